"""Hostile inputs for the offline tools (``scheduler explain``, ``agent plan``, ``simulate``).

Each :class:`Case` is a file (name + bytes) and the arguments to run the tool with; every case
must end in exit code 2 with one ``error: FILE: ...`` line. The tests and the fuzz tier both use
these as fixed examples. Special files (``/dev/zero``, a directory, a missing file, a file over
the size limit) are returned as paths, not bytes.

Not guaranteed: the set is a sample of the classes that once crashed or blew up (overflow, deep
nesting, huge integers, alias expansion, wrong shapes, NaN/infinity, booleans for numbers); it
is not exhaustive.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from koordpy_testkit.bounds import HANG_BACKSTOP, cpu_seconds_of, limit_child

__all__ = [
    "ALIAS_BOMB",
    "Case",
    "agent_plan_cases",
    "all_cases",
    "base_agent_dump",
    "base_cluster_dump",
    "base_scenario",
    "explain_cases",
    "fork_run",
    "scenario_cases",
    "set_path",
]

NOW = "2026-11-21T10:01:00Z"
LONG_INT = "7" * 5000
"""Above Python's int-string conversion limit (4,300 digits)."""
QUANTITY_HUGE = "1e99999999"
"""A quantity whose exact value has 100 million digits (needs the bounded quantity parser)."""

ALIAS_BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
    "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
    "kind: List\napiVersion: v1\nitems: [*i]\n"
)


@dataclass(frozen=True)
class Case:
    """One hostile run: ``files`` are written to a directory; ``{dir}`` in ``args`` is replaced by it."""

    name: str
    args: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)
    may_succeed: bool = False
    """A quantity beyond 2^63-1 where a quantity is expected: the API server caps such values, so the
    tool may accept it (capped) or refuse it; either way it must not crash or exceed the bounds."""
    needs_bounded_quantities: bool = False
    """True for ``1e99999999``-style quantities: they pass once quantities are parsed in bounded time."""


def set_path(document: Any, path: str, value: Any) -> Any:
    """A deep copy of ``document`` with ``value`` at ``a.b[0].c`` (``-`` as value deletes the key)."""
    out = copy.deepcopy(document)
    parts: list[Any] = []
    for piece in path.replace("]", "").split("."):
        name, *indexes = piece.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i) for i in indexes)
    target = out
    for part in parts[:-1]:
        target = target[part]
    if value == "-":
        del target[parts[-1]]
    else:
        target[parts[-1]] = value
    return out


class _Raw(str):
    """A scalar written into YAML verbatim (``.nan``, a 5,000-digit integer, ``2026-01-01``)."""


def _yaml(document: Any) -> bytes:
    """Flow-style YAML (a superset of JSON) with :class:`_Raw` scalars written verbatim."""

    def emit(value: Any) -> str:
        if isinstance(value, _Raw):
            return str(value)
        if isinstance(value, dict):
            return "{" + ", ".join(f"{json.dumps(str(k))}: {emit(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(emit(v) for v in value) + "]"
        return json.dumps(value)

    return (emit(document) + "\n").encode()


