"""NodeMetric status from a history of usage samples, in the JSON shape the extender reads.

``nodeUsage`` and each pod's ``podUsage`` are the mean over the aggregation window
(``aggregateDurationSeconds``); ``aggregatedNodeUsages`` hold avg/p50/p90/p95/p99 of node usage
per configured duration; ``systemUsage`` = node - sum of pods (clamped at 0). The output parses
with :func:`koordpy.model.objects.nodemetric_from_dict` as is.

Not guaranteed: a duration is reported only once the history spans at least half of it (Koordinator
likewise reports an aggregate only with enough samples); percentiles use linear interpolation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import PodInfo
from koordpy.model.priority import LABEL_KOORD_QOS, KubeQoS

__all__ = ["CollectPolicy", "UsageHistory", "go_duration", "nodemetric_status", "policy_from_spec"]

_KOORD_QOS = {KubeQoS.GUARANTEED: "LSR", KubeQoS.BURSTABLE: "LS", KubeQoS.BEST_EFFORT: "BE"}
Sample = tuple[float, float, float]  # (time, cpu cores, memory bytes)


@dataclass(frozen=True, slots=True)
class CollectPolicy:
    report_interval: float = 60.0
    aggregate_duration: float = 300.0
    durations: tuple[float, ...] = (300.0, 600.0, 1800.0)


def policy_from_spec(spec: Mapping[str, Any] | None, default: CollectPolicy) -> CollectPolicy:
    """``spec.metricCollectPolicy`` of a NodeMetric over the agent's defaults (unset/0 = default)."""
    from koordpy.crds.nodemetric import NodeMetricSpec
    from koordpy.model.durations import DurationError, parse_duration

    try:
        parsed = NodeMetricSpec.model_validate(spec or {})
    except ValueError:
        return default
    pol = parsed.metric_collect_policy
    if pol is None:
        return default
    durations = default.durations
    if pol.node_aggregate_policy is not None and pol.node_aggregate_policy.durations:
        try:
            durations = tuple(parse_duration(d) for d in pol.node_aggregate_policy.durations)
        except DurationError:
            durations = default.durations
    return CollectPolicy(
        report_interval=float(pol.report_interval_seconds or default.report_interval),
        aggregate_duration=float(pol.aggregate_duration_seconds or default.aggregate_duration),
        durations=durations,
    )


def go_duration(seconds: float) -> str:
    """``300`` -> ``"5m0s"`` as metav1.Duration prints it (whole seconds)."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


@dataclass
class UsageHistory:
    """Samples of the node and of each pod (by UID), kept for ``horizon`` seconds."""

    horizon: float = 1800.0
    node: deque[Sample] = field(default_factory=deque)
    pods: dict[str, deque[Sample]] = field(default_factory=dict)

    def add_node(self, time: float, cpu: float | None, memory: float | None) -> None:
        if cpu is not None and memory is not None:
            self.node.append((time, cpu, memory))

    def add_pod(self, uid: str, time: float, cpu: float | None, memory: float | None) -> None:
        if cpu is not None and memory is not None:
            self.pods.setdefault(uid, deque()).append((time, cpu, memory))

    def prune(self, now: float, present: Iterable[str] | None = None) -> None:
        """Drop samples older than the horizon and pods not in ``present``."""
        cutoff = now - self.horizon
        while self.node and self.node[0][0] < cutoff:
            self.node.popleft()
        keep = set(present) if present is not None else None
        for uid in list(self.pods):
            samples = self.pods[uid]
            while samples and samples[0][0] < cutoff:
                samples.popleft()
            if not samples or (keep is not None and uid not in keep):
                del self.pods[uid]


def _window(samples: Iterable[Sample], since: float) -> list[Sample]:
    return [s for s in samples if s[0] >= since]


def _resources(cpu: float, memory: float) -> dict[str, Any]:
    return {"resources": {"cpu": f"{max(0, round(cpu * 1000))}m", "memory": str(max(0, round(memory)))}}


def nodemetric_status(
    history: UsageHistory, pods: Sequence[PodInfo], now: float, policy: CollectPolicy
) -> dict[str, Any]:
    """The ``status`` of the node's NodeMetric at ``now``."""
    status: dict[str, Any] = {"updateTime": format_rfc3339(now)}
    recent = _window(history.node, now - policy.aggregate_duration)
    pod_total_cpu = pod_total_mem = 0.0
    pods_metric: list[dict[str, Any]] = []
    for pod in sorted(pods, key=lambda p: p.key):
        samples = _window(history.pods.get(pod.uid, ()), now - policy.aggregate_duration)
        if not samples:
            continue
        cpu = sum(s[1] for s in samples) / len(samples)
        mem = sum(s[2] for s in samples) / len(samples)
        pod_total_cpu += cpu
        pod_total_mem += mem
        pods_metric.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "podUsage": _resources(cpu, mem),
                "priority": str(pod.priority_class) or "koord-none",
                "qos": pod.labels.get(LABEL_KOORD_QOS) or _KOORD_QOS[pod.qos],
            }
        )
    if recent:
        cpu = sum(s[1] for s in recent) / len(recent)
        mem = sum(s[2] for s in recent) / len(recent)
        aggregated = []
        for duration in policy.durations:
            window = _window(history.node, now - duration)
            if len(window) < 2 or window[-1][0] - window[0][0] < duration / 2:
                continue
            arr = np.asarray([(s[1], s[2]) for s in window], dtype=np.float64)
            usage: dict[str, Any] = {"avg": _resources(float(arr[:, 0].mean()), float(arr[:, 1].mean()))}
            for q in (50, 90, 95, 99):
                cpu_q, mem_q = np.percentile(arr, q, axis=0)
                usage[f"p{q}"] = _resources(float(cpu_q), float(mem_q))
            aggregated.append({"usage": usage, "duration": go_duration(duration)})
        status["nodeMetric"] = {
            "nodeUsage": _resources(cpu, mem),
            "systemUsage": _resources(max(0.0, cpu - pod_total_cpu), max(0.0, mem - pod_total_mem)),
            "aggregatedNodeUsages": aggregated,
        }
    status["podsMetric"] = pods_metric
    return status
