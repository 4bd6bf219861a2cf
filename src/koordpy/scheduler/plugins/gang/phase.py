"""PodGroup ``status.phase`` as each API's controller computes it, as pure functions of one sync.

``koordinator_phase`` (``scheduling.sigs.k8s.io``, Koordinator's controller, reference §2.7) and
``x_k8s_phase`` (``scheduling.x-k8s.io``, scheduler-plugins' controller) each take the phase stored now
and the member counts and return the phase after one reconcile, exactly like the controllers'
state machines (so ``"" → Pending`` takes one sync and ``Pending → PreScheduling/Scheduling`` the
next). ``converge`` repeats a step until it stops changing: what the status settles on if nothing else
changes. ``Finished`` and ``Failed`` are final (neither controller reconciles them again).

Not guaranteed: the 48-hour "stop reconciling" rule and ``occupiedBy``/``scheduleStartTime`` are the
caller's (the manager's) business; these functions only decide the phase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MemberCounts", "converge", "gang_phase", "koordinator_phase", "x_k8s_phase"]

FINAL = frozenset({"Finished", "Failed"})


@dataclass(frozen=True, slots=True)
class MemberCounts:
    pods: int
    """Members known (any pod phase)."""
    scheduled: int
    """Members bound to a node (Koordinator's ``status.scheduled``; x-k8s.io has no such field)."""
    running: int
    succeeded: int
    failed: int


def koordinator_phase(previous: str, min_member: int, counts: MemberCounts) -> str:
    """One sync of Koordinator's PodGroup controller (HEAD semantics, reference §2.7)."""
    if previous in FINAL:
        return previous
    if previous == "":
        return "Pending"
    if previous == "Pending":
        # Pending → PreScheduling only with a positive minMember and enough members.
        return "PreScheduling" if min_member > 0 and counts.pods >= min_member else "Pending"
    if counts.pods == 0:
        return "Pending"
    phase = "Scheduling" if counts.scheduled < min_member else "Scheduled"
    if phase == "Scheduled" and counts.running + counts.succeeded >= min_member:
        phase = "Running"
    if counts.failed != 0 and counts.failed + counts.running + counts.succeeded >= min_member:
        phase = "Failed"
    if counts.succeeded >= min_member:
        phase = "Finished"
    return phase


def x_k8s_phase(previous: str, min_member: int, counts: MemberCounts) -> str:
    """One reconcile of scheduler-plugins' PodGroup controller (``scheduling.x-k8s.io``)."""
    if previous in FINAL:
        return previous
    if previous == "":
        return "Pending"
    if previous == "Pending":
        return "Scheduling" if counts.pods >= min_member else "Pending"
    if counts.pods < min_member:
        return "Pending"
    active = counts.running + counts.succeeded
    phase = "Running" if active >= min_member else "Scheduling"
    if counts.failed != 0 and counts.failed + active >= min_member:
        phase = "Failed"
    if counts.succeeded >= min_member:
        phase = "Finished"
    return phase


def converge(
    step: Callable[[str, int, MemberCounts], str], previous: str, min_member: int, counts: MemberCounts
) -> str:
    """Apply ``step`` until the phase stops changing (at most 8 syncs; the machines settle in ≤ 3)."""
    phase = previous
    for _ in range(8):
        nxt = step(phase, min_member, counts)
        if nxt == phase:
            break
        phase = nxt
    return phase


def gang_phase(source: str, initialised: bool, stored: str, min_member: int, counts: MemberCounts) -> str:
    """The phase a gang's PodGroup status settles on from ``stored``; ``NotFound`` when the gang comes from
    a PodGroup label and that PodGroup does not exist. ``scheduling.x-k8s.io`` gangs use scheduler-plugins'
    machine, every other gang Koordinator's (an annotation-way gang has no PodGroup object: its phase is
    the one Koordinator would write if it had one)."""
    if source != "annotations" and not initialised:
        return "NotFound"
    step = x_k8s_phase if source == "scheduling.x-k8s.io" else koordinator_phase
    return converge(step, stored, min_member, counts)