def base_cluster_dump() -> dict[str, Any]:
    """One node with its NodeMetric, a running pod and the pod being placed (``default/p``)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-p", "labels": {}, "annotations": {}},
        "spec": {
            "priority": 5000,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {}}}],
            "initContainers": [],
            "overhead": {},
        },
        "status": {"phase": "Pending", "conditions": []},
    }
    running = set_path(pod, "metadata", {"name": "r", "namespace": "default", "uid": "u-r"})
    running["spec"]["nodeName"] = "n1"
    running["status"] = {"phase": "Running"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {}},
        "spec": {"taints": []},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}, "capacity": {"cpu": "8", "memory": "32Gi"}},
    }
    metric = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": "n1"},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": "2026-11-21T10:00:30Z",
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": "2", "memory": "8Gi"}},
                "aggregatedNodeUsages": [],
            },
            "podsMetric": [{"namespace": "default", "name": "r", "podUsage": {"resources": {"cpu": "1"}}}],
        },
    }
    return {"apiVersion": "v1", "kind": "List", "items": [node, metric, running, pod]}


def _explain(name: str, content: bytes, *, filename: str = "dump.yaml", **kw: Any) -> Case:
    args = ("scheduler", "explain", "-f", f"{{dir}}/{filename}", "--pod", "default/p", "--now", NOW)
    return Case(name, args, {filename: content}, **kw)


# Paths into base_cluster_dump(): node, metric, running pod, placed pod.
_NODE, _METRIC, _RUN, _POD = "items[0]", "items[1]", "items[2]", "items[3]"

_WRONG_VALUES: dict[str, Any] = {
    "nan": _Raw(".nan"),
    "inf": _Raw(".inf"),
    "ninf": _Raw("-.inf"),
    "e400": _Raw("1.0e+400"),
    "e400s": "1e400",
    "longint": _Raw(LONG_INT),
    "bool": True,
    "list": [1, None],
    "map": {"a": {"b": 1}},
    "null": None,
    "str": "not-a-number",
}


def _file_level(prefix: str, make: Callable[[str, bytes, str], Case]) -> Iterator[Case]:
    """File-level hostility shared by every tool: syntax, encoding, nesting, aliases, huge integers."""
    yield make(f"{prefix}-alias-bomb", ALIAS_BOMB.encode(), "a.yaml")
    yield make(f"{prefix}-one-alias", b"a: &x {kind: Pod}\nb: *x\n", "a.yaml")
    yield make(f"{prefix}-deep-json-150", b"[" * 150 + b"]" * 150, "d.json")
    yield make(f"{prefix}-deep-json-100k", b"[" * 100_000 + b"]" * 100_000, "d.json")
    yield make(f"{prefix}-deep-json-map", b'{"a":' * 5000 + b"1" + b"}" * 5000, "d.json")
    yield make(f"{prefix}-deep-yaml-flow", b"[" * 50_000 + b"]" * 50_000, "d.yaml")
    yield make(f"{prefix}-deep-yaml-block", "".join(f"{' ' * i}k{i}:\n" for i in range(300)).encode(), "d.yaml")
    yield make(f"{prefix}-long-int-json", b'{"kind": "List", "items": [], "x": ' + LONG_INT.encode() + b"}", "l.json")
    yield make(f"{prefix}-long-int-yaml", b"kind: List\nitems: []\nx: " + LONG_INT.encode() + b"\n", "l.yaml")
    yield make(f"{prefix}-not-utf8", b"kind: \xff\xfe\n", "b.yaml")
    yield make(f"{prefix}-binary", bytes(range(256)) * 4, "b.yaml")
    yield make(f"{prefix}-bad-yaml", b"kind: [unclosed\n", "b.yaml")
    yield make(f"{prefix}-bad-json", b'{"kind": ', "b.json")
    yield make(f"{prefix}-tab-indent", b"kind: List\nitems:\n\t- 1\n", "b.yaml")
    yield make(f"{prefix}-python-tag", b"!!python/object/apply:os.system ['true']\n", "b.yaml")
    yield make(f"{prefix}-binary-tag", b"kind: List\nitems: [!!binary aGVsbG8=]\n", "b.yaml")
    yield make(f"{prefix}-set-tag", b"kind: List\nitems: [!!set {a, b}]\n", "b.yaml")
    yield make(f"{prefix}-scalar-doc", b"42\n", "s.yaml")
    yield make(f"{prefix}-list-doc", b"- 1\n- 2\n", "s.yaml")
    yield make(f"{prefix}-unhashable-key", b"? [a, b]\n: 1\n", "s.yaml")


def explain_cases() -> list[Case]:
    """About 100 hostile ``koordpy scheduler explain`` runs."""
    base = base_cluster_dump()
    cases: list[Case] = list(
        _file_level("explain", lambda name, content, filename: _explain(name, content, filename=filename))
    )
    explain_args = ("scheduler", "explain", "--pod", "default/p", "--now", NOW)
    cases += [
        Case("explain-dev-zero", ("scheduler", "explain", "-f", "/dev/zero", "--pod", "default/p")),
        Case("explain-directory", ("scheduler", "explain", "-f", "{dir}", "--pod", "default/p")),
        Case("explain-missing-file", ("scheduler", "explain", "-f", "{dir}/missing.yaml", "--pod", "default/p")),
        Case("explain-over-limit", ("scheduler", "explain", "-f", "{dir}/big.yaml", "--pod", "default/p")),
        Case(
            "explain-bad-pod-arg",
            ("scheduler", "explain", "-f", "{dir}/dump.yaml", "--pod", "nope"),
            {"dump.yaml": _yaml(base)},
        ),
        Case("explain-bad-now", (*explain_args[:-1], "yesterday", "-f", "{dir}/dump.yaml"), {"dump.yaml": _yaml(base)}),
        Case(
            "explain-config-nan",
            (*explain_args, "-f", "{dir}/dump.yaml", "--config", "{dir}/c.yaml"),
            {
                "dump.yaml": _yaml(base),
                "c.yaml": b"loadAware: {usageThresholds: {cpu: .nan}}\n",
            },
        ),
        Case(
            "explain-config-bool",
            (*explain_args, "-f", "{dir}/dump.yaml", "--config", "{dir}/c.yaml"),
            {
                "dump.yaml": _yaml(base),
                "c.yaml": b"loadAware: {nodeMetricExpirationSeconds: true}\n",
            },
        ),
        Case(
            "explain-config-alias",
            (*explain_args, "-f", "{dir}/dump.yaml", "--config", "{dir}/c.yaml"),
            {
                "dump.yaml": _yaml(base),
                "c.yaml": ALIAS_BOMB.encode(),
            },
        ),
    ]
    mutations: list[tuple[str, str, Any]] = [
        ("containers-null-5", f"{_POD}.spec.containers", [None, 5]),
        ("containers-str", f"{_POD}.spec.containers", "x"),
        ("containers-map", f"{_POD}.spec.containers", {"a": 1}),
        ("running-containers-null", f"{_RUN}.spec.containers", [None]),
        ("init-null", f"{_POD}.spec.initContainers", [None, 5]),
        ("init-str", f"{_POD}.spec.initContainers", "x"),
        ("resources-int", f"{_POD}.spec.containers[0].resources", 5),
        ("resources-list", f"{_POD}.spec.containers[0].resources", [1]),
        ("requests-list", f"{_POD}.spec.containers[0].resources.requests", [1]),
        ("requests-str", f"{_POD}.spec.containers[0].resources.requests", "cpu"),
        ("limits-cpu-e400", f"{_POD}.spec.containers[0].resources.limits", {"cpu": "1e400"}),
        ("requests-cpu-e400", f"{_POD}.spec.containers[0].resources.requests.cpu", "1e400"),
        ("requests-cpu-inf", f"{_POD}.spec.containers[0].resources.requests.cpu", _Raw(".inf")),
        ("requests-cpu-nan", f"{_POD}.spec.containers[0].resources.requests.cpu", _Raw(".nan")),
        ("requests-cpu-float-e400", f"{_POD}.spec.containers[0].resources.requests.cpu", _Raw("1.0e+400")),
        ("requests-cpu-longint", f"{_POD}.spec.containers[0].resources.requests.cpu", _Raw(LONG_INT)),
        ("requests-cpu-longstr", f"{_POD}.spec.containers[0].resources.requests.cpu", LONG_INT),
        ("requests-cpu-bool", f"{_POD}.spec.containers[0].resources.requests.cpu", True),
        ("requests-cpu-list", f"{_POD}.spec.containers[0].resources.requests.cpu", [1]),
        ("requests-mem-junk", f"{_POD}.spec.containers[0].resources.requests.memory", "1Gb"),
        ("running-limits-e400", f"{_RUN}.spec.containers[0].resources.limits", {"cpu": "1e400"}),
        ("running-requests-mem-e400", f"{_RUN}.spec.containers[0].resources.requests.memory", "1e400"),
        ("overhead-list", f"{_POD}.spec.overhead", [1]),
        ("overhead-e400", f"{_POD}.spec.overhead", {"cpu": "1e400"}),
        ("priority-str", f"{_POD}.spec.priority", "high"),
        ("priority-float-e400", f"{_POD}.spec.priority", _Raw("1.0e+400")),
        ("priority-longint", f"{_POD}.spec.priority", _Raw(LONG_INT)),
        ("priority-nan", f"{_POD}.spec.priority", _Raw(".nan")),
        ("metadata-str", f"{_POD}.metadata", "oops"),
        ("metadata-list", f"{_RUN}.metadata", [1]),
        ("name-int", f"{_POD}.metadata.name", 5),
        ("labels-list", f"{_POD}.metadata.labels", [1]),
        ("annotations-int", f"{_RUN}.metadata.annotations", 5),
        ("owners-null", f"{_RUN}.metadata.ownerReferences", [None, 5]),
        ("owners-int", f"{_RUN}.metadata.ownerReferences", 5),
        ("conditions-int", f"{_POD}.status.conditions", 5),
        ("conditions-null", f"{_POD}.status.conditions", [None, "x"]),
        (
            "condition-time-int",
            f"{_POD}.status.conditions",
            [{"type": "PodScheduled", "status": "True", "lastTransitionTime": 5}],
        ),
        ("creation-date", f"{_POD}.metadata.creationTimestamp", _Raw("2026-01-01")),
        ("creation-junk", f"{_RUN}.metadata.creationTimestamp", "noon"),
        ("spec-int", f"{_POD}.spec", 5),
        ("status-list", f"{_RUN}.status", [1]),
        ("grace-longint", f"{_POD}.spec.terminationGracePeriodSeconds", _Raw(LONG_INT)),
        ("grace-negative", f"{_POD}.spec.terminationGracePeriodSeconds", -1),
        ("node-alloc-e400", f"{_NODE}.status.allocatable.cpu", "1e400"),
        ("node-alloc-inf", f"{_NODE}.status.allocatable.memory", _Raw(".inf")),
        ("node-alloc-list", f"{_NODE}.status.allocatable", [1]),
        ("node-alloc-junk", f"{_NODE}.status.allocatable.cpu", "eight"),
        ("node-capacity-longint", f"{_NODE}.status.capacity.memory", _Raw(LONG_INT)),
        ("node-taints-int-item", f"{_NODE}.spec.taints", [5]),
        ("node-taints-int", f"{_NODE}.spec.taints", 5),
        ("node-metadata-str", f"{_NODE}.metadata", "oops"),
        ("node-name-missing", f"{_NODE}.metadata.name", "-"),
        ("metric-usage-e400", f"{_METRIC}.status.nodeMetric.nodeUsage.resources.cpu", "1e400"),
        ("metric-usage-nan", f"{_METRIC}.status.nodeMetric.nodeUsage.resources.cpu", _Raw(".nan")),
        ("metric-usage-list", f"{_METRIC}.status.nodeMetric.nodeUsage", [1]),
        ("metric-pods-null", f"{_METRIC}.status.podsMetric", [None, 5]),
        ("metric-pods-int", f"{_METRIC}.status.podsMetric", 5),
        ("metric-pod-usage-e400", f"{_METRIC}.status.podsMetric[0].podUsage.resources.cpu", "1e400"),
        ("metric-aggregated-int", f"{_METRIC}.status.nodeMetric.aggregatedNodeUsages", 5),
        (
            "metric-aggregated-duration",
            f"{_METRIC}.status.nodeMetric.aggregatedNodeUsages",
            [{"duration": "1" * 400 + "h", "usage": {"p95": {"resources": {"cpu": "1"}}}}],
        ),
        ("metric-update-int", f"{_METRIC}.status.updateTime", 5),
        ("metric-interval-e400", f"{_METRIC}.spec.metricCollectPolicy.reportIntervalSeconds", _Raw("1.0e+400")),
        ("metric-interval-str", f"{_METRIC}.spec.metricCollectPolicy.reportIntervalSeconds", "60s"),
        ("items-int", "items", 5),
        ("items-null", "items[3]", None),
        ("items-str", "items[2]", "pod"),
        ("kind-int", f"{_POD}.kind", 5),
        ("kind-missing", f"{_RUN}.kind", "-"),
        ("nested-list-items-int", "items[2]", {"kind": "PodList", "items": 5}),
    ]
    for name, path, value in mutations:
        cases.append(
            _explain(f"explain-{name}", _yaml(set_path(base, path, value)), may_succeed=_beyond_int64(path, value))
        )
    for name, path in (
        ("requests-cpu-huge", f"{_POD}.spec.containers[0].resources.requests.cpu"),
        ("node-alloc-huge", f"{_NODE}.status.allocatable.cpu"),
        ("metric-usage-huge", f"{_METRIC}.status.nodeMetric.nodeUsage.resources.cpu"),
    ):
        cases.append(
            _explain(
                f"explain-{name}",
                _yaml(set_path(base, path, QUANTITY_HUGE)),
                may_succeed=True,
                needs_bounded_quantities=True,
            )
        )
    return cases


_QUANTITY_FIELDS = ("resources", "allocatable", "capacity", "overhead", "limits", "requests", "metricRule.value")


def _beyond_int64(path: str, value: Any) -> bool:
    """A ``1e400`` or a 5,000-digit string where a quantity is expected (see :attr:`Case.may_succeed`)."""
    text = value.get("cpu") if isinstance(value, dict) else value
    huge = text == "1e400" or (type(text) is str and text == LONG_INT)  # a quoted 5,000-digit string
    return huge and any(f in path for f in _QUANTITY_FIELDS)


def base_agent_dump() -> list[dict[str, Any]]:
    """Policy, two actions, the node, its NodeMetric and two pods (``agent plan --node n1``)."""
    policy = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "NodeQOSEnsurancePolicy",
        "metadata": {"name": "waterline"},
        "spec": {
            "objectiveEnsurances": [
                {
                    "name": "cpu",
                    "avoidanceThreshold": 2,
                    "actionName": "throttle",
                    "metricRule": {"name": "cpu_total_usage", "value": 5000},
                },
                {"name": "mem", "actionName": "evict", "metricRule": {"name": "memory_total_usage", "value": "19Gi"}},
            ]
        },
    }
    throttle = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "throttle"},
        "spec": {"coolDownSeconds": 30, "throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 50}}},
    }
    evict = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "evict"},
        "spec": {"coolDownSeconds": 60, "eviction": {"terminationGracePeriodSeconds": 10}},
    }
    dump = base_cluster_dump()
    node, metric, running, pod = dump["items"]
    pod = set_path(pod, "spec.nodeName", "n1")
    return [policy, throttle, evict, node, metric, running, pod]


def _plan(name: str, content: bytes, *, filename: str = "dump.yaml", extra: tuple[str, ...] = (), **kw: Any) -> Case:
    args = ("agent", "plan", "-f", f"{{dir}}/{filename}", "--node", "n1", "--now", NOW, *extra)
    return Case(name, args, {filename: content}, **kw)


def _yaml_all(documents: list[Any]) -> bytes:
    return b"---\n".join(_yaml(d) for d in documents)


def agent_plan_cases() -> list[Case]:
    """About 50 hostile ``koordpy agent plan`` runs."""
    base = base_agent_dump()
    cases: list[Case] = list(
        _file_level("plan", lambda name, content, filename: _plan(name, content, filename=filename))
    )
    cases.append(Case("plan-dev-zero", ("agent", "plan", "-f", "/dev/zero", "--node", "n1")))
    mutations: list[tuple[str, int, str, Any]] = [
        ("value-e400", 0, "spec.objectiveEnsurances[0].metricRule.value", "1e400"),
        ("value-float-e400", 0, "spec.objectiveEnsurances[0].metricRule.value", _Raw("1.0e+400")),
        ("value-nan", 0, "spec.objectiveEnsurances[0].metricRule.value", _Raw(".nan")),
        ("value-negative", 0, "spec.objectiveEnsurances[1].metricRule.value", "-1Gi"),
        ("value-list", 0, "spec.objectiveEnsurances[1].metricRule.value", [1]),
        ("value-longint", 0, "spec.objectiveEnsurances[0].metricRule.value", _Raw(LONG_INT)),
        ("threshold-e400", 0, "spec.objectiveEnsurances[0].avoidanceThreshold", _Raw("1.0e+400")),
        ("threshold-bool", 0, "spec.objectiveEnsurances[0].avoidanceThreshold", True),
        ("rules-null", 0, "spec.objectiveEnsurances", [None, 5]),
        ("metric-rule-null", 0, "spec.objectiveEnsurances[0].metricRule", None),
        ("selector-int", 0, "spec.selector", 5),
        ("policy-metadata-str", 0, "metadata", "oops"),
        ("cooldown-inf", 1, "spec.coolDownSeconds", _Raw(".inf")),
        ("ratio-e400", 1, "spec.throttle.cpuThrottle.minCPURatio", _Raw("1.0e+400")),
        ("ratio-str", 1, "spec.throttle.cpuThrottle.stepCPURatio", "half"),
        ("grace-longint", 2, "spec.eviction.terminationGracePeriodSeconds", _Raw(LONG_INT)),
        ("node-capacity-e400", 3, "status.capacity.cpu", "1e400"),
        ("metric-usage-e400", 4, "status.nodeMetric.nodeUsage.resources.memory", "1e400"),
        ("metric-pod-usage-e400", 4, "status.podsMetric[0].podUsage.resources.cpu", "1e400"),
        ("metric-pods-int", 4, "status.podsMetric", [5]),
        ("pod-limits-e400", 5, "spec.containers[0].resources.limits", {"cpu": "1e400"}),
        ("pod-containers-null", 6, "spec.containers", [None, 5]),
        ("pod-priority-longint", 6, "spec.priority", _Raw(LONG_INT)),
        ("pod-metadata-str", 6, "metadata", "oops"),
    ]
    for name, index, path, value in mutations:
        docs = list(base)
        docs[index] = set_path(docs[index], path, value)
        cases.append(_plan(f"plan-{name}", _yaml_all(docs), may_succeed=_beyond_int64(path, value)))
    config_cases = {
        "config-interval-tiny": b"collectIntervalSeconds: 1.0e-9\n",
        "config-interval-tiny-string": b"collectIntervalSeconds: 1e-9\n",
        "config-interval-nan": b"collectIntervalSeconds: .nan\n",
        "config-interval-inf": b"collectIntervalSeconds: .inf\n",
        "config-priority-bool": b"qos: {protectedPriorityAbove: true}\n",
        "config-timeout-e400": b"qos: {evictionTimeoutSeconds: 1e400}\n",
        "config-retries-longint": b"qos: {evictionRetries: " + LONG_INT.encode() + b"}\n",
        "config-report-400-digits": b"nodeMetric: {reportIntervalSeconds: " + b"9" * 400 + b"}\n",
        "config-alias": ALIAS_BOMB.encode(),
    }
    for name, content in config_cases.items():
        cases.append(
            Case(
                f"plan-{name}",
                ("agent", "plan", "-f", "{dir}/dump.yaml", "--node", "n1", "--now", NOW, "--config", "{dir}/c.yaml"),
                {"dump.yaml": _yaml_all(base), "c.yaml": content},
            )
        )
    docs = list(base)
    docs[0] = set_path(docs[0], "spec.objectiveEnsurances[0].metricRule.value", QUANTITY_HUGE)
    cases.append(_plan("plan-value-huge", _yaml_all(docs), may_succeed=True, needs_bounded_quantities=True))
    return cases


def base_scenario() -> dict[str, Any]:
    """A tiny valid scenario (one pool, two workloads, QoS on)."""
    return {
        "apiVersion": "koordpy.io/v1alpha1",
        "kind": "Scenario",
        "name": "hostile",
        "seed": 1,
        "start": "2026-11-21T12:00:00Z",
        "duration": "10m",
        "step": "30s",
        "nodePools": [
            {
                "name": "node",
                "count": 2,
                "allocatable": {"cpu": "16", "memory": "64Gi"},
                "systemUsage": {"cpu": "500m"},
            }
        ],
        "workloads": [
            {
                "name": "web",
                "priority": 9500,
                "arrivals": {"count": 4, "start": "0s", "end": "5m"},
                "lifetime": {"min": "1m", "max": "5m"},
                "requests": {"cpu": "1", "memory": "2Gi"},
                "limits": {"cpu": "3", "memory": "2Gi"},
                "usage": {
                    "pattern": "bursty",
                    "cpu": {"mean": "1500m", "spread": 0.5, "noise": 0.1},
                    "memory": {"mean": "1Gi"},
                    "amplitude": 0.5,
                    "peakHour": 13,
                    "burstEvery": "5m",
                    "burstLength": "1m",
                    "burstFactor": 2,
                },
            }
        ],
        "nodeMetric": {"reportInterval": "60s", "lag": "10s", "aggregatedDurations": ["5m"]},
        "scheduler": {"loadAware": {"usageThresholds": {"cpu": 65, "memory": 95}, "nodeMetricExpirationSeconds": 180}},
        "qos": {
            "interval": "30s",
            "policies": [
                {
                    "apiVersion": "ensurance.crane.io/v1alpha1",
                    "kind": "NodeQOSEnsurancePolicy",
                    "metadata": {"name": "cpu"},
                    "spec": {
                        "objectiveEnsurances": [
                            {
                                "name": "throttle",
                                "actionName": "throttle",
                                "metricRule": {"name": "cpu_total_utilization", "value": 70},
                            }
                        ]
                    },
                }
            ],
            "actions": [
                {
                    "apiVersion": "ensurance.crane.io/v1alpha1",
                    "kind": "AvoidanceAction",
                    "metadata": {"name": "throttle"},
                    "spec": {"coolDownSeconds": 30, "throttle": {"cpuThrottle": {"stepCPURatio": 20}}},
                }
            ],
        },
        "report": {"hotThreshold": 65},
    }


_SCENARIO_FIELDS: dict[str, tuple[str, ...]] = {
    # field path -> which wrong values apply (keys of _WRONG_VALUES)
    "seed": ("nan", "e400", "longint", "bool"),
    "duration": ("nan", "inf", "e400", "longint", "bool", "list"),
    "step": ("nan", "inf", "bool"),
    "start": ("nan", "inf", "e400"),
    "nodePools[0].count": ("nan", "inf", "bool", "longint"),
    "nodePools[0].allocatable.cpu": ("nan", "inf", "e400", "e400s", "bool"),
    "nodePools[0].systemUsage.cpu": ("e400s", "nan"),
    "workloads[0].priority": ("nan", "e400", "longint", "bool"),
    "workloads[0].arrivals.count": ("nan", "inf", "bool"),
    "workloads[0].arrivals.end": ("nan", "inf"),
    "workloads[0].lifetime.min": ("nan", "ninf"),
    "workloads[0].lifetime.max": ("inf", "e400"),
    "workloads[0].requests.cpu": ("e400s", "nan", "inf"),
    "workloads[0].limits.memory": ("e400s", "e400"),
    "workloads[0].usage.cpu.mean": ("nan", "inf", "e400s", "bool"),
    "workloads[0].usage.cpu.spread": ("nan", "inf", "bool"),
    "workloads[0].usage.cpu.noise": ("nan", "e400"),
    "workloads[0].usage.memory.mean": ("nan", "e400s"),
    "workloads[0].usage.amplitude": ("nan", "bool"),
    "workloads[0].usage.peakHour": ("nan", "inf"),
    "workloads[0].usage.burstEvery": ("nan", "inf"),
    "workloads[0].usage.burstLength": ("nan",),
    "workloads[0].usage.burstFactor": ("nan", "inf", "bool"),
    "nodeMetric.reportInterval": ("nan", "inf"),
    "nodeMetric.lag": ("nan", "inf"),
    "nodeMetric.aggregatedDurations": ("map",),
    "qos.interval": ("nan", "inf", "bool"),
    "report.hotThreshold": ("nan", "bool"),
    "scheduler.loadAware.usageThresholds.cpu": ("nan", "inf", "bool"),
    "scheduler.loadAware.nodeMetricExpirationSeconds": ("nan", "bool", "longint"),
    "qos.policies[0].spec.objectiveEnsurances[0].metricRule.value": ("nan", "e400s", "e400"),
    "qos.actions[0].spec.coolDownSeconds": ("inf", "bool"),
}


def scenario_cases() -> list[Case]:
    """About 100 hostile ``koordpy simulate`` scenarios."""
    base = base_scenario()

    def make(name: str, content: bytes, filename: str = "s.yaml") -> Case:
        return Case(name, ("simulate", f"{{dir}}/{filename}", "--out", "{dir}/out"), {filename: content})

    cases = list(_file_level("simulate", make))
    cases.append(Case("simulate-dev-zero", ("simulate", "/dev/zero", "--out", "{dir}/out")))
    for path, wrongs in _SCENARIO_FIELDS.items():
        for wrong in wrongs:
            case = make(f"simulate-{path}-{wrong}", _yaml(set_path(base, path, _WRONG_VALUES[wrong])))
            # Scenario quantities are bounded at 2^53 by the scenario itself; a policy's value only by the CRD.
            capped = path.endswith("metricRule.value") and _beyond_int64(path, _WRONG_VALUES[wrong])
            cases.append(dataclasses.replace(case, may_succeed=capped))
    cases.append(make("simulate-duration-400-digits", _yaml(set_path(base, "duration", "9" * 400 + "h"))))
    cases.append(make("simulate-step-tiny", _yaml(set_path(base, "step", _Raw("1e-9")))))
    cases.append(make("simulate-workloads-null", _yaml(set_path(base, "workloads", [None, 5]))))
    return cases


MEMORY_LIMIT = 300 * 1024 * 1024
"""Address-space limit of every run (``RLIMIT_AS``)."""
CPU_LIMIT = 10
"""CPU seconds a run may use (``RLIMIT_CPU``; the forked runs start with their imports done). Every case
needs well under one CPU second; a parser that goes super-linear on a hostile input needs far more.
CPU time, unlike wall-clock time, does not grow with the machine's load."""
HANG_SECONDS = HANG_BACKSTOP
"""Wall-clock seconds after which a run that is still alive is killed as hung (blocked, not computing:
a computing run meets :data:`CPU_LIMIT` first). Only a backstop: no healthy run gets near it."""


