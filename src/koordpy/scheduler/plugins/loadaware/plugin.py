"""LoadAwareScheduling filter and score over numpy arrays indexed by node.

Filter, in order (Koordinator v1.8):

1. DaemonSet pods pass.
2. No NodeMetric for the node: pass (load awareness is an optimisation; fail open). A NodeMetric
   that exists but could not be read (a quantity out of range, negative usage, ...): Unschedulable
   ``node(s) nodeMetric invalid`` (its usage is unknown, not zero: never a load-aware pass), score 0.
3. Expired metric (``updateTime`` unset, or ``now − updateTime ≥ nodeMetricExpirationSeconds``)
   with ``filterExpiredNodeMetrics``: Unschedulable ``node(s) nodeMetric expired``, unless
   ``enableScheduleWhenNodeMetricsExpired`` (then pass). Without ``filterExpiredNodeMetrics`` the
   stale usage is still checked.
4. ``status.nodeMetric`` absent: pass.
5. Threshold set: prod thresholds for a Prod pod when the node's profile has them (base =
   prodUsage + prodDelta); else aggregated thresholds if configured (base = percentile usage +
   nodeDelta); else ``usageThresholds`` (base = nodeUsage + nodeDelta). A missing percentile usage
   falls back to nodeEstimated. The incoming pod's estimate is added.
6. Per resource in name order, skipping threshold 0 or allocatable 0:
   ``round(used / allocatable × 100) > threshold`` fails (strictly greater, Go rounding).

Filter verdicts are kept per incoming-pod class (the pod's estimate vector and whether it is Prod) for
every node, and recomputed only for the nodes that changed since (a change log fed by every event that
writes a node's rows), or for all nodes when the capacity grew, when the oldest unexpired metric expired,
or when the clock went back. A request then takes its nodes' verdicts from the table; the pod's estimate
is the only per-pod work. ``invalidate`` is the hook for any other source that changes a verdict.

Score: 0 without weights, without a (fresh) metric or without ``status.nodeMetric``; else per
resource ``s = 0 if cap == 0 or used > cap else (cap − used) × 100 // cap`` and
``(Σ w·s + D·min s) // (Σ w + D)``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo
from koordpy.model.priority import PriorityClass
from koordpy.scheduler.framework.interfaces import FilterVerdicts, IndexArray
from koordpy.scheduler.framework.status import Code
from koordpy.scheduler.plugins.loadaware.estimator import (
    ANNOTATION_ESTIMATED_SCALING_FACTORS,
    ANNOTATION_ESTIMATED_SECONDS_AFTER_INITIALIZED,
    ANNOTATION_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED,
    custom_seconds,
    estimate_node,
    estimate_pod,
)
from koordpy.scheduler.plugins.loadaware.nodeload import AssignedPod, NodeLoad, Vector, Vectorizer
from koordpy.scheduler.plugins.loadaware.profile import ThresholdProfile, threshold_profile

__all__ = [
    "NAME",
    "REASON_AGGREGATED_USAGE_EXCEED",
    "REASON_NODEMETRIC_EXPIRED",
    "REASON_NODEMETRIC_INVALID",
    "REASON_USAGE_EXCEED",
    "LoadAwarePlugin",
    "LoadDetail",
    "ResourceLoad",
]

NAME = "LoadAwareScheduling"
REASON_NODEMETRIC_EXPIRED = "node(s) nodeMetric expired"
REASON_NODEMETRIC_INVALID = "node(s) nodeMetric invalid"
REASON_USAGE_EXCEED = "node(s) {} usage exceed threshold"
REASON_AGGREGATED_USAGE_EXCEED = "node(s) {} aggregated usage exceed threshold"


@dataclass(frozen=True, slots=True)
class ResourceLoad:
    """One resource of a node as the filter sees it: ``usage`` is the node's base (reported usage +
    the delta of recently assigned pods, or the chosen percentile), ``estimate`` the incoming pod's."""

    resource: str
    usage: int
    estimate: int
    allocatable: int
    percent: int | None
    """``round((usage + estimate) / allocatable × 100)``; None when allocatable is 0."""
    threshold: int
    """0 = not checked."""
    over: bool
    """``percent > threshold`` as the filter decides it."""


