"""How long the profile's pods have been refused by the extender's filter, and why: the numbers behind
``koordpy_extender_pending_pods`` and ``koordpy_extender_pending_oldest_seconds``.

A filter answer that leaves a pod no node records the pod (the first such answer's time is kept while the
refusals go on) with a reason: ``gang`` (its gang is short of members), ``load`` (every node refused was
refused by load-aware scheduling: usage over a threshold, or an expired or unreadable NodeMetric) or
``other`` (a Reservation, or a mix). A filter answer with a node forgets the pod; so does its binding or
deletion, found at scrape time (only pods the cache still holds unbound are counted).

Not guaranteed: the time a pod waited before its first refusal (kube-scheduler's queue, or in-tree
filters that refused it before asking the extender), or a reason for pods the extender never saw.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Literal

from koordpy.scheduler.plugins.loadaware import REASON_NODEMETRIC_EXPIRED

__all__ = ["REASONS", "PendingTracker", "Reason", "refusal_reason"]

Reason = Literal["gang", "load", "other"]
REASONS: tuple[Reason, ...] = ("gang", "load", "other")
MAX_TRACKED = 100_000
"""Pods remembered at most (the oldest refusal is dropped first); more than any cluster's pending pods."""

_LOAD_MARKS = ("usage exceed threshold", REASON_NODEMETRIC_EXPIRED, "nodeMetric invalid")


def refusal_reason(reasons: Iterable[str]) -> Reason:
    """``load`` when every reason is load-aware scheduling's, else ``other``."""
    seen = False
    for reason in reasons:
        seen = True
        if not any(mark in reason for mark in _LOAD_MARKS):
            return "other"
    return "load" if seen else "other"


class PendingTracker:
    def __init__(self) -> None:
        self.refused: OrderedDict[str, tuple[float, Reason]] = OrderedDict()
        """uid -> (time of the first refusal in the current run of refusals, latest reason)."""

    def refuse(self, uid: str, reason: Reason, now: float) -> None:
        first = self.refused.get(uid)
        self.refused[uid] = (now if first is None else first[0], reason)
        if len(self.refused) > MAX_TRACKED:
            self.refused.popitem(last=False)

    def admit(self, uid: str) -> None:
        if self.refused:
            self.refused.pop(uid, None)

    def summary(self, pending: Collection[str], now: float) -> dict[str, tuple[int, float]]:
        """Per reason: how many of the ``pending`` uids are refused, and for how long the oldest has been (0
        when none). Forgets every pod not in ``pending`` (bound or deleted since)."""
        out: dict[str, tuple[int, float]] = {reason: (0, 0.0) for reason in REASONS}
        for uid in [u for u in self.refused if u not in pending]:
            del self.refused[uid]
        for since, reason in self.refused.values():
            count, oldest = out[reason]
            out[reason] = (count + 1, max(oldest, now - since))
        return out