@dataclass(frozen=True)
class Outcome:
    name: str
    code: int | None  # None: killed as hung after HANG_SECONDS; -SIGXCPU: over CPU_LIMIT
    stdout: str
    stderr: str
    cpu_seconds: float
    """CPU time the run used (user + system)."""


def materialise(case: Case, directory: str) -> list[str]:
    """Write the case's files into ``directory`` and return its arguments with ``{dir}`` filled in."""
    os.makedirs(directory, exist_ok=True)
    for name, content in case.files.items():
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(content)
    if "big.yaml" in " ".join(case.args):
        with open(os.path.join(directory, "big.yaml"), "wb") as handle:
            handle.truncate(40 * 1024 * 1024)  # sparse: over the 32 MiB limit without writing it
    return [arg.replace("{dir}", directory) for arg in case.args]


_LAZY_IMPORTS = (
    "koordpy.agent.policy.offline",
    "koordpy.cli.live",
    "koordpy.kube.resources",
    "koordpy.kube.client",
    "koordpy.scheduler.explain",
)


def fork_run(cases: list[Case], workdir: str) -> list[Outcome]:
    """Run each case in a forked child of this (already imported) process, under the limits.

    A fork of a warm interpreter is a real separate process with its own ``RLIMIT_AS`` and the real
    ``koordpy`` entry point, without paying the import time once per case. The limit counts the
    inherited address space too, so it is stricter than the same limit on a fresh process.
    """
    import importlib

    import typer.main

    from koordpy.cli.main import COMMANDS, app

    command = typer.main.get_command(app)  # built once: what ``koordpy`` builds at every start
    for name in COMMANDS:  # the sub-commands load lazily: load them once here, not in every child
        command.get_command(None, name)  # type: ignore[attr-defined]
    for module in _LAZY_IMPORTS:  # imported inside the commands' functions
        importlib.import_module(module)
    outcomes = []
    for i, case in enumerate(cases):
        directory = os.path.join(workdir, f"case-{i}")
        args = materialise(case, directory)
        out_path, err_path = os.path.join(directory, "stdout"), os.path.join(directory, "stderr")
        pid = os.fork()
        code: int | None = 70
        if pid == 0:  # pragma: no cover - the child
            try:
                limit_child(CPU_LIMIT, MEMORY_LIMIT)()
                out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(out_fd, 1)
                os.dup2(err_fd, 2)
                try:
                    command.main(args=args, prog_name="koordpy", standalone_mode=True)
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 70
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(70 if code is None else code)
        code, cpu = _wait_bounded(pid)
        with open(out_path, encoding="utf-8", errors="replace") as fh:
            stdout = fh.read(100_000)
        with open(err_path, encoding="utf-8", errors="replace") as fh:
            stderr = fh.read(100_000)
        outcomes.append(Outcome(case.name, code, stdout, stderr, cpu))
    return outcomes


