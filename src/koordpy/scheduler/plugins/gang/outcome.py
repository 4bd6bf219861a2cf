"""What a PodGroup says about its gang's last attempt: a ``GangScheduled`` condition and Events. Pure.

The extender's barrier knows why held members were let go; Koordinator and scheduler-plugins leave their
PodGroup at ``Scheduling`` through a timeout, so nothing in the object would say it happened. From the
releases of one pass (``GangCache.take_releases``) :func:`outcomes` makes one :class:`GangOutcome` per gang
that was released for a reason of its own (its wait time ran out, a Strict failure, deadlock resolution,
a held member deleted), naming the first release of the pass, which is the one that set off the others;
a bound batch is the other outcome. :func:`gang_condition` turns an outcome into the condition, merged
into the PodGroup's stored conditions (other types kept), or None when that changes nothing.

``GangScheduled``: ``False`` with reason ``WaitTimeout``, ``StrictRelease``, ``DeadlockResolution`` or
``MemberDeleted`` and the release's text as message; ``True`` with reason ``Bound`` once the gang binds
after such a release (a gang that binds at its first attempt gets no condition: nothing to report).
``lastTransitionTime`` is the time of the last change of the condition (a new release with another
reason or text moves it too, so it says when the last release happened).

Not guaranteed: that the condition is kept; a CRD without ``status.conditions`` in its schema (as
scheduler-plugins' own ``scheduling.x-k8s.io`` CRD) prunes it, and only the Event remains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.scheduler.plugins.gang.decisions import Release, ReleaseCause

__all__ = ["CONDITION_TYPE", "GangOutcome", "bound_outcome", "gang_condition", "outcomes"]

CONDITION_TYPE = "GangScheduled"
_REASONS: dict[ReleaseCause, str] = {
    "expired": "WaitTimeout",
    "strict": "StrictRelease",
    "rejected": "StrictRelease",
    "deadlock": "DeadlockResolution",
    "deleted": "MemberDeleted",
}
"""Release causes that end a gang's attempt (``answer-deadline`` renews a hold, ``superseded`` replaces
one: neither is an outcome)."""


@dataclass(frozen=True, slots=True)
class GangOutcome:
    gang_id: str
    scheduled: bool
    reason: str
    """``Bound``, or the release's condition reason (``WaitTimeout``, ...)."""
    message: str
    members: int
    """Members bound together, or held members released."""

    @property
    def event_reason(self) -> str:
        if self.scheduled:
            return "GangBound"
        return "GangTimedOut" if self.reason == "WaitTimeout" else "GangReleased"


def outcomes(releases: Iterable[Release]) -> list[GangOutcome]:
    """One outcome per gang released in this pass, sorted by gang id; the first release of a gang names
    the reason (a Strict cascade comes after the release that set it off)."""
    first: dict[str, Release] = {}
    counts: dict[str, int] = {}
    for release in releases:
        if release.cause not in _REASONS:
            continue
        gang = release.hold.gang_id
        first.setdefault(gang, release)
        counts[gang] = counts.get(gang, 0) + 1
    out: list[GangOutcome] = []
    for gang in sorted(first):
        release = first[gang]
        # A group-mate released by a Strict cascade that a timeout set off timed out too.
        cause = release.trigger or release.cause
        out.append(GangOutcome(gang, False, _REASONS[cause], release.reason, counts[gang]))
    return out


def bound_outcome(gang_id: str, members: int) -> GangOutcome:
    return GangOutcome(gang_id, True, "Bound", f"gang {gang_id}: {members} held members bound together", members)


def gang_condition(outcome: GangOutcome, stored: Sequence[Mapping[str, Any]], now: str) -> list[dict[str, Any]] | None:
    """The PodGroup's ``status.conditions`` with ``GangScheduled`` set from ``outcome`` (``now`` is RFC 3339),
    or None when nothing changes: the same status, reason and message, or a bound gang that never had a
    release to report."""
    old = next((c for c in stored if c.get("type") == CONDITION_TYPE), None)
    status = "True" if outcome.scheduled else "False"
    if old is None and outcome.scheduled:
        return None
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
        status,
        outcome.reason,
        outcome.message,
    ):
        return None
    condition = {
        "type": CONDITION_TYPE,
        "status": status,
        "reason": outcome.reason,
        "message": outcome.message[:1024],
        "lastTransitionTime": now,
    }
    return [*(dict(c) for c in stored if c.get("type") != CONDITION_TYPE), condition]