@dataclass(frozen=True, slots=True)
class LoadDetail:
    """What ``LoadAwarePlugin.filter`` looked at for one node. Not guaranteed: the verdict itself
    comes from ``filter`` (DaemonSet pods and disabled thresholds pass before any of this)."""

    node: str
    has_metric: bool
    has_status: bool = False
    age: float | None = None
    """Seconds since ``status.updateTime``; None when unset."""
    expired: bool = False
    prod: bool = False
    aggregated: bool = False
    resources: tuple[ResourceLoad, ...] = ()


def _exceeds(thresholds: Vector, alloc: Vector, percent: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """THE threshold rule: a set threshold on a resource the node has, strictly exceeded."""
    out: npt.NDArray[np.bool_] = (thresholds > 0) & (alloc > 0) & (percent > thresholds)
    return out


VERDICT_TABLES = 8
"""Pod classes whose verdict tables are kept (least recently used dropped first)."""
_ESTIMATES_MAX = 4096
"""Distinct pod resource shapes whose estimates are kept (then estimates are computed, not kept)."""
_CHANGE_LOG_MAX = 4096
"""Changed node indices remembered; a table further behind than that is recomputed whole."""


@dataclass(slots=True)
class _VerdictTable:
    """Filter verdicts of one pod class for every node index below ``codes.size``."""

    codes: npt.NDArray[np.int8]
    reason_ids: npt.NDArray[np.int16]
    seen: int
    """Change-log sequence number up to which the table is current."""
    computed_at: float
    """The earliest ``now`` any verdict in the table was computed at."""
    oldest_update: float
    """The oldest ``updateTime`` among nodes whose metric was not expired: once it expires, recompute."""


def _go_round(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Go ``math.Round`` for non-negative values, vectorised."""
    floor = np.floor(values)
    return np.where(values - floor >= 0.5, floor + 1.0, floor)


class LoadAwarePlugin:
    """The plugin. Feed it cluster events (``ClusterState`` does), then call filter/score."""

    name = NAME
    weight = 1

    def __init__(self, args: LoadAwareSchedulingArgs) -> None:
        self.args = args
        self.resources = args.resources
        self.vectorize = Vectorizer(self.resources)
        width = len(self.resources)
        self._width = width
        self._weights = self.vectorize(dict(args.resource_weights))
        self._weight_sum = int(self._weights.sum()) + args.dominant_resource_weight
        # reason table: 0 = "", 1 = expired, then plain per resource, then aggregated per resource, then invalid
        self.reasons: tuple[str, ...] = (
            "",
            REASON_NODEMETRIC_EXPIRED,
            *(REASON_USAGE_EXCEED.format(r) for r in self.resources),
            *(REASON_AGGREGATED_USAGE_EXCEED.format(r) for r in self.resources),
            REASON_NODEMETRIC_INVALID,
        )
        self._invalid_reason_id = len(self.reasons) - 1
        self._invalid_metrics: set[str] = set()
        self.loads: dict[str, NodeLoad] = {}
        self.profiles: dict[str, ThresholdProfile] = {}
        self._node_of_index: dict[int, str] = {}
        self._index_of_node: dict[str, int] = {}
        self._alloc_of: dict[str, Vector] = {}
        self._usage_source: list[tuple[str, float] | None] = []
        """Node index -> the (aggregation type, duration) its profile's filter base reads (None: ``nodeUsage``),
        by index so that a pod event does not look the profile up by name; set with the profile."""
        self._load_at: list[NodeLoad | None] = []
        """Node index -> ``loads`` of the node at that index (None while it has none), set when its NodeLoad
        is created and whenever a node is added at that index (a removed node's index may be reused): a pod
        event finds the NodeLoad without a name lookup. A removed node's entry is stale until then, and
        never read: the cluster state passes no index for a node it does not know."""
        self._tables: OrderedDict[tuple[tuple[int, ...], bool], _VerdictTable] = OrderedDict()
        self._changes: list[int] = []
        """Node indices whose rows changed, oldest first; ``_changes[k]`` has sequence ``_changes_base + k``."""
        self._changes_base = 0
        self._estimates: dict[tuple[object, ...], tuple[int, ...]] = {}
        """(priority class, requests items, limits items) -> estimate, filled up to ``_ESTIMATES_MAX``."""
        self.tables_rebuilt = 0
        """Whole-table verdict computations so far (read in tests and benchmarks)."""
        self._allocate(64)

    # ---- arrays ------------------------------------------------------------------------

    def _allocate(self, capacity: int) -> None:
        width = self._width

        def grow_matrix(name: str, fill: int = 0) -> None:
            new: npt.NDArray[np.int64] = np.full((capacity, width), fill, np.int64)
            old = getattr(self, name, None)
            if old is not None:
                new[: old.shape[0]] = old
            setattr(self, name, new)

        def grow_vector(name: str, dtype: type, fill: object) -> None:
            new: npt.NDArray[Any] = np.full(capacity, fill, dtype)
            old = getattr(self, name, None)
            if old is not None:
                new[: old.shape[0]] = old
            setattr(self, name, new)

        for matrix in (
            "alloc",
            "np_base",
            "np_thr",
            "prod_base",
            "prod_thr",
            "score_np_base",
            "score_prod_base",
        ):
            grow_matrix(matrix)
        grow_vector("has_metric", bool, False)
        grow_vector("metric_invalid", bool, False)
        grow_vector("has_status", bool, False)
        grow_vector("np_aggregated", bool, False)
        grow_vector("prod_enabled", bool, False)
        grow_vector("np_enabled", bool, False)
        grow_vector("update_time", np.float64, np.nan)
        self._usage_source.extend([None] * (capacity - len(self._usage_source)))
        self._load_at.extend([None] * (capacity - len(self._load_at)))
        # Flat views of the four base matrices for the per-event writes of ``_write_bases``: a memoryview
        # item write costs half a numpy ``[index, r]`` one. Rebuilt with the matrices they view.
        self._base_views = tuple(
            matrix.reshape(-1).data
            for matrix in (self.np_base, self.prod_base, self.score_np_base, self.score_prod_base)
        )
        self._flag_views = (self.metric_invalid.data, self.has_metric.data, self.has_status.data)
        self._capacity = capacity
        self.invalidate()

    alloc: npt.NDArray[np.int64]
    np_base: npt.NDArray[np.int64]
    np_thr: npt.NDArray[np.int64]
    prod_base: npt.NDArray[np.int64]
    prod_thr: npt.NDArray[np.int64]
    score_np_base: npt.NDArray[np.int64]
    score_prod_base: npt.NDArray[np.int64]
    has_metric: npt.NDArray[np.bool_]
    metric_invalid: npt.NDArray[np.bool_]
    has_status: npt.NDArray[np.bool_]
    np_aggregated: npt.NDArray[np.bool_]
    prod_enabled: npt.NDArray[np.bool_]
    np_enabled: npt.NDArray[np.bool_]
    update_time: npt.NDArray[np.float64]
    _base_views: tuple[memoryview, ...]
    """Flat views of ``np_base``, ``prod_base``, ``score_np_base`` and ``score_prod_base``, in that order."""
    _flag_views: tuple[memoryview, ...]
    """Views of ``metric_invalid``, ``has_metric`` and ``has_status``, for ``_refresh``."""

    def _load(self, name: str) -> NodeLoad:
        load = self.loads.get(name)
        if load is None:
            load = self.loads[name] = NodeLoad(self._width)
            index = self._index_of_node.get(name)
            if index is not None:
                self._load_at[index] = load
        return load

    def _refresh(self, name: str, load: NodeLoad | None = None) -> None:
        """Recompute the node's rows from its NodeLoad (``load``: the caller's, else looked up) and profile.
        O(resources)."""
        index = self._index_of_node.get(name)
        if index is None:
            return
        self._changed(index)
        if load is None:
            load = self.loads.get(name)
        metric = load.metric if load is not None else None
        invalid, has_metric, has_status = self._flag_views
        invalid[index] = name in self._invalid_metrics
        if load is None or metric is None:
            has_metric[index] = False
            has_status[index] = False
            return
        has_metric[index] = True
        has_status[index] = metric.node_usage is not None
        self.update_time[index] = metric.update_time if metric.update_time is not None else np.nan
        self._write_bases(index, load)

    def _refresh_sums(self, name: str, load: NodeLoad | None, index: int | None) -> None:
        """:meth:`_refresh` after a pod event on node ``name`` (``load``: its NodeLoad, None when it has
        none; ``index``: its index as the cluster state gave it, None: looked up here): only the pod sums
        changed, so only the base rows are rewritten (the metric flags, update time and profile rows are
        the same)."""
        if index is None:
            index = self._index_of_node.get(name)
            if index is None:
                return
        self._changed(index)
        if load is not None and load.metric is not None:  # without a metric the base rows are not read
            self._write_bases(index, load)

    def _write_bases(self, index: int, load: NodeLoad) -> None:
        """The base rows (usage + deltas) of node ``index``, in plain integers written entry by entry
        through flat views (at a handful of resources that is cheaper than building a numpy row)."""
        node_delta, prod_delta, node_estimated, prod_usage = load.sums()
        source = self._usage_source[index]
        usage = load.node_usage_values if source is None else load.aggregated_values(*source)
        score_agg = self.args.aggregated
        if score_agg is not None and score_agg.score_enabled:
            score_usage = load.aggregated_values(score_agg.score_aggregation_type, score_agg.score_aggregated_duration)
        else:
            score_usage = load.node_usage_values
        np_base, prod_base, score_np_base, score_prod_base = self._base_views
        width = self._width
        at = index * width
        for r in range(width):
            prod = prod_usage[r] + prod_delta[r]
            prod_base[at] = prod
            score_prod_base[at] = prod
            np_base[at] = node_estimated[r] if usage is None else usage[r] + node_delta[r]
            score_np_base[at] = node_estimated[r] if score_usage is None else score_usage[r] + node_delta[r]
            at += 1

    # ---- events ------------------------------------------------------------------------

    def on_capacity(self, capacity: int) -> None:
        if capacity > self._capacity:
            self._allocate(capacity)

    def on_node(self, index: int, node: NodeInfo) -> None:
        self._node_of_index[index] = node.name
        self._index_of_node[node.name] = index
        self._load_at[index] = self.loads.get(node.name)
        self._alloc_of[node.name] = self.vectorize(dict(estimate_node(node)))
        profile = self.profiles[node.name] = threshold_profile(node.annotations, self.args)
        aggregated = profile.aggregated
        self._usage_source[index] = None if aggregated is None else (aggregated.aggregation_type, aggregated.duration)
        self.np_aggregated[index] = aggregated is not None  # read only while the node has a metric
        # Node-static rows: set once per node change, not on every pod or metric event.
        prod_thr = self.vectorize(dict(profile.prod))
        usage_thresholds = profile.aggregated.thresholds if profile.aggregated is not None else profile.usage
        np_thr = self.vectorize(dict(usage_thresholds))
        self.alloc[index] = self._alloc_of[node.name]
        self.prod_thr[index] = prod_thr
        self.np_thr[index] = np_thr
        # Koordinator tests the *vectorised* thresholds: all zero (or only unknown resources) means "not set".
        self.prod_enabled[index] = bool(prod_thr.any())
        self.np_enabled[index] = bool(np_thr.any())
        self._refresh(node.name)

    def on_node_removed(self, index: int, name: str) -> None:
        self._node_of_index.pop(index, None)
        self._index_of_node.pop(name, None)
        self.profiles.pop(name, None)
        self._alloc_of.pop(name, None)
        self._load_at[index] = None
        self._forget_load(name)
        self._usage_source[index] = None
        self.has_metric[index] = False
        self.has_status[index] = False
        self.metric_invalid[index] = False
        self.alloc[index] = 0
        self._changed(index)

    # ---- verdict tables ----------------------------------------------------------------

    def _changed(self, index: int) -> None:
        changes = self._changes
        changes.append(index)
        if len(changes) > _CHANGE_LOG_MAX:
            drop = len(changes) // 2
            del changes[:drop]
            self._changes_base += drop

    def invalidate(self, index: int | None = None) -> None:
        """Forget the verdicts of node ``index`` (None: of every node). Every event this plugin receives
        already does this; call it for anything else that changes what ``filter`` decides."""
        if index is None:
            self._tables.clear()
        else:
            self._changed(index)

    def _table(self, estimate: Vector, prod: bool, now: float) -> _VerdictTable:
        key = (tuple(estimate.tolist()), prod)
        table = self._tables.get(key)
        head = self._changes_base + len(self._changes)
        if table is not None and table.codes.size == self._capacity and now >= table.computed_at:
            behind = table.seen < self._changes_base or head - table.seen > self._capacity // 4
            stale = self.args.filter_expired_node_metrics and now - table.oldest_update >= self._expiration
            if not behind and not stale:
                self._tables.move_to_end(key)
                if table.seen < head:
                    changed = np.unique(np.array(self._changes[table.seen - self._changes_base :], np.int64))
                    codes, reason_ids, oldest = self._verdicts(estimate, prod, changed, now)
                    table.codes[changed] = codes
                    table.reason_ids[changed] = reason_ids
                    table.oldest_update = min(table.oldest_update, oldest)
                    table.seen = head
                return table
        indices = np.arange(self._capacity, dtype=np.int64)
        codes, reason_ids, oldest = self._verdicts(estimate, prod, indices, now)
        self.tables_rebuilt += 1
        table = _VerdictTable(codes, reason_ids, head, now, oldest)
        self._tables[key] = table
        self._tables.move_to_end(key)
        if len(self._tables) > VERDICT_TABLES:
            self._tables.popitem(last=False)
        return table

    def on_metric(self, name: str, metric: NodeMetricInfo | None) -> None:
        if metric is not None and metric.error is not None:
            self._invalid_metrics.add(name)
            metric = None  # nothing of it is usable: no usage, no updateTime
        elif self._invalid_metrics:
            self._invalid_metrics.discard(name)
        load = self._load(name)
        load.set_metric(metric, self.vectorize, self.args.prod_usage_include_sys)
        self._refresh(name, load)
        if metric is None:
            self._forget_load(name)

    def on_pod_assigned(self, index: int | None, node_name: str, pod: PodInfo, now: float) -> None:
        if pod.annotations.get("scheduling.koordinator.sh/reservation"):  # placeholder pods
            return
        estimate = self.estimate_values(pod)
        assigned = AssignedPod(pod, now, estimate if any(estimate) else None, self._deadline(pod, now))
        load = self._load_at[index] if index is not None else None
        if load is None:
            load = self._load(node_name)
        load.add_pod(assigned)
        self._refresh_sums(node_name, load, index)

    def on_pod_unassigned(self, index: int | None, node_name: str, pod: PodInfo) -> None:
        load = self.loads.get(node_name)
        if load is not None:
            load.remove_pod(pod.uid)
            self._refresh_sums(node_name, load, index)
            if not load.pods:
                self._forget_load(node_name)

    def _forget_load(self, name: str) -> None:
        """Drop the NodeLoad of a node that is gone once nothing is left in it (no NodeMetric, no pod): the
        NodeLoads of nodes that came and went must not stay."""
        load = self.loads.get(name)
        if load is not None and load.metric is None and not load.pods and name not in self._index_of_node:
            del self.loads[name]

    def _deadline(self, pod: PodInfo, timestamp: float) -> float | None:
        after_scheduled = after_initialized = -1
        if self.args.allow_customize_estimation:
            after_scheduled = custom_seconds(pod, ANNOTATION_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED)
            after_initialized = custom_seconds(pod, ANNOTATION_ESTIMATED_SECONDS_AFTER_INITIALIZED)
        if after_scheduled < 0 and self.args.estimated_seconds_after_pod_scheduled is not None:
            after_scheduled = self.args.estimated_seconds_after_pod_scheduled
        if after_initialized < 0 and self.args.estimated_seconds_after_initialized is not None:
            after_initialized = self.args.estimated_seconds_after_initialized
        if after_initialized > 0 and pod.initialized_time is not None:
            return pod.initialized_time + after_initialized
        if after_scheduled > 0:
            return timestamp + after_scheduled
        return None

    # ---- decisions ---------------------------------------------------------------------

    def estimate(self, pod: PodInfo) -> Vector:
        return np.array(self.estimate_values(pod), np.int64)

    def estimate_values(self, pod: PodInfo) -> tuple[int, ...]:
        """``estimate_pod`` in resource order, clamped (the entries of :meth:`estimate`). Memoised by what
        it reads (priority class, requests, limits) unless the pod carries its own scaling factors."""
        custom = self.args.allow_customize_estimation and ANNOTATION_ESTIMATED_SCALING_FACTORS in pod.annotations
        if custom:
            return self.vectorize.saturated(estimate_pod(pod, self.args))
        key = (pod.priority_class, tuple(pod.requests.items()), tuple(pod.limits.items()))
        known = self._estimates.get(key)
        if known is None:
            known = self.vectorize.saturated(estimate_pod(pod, self.args))
            if len(self._estimates) < _ESTIMATES_MAX:
                self._estimates[key] = known
        return known

    @property
    def _expiration(self) -> float:
        return self.args.node_metric_expiration_seconds

    def expired_metrics(self, now: float) -> int:
        """Nodes whose NodeMetric exists but is expired at ``now`` (``updateTime`` unset, or older than
        ``nodeMetricExpirationSeconds``): no agent reports for them. Nodes without a NodeMetric do not count."""
        if not self._node_of_index:
            return 0
        indices = np.fromiter(self._node_of_index, np.int64, len(self._node_of_index))
        return int(np.count_nonzero(self.has_metric[indices] & self._expired(indices, now)))

    def _expired(self, indices: IndexArray, now: float) -> npt.NDArray[np.bool_]:
        updated = self.update_time[indices]
        with np.errstate(invalid="ignore"):
            return np.isnan(updated) | (now - updated >= self._expiration)

    def _percent(
        self, pod: PodInfo, rows: IndexArray
    ) -> tuple[npt.NDArray[np.bool_], Vector, Vector, Vector, npt.NDArray[np.float64]]:
        """Per row: prod thresholds used?, used (base + estimate), allocatable, thresholds, percent."""
        return self._percent_of(self.estimate(pod), pod.priority_class is PriorityClass.PROD, rows)

    def _percent_of(
        self, estimate: Vector, prod: bool, rows: IndexArray
    ) -> tuple[npt.NDArray[np.bool_], Vector, Vector, Vector, npt.NDArray[np.float64]]:
        # ``take`` along axis 0 rather than ``matrix[rows]``: same result, an order of magnitude faster.
        use_prod = self.prod_enabled[rows] if prod else np.zeros(rows.size, bool)
        if use_prod.any():
            base = np.where(use_prod[:, None], self.prod_base.take(rows, 0), self.np_base.take(rows, 0))
            thresholds = np.where(use_prod[:, None], self.prod_thr.take(rows, 0), self.np_thr.take(rows, 0))
        else:
            base = self.np_base.take(rows, 0)
            thresholds = self.np_thr.take(rows, 0)
        used = base + estimate
        alloc = self.alloc.take(rows, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            percent = _go_round(used.astype(np.float64) / alloc.astype(np.float64) * 100.0)
        return use_prod, used, alloc, thresholds, percent

    def detail(self, pod: PodInfo, index: int, now: float) -> LoadDetail:
        """The numbers behind ``filter`` for one node (the same arrays and arithmetic)."""
        name = self._node_of_index.get(index, "")
        if not self.has_metric[index]:
            return LoadDetail(name, has_metric=False)
        updated = float(self.update_time[index])
        age = None if np.isnan(updated) else now - updated
        expired = bool(self._expired(np.array([index], np.int64), now)[0])
        if not self.has_status[index]:
            return LoadDetail(name, has_metric=True, has_status=False, age=age, expired=expired)
        use_prod, used, alloc, thresholds, percent = self._percent(pod, np.array([index], np.int64))
        estimate = self.estimate(pod)
        over = _exceeds(thresholds, alloc, percent)
        resources = tuple(
            ResourceLoad(
                resource=r,
                usage=int(used[0, i] - estimate[i]),
                estimate=int(estimate[i]),
                allocatable=int(alloc[0, i]),
                percent=None if alloc[0, i] <= 0 else int(percent[0, i]),
                threshold=int(thresholds[0, i]),
                over=bool(over[0, i]),
            )
            for i, r in enumerate(self.resources)
        )
        aggregated = bool(self.np_aggregated[index]) and not bool(use_prod[0])
        return LoadDetail(
            name,
            has_metric=True,
            has_status=True,
            age=age,
            expired=expired,
            prod=bool(use_prod[0]),
            aggregated=aggregated,
            resources=resources,
        )

    def filter(self, pod: PodInfo, indices: IndexArray, now: float) -> FilterVerdicts:
        count = indices.size
        if pod.is_daemonset_pod or count == 0:
            return FilterVerdicts.all_pass(count)
        table = self._table(self.estimate(pod), pod.priority_class is PriorityClass.PROD, now)
        return FilterVerdicts(table.codes.take(indices), table.reason_ids.take(indices), self.reasons)

    def _verdicts(
        self, estimate: Vector, prod: bool, indices: IndexArray, now: float
    ) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int16], float]:
        """THE filter rule for a non-DaemonSet pod with ``estimate``: codes and reason ids per index,
        and the oldest ``updateTime`` among the nodes whose metric is not expired (inf: none)."""
        count = indices.size
        codes = np.zeros(count, np.int8)
        reason_ids = np.zeros(count, np.int16)
        oldest = math.inf
        # Selected thresholds all zero: pass before the NodeMetric is even looked at (so also when expired).
        enabled = self.np_enabled[indices]
        if prod:
            enabled = enabled | self.prod_enabled[indices]
        invalid = self.metric_invalid[indices] & enabled
        if invalid.any():
            codes[invalid] = Code.UNSCHEDULABLE
            reason_ids[invalid] = self._invalid_reason_id
        metric = self.has_metric[indices] & enabled
        checked = metric & self.has_status[indices]
        if self.args.filter_expired_node_metrics:
            expired = self._expired(indices, now)
            fresh = self.update_time[indices][self.has_metric[indices] & ~expired]
            if fresh.size:
                oldest = float(fresh.min())
            expired &= metric
            if not self.args.enable_schedule_when_node_metrics_expired:
                codes[expired] = Code.UNSCHEDULABLE
                reason_ids[expired] = 1
            checked &= ~expired
        if not checked.any():
            return codes, reason_ids, oldest
        rows = indices if checked.all() else indices[checked]
        use_prod, _used, alloc, thresholds, percent = self._percent_of(estimate, prod, rows)
        over = _exceeds(thresholds, alloc, percent)
        failing = over.any(axis=1)
        if failing.any():
            first = over.argmax(axis=1)
            aggregated = self.np_aggregated[rows] & ~use_prod
            ids = 2 + first + np.where(aggregated, len(self.resources), 0)
            positions = np.flatnonzero(checked)[failing]
            codes[positions] = Code.UNSCHEDULABLE
            reason_ids[positions] = ids[failing]
        return codes, reason_ids, oldest

    def score(self, pod: PodInfo, indices: IndexArray, now: float) -> npt.NDArray[np.int64]:
        count = indices.size
        scores = np.zeros(count, np.int64)
        if self._weight_sum == 0 or count == 0:
            return scores
        valid = self.has_metric[indices] & self.has_status[indices] & ~self._expired(indices, now)
        if not valid.any():
            return scores
        rows = indices if valid.all() else indices[valid]
        prod = self.args.score_according_prod_usage and pod.priority_class is PriorityClass.PROD
        base = (self.score_prod_base if prod else self.score_np_base).take(rows, 0)
        used = base + self.estimate(pod)
        cap = self.alloc.take(rows, 0)
        safe_cap = np.where(cap == 0, 1, cap)
        per_resource = np.where((cap == 0) | (used > cap), 0, (cap - used) * 100 // safe_cap)
        total = per_resource @ self._weights
        if self.args.dominant_resource_weight:
            total = total + self.args.dominant_resource_weight * per_resource.min(axis=1)
        scores[valid] = total // self._weight_sum
        return scores