def _wait_bounded(pid: int) -> tuple[int | None, float]:
    """Wait for the child; its exit code (None when killed as hung) and the CPU seconds it used."""
    deadline = time.monotonic() + HANG_SECONDS
    pause = 0.001
    while time.monotonic() < deadline:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), cpu_seconds_of(usage)
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    os.kill(pid, signal.SIGKILL)
    _, _, usage = os.wait4(pid, 0)
    return None, cpu_seconds_of(usage)


def all_cases() -> dict[str, list[Case]]:
    """The sets by name: ``explain``, ``plan``, ``simulate`` and ``huge`` (the ``1e99999999`` cases of all three)."""
    every = explain_cases() + agent_plan_cases() + scenario_cases()
    sets = {
        "explain": explain_cases(),
        "plan": agent_plan_cases(),
        "simulate": scenario_cases(),
    }
    out = {name: [c for c in cases if not c.needs_bounded_quantities] for name, cases in sets.items()}
    out["huge"] = [c for c in every if c.needs_bounded_quantities]
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m koordpy_testkit.hostile WORKDIR SET...``: run the sets, print outcomes as JSON lines."""
    workdir, *names = sys.argv[1:] if argv is None else argv
    sets = all_cases()
    for name in names:
        for outcome in fork_run(sets[name], f"{workdir}/{name}"):
            print(json.dumps(dataclasses.asdict(outcome)), flush=True)


if __name__ == "__main__":
    main()
