"""Decisions the gang model hands back as values: admit, permit, holds, bind batches, releases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CASCADING_CAUSES",
    "QUORUM_REFUSED",
    "YIELD_REFUSED",
    "Admission",
    "BindBatch",
    "Deadlock",
    "Hold",
    "Permit",
    "Release",
    "ReleaseCause",
    "Verdict",
    "Wakeup",
    "is_admission_refusal",
]

Verdict = Literal["allow", "wait", "reject"]

ReleaseCause = Literal[
    "expired",  # the member's gang wait time ran out
    "answer-deadline",  # kube-scheduler's binder httpTimeout is near; retried, the wait clock is kept
    "strict",  # another member of a Strict gang of the GangGroup failed (the cascade itself)
    "rejected",  # held while a Strict member's failure is outstanding
    "deadlock",  # NonStrict deadlock resolution picked this member's GangGroup
    "deleted",  # the pod was deleted while held
    "superseded",  # a newer bind request for the same pod arrived, or the pod got a node elsewhere
]

CASCADING_CAUSES: frozenset[str] = frozenset({"expired", "rejected", "deleted", "bind-failed", "abandoned"})
"""Causes that, for a Strict gang not (once-satisfied ∧ satisfied), release every held member of the
GangGroup (Koordinator: Unreserve of a Strict member). ``bind-failed`` and ``abandoned`` are reported by
the extender and produce no Release of their own (nobody is left to answer)."""


QUORUM_REFUSED = "gang quorum not reached: "
"""How every quorum refusal begins. kube-scheduler copies the refusal into the pod's ``PodScheduled=False``
condition, so a restarted extender recognises its own refusals there (they are not scheduling failures)."""


YIELD_REFUSED = "gang yields after a deadlock resolution: "
"""How every refusal of a member of a GangGroup released by NonStrict deadlock resolution begins, while it
yields the freed room to the groups its release lets proceed (``gang.deadlockYieldSeconds``)."""


def is_admission_refusal(message: str) -> bool:
    """Whether a ``PodScheduled`` message carries an admission refusal (``Admission.reason`` of a refusal:
    quorum not reached, or yielding after a deadlock). Neither is a scheduling failure."""
    return QUORUM_REFUSED in message or YIELD_REFUSED in message


@dataclass(frozen=True, slots=True)
class Admission:
    """PreEnqueue (quorum, and the yield after a deadlock): may this member be tried at all?

    ``reason`` is what ``/filter`` answers: for a quorum refusal it starts with :data:`QUORUM_REFUSED` and
    names the first gang that falls short without counting its members (the text stays true while the pod
    waits, and kube-scheduler rewrites the pod's condition only when the text changes); for a yield it
    starts with :data:`YIELD_REFUSED`. ``detail`` says the same with the counts, for Events and
    ``/debug/gangs``."""

    ok: bool
    reason: str
    gang_id: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Wakeup:
    """A member refused at admission whose GangGroup now passes: kube-scheduler must be told to retry it
    (it does not retry a pod an extender refused until some cluster event or its 5-minute flush)."""

    pod: str
    """``namespace/name``."""
    gang_id: str
    reason: str
    """Why it passes now (the admission's ``detail``)."""


@dataclass(frozen=True, slots=True)
class Permit:
    """Permit for a gang's GangGroup: ``allow`` (bind every waiting member of every gang), ``wait`` or
    ``reject``. ``remaining_seconds`` is the time left until the earliest held member's wait runs out
    (None when nothing is held; 0 for an un-initialised gang, whose wait time is 0)."""

    verdict: Verdict
    reason: str
    remaining_seconds: float | None


@dataclass(frozen=True, slots=True)
class Hold:
    """A bind request parked at the barrier. ``hold_id`` tells requests for the same pod apart."""

    hold_id: int
    pod: str
    """``namespace/name``."""
    uid: str
    gang_id: str
    node: str
    held_at: float
    """When this bind request arrived."""
    wait_started_at: float
    """When the member's gang wait began (its first hold; kept across ``answer-deadline`` renewals)."""
    wait_deadline: float
    answer_deadline: float
    """``held_at`` + the binder timeout − the margin: the request must be answered by then."""

    @property
    def deadline(self) -> float:
        return min(self.wait_deadline, self.answer_deadline)


@dataclass(frozen=True, slots=True)
class BindBatch:
    """Holds whose GangGroup is now allowed: create all their bindings together."""

    group_id: str
    holds: tuple[Hold, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Release:
    """A hold that must be answered with the bind protocol's ``Error`` now; ``reason`` is that error text."""

    hold: Hold
    cause: ReleaseCause
    reason: str
    trigger: ReleaseCause | None = None
    """For a Strict cascade (``strict``): the cause of the release that set it off, when it was one of
    ``expired``, ``rejected`` or ``deleted`` (None for a scheduling failure or a failed binding)."""


@dataclass(frozen=True, slots=True)
class Deadlock:
    """A NonStrict deadlock and the GangGroup released to resolve it; ``reason`` is the Event message."""

    groups: tuple[str, ...]
    """Every waiting GangGroup id in the deadlock, sorted."""
    victim: str
    """The GangGroup id whose holds are released."""
    released: tuple[Hold, ...]
    reason: str
    helped: tuple[str, ...] = ()
    """The GangGroup ids a pending member of which fits a node the release frees, sorted: the victim
    yields to them (``gang.deadlockYieldSeconds``)."""
