"""The scheduler's view of the cluster and the one place plugins are run.

``ClusterState`` receives object events (from a watch, a dump or the simulator), keeps the
node index and the set of *assigned* pods, and tells every plugin what changed. ``filter`` and
``score`` run the plugins over node names exactly as the extender, ``koordpy scheduler explain``
and ``koordpy simulate`` all need, so there is one implementation of each rule.

A pod is *assigned* while it has ``spec.nodeName`` (or was just bound by us) and is not
terminated (phase Succeeded/Failed). Its assignment time is its ``PodScheduled=True`` transition
time, else the time we first saw it assigned; a placement we assumed keeps the time we assumed it
when the watch confirms it (the update that only adds the ``PodScheduled`` time is not replayed).

Not guaranteed: thread safety. Call from one thread (the extender's event loop).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo
from koordpy.scheduler.framework.interfaces import FilterPlugin, Plugin, ScorePlugin
from koordpy.scheduler.framework.nodeindex import NodeIndex
from koordpy.scheduler.framework.status import Code, Status

__all__ = ["REASON_NODE_INVALID", "REASON_NODE_UNKNOWN", "ClusterState", "FilterOutcome", "ScoreOutcome"]

REASON_NODE_UNKNOWN = "node(s) not yet known to the koordpy extender"
REASON_NODE_INVALID = "node(s) Node object invalid"
"""A Node whose object could not be read (e.g. a quantity out of range): its allocatable is unknown."""


class FilterOutcome:
    """What a filter pass decided. ``statuses`` (failing status per node name, first failing plugin
    wins) is built on first access: the extender only needs ``failed``/``unresolvable``."""

    __slots__ = ("_groups", "_statuses", "failed", "passed", "passed_indices", "unresolvable")

    def __init__(
        self,
        passed: list[str],
        failed: dict[str, str],
        unresolvable: dict[str, str],
        groups: list[tuple[list[str], Status]],
        passed_indices: npt.NDArray[np.int64],
    ) -> None:
        self.passed = passed
        self.failed = failed
        self.unresolvable = unresolvable
        self.passed_indices = passed_indices
        """Node indices of ``passed``, aligned with it."""
        self._groups = groups
        self._statuses: dict[str, Status] | None = None

    @property
    def statuses(self) -> dict[str, Status]:
        if self._statuses is None:
            statuses: dict[str, Status] = {}
            for names, status in self._groups:
                for name in names:
                    statuses.setdefault(name, status)
            self._statuses = statuses
        return self._statuses


@dataclass(slots=True)
class ScoreOutcome:
    names: list[str]
    per_plugin: dict[str, npt.NDArray[np.int64]]
    """Plugin name -> scores 0..100, aligned with ``names``."""
    total: npt.NDArray[np.int64]
    """Weighted sum of plugin scores."""
    extender: npt.NDArray[np.int64]
    """Clamped 0..10: the weighted mean of plugin scores integer-divided by 10."""


class ClusterState:
    def __init__(self, plugins: Sequence[Plugin]) -> None:
        self.index = NodeIndex()
        self.plugins = list(plugins)
        self.nodes: dict[str, NodeInfo] = {}
        self.metrics: dict[str, NodeMetricInfo] = {}
        self.assigned: dict[str, PodInfo] = {}
        self.invalid_nodes: dict[str, str] = {}
        """Node name -> why its last object could not be read; such a node fails every filter."""
        self._assigned_at: dict[str, float] = {}
        self._assumed: set[str] = set()
        """Pods placed by :meth:`assume` whose placement the watch has not confirmed yet."""
        self._filters = [p for p in self.plugins if isinstance(p, FilterPlugin)]
        self._scorers = [p for p in self.plugins if isinstance(p, ScorePlugin)]
        self._capacity = 0

    # ---- events ------------------------------------------------------------------------

    def upsert_node(self, node: NodeInfo) -> None:
        self.invalid_nodes.pop(node.name, None)
        index = self.index.add(node.name)
        self._grow()
        self.nodes[node.name] = node
        for plugin in self.plugins:
            plugin.on_node(index, node)

    def invalidate_node(self, name: str, error: str) -> None:
        """The node's current object cannot be read: forget the last good one, fail it in every filter."""
        self.remove_node(name)
        self.invalid_nodes[name] = error

    def remove_node(self, name: str) -> None:
        self.invalid_nodes.pop(name, None)
        self.nodes.pop(name, None)
        index = self.index.remove(name)
        if index is not None:
            for plugin in self.plugins:
                plugin.on_node_removed(index, name)

    def upsert_metric(self, metric: NodeMetricInfo) -> None:
        """A NodeMetric, or ``NodeMetricInfo.unreadable(...)`` for one that could not be read (the
        plugins then treat that node's usage as unknown, never as zero)."""
        self.metrics[metric.name] = metric
        for plugin in self.plugins:
            plugin.on_metric(metric.name, metric)

    def remove_metric(self, name: str) -> None:
        if self.metrics.pop(name, None) is not None:
            for plugin in self.plugins:
                plugin.on_metric(name, None)

    def upsert_pod(self, pod: PodInfo, now: float) -> None:
        """A pod was added or changed (watch event). Tracks it while assigned."""
        old = self.assigned.get(pod.uid)
        keep = bool(pod.node_name) and not pod.terminated
        if old is not None:
            if keep and old.node_name == pod.node_name:
                if old == pod:
                    return
                if (
                    old.scheduled_time is None
                    and pod.scheduled_time is not None
                    and pod.uid in self._assumed
                    and dataclasses.replace(old, scheduled_time=pod.scheduled_time) == pod
                ):
                    # The watch confirms a placement we assumed (only the PodScheduled time is new): the
                    # plugins keep the assume, timed when we bound it; nothing they read has changed.
                    self.assigned[pod.uid] = pod
                    self._assumed.discard(pod.uid)
                    return
            self._unassign(old)
        if keep:
            first_seen = self._assigned_at.get(pod.uid) if old is not None and old.node_name == pod.node_name else None
            self._assign(pod, now if first_seen is None else first_seen)
        else:
            self._assigned_at.pop(pod.uid, None)

    def remove_pod(self, uid: str) -> None:
        old = self.assigned.get(uid)
        if old is not None:
            self._unassign(old)
        self._assigned_at.pop(uid, None)

    def assume(self, pod: PodInfo, node_name: str, now: float) -> PodInfo:
        """Record a placement we made (a bind) before the watch reports it."""
        placed = dataclasses.replace(pod, node_name=node_name)
        self.upsert_pod(placed, now)
        if placed.uid in self.assigned:
            self._assumed.add(placed.uid)
        return placed

    def is_assumed(self, uid: str) -> bool:
        """Whether the pod's placement is one we recorded (``assume``) and the watch has not confirmed."""
        return uid in self._assumed

    def _assign(self, pod: PodInfo, assigned_at: float) -> None:
        self.assigned[pod.uid] = pod
        self._assigned_at[pod.uid] = assigned_at
        index = self.index.get(pod.node_name)
        timestamp = pod.scheduled_time if pod.scheduled_time is not None else assigned_at
        for plugin in self.plugins:
            plugin.on_pod_assigned(index, pod.node_name, pod, timestamp)

    def _unassign(self, pod: PodInfo) -> None:
        del self.assigned[pod.uid]
        self._assumed.discard(pod.uid)
        index = self.index.get(pod.node_name)
        for plugin in self.plugins:
            plugin.on_pod_unassigned(index, pod.node_name, pod)

    def invalidate_verdicts(self, name: str | None = None) -> None:
        """Something outside these events changed what a filter decides for node ``name`` (None: for any
        node): plugins that keep verdicts between requests (``invalidate``) recompute them. Every event
        method above already does this for what it changes; call it from any other source (for example a
        Reservation watch) before the next filter."""
        index = None if name is None else self.index.get(name)
        if name is not None and index is None:
            return  # an unknown node has no verdicts kept: it fails as unknown
        for plugin in self.plugins:
            invalidate = getattr(plugin, "invalidate", None)
            if invalidate is not None:
                invalidate(index)

    def _grow(self) -> None:
        if self.index.capacity > self._capacity:
            self._capacity = max(self.index.capacity, 2 * self._capacity, 64)
            for plugin in self.plugins:
                plugin.on_capacity(self._capacity)

    # ---- decisions ---------------------------------------------------------------------

    def filter(
        self, pod: PodInfo, names: list[str], now: float, indices: npt.NDArray[np.int64] | None = None
    ) -> FilterOutcome:
        """Run the filter plugins over ``names``. ``indices`` may carry ``self.index.lookup(names)``
        when the caller already has it (the extender reuses it between verbs)."""
        if indices is None:
            indices = self.index.lookup(names)
        known = indices >= 0
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        groups: list[tuple[list[str], Status]] = []
        if not known.all():
            unknown = [names[pos] for pos in np.flatnonzero(~known).tolist()]
            invalid = [name for name in unknown if name in self.invalid_nodes] if self.invalid_nodes else []
            if invalid:
                unknown = [name for name in unknown if name not in self.invalid_nodes]
                failed.update(dict.fromkeys(invalid, REASON_NODE_INVALID))
                groups.append((invalid, Status(Code.UNSCHEDULABLE, REASON_NODE_INVALID, "koordpy")))
            if unknown:
                failed.update(dict.fromkeys(unknown, REASON_NODE_UNKNOWN))
                groups.append((unknown, Status(Code.UNSCHEDULABLE, REASON_NODE_UNKNOWN, "koordpy")))
            alive = np.flatnonzero(known)
        else:
            alive = np.arange(len(names))
        for plugin in self._filters:
            if alive.size == 0:
                break
            verdicts = plugin.filter(pod, indices[alive], now)
            bad = verdicts.codes != Code.SUCCESS
            if bad.any():
                bad_positions = np.flatnonzero(bad)
                # One Status per distinct (code, reason): thousands of failing nodes share a handful.
                keys = verdicts.codes[bad_positions].astype(np.int64) * 65536 + verdicts.reason_ids[bad_positions]
                distinct, group_of = np.unique(keys, return_inverse=True)
                bad_names = self.index.names_at(indices[alive[bad_positions]])
                for group, key in enumerate(distinct.tolist()):
                    code = Code(key >> 16)
                    status = Status(code, verdicts.reasons[key & 0xFFFF], plugin.name)
                    members = np.flatnonzero(group_of == group).tolist()
                    group_names = [bad_names[i] for i in members] if len(distinct) > 1 else bad_names
                    groups.append((group_names, status))
                    if code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        unresolvable.update(dict.fromkeys(group_names, status.reason))
                    elif failed:
                        failed.update(dict.fromkeys(group_names, status.reason))
                    else:
                        failed = dict.fromkeys(group_names, status.reason)
                alive = alive[~bad]
        passed_indices = indices[alive]
        passed = list(names) if alive.size == len(names) else self.index.names_at(passed_indices)
        return FilterOutcome(passed, failed, unresolvable, groups, passed_indices)

    def score(
        self, pod: PodInfo, names: list[str], now: float, indices: npt.NDArray[np.int64] | None = None
    ) -> ScoreOutcome:
        """Run the score plugins over ``names`` (``indices`` as in :meth:`filter`); unknown names score 0."""
        if indices is None:
            indices = self.index.lookup(names)
        known = indices >= 0
        all_known = bool(known.all())
        safe = indices if all_known else np.where(known, indices, 0)
        per_plugin: dict[str, npt.NDArray[np.int64]] = {}
        total = np.zeros(len(names), np.int64)
        weights = 0
        for plugin in self._scorers:
            raw = plugin.score(pod, safe, now)
            scores = (raw if all_known else np.where(known, raw, 0)).astype(np.int64)
            per_plugin[plugin.name] = scores
            total += scores * plugin.weight
            weights += plugin.weight
        mean = total // weights if weights else total
        extender = np.minimum(np.maximum(mean // 10, 0), 10)  # np.clip: same values, more overhead
        return ScoreOutcome(list(names), per_plugin, total, extender)
