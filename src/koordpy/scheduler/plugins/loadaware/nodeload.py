"""Per-node load bookkeeping (Koordinator's v1.7+ "assign cache").

For each node: the NodeMetric's usage vectors, and four sums over the pods assigned to it::

    nodeDelta     = Σ max(0, estimate − reported usage)   over pods that "should be estimated"
    prodDelta     = the same over Prod pods (full estimate if the metric does not call it Prod)
    nodeEstimated = Σ full estimates of all assigned pods
    prodUsage     = Σ reported usage of pods that are Prod by spec *and* by the metric
                    (+ systemUsage when prodUsageIncludeSys)

A pod "should be estimated" when it has no usage in ``podsMetric``, or it was assigned after
``updateTime − reportInterval``, or its force-estimation deadline is after ``updateTime``.

The sums are kept in plain Python integers: a NodeMetric recomputes them in one pass over the
node's pods, a pod event adds or takes back that pod's share. At tens of pods per node this is
faster than numpy (which has a fixed cost per array operation), and integer sums cannot drift.

Not guaranteed: vectors are only as fresh as the last event; nothing here looks at the clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeMetricInfo, PodInfo
from koordpy.model.priority import PriorityClass

__all__ = ["SATURATION", "AssignedPod", "NodeLoad", "Vector", "Vectorizer", "saturate"]

Vector = npt.NDArray[np.int64]
DEFAULT_REPORT_INTERVAL = 60.0
SATURATION = 2**53
"""Vector entries are clamped to ±2^53 (9.0e15 millicores, 8 PiB): any quantity beyond exceeds every
threshold anyway, and the clamp keeps float64 exact and the int64 arithmetic of filter and score
(a sum of two vectors, ``× 100``) from overflowing. Usage and allocatable are clamped alike, so a
clamped node can only look fuller than it is, never emptier."""


def saturate(amount: int) -> int:
    return SATURATION if amount > SATURATION else -SATURATION if amount < -SATURATION else amount


@dataclass(slots=True)
class AssignedPod:
    pod: PodInfo
    timestamp: float
    estimated: Vector | None
    deadline: float | None
    key: tuple[str, str] = field(init=False)
    prod: bool = field(init=False)
    _estimate: tuple[int, ...] | None = field(init=False, repr=False)
    _deadline: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.key = (self.pod.namespace, self.pod.name)
        self.prod = self.pod.priority_class is PriorityClass.PROD
        self._estimate = None if self.estimated is None else tuple(self.estimated.tolist())
        self._deadline = -math.inf if self.deadline is None else self.deadline


class NodeLoad:
    """One node's metric vectors and assigned pods, with the four sums above."""

    __slots__ = (
        "_metric_prod",
        "_reported",
        "_sums",
        "_system",
        "_usage",
        "_values",
        "agg_usages",
        "metric",
        "node_delta",
        "node_estimated",
        "node_usage",
        "pods",
        "prod_delta",
        "prod_usage",
        "report_interval",
        "update_time",
        "width",
    )

    prod_usage: Vector
    node_delta: Vector
    prod_delta: Vector
    node_estimated: Vector

    def __init__(self, width: int) -> None:
        self.width = width
        self.pods: dict[str, AssignedPod] = {}
        self.metric: NodeMetricInfo | None = None
        self.update_time = -math.inf
        self.report_interval = DEFAULT_REPORT_INTERVAL
        self.node_usage: Vector | None = None
        self.agg_usages: dict[tuple[str, float], Vector] = {}
        self._system: tuple[int, ...] = (0,) * width
        self._usage: dict[tuple[str, str], tuple[int, ...]] = {}
        """Reported usage vectors, filled lazily from ``_reported`` for the pods that are looked up."""
        self._reported: dict[tuple[str, str], Mapping[str, int]] = {}
        self._values: Callable[[Mapping[str, int]], tuple[int, ...]] | None = None
        self._metric_prod: frozenset[tuple[str, str]] = frozenset()
        self._recompute()

    # ---- metric ------------------------------------------------------------------------

    def set_metric(
        self,
        metric: NodeMetricInfo | None,
        vectorize: Vectorizer,
        include_sys: bool,
    ) -> None:
        self.metric = metric
        self.node_usage = None
        self.agg_usages = {}
        self._system = (0,) * self.width
        self._usage = {}
        self._reported = {}
        self._values = vectorize.values
        self._metric_prod = frozenset()
        if metric is None:
            self._recompute()
            return
        self.update_time = metric.update_time if metric.update_time is not None else -math.inf
        self.report_interval = metric.report_interval if metric.report_interval else DEFAULT_REPORT_INTERVAL
        if metric.node_usage is not None:
            self.node_usage = vectorize(metric.node_usage)
            longest: dict[str, float] = {}
            for entry in metric.aggregated:
                for kind, usage in entry.usage.items():
                    if not usage:
                        continue
                    self.agg_usages[(kind, entry.duration)] = vectorize(usage)
                    if entry.duration > longest.get(kind, -1.0):
                        longest[kind] = entry.duration
            for kind, duration in longest.items():
                self.agg_usages[(kind, 0.0)] = self.agg_usages[(kind, duration)]
            if include_sys:
                self._system = vectorize.values(metric.system_usage)
        # Pods without usage count as "not reported"; a repeated name keeps its last usage and
        # is Prod if any of its entries says so.
        # Only the node's assigned pods are ever looked up: their vectors are made on first use.
        prod = PriorityClass.PROD.value
        reported: dict[tuple[str, str], Mapping[str, int]] = {}
        prod_keys = []
        for p in metric.pods:
            if p.usage:
                key = (p.namespace, p.name)
                reported[key] = p.usage
                if p.priority == prod:
                    prod_keys.append(key)
        self._reported = reported
        self._metric_prod = frozenset(prod_keys)
        self._recompute()

    def _reported_vector(self, key: tuple[str, str]) -> tuple[int, ...] | None:
        """The pod's reported usage as a tuple in resource order; None when not reported."""
        usage = self._usage.get(key)
        if usage is None:
            raw = self._reported.get(key)
            if raw is None or self._values is None:
                return None
            usage = self._usage[key] = self._values(raw)
        return usage

    def aggregated(self, kind: str, duration: float) -> Vector | None:
        """Usage for (type, duration); duration 0 = longest with data, else ``nodeUsage``."""
        vec = self.agg_usages.get((kind, duration))
        if vec is None and duration == 0:
            return self.node_usage
        return vec

    def reported_usage(self, key: tuple[str, str]) -> Vector | None:
        """The pod's usage in the current NodeMetric's ``podsMetric``; None when not reported."""
        usage = self._reported_vector(key)
        return None if usage is None else np.array(usage, np.int64)

    # ---- pods --------------------------------------------------------------------------

    def add_pod(self, assigned: AssignedPod) -> None:
        old = self.pods.get(assigned.pod.uid)
        if old is not None:
            self._account(old, -1)
        self.pods[assigned.pod.uid] = assigned
        self._account(assigned, +1)
        self._publish()

    def remove_pod(self, uid: str) -> None:
        old = self.pods.pop(uid, None)
        if old is not None:
            self._account(old, -1)
            self._publish()

    def _recompute(self) -> None:
        self._sums = ([0] * self.width, [0] * self.width, [0] * self.width, list(self._system))
        for assigned in self.pods.values():
            self._account(assigned, +1)
        self._publish()

    def _account(self, assigned: AssignedPod, sign: int) -> None:
        """Add (sign +1) or take back (-1) one pod's share: the only place the rule lives.

        Plain integers, so taking a share back is exact and the sums cannot drift.
        """
        if self.metric is None:
            return
        node_delta, prod_delta, node_estimated, prod_usage = self._sums
        width = range(self.width)
        usage = self._reported_vector(assigned.key)
        active_prod = assigned.prod and usage is not None and assigned.key in self._metric_prod
        if active_prod:
            for r in width:
                prod_usage[r] += sign * usage[r]  # type: ignore[index]
        estimate = assigned._estimate
        if estimate is None:
            return
        for r in width:
            node_estimated[r] += sign * estimate[r]
        should = (
            usage is None
            or assigned.timestamp > self.update_time - self.report_interval
            or assigned._deadline > self.update_time
        )
        delta: Sequence[int] = estimate
        if should:
            if usage is not None:
                delta = [e - u if e > u else 0 for e, u in zip(estimate, usage, strict=True)]
            for r in width:
                node_delta[r] += sign * delta[r]
        if assigned.prod:
            if not active_prod and usage is not None:
                delta, should = estimate, True  # Prod by spec, not by the metric: full estimate
            if should:
                for r in width:
                    prod_delta[r] += sign * delta[r]

    def _publish(self) -> None:
        sums = np.array([[saturate(v) for v in row] for row in self._sums], np.int64)
        self.node_delta, self.prod_delta, self.node_estimated, self.prod_usage = sums


class Vectorizer:
    """Maps a resource list onto the plugin's fixed resource order."""

    def __init__(self, resources: tuple[str, ...]) -> None:
        self.resources = resources
        self.position = {name: i for i, name in enumerate(resources)}
        self._zeros = (0,) * len(resources)

    def values(self, values: Mapping[str, int]) -> tuple[int, ...]:
        """The same as a tuple of Python ints, for per-pod arithmetic."""
        return tuple(map(values.get, self.resources, self._zeros))

    def __call__(self, values: Mapping[str, int]) -> Vector:
        vec = np.zeros(len(self.resources), np.int64)
        position = self.position
        for name, amount in values.items():
            i = position.get(name)
            if i is not None:
                vec[i] = saturate(amount)
        return vec
