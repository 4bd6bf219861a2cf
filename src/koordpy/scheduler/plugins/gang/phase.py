"""PodGroup ``status.phase`` as each API's controller computes it, as pure functions of one sync.

``koordinator_phase`` (``scheduling.sigs.k8s.io``, Koordinator's controller, reference §2.7),
``x_k8s_phase`` (``scheduling.x-k8s.io``, scheduler-plugins' controller) and ``volcano_phase``
(``scheduling.volcano.sh``, the job status Volcano's scheduler writes at the end of each session) each take
the phase stored now and the member counts and return the phase after one reconcile, like those
state machines (so ``"" → Pending`` takes one sync and ``Pending → PreScheduling/Scheduling`` the
next). ``converge`` repeats a step until it stops changing: what the status settles on if nothing else
changes. ``Finished`` and ``Failed`` are final (neither controller reconciles them again).

Not guaranteed: the 48-hour "stop reconciling" rule and ``occupiedBy``/``scheduleStartTime`` are the
caller's (the manager's) business; these functions only decide the phase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MemberCounts", "converge", "gang_phase", "koordinator_phase", "volcano_phase", "x_k8s_phase"]

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


def volcano_phase(previous: str, min_member: int, counts: MemberCounts) -> str:
    """One session of Volcano's scheduler (``jobStatus`` in ``pkg/scheduler/framework/session.go``), for a
    gang without a Volcano queue: allocated = members bound to a node that have not failed (``AllocatedStatus``
    or ``Succeeded``). allocated ≥ ``minMember`` → ``Running``, or ``Completed`` when every allocated member
    succeeded; fewer allocated but some running → ``Unknown`` (Volcano: running members and an unschedulable
    rest); otherwise ``Inqueue``. Volcano's ``enqueue`` action moves a PodGroup from ``Pending`` to
    ``Inqueue`` when its queue has room; koordpy has no queues, so a PodGroup is ``Inqueue`` at once
    (``Pending`` for one sync, as in Volcano); the Volcano job controller creates a Job's pods only then.
    """
    if previous in ("", "Pending"):
        return "Inqueue" if previous == "Pending" else "Pending"
    allocated = counts.scheduled - counts.failed  # bound members, failed ones not counted
    if allocated >= min_member and allocated > 0:
        return "Completed" if counts.succeeded == allocated else "Running"
    if counts.running > 0:
        return "Unknown"
    return "Inqueue"


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
    machine, ``scheduling.volcano.sh`` gangs Volcano's, every other gang Koordinator's (an annotation-way
    gang has no PodGroup object: its phase is the one Koordinator would write if it had one). A native
    (``scheduling.k8s.io``) PodGroup has no phase and koordpy writes none: ``stored`` is what its
    ``PodGroupInitiallyScheduled`` condition says (``Scheduled``, ``Unschedulable``, ...), else ``Pending``."""
    if source != "annotations" and not initialised:
        return "NotFound"
    if source == "scheduling.k8s.io":
        return stored or "Pending"
    steps: dict[str, Callable[[str, int, MemberCounts], str]] = {
        "scheduling.x-k8s.io": x_k8s_phase,
        "scheduling.volcano.sh": volcano_phase,
    }
    return converge(steps.get(source, koordinator_phase), stored, min_member, counts)
