"""Recent moves, counted until the NodeMetrics show them.

Upstream reads a node's usage from its NodeMetric alone, so after a pod is moved off a hot node the next rounds
still see the pre-move usage until the agent reports again (every 60 s by default, while rounds run every 10 s):
the node still looks hot, and the destination still looks idle. A round takes a ledger of recent moves and counts
each one until the NodeMetrics catch up:

* **moved out**: the pod's usage is taken off its source node while the source's NodeMetric is not newer than the
  move (``updateTime <= at``) or still lists the pod (it has not left yet: the job waits in arbitration or the
  eviction is in flight). The pod counts one less towards the source's ``pods`` while it is still bound there.
  A pod with a move in the ledger is not moved again while the entry counts;
* **moved in**: the pod's usage (as measured on its source) is added to its destination while the destination's
  NodeMetric is not newer than the move, and one pod to its ``pods``. The expected destination is the extender's
  choice when the move was filed; give the node the replacement really landed on (a PodMigrationJob's
  ``status.nodeName``) when it is known.

A NodeMetric older than the move never hides it; a newer one replaces the ledger's guess by the measurement. The
caller keeps the ledger: it adds the round's moves (``PlannedMove.recent(at)``) and drops entries with :func:`prune`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["RecentMove", "counts_in", "counts_out", "prune"]


@dataclass(frozen=True, slots=True)
class RecentMove:
    """One pod moved (or being moved) at ``at``: from ``source`` to ``destination`` (None: unknown)."""

    pod: str
    """``namespace/name``."""
    source: str
    destination: str | None
    at: float
    cpu: int
    """The pod's usage when it was moved: cpu in millicores."""
    memory: int
    """Memory in bytes."""
    prod: bool
    """A Prod pod: its usage also counts in the nodes' Prod usage."""

    @property
    def usage(self) -> tuple[int, int]:
        return self.cpu, self.memory


def _not_newer(update_time: float, at: float) -> bool:
    """A NodeMetric (``update_time``, NaN without one) that does not yet show a move made at ``at``."""
    return math.isnan(update_time) or update_time <= at


def counts_out(move: RecentMove, source_update_time: float, listed: bool) -> bool:
    """Whether the move still takes the pod's usage off its source."""
    return listed or _not_newer(source_update_time, move.at)


def counts_in(move: RecentMove, destination_update_time: float) -> bool:
    """Whether the move still adds the pod's usage to its destination."""
    return move.destination is not None and _not_newer(destination_update_time, move.at)


def prune(
    moves: Iterable[RecentMove],
    update_time: dict[str, float],
    listed: set[tuple[str, str]],
    now: float,
    horizon: float,
) -> list[RecentMove]:
    """The moves that still count on a side (``update_time``: node -> NodeMetric ``updateTime``; ``listed``: the
    (node, pod) pairs some NodeMetric lists); a move older than ``horizon`` seconds is dropped whatever counts
    (a node whose NodeMetric stopped is neither hot nor idle anyway)."""
    kept = []
    for move in moves:
        if now - move.at > horizon:
            continue
        source = counts_out(move, update_time.get(move.source, math.nan), (move.source, move.pod) in listed)
        destination = move.destination is not None and counts_in(move, update_time.get(move.destination, math.nan))
        if source or destination:
            kept.append(move)
    return kept
