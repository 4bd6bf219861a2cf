"""``koordpy agent plan``: the waterline plan for one node from a dump of objects.

Input kinds: NodeQOSEnsurancePolicy, Crane v0.8+ ``NodeQOS`` and ``PodQOS``, AvoidanceAction, Pod, NodeMetric
(node and pod usage) and optionally Node (capacity, labels: needed by the ``*_utilization``
metrics and policy selectors) and koordpy's ``NodePressure`` (:class:`NodePressure`: the PSI figures the
pressure rules read, which no Kubernetes object carries). Pods are those with ``spec.nodeName`` = the
node; their usage is the NodeMetric ``podsMetric`` entry with the same namespace/name.

Rules fire "now": every rule whose metric is above its line counts as fired, cool-downs are
ignored and nothing is in flight. The output is :meth:`Plan.to_json`; its ``warnings`` are
:func:`koordpy.agent.policy.objectcheck.qos_warnings` over the input (``SelectsNoNode`` against the
input's Nodes, or the planned node alone when the input has none).

Not guaranteed: pods' current CFS caps are not in a dump, so they are taken from their CPU limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Annotated, Any, Literal, TypeVar

import pydantic

from koordpy.agent.policy.objectcheck import qos_warnings
from koordpy.agent.policy.planner import PlanOptions, plan
from koordpy.agent.policy.types import MAX_MILLIS, AgentState, NodeSample, Plan, PodSample, check_pod
from koordpy.config.errors import ConfigError, validate
from koordpy.crds.ensurance import (
    PRESSURE_METRIC_NAMES,
    AvoidanceAction,
    NodeQOS,
    NodeQOSEnsurancePolicy,
    ObjectMeta,
    PodQOS,
)
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict

__all__ = ["NodePressure", "OfflineError", "offline_plan"]

T = TypeVar("T")
KINDS = ("NodeQOSEnsurancePolicy", "NodeQOS", "PodQOS", "AvoidanceAction", "Pod", "NodeMetric", "Node", "NodePressure")
PSI_KEYS = tuple(name for name in PRESSURE_METRIC_NAMES if not name.startswith("pod_"))
Percent = Annotated[float, pydantic.Field(ge=0, le=100, strict=True, allow_inf_nan=False)]


def _psi_keys(figures: dict[str, float]) -> dict[str, float]:
    unknown = sorted(set(figures) - set(PSI_KEYS))
    if unknown:
        raise ValueError(
            f"unknown figure {unknown[0]!r} (expected <cpu|memory|io>_pressure_<some|full>_<avg10|avg60|avg300>)"
        )
    return figures


PsiFigures = Annotated[dict[str, Percent], pydantic.AfterValidator(_psi_keys)]


class PodPressure(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)

    namespace: str
    name: str
    pressure: PsiFigures = pydantic.Field(default_factory=dict)
    """The pod cgroup's PSI, keyed as the node's (``cpu_pressure_some_avg10: 41.5``)."""
    own_limit_seconds_ago: dict[
        Literal["cpu", "memory"], Annotated[float, pydantic.Field(ge=0, strict=True, allow_inf_nan=False)]
    ] = pydantic.Field(default_factory=dict, alias="ownLimitSecondsAgo")
    """Per resource, seconds since the pod's own limit last held it back (unset: not seen)."""


class NodePressure(pydantic.BaseModel):
    """``koordpy.io/v1alpha1`` ``NodePressure``: the PSI figures of one node and its pods, in percent, as the
    agent reads them (``/proc/pressure/*`` and each pod cgroup's ``*.pressure``)."""

    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)

    api_version: Literal["koordpy.io/v1alpha1"] = pydantic.Field(alias="apiVersion")
    kind: Literal["NodePressure"]
    metadata: ObjectMeta
    """``metadata.name``: the node."""
    node: PsiFigures = pydantic.Field(default_factory=dict)
    pods: list[PodPressure] = pydantic.Field(default_factory=list)


class OfflineError(ValueError):
    """Bad input: names the source and the field."""


