"""Where a moved pod would land, by the scheduler's own rules, and whether that node stays cool with it.

One notion of hot: a pod is moved only when the node the scheduler would pick for it (kube-scheduler's in-tree
filters, then the koordpy extender's own filter and score, ``ClusterState`` with the profile's plugins,
LoadAwareScheduling and its estimator: called here, never copied) would stay at or below its descheduler high
thresholds with the pod's measured usage added. So the descheduler never moves a pod onto a node it would then
find hot, and never moves one the scheduler would put back where it came from.

**The pick.** Every node but the pod's own (a ReservationFirst migration's Reservation excludes it) that passes the
extender's filter, in order of the extender's score (0..10, what kube-scheduler adds up), then the plugins' summed
score (0..100), then node name; the first of them that passes kube-scheduler's in-tree filters
(:func:`koordpy.scheduler.framework.fit.filter_one_node`: unschedulable, taints, node affinity, requests) is the
pick. A node without a NodeMetric passes the extender's filter (the extender fails open) but cannot be judged cool:
such a pick keeps the pod where it is.

**Within a round** each move is added to the scheduler's view (the pod, under a distinct uid, assigned to its
destination: the extender then estimates it as a pod it just placed) and to the in-tree requests, so the next pod
sees the first one there; :meth:`Destinations.close` takes every such addition back. The verdicts the extender
keeps per pod class (estimate, Prod) are reused between pods of one class and recomputed only for the nodes a move
changed, which keeps a round at thousands of nodes to a few numpy passes per pod class.

Not guaranteed: kube-scheduler's own score plugins (spreading, preferred affinity) are not modelled, nor the
in-tree filters ``koordpy scheduler explain`` leaves out (ports, volumes, topology spread, inter-pod affinity).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.descheduler.lownodeload.state import BalancePod, BalanceState
from koordpy.model.objects import ObjectError, PodInfo
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.framework.fit import filter_one_node
from koordpy.scheduler.framework.status import Status
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin

__all__ = ["PHANTOM_SUFFIX", "Destinations", "Landing"]

PHANTOM_SUFFIX = "@lownodeload"
"""Suffix of the uid under which a planned move is added to the scheduler's view for the rest of a round."""
I64 = npt.NDArray[np.int64]
_SCORE_SCALE = 1_000_000


@dataclass(frozen=True, slots=True)
class Landing:
    """The scheduler's pick for a pod: ``node`` None when no node passes its filters."""

    node: str | None
    extender_score: int = 0
    """kube-scheduler's extender score of the pick, 0..10."""
    score: int = 0
    """The extender's plugins' summed score of the pick (LoadAwareScheduling 0..100)."""
    passed: int = 0
    """Nodes other than the source that pass the extender's filter."""
    unfit: tuple[tuple[str, str], ...] = ()
    """Nodes ranked above the pick that kube-scheduler's in-tree filters refuse: (node, reason)."""
    refusals: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """When no node passes: why the other nodes fail the extender's filter, reason -> count."""


class _ClassCache:
    """The extender's verdict and scores of every node for one pod class. A move changes one node: it is marked
    ``dirty`` and asked again only when a pick reaches it (adding load never raises a node's score nor turns a
    refusal into a pass, so the cached values of the other nodes keep their order)."""

    __slots__ = ("dirty", "failed", "passed", "ranking", "synced")

    def __init__(self, passed: npt.NDArray[np.bool_], composite: I64, failed: dict[str, str], synced: int) -> None:
        self.passed = passed
        self.ranking: I64 = np.where(passed, composite, -1)
        """The composite score of each passing node, -1 for the others."""
        self.failed = failed
        """Node -> the extender's reason, for the nodes that fail its filter."""
        self.synced = synced
        self.dirty: set[int] = set()


