"""Crane v0.8+ NodeQOS and PodQOS: loading Crane's own example, conversion, PodQOS pod matching."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from koordpy.crds.ensurance import NodeQOS, PodQOS, pod_qos_allows, pod_qos_matches
from koordpy.model.objects import pod_from_dict
from koordpy_testkit.builders import PodBuilder

CRANE = Path(__file__).resolve().parents[2] / "fixtures" / "crane" / "be-rules.yaml"


def crane_docs() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(CRANE.read_text())}


def test_crane_example_loads_with_crane_field_names():
    docs = crane_docs()
    node_qos = NodeQOS.model_validate(docs["NodeQOS"])
    pod_qos = PodQOS.model_validate(docs["PodQOS"])
    assert [r.name for r in node_qos.spec.rules] == ["cpu-usage"]
    rule = node_qos.spec.rules[0]
    assert (rule.metric_rule.name, rule.metric_rule.threshold, rule.action_name) == (
        "cpu_total_usage",
        5000,
        "eviction",
    )
    assert (rule.avoidance_threshold, rule.restore_threshold) == (2, 2)
    assert pod_qos.spec.allowed_actions == ["eviction"]
    assert pod_qos.spec.scope_selector is not None
    req = pod_qos.spec.scope_selector.match_expressions[0]
    assert (str(req.scope_name), req.operator, req.values) == ("QOSClass", "In", ["BestEffort"])


def test_to_policy_keeps_rules_and_the_kind():
    policy = NodeQOS.model_validate(crane_docs()["NodeQOS"]).to_policy()
    assert policy.kind == "NodeQOS"  # the planner scopes its rules by PodQOS
    assert policy.metadata.name == "eviction-on-high-usage"
    assert [r.name for r in policy.spec.objective_ensurances] == ["cpu-usage"]


def test_nodeqos_extra_fields_kept_and_listed_as_ignored():
    raw = crane_docs()["NodeQOS"]
    raw["spec"]["elasticCpuLimit"] = {"elasticNodeCpuLimit": {"percent": 60}}
    assert NodeQOS.model_validate(raw).spec.ignored_fields() == ["elasticCpuLimit"]


def test_duplicate_rule_names_refused_with_the_field():
    raw = crane_docs()["NodeQOS"]
    raw["spec"]["rules"].append(dict(raw["spec"]["rules"][0]))
    with pytest.raises(ValidationError, match="rules: duplicate rule name 'cpu-usage'"):
        NodeQOS.model_validate(raw)


def pod(qos: str, *, ns: str = "default", priority: int | None = None, labels: dict[str, str] | None = None):
    builder = PodBuilder("p", ns)
    if qos == "Guaranteed":
        builder = builder.requests(cpu="1", memory="1Gi").limits(cpu="1", memory="1Gi")
    elif qos == "Burstable":
        builder = builder.requests(cpu="1")
    if priority is not None:
        builder = builder.priority(priority)
    for k, v in (labels or {}).items():
        builder = builder.label(k, v)
    info = pod_from_dict(builder.build())
    assert str(info.qos) == qos
    return info


def pq(spec: dict) -> PodQOS:
    return PodQOS.model_validate({"metadata": {"name": "q"}, "spec": {"allowedActions": ["eviction"], **spec}})


def scope(name: str, op: str, *values: str) -> dict:
    return {"scopeSelector": {"matchExpressions": [{"scopeName": name, "operator": op, "values": list(values)}]}}


@pytest.mark.parametrize(
    ("spec", "target", "expected"),
    [
        (scope("QOSClass", "In", "BestEffort"), pod("BestEffort"), True),
        (scope("QOSClass", "In", "BestEffort"), pod("Burstable"), False),
        (scope("QOSClass", "NotIn", "Guaranteed"), pod("Burstable"), True),
        (scope("QOSClass", "NotIn", "Guaranteed"), pod("Guaranteed"), False),
        (scope("Namespace", "In", "batch"), pod("BestEffort", ns="batch"), True),
        (scope("Namespace", "In", "batch"), pod("BestEffort"), False),
        # Priority: "N" exact, "A-B" inclusive range; unset priority counts as 0.
        (scope("Priority", "In", "1000"), pod("BestEffort", priority=1000), True),
        (scope("Priority", "In", "0-999"), pod("BestEffort", priority=999), True),
        (scope("Priority", "In", "0-999"), pod("BestEffort", priority=1000), False),
        (scope("Priority", "In", "0-999"), pod("BestEffort"), True),
        (scope("Priority", "NotIn", "5", "100-200"), pod("BestEffort", priority=150), False),
        (scope("Priority", "NotIn", "5", "100-200"), pod("BestEffort", priority=6), True),
        # Label selector ANDed with the scope selector.
        (
            {"labelSelector": {"matchLabels": {"preemptible_job": "true"}}, **scope("QOSClass", "In", "BestEffort")},
            pod("BestEffort", labels={"preemptible_job": "true"}),
            True,
        ),
        (
            {"labelSelector": {"matchLabels": {"preemptible_job": "true"}}, **scope("QOSClass", "In", "BestEffort")},
            pod("BestEffort"),
            False,
        ),
        ({"labelSelector": {"matchLabels": {"preemptible_job": "true"}}}, pod("Guaranteed"), False),
        # Crane: no selector at all selects no pod.
        ({}, pod("BestEffort"), False),
        ({"labelSelector": {}}, pod("BestEffort"), False),
    ],
)
def test_pod_qos_matches_table(spec, target, expected):
    assert pod_qos_matches(pq(spec), target) is expected


def test_allows_needs_a_matching_podqos_that_lists_the_action():
    be = pod("BestEffort")
    only_be = pq(scope("QOSClass", "In", "BestEffort"))
    throttle_all = PodQOS.model_validate(
        {"metadata": {"name": "t"}, "spec": {"allowedActions": ["throttle"], **scope("QOSClass", "In", "Burstable")}}
    )
    assert pod_qos_allows([only_be], be, "eviction")
    assert not pod_qos_allows([only_be], be, "throttle")  # matched, action not listed
    assert not pod_qos_allows([throttle_all], pod("Burstable"), "eviction")
    assert not pod_qos_allows([], be, "eviction")  # no PodQOS at all: nothing allowed (Crane v0.8+)


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        ({"scopeName": "QOSClass", "operator": "Exists", "values": ["x"]}, "unknown operator 'Exists'"),
        ({"scopeName": "Zone", "operator": "In", "values": ["x"]}, "scopeName"),
        ({"scopeName": "QOSClass", "operator": "In", "values": []}, "must be non-empty"),
        ({"scopeName": "Priority", "operator": "In", "values": ["10-5"]}, "'10-5' is not a priority"),
        ({"scopeName": "Priority", "operator": "In", "values": ["high"]}, "'high' is not a priority"),
    ],
)
def test_bad_scope_requirements_are_refused(requirement, message):
    with pytest.raises(ValidationError, match=message):
        PodQOS.model_validate(
            {"metadata": {"name": "q"}, "spec": {"scopeSelector": {"matchExpressions": [requirement]}}}
        )