def offline_plan(
    documents: Iterable[tuple[str, Any]], node: str, now: float, options: PlanOptions | None = None
) -> Plan:
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise OfflineError(str(exc)) from None

    def model(kind: str, cls: type[pydantic.BaseModel]) -> list[Any]:
        out = []
        for where, obj in dump.of(kind):
            try:
                out.append(validate(cls, obj, f"{where}: {kind} {_name(obj)}"))
            except ConfigError as exc:
                raise OfflineError(str(exc)) from None
        return out

    legacy: list[NodeQOSEnsurancePolicy] = model("NodeQOSEnsurancePolicy", NodeQOSEnsurancePolicy)
    node_qos: list[NodeQOS] = model("NodeQOS", NodeQOS)
    pod_qos: list[PodQOS] = model("PodQOS", PodQOS)
    policies = legacy + [q.to_policy() for q in node_qos]
    actions = model("AvoidanceAction", AvoidanceAction)
    metrics = _convert(dump.of("NodeMetric"), "NodeMetric", nodemetric_from_dict)
    nodes = _convert(dump.of("Node"), "Node", node_from_dict)
    pods = _convert(dump.of("Pod"), "Pod", pod_from_dict)
    for where, pod in pods:
        try:
            check_pod(pod)
        except ValueError as exc:
            raise OfflineError(f"{where}: Pod {pod.name}: {exc}") from None
    found = next(((w, m) for w, m in metrics if m.name == node), None)
    if found is None:
        raise OfflineError(f"--node: no NodeMetric named {node!r} in the input")
    where, metric = found
    node_found = next(((w, n) for w, n in nodes if n.name == node), None)
    info = node_found[1] if node_found is not None else None
    usage = _bounded(metric.node_usage or {}, f"{where}: NodeMetric {node}: status.nodeMetric.nodeUsage")
    capacity = _bounded(info.capacity, f"{node_found[0]}: Node {node}: status.capacity") if node_found and info else {}
    pressures: list[NodePressure] = model("NodePressure", NodePressure)
    psi = next((p for p in pressures if p.metadata.name == node), None)
    pod_psi = {(p.namespace, p.name): p for p in psi.pods} if psi is not None else {}
    sample = NodeSample(
        name=node,
        time=metric.update_time if metric.update_time is not None else now,
        cpu=usage["cpu"] / 1000 if "cpu" in usage else None,
        cpu_capacity=capacity["cpu"] / 1000 if "cpu" in capacity else None,
        memory=usage.get("memory"),
        memory_capacity=capacity.get("memory"),
        labels=dict(info.labels) if info is not None else {},
        pressure=dict(psi.node) if psi is not None else {},
    )
    by_name = {
        (p.namespace, p.name): _bounded(p.usage, f"{where}: NodeMetric {node}: status.podsMetric[{i}].podUsage")
        for i, p in enumerate(metric.pods)
    }
    samples = []
    for _, pod in pods:
        if pod.node_name != node or pod.terminated:
            continue
        pod_usage = by_name.get((pod.namespace, pod.name))
        cpu = pod_usage["cpu"] / 1000 if pod_usage is not None and "cpu" in pod_usage else None
        memory = pod_usage.get("memory") if pod_usage is not None else None
        limit = pod.limits.get("cpu")
        figures = pod_psi.get((pod.namespace, pod.name))
        samples.append(
            PodSample(
                pod,
                cpu,
                memory,
                limit / 1000 if limit else None,
                dict(figures.pressure) if figures is not None else {},
                {str(k): v for k, v in figures.own_limit_seconds_ago.items()} if figures is not None else {},
            )
        )
    result = plan(
        policies, actions, sample, samples, AgentState(), now=now, options=options, assume_fired=True, pod_qos=pod_qos
    )
    known_nodes = [dict(n.labels) for _, n in nodes] or [dict(sample.labels)]
    warnings = qos_warnings(
        [*legacy, *node_qos],
        actions,
        pod_qos,
        metrics=(options or PlanOptions()).metrics,
        node_labels=known_nodes,
    )
    return replace(result, warnings=tuple(w.text for w in warnings))


def _bounded(resources: Mapping[str, int], where: str) -> Mapping[str, int]:
    """``resources`` unchanged, or an error naming the first amount the policy's arithmetic cannot hold."""
    for name, amount in resources.items():
        if not -MAX_MILLIS <= amount <= MAX_MILLIS:
            raise OfflineError(f"{where}.{name}: out of range (at most {MAX_MILLIS})")
    return resources


def _convert(objects: Iterable[tuple[str, Any]], kind: str, conv: Callable[[Any], T]) -> list[tuple[str, T]]:
    """Convert every object; an error names the file/document, the object and the field."""
    out: list[tuple[str, T]] = []
    for where, obj in objects:
        try:
            out.append((where, conv(obj)))
        except ObjectError as exc:
            raise OfflineError(f"{where}: {kind} {_name(obj)}: {exc}") from None
        except (ValueError, TypeError, AttributeError, KeyError, ArithmeticError) as exc:
            raise OfflineError(f"{where}: {kind} {_name(obj)}: {type(exc).__name__}: {exc}") from None
    return out


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("name")) if isinstance(meta, dict) else "<unnamed>"
