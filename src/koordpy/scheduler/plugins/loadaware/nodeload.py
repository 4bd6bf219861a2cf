"""Per-node load bookkeeping (Koordinator's v1.7+ "assign cache"), incrementally maintained.

For each node: the NodeMetric's usage vectors, and three running sums over the pods assigned
to it::

    nodeDelta     = Σ max(0, estimate − reported usage)   over pods that "should be estimated"
    prodDelta     = the same over Prod pods (full estimate if the metric does not call it Prod)
    nodeEstimated = Σ full estimates of all assigned pods
    prodUsage     = Σ reported usage of pods that are Prod by spec *and* by the metric
                    (+ systemUsage when prodUsageIncludeSys)

A pod "should be estimated" when it has no usage in ``podsMetric``, or it was assigned after
``updateTime − reportInterval``, or its force-estimation deadline is after ``updateTime``.

Not guaranteed: vectors are only as fresh as the last event; nothing here looks at the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeMetricInfo, PodInfo
from koordpy.model.priority import PriorityClass

__all__ = ["AssignedPod", "NodeLoad", "Vector", "Vectorizer"]

Vector = npt.NDArray[np.int64]
DEFAULT_REPORT_INTERVAL = 60.0


@dataclass(slots=True)
class AssignedPod:
    pod: PodInfo
    timestamp: float
    estimated: Vector | None
    deadline: float | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.pod.namespace, self.pod.name)

    @property
    def prod(self) -> bool:
        return self.pod.priority_class is PriorityClass.PROD


@dataclass(slots=True)
class NodeLoad:
    width: int
    pods: dict[str, AssignedPod] = field(default_factory=dict)
    metric: NodeMetricInfo | None = None
    update_time: float = float("-inf")
    report_interval: float = DEFAULT_REPORT_INTERVAL
    pod_usages: dict[tuple[str, str], Vector] = field(default_factory=dict)
    prod_pods: set[tuple[str, str]] = field(default_factory=set)
    node_usage: Vector | None = None
    agg_usages: dict[tuple[str, float], Vector] = field(default_factory=dict)
    prod_usage: Vector = field(init=False)
    node_delta: Vector = field(init=False)
    prod_delta: Vector = field(init=False)
    node_estimated: Vector = field(init=False)

    def __post_init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        zero = np.zeros(self.width, np.int64)
        self.prod_usage = zero.copy()
        self.node_delta = zero.copy()
        self.prod_delta = zero.copy()
        self.node_estimated = zero.copy()

    # ---- metric ------------------------------------------------------------------------

    def set_metric(
        self,
        metric: NodeMetricInfo | None,
        vectorize: Vectorizer,
        include_sys: bool,
    ) -> None:
        self.metric = metric
        self.pod_usages = {}
        self.prod_pods = set()
        self.node_usage = None
        self.agg_usages = {}
        self._reset()
        if metric is None:
            return
        self.update_time = metric.update_time if metric.update_time is not None else float("-inf")
        self.report_interval = metric.report_interval if metric.report_interval else DEFAULT_REPORT_INTERVAL
        if metric.node_usage is not None:
            self.node_usage = vectorize(metric.node_usage)
            longest: dict[str, float] = {}
            for entry in metric.aggregated:
                for kind, usage in entry.usage.items():
                    if not usage:
                        continue
                    self.agg_usages[(kind, entry.duration)] = vectorize(dict(usage))
                    if entry.duration > longest.get(kind, -1.0):
                        longest[kind] = entry.duration
            for kind, duration in longest.items():
                self.agg_usages[(kind, 0.0)] = self.agg_usages[(kind, duration)]
            if include_sys:
                self.prod_usage += vectorize(metric.system_usage)
        for pod_metric in metric.pods:
            if not pod_metric.usage:
                continue
            key = (pod_metric.namespace, pod_metric.name)
            self.pod_usages[key] = vectorize(pod_metric.usage)
            if pod_metric.priority == PriorityClass.PROD.value:
                self.prod_pods.add(key)
        for assigned in self.pods.values():
            self._account(assigned, +1)

    def aggregated(self, kind: str, duration: float) -> Vector | None:
        """Usage for (type, duration); duration 0 = longest with data, else ``nodeUsage``."""
        vec = self.agg_usages.get((kind, duration))
        if vec is None and duration == 0:
            return self.node_usage
        return vec

    # ---- pods --------------------------------------------------------------------------

    def add_pod(self, assigned: AssignedPod) -> None:
        old = self.pods.get(assigned.pod.uid)
        if old is not None and self.metric is not None:
            self._account(old, -1)
        self.pods[assigned.pod.uid] = assigned
        if self.metric is not None:
            self._account(assigned, +1)

    def remove_pod(self, uid: str) -> None:
        old = self.pods.pop(uid, None)
        if old is not None and self.metric is not None:
            self._account(old, -1)

    def _account(self, assigned: AssignedPod, sign: int) -> None:
        key = assigned.key
        usage = self.pod_usages.get(key)
        prod = assigned.prod
        active_prod = prod and key in self.prod_pods
        if active_prod and usage is not None:
            self.prod_usage += sign * usage
        estimated = assigned.estimated
        if estimated is None:
            return
        should = (
            usage is None
            or self.update_time - self.report_interval < assigned.timestamp
            or (assigned.deadline is not None and assigned.deadline > self.update_time)
        )
        if should:
            self.node_delta += sign * _delta(estimated, usage)
        self.node_estimated += sign * estimated
        if not prod:
            return
        if not active_prod and usage is not None:
            usage, should = None, True
        if should:
            self.prod_delta += sign * _delta(estimated, usage)


def _delta(estimated: Vector, usage: Vector | None) -> Vector:
    if usage is None:
        return estimated
    delta: Vector = np.maximum(estimated - usage, 0)
    return delta


class Vectorizer:
    """Maps a resource list onto the plugin's fixed resource order."""

    def __init__(self, resources: tuple[str, ...]) -> None:
        self.resources = resources
        self.position = {name: i for i, name in enumerate(resources)}

    def __call__(self, values: Mapping[str, int]) -> Vector:
        vec = np.zeros(len(self.resources), np.int64)
        position = self.position
        for name, amount in values.items():
            i = position.get(name)
            if i is not None:
                vec[i] = amount
        return vec
