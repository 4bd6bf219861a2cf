"""A model of the stock kube-scheduler around the extender: fit on requests, then one of two scorers.

* ``RequestsFit`` is NodeResourcesFit's filter, the shared rule in
  ``koordpy.scheduler.framework.fit``: every requested resource (and one pod slot) must fit in
  allocatable minus the requests of the pods already bound there.
* ``LoadAwarePlacement`` then asks ``ClusterState.filter`` / ``ClusterState.score`` exactly as the
  extender's ``/filter`` and ``/prioritize`` do (node names in, names and totals out) and takes the
  highest total; this is koordpy.
* ``LeastAllocatedPlacement`` is the default kube-scheduler's NodeResourcesFit ``LeastAllocated``
  score on requests (cpu and memory, weight 1 each, the 100m / 200 MB non-zero defaults); this is
  the ``--compare baseline``.

Ties go to a seeded generator. Not modelled: preemption, affinity, taints, topology spread,
the other default score plugins (BalancedAllocation, ImageLocality, ...), scheduling latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeInfo, PodInfo
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.framework.fit import RequestsTable

__all__ = [
    "LeastAllocatedPlacement",
    "LoadAwarePlacement",
    "NodeSampler",
    "Placement",
    "RequestsFit",
    "feasible_nodes_to_find",
]

I64 = npt.NDArray[np.int64]
# kube-scheduler's NonZeroRequested defaults (pkg/scheduler/util/pod_resources.go)
NON_ZERO_CPU_MILLIS = 100
NON_ZERO_MEMORY_BYTES = 200 * 1024 * 1024


class RequestsFit(RequestsTable):
    """The shared ``NodeResourcesFit`` table (``koordpy.scheduler.framework.fit``) over the
    simulator's nodes, plus the LeastAllocated score. Nodes without ``allocatable.pods`` hold 110."""

    def __init__(self, nodes: Sequence[NodeInfo], resources: Sequence[str]) -> None:
        super().__init__([n.allocatable for n in nodes], resources, missing_pods=110)
        self.names = [n.name for n in nodes]
        self._cpu = self.position.get("cpu", -1)
        self._memory = self.position.get("memory", -1)

    def least_allocated(self, pod: PodInfo, rows: I64) -> I64:
        """``Σ_r (alloc − requested − pod) × 100 // alloc / 2`` over cpu and memory (non-zero requests)."""
        every = rows.size == self.alloc.shape[0]
        total = np.zeros(rows.size, np.int64)
        for position, default, name in (
            (self._cpu, NON_ZERO_CPU_MILLIS, "cpu"),
            (self._memory, NON_ZERO_MEMORY_BYTES, "memory"),
        ):
            if position < 0:
                continue
            alloc = self.alloc[:, position] if every else self.alloc[rows, position]
            free = self.free[:, position] if every else self.free[rows, position]
            left = free - (pod.requests.get(name) or default)
            safe = np.where(alloc == 0, 1, alloc)
            total += np.where((alloc == 0) | (left < 0), 0, left * 100 // safe)
        out: I64 = total // 2
        return out


MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def feasible_nodes_to_find(percentage: int, nodes: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind`` (pkg/scheduler/schedule_one.go, v1.37): how many fitting
    nodes a cycle collects before it stops filtering. ``percentage`` 0 is the adaptive default."""
    if nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return nodes
    if percentage == 0:
        percentage = max(50 - nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class NodeSampler:
    """kube-scheduler's ``percentageOfNodesToScore``: each cycle walks the nodes from where the last one
    stopped (``nextStartNodeIndex``) and keeps the first ``feasible_nodes_to_find`` that fit; only those
    reach the extender and the scores. Not modelled: the parallel filter's overshoot (kube-scheduler may
    examine a few more nodes than it keeps), the zone-interleaved node order."""

    def __init__(self, percentage: int) -> None:
        self.percentage = percentage
        self.next_start = 0

    def sample(self, fits: npt.NDArray[np.bool_]) -> tuple[I64, bool]:
        """The candidate rows in the order examined, and whether every node was examined."""
        count = fits.size
        want = feasible_nodes_to_find(self.percentage, count)
        start = self.next_start % count if count else 0
        found: I64 = np.flatnonzero(fits)
        if start:  # examined from ``start`` to the end, then from the first node
            split = int(np.searchsorted(found, start))
            found = np.concatenate((found[split:], found[:split]))
        if want >= count or found.size <= want:
            return found, True  # every node examined: processed == count, the start stays
        kept = found[:want]
        self.next_start = (int(kept[-1]) + 1) % count
        return kept, False


class Placement(Protocol):
    name: str

    def choose(self, pod: PodInfo, candidates: I64, now: float) -> int | None:
        """The node (row) to bind ``pod`` to among fitting ``candidates``, or None (unschedulable)."""
        ...


def _pick(best: I64, rng: np.random.Generator) -> int:
    return int(best[0]) if best.size == 1 else int(best[int(rng.integers(best.size))])


class LoadAwarePlacement:
    """koordpy: the extender's filter and prioritize on the fitting nodes."""

    name = "load-aware"

    def __init__(self, state: ClusterState, fit: RequestsFit, rng: np.random.Generator) -> None:
        self.state = state
        self.fit = fit
        self.rng = rng
        self.index_of_row: I64 = state.index.lookup(fit.names)
        """The ClusterState node index of each fit row (looked up once, as the extender caches it)."""
        rows = np.full(max(int(self.index_of_row.max(initial=-1)) + 1, 0), -1, np.int64)
        rows[self.index_of_row] = np.arange(len(fit.names))
        self.row_of_index: I64 = rows

    def choose(self, pod: PodInfo, candidates: I64, now: float) -> int | None:
        every = self.fit.names
        names = every if candidates.size == len(every) else list(map(every.__getitem__, candidates.tolist()))
        outcome = self.state.filter(pod, names, now, indices=self.index_of_row[candidates])
        if not outcome.passed:
            return None
        total = self.state.score(pod, outcome.passed, now, indices=outcome.passed_indices).total
        best = np.flatnonzero(total == total.max())
        return int(self.row_of_index[outcome.passed_indices[_pick(best, self.rng)]])


class LeastAllocatedPlacement:
    """The default kube-scheduler: requests only."""

    name = "least-allocated"

    def __init__(self, fit: RequestsFit, rng: np.random.Generator) -> None:
        self.fit = fit
        self.rng = rng

    def choose(self, pod: PodInfo, candidates: I64, now: float) -> int | None:
        if candidates.size == 0:
            return None
        scores = self.fit.least_allocated(pod, candidates)
        best = np.flatnonzero(scores == scores.max())
        return int(candidates[_pick(best, self.rng)])