class Destinations:
    """The scheduler's pick and the in-round additions, for one round at ``now``."""

    def __init__(self, cluster: ClusterState, state: BalanceState, now: float) -> None:
        self.cluster = cluster
        self.state = state
        self.now = now
        self.names = sorted(cluster.nodes)
        self.indices = cluster.index.lookup(self.names)
        self._position = {name: i for i, name in enumerate(self.names)}
        plugins = cluster.plugins
        loadaware = plugins[0] if len(plugins) == 1 and isinstance(plugins[0], LoadAwarePlugin) else None
        self._loadaware = loadaware
        """The profile's only plugin, whose verdicts depend on the pod's estimate and Prod-ness alone: pods of one
        class share a cache. Another profile: nothing is shared (every pod asks the cluster afresh)."""
        self._classes: dict[tuple[object, ...], _ClassCache] = {}
        self._fits: dict[tuple[str, tuple[object, ...]], Status] = {}
        """(node, the pod's ``fit_key``) -> the in-tree verdict, while the node's requests are unchanged."""
        self._picks: dict[tuple[object, ...], tuple[int, Landing]] = {}
        """(class, fit key, source) -> (changes seen, the pick): pods alike on one node get one pick."""
        self._changes: list[str] = []
        self._phantoms: list[str] = []
        self._requested: dict[str, tuple[dict[str, int], int]] = {}

    # ---- the pick -----------------------------------------------------------------------------------------------

    def _class_key(self, info: PodInfo) -> tuple[object, ...] | None:
        if self._loadaware is None:
            return None
        return (self._loadaware.estimate_values(info), info.priority_class.value, info.is_daemonset_pod)

    def _evaluate(
        self, info: PodInfo, names: list[str], indices: I64
    ) -> tuple[npt.NDArray[np.bool_], I64, dict[str, str]]:
        """Pass/fail and the composite score of ``names`` for the pod, from the cluster, and the failures' reasons."""
        outcome = self.cluster.filter(info, names, self.now, indices)
        passed = np.zeros(len(names), np.bool_)
        composite = np.zeros(len(names), np.int64)
        failed = {**outcome.failed, **outcome.unresolvable}
        if outcome.passed:
            at = {name: i for i, name in enumerate(names)} if len(outcome.passed) != len(names) else None
            positions = np.arange(len(names)) if at is None else np.array([at[n] for n in outcome.passed], np.int64)
            scored = self.cluster.score(info, outcome.passed, self.now, outcome.passed_indices)
            passed[positions] = True
            composite[positions] = scored.extender * _SCORE_SCALE + scored.total
        return passed, composite, failed

    def _cache(self, info: PodInfo) -> _ClassCache:
        key = self._class_key(info)
        cache = self._classes.get(key) if key is not None else None
        if cache is None:
            passed, composite, failed = self._evaluate(info, self.names, self.indices)
            cache = _ClassCache(passed, composite, failed, len(self._changes))
            if key is not None:
                self._classes[key] = cache
            return cache
        if cache.synced < len(self._changes):
            cache.dirty.update(self._position[name] for name in self._changes[cache.synced :])
            cache.synced = len(self._changes)
        return cache

    def _refresh(self, info: PodInfo, cache: _ClassCache, position: int) -> None:
        """Ask the cluster again about the node at ``position`` (a move changed it)."""
        cache.dirty.discard(position)
        indices = self.indices[position : position + 1]
        name = self.names[position]
        passed, composite, failed = self._evaluate(info, [name], indices)
        cache.failed.pop(name, None)
        cache.failed.update(failed)
        cache.passed[position] = passed[0]
        cache.ranking[position] = composite[0] if passed[0] else -1

    def pick(self, pod: BalancePod, source: str) -> Landing:
        """The node the scheduler would put ``pod`` on if it left ``source``."""
        info = pod.info
        key = self._class_key(info)
        memo = None if key is None else (key, pod.fit_key, source)
        if memo is not None:
            known = self._picks.get(memo)
            if known is not None and known[0] == len(self._changes):
                return known[1]
        landing = self._pick(pod, source)
        if memo is not None:
            self._picks[memo] = (len(self._changes), landing)
        return landing

    def _fit(self, pod: BalancePod, name: str) -> Status:
        key = (name, pod.fit_key)
        status = self._fits.get(key)
        if status is None:
            requested, count = self.requested(name)
            node = self.state.nodes.get(name) or self.cluster.nodes[name]
            status = self._fits[key] = filter_one_node(pod.pending, node, requested, count, pod.info.requests)
        return status

    def _pick(self, pod: BalancePod, source: str) -> Landing:
        info = pod.info
        cache = self._cache(info)
        ranking = cache.ranking
        at = self._position.get(source)
        hidden: list[tuple[int, int]] = []  # (position, ranking) taken out for this pick, put back after
        if at is not None and ranking[at] >= 0:
            hidden.append((at, int(ranking[at])))
            ranking[at] = -1
        passed = int(np.count_nonzero(ranking >= 0))
        unfit: list[tuple[str, str]] = []
        landing = None
        try:
            while landing is None:
                best = int(np.argmax(ranking))
                value = int(ranking[best])
                if value < 0:
                    refusals: dict[str, int] = {}
                    for name, reason in cache.failed.items():
                        if name != source:
                            refusals[reason] = refusals.get(reason, 0) + 1
                    landing = Landing(None, 0, 0, passed, tuple(unfit), refusals)
                elif best in cache.dirty:
                    self._refresh(info, cache, best)
                else:
                    name = self.names[best]
                    status = self._fit(pod, name)
                    if status.is_success:
                        extender, score = divmod(value, _SCORE_SCALE)
                        landing = Landing(name, extender, score, passed, tuple(unfit))
                    else:
                        unfit.append((name, f"{status.plugin}: {status.detail or status.reason}"))
                        hidden.append((best, value))
                        ranking[best] = -1
        finally:
            for position, value in hidden:
                ranking[position] = value
        return landing

    # ---- in-round additions -------------------------------------------------------------------------------------

    def requested(self, node: str) -> tuple[Mapping[str, int], int]:
        """The in-tree requests on ``node``, with this round's moves onto it."""
        added = self._requested.get(node)
        base, count = self.state.requested(node)
        if added is None:
            return base, count
        extra, more = added
        merged = dict(base)
        for name, amount in extra.items():
            merged[name] = merged.get(name, 0) + amount
        return merged, count + more

    def add(self, info: PodInfo, destination: str) -> None:
        """Count ``info`` on ``destination`` for the rest of the round (the extender's view and the requests)."""
        uid = info.uid + PHANTOM_SUFFIX
        if uid in self.cluster.assigned:
            return
        phantom = dataclasses.replace(info, uid=uid, node_name=destination, scheduled_time=None)
        self.cluster.upsert_pod(phantom, self.now)
        self._phantoms.append(uid)
        extra, more = self._requested.get(destination, ({}, 0))
        extra = dict(extra)
        for name, amount in info.requests.items():
            extra[name] = extra.get(name, 0) + amount
        self._requested[destination] = (extra, more + 1)
        self._changes.append(destination)
        for key in [key for key in self._fits if key[0] == destination]:
            del self._fits[key]

    def close(self) -> None:
        """Take every addition back out of the scheduler's view."""
        for uid in self._phantoms:
            self.cluster.remove_pod(uid)
        self._phantoms.clear()


def placement_problem(pod: BalancePod) -> str | None:
    """Why the pod's placement constraints cannot be read (then it stays where it is), or None."""
    try:
        pod.placement  # noqa: B018 - converted (and kept) on first use
    except ObjectError as exc:
        return f"its placement cannot be read: {exc}"
    return None
