"""Pure NodeMetric bookkeeping decisions: what a node's NodeMetric spec should be, and what to do about it.

Koordinator's slo-controller keeps one NodeMetric per node, named after it, whose
``spec.metricCollectPolicy`` comes from cluster configuration, and removes the NodeMetrics of deleted
nodes. This module decides; ``koordpy.manager.operator`` carries the decisions out. No I/O, no clock.
Not guaranteed: the status is never looked at (the agent owns it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.config.manager import NodeMetricOverride, NodeMetricSettings
from koordpy.crds.nodemetric import (
    AggregatePolicy,
    NodeMetricCollectPolicy,
    NodeMetricSpec,
    nodemetric_body,
)
from koordpy.model.durations import parse_duration

__all__ = [
    "Create",
    "Delete",
    "Patch",
    "desired_policy",
    "go_duration",
    "reconcile_nodemetric",
]


@dataclass(frozen=True)
class Create:
    """Create the NodeMetric ``name`` with ``body``."""

    name: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Patch:
    """JSON merge-patch the NodeMetric ``name`` (``None`` values delete keys)."""

    name: str
    patch: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    """Delete the NodeMetric ``name`` (its node is gone)."""

    name: str


Action = Create | Patch | Delete


def go_duration(seconds: float) -> str:
    """Format seconds as Go's ``time.Duration.String()`` does for whole seconds (``300`` -> ``5m0s``)."""
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def _matches(override: NodeMetricOverride, labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in override.node_selector.items())


def desired_policy(settings: NodeMetricSettings, labels: Mapping[str, str]) -> NodeMetricCollectPolicy:
    """The collect policy for a node with ``labels``: the cluster values, then the first matching override."""
    aggregate = settings.aggregate_duration_seconds
    report = settings.report_interval_seconds
    durations = settings.node_aggregate_durations
    memory = settings.node_memory_collect_policy
    for override in settings.overrides:
        if _matches(override, labels):
            aggregate = override.aggregate_duration_seconds or aggregate
            report = override.report_interval_seconds or report
            durations = override.node_aggregate_durations or durations
            memory = override.node_memory_collect_policy or memory
            break
    return NodeMetricCollectPolicy(
        aggregateDurationSeconds=aggregate,
        reportIntervalSeconds=report,
        nodeAggregatePolicy=AggregatePolicy(durations=[go_duration(parse_duration(d)) for d in durations]),
        nodeMemoryCollectPolicy=memory,
    )


def _wire(policy: NodeMetricCollectPolicy) -> dict[str, Any]:
    return policy.model_dump(by_alias=True, exclude_none=True)


def _current_wire(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The stored policy as the API would echo it; unreadable content counts as different."""
    if spec is None:
        return None
    raw = spec.get("metricCollectPolicy")
    if not isinstance(raw, Mapping):
        return {}
    return dict(raw)


def reconcile_nodemetric(
    name: str,
    settings: NodeMetricSettings,
    node_labels: Mapping[str, str] | None,
    current_spec: Mapping[str, Any] | None,
    exists: bool,
) -> Action | None:
    """One step towards "one NodeMetric per node, with the desired policy".

    ``node_labels`` is ``None`` when the node does not exist; ``exists`` says whether the NodeMetric does,
    and ``current_spec`` is its ``spec`` (``None`` when absent or unknown). Returns ``None`` when nothing
    needs doing. With ``settings.enabled`` false nothing is ever created, patched or deleted.
    """
    if not settings.enabled:
        return None
    if node_labels is None:
        return Delete(name) if exists else None
    desired = _wire(desired_policy(settings, node_labels))
    if not exists:
        spec = NodeMetricSpec(metricCollectPolicy=NodeMetricCollectPolicy.model_validate(desired))
        return Create(name, nodemetric_body(name, spec))
    current = _current_wire(current_spec) or {}
    if current == desired:
        return None
    patch: dict[str, Any] = dict(desired)
    for key in current:
        if key not in desired:
            patch[key] = None
    return Patch(name, {"spec": {"metricCollectPolicy": patch}})
