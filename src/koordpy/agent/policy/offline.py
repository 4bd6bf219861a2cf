"""``koordpy agent plan``: the waterline plan for one node from a dump of objects.

Input kinds: NodeQOSEnsurancePolicy, Crane v0.8+ ``NodeQOS`` and ``PodQOS``, AvoidanceAction, Pod, NodeMetric
(node and pod usage) and optionally Node (capacity, labels: needed by the ``*_utilization``
metrics and policy selectors). Pods are those with ``spec.nodeName`` = the node; their usage is
the NodeMetric ``podsMetric`` entry with the same namespace/name.

Rules fire "now": every rule whose metric is above its line counts as fired, cool-downs are
ignored and nothing is in flight. The output is :meth:`Plan.to_json`; its ``warnings`` are
:func:`koordpy.agent.policy.objectcheck.qos_warnings` over the input (``SelectsNoNode`` against the
input's Nodes, or the planned node alone when the input has none).

Not guaranteed: pods' current CFS caps are not in a dump, so they are taken from their CPU limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pydantic

from koordpy.agent.policy.objectcheck import qos_warnings
from koordpy.agent.policy.planner import PlanOptions, plan
from koordpy.agent.policy.types import AgentState, NodeSample, Plan, PodSample
from koordpy.config.errors import ConfigError, validate
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, NodeQOSEnsurancePolicy, PodQOS
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict

__all__ = ["OfflineError", "offline_plan"]

KINDS = ("NodeQOSEnsurancePolicy", "NodeQOS", "PodQOS", "AvoidanceAction", "Pod", "NodeMetric", "Node")


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
    try:
        metrics = [(w, nodemetric_from_dict(o)) for w, o in dump.of("NodeMetric")]
        nodes = [(w, node_from_dict(o)) for w, o in dump.of("Node")]
        pods = [(w, pod_from_dict(o)) for w, o in dump.of("Pod")]
    except ObjectError as exc:
        raise OfflineError(str(exc)) from None
    metric = next((m for _, m in metrics if m.name == node), None)
    if metric is None:
        raise OfflineError(f"--node: no NodeMetric named {node!r} in the input")
    info = next((n for _, n in nodes if n.name == node), None)
    usage = metric.node_usage or {}
    sample = NodeSample(
        name=node,
        time=metric.update_time if metric.update_time is not None else now,
        cpu=usage["cpu"] / 1000 if "cpu" in usage else None,
        cpu_capacity=info.capacity["cpu"] / 1000 if info is not None and "cpu" in info.capacity else None,
        memory=usage.get("memory"),
        memory_capacity=info.capacity.get("memory") if info is not None else None,
        labels=dict(info.labels) if info is not None else {},
    )
    by_name = {(p.namespace, p.name): p.usage for p in metric.pods}
    samples = []
    for _, pod in pods:
        if pod.node_name != node or pod.terminated:
            continue
        pod_usage = by_name.get((pod.namespace, pod.name))
        cpu = pod_usage["cpu"] / 1000 if pod_usage is not None and "cpu" in pod_usage else None
        memory = pod_usage.get("memory") if pod_usage is not None else None
        limit = pod.limits.get("cpu")
        samples.append(PodSample(pod, cpu, memory, limit / 1000 if limit else None))
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


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("name")) if isinstance(meta, dict) else "<unnamed>"
