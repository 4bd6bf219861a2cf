"""What one lifecycle step returns (:func:`koordpy.descheduler.lifecycle.decide`): values the adapter carries
out (write a status, evict, create a Reservation, delete the job), the Events to post with them, and the
constructors the steps share (fail the job, wait with condition ``Waiting``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from koordpy.descheduler.job_status import CONDITION_WAITING, FAILED, condition, put_condition
from koordpy.descheduler.reservation_first import OwnedReservation
from koordpy.model.durations import format_rfc3339

__all__ = [
    "EVICTORS",
    "REQUEUE_SECONDS",
    "Decision",
    "Evict",
    "EvictorName",
    "Finish",
    "Ignore",
    "JobEvent",
    "Reserve",
    "Scavenge",
    "Start",
    "Wait",
    "end_wait",
    "finish_failed",
    "named_wait",
]

REQUEUE_SECONDS = 3.0
"""Upstream ``defaultRequeueAfter``: how soon a waiting job is looked at again."""
EvictorName = Literal["Eviction", "Delete", "SoftEviction"]
EVICTORS: tuple[EvictorName, ...] = ("Eviction", "Delete", "SoftEviction")


@dataclass(frozen=True)
class JobEvent:
    """A Kubernetes Event on the job (``type`` Normal or Warning, upstream reasons, action Migrating)."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Ignore:
    """Nothing to do now (paused, finished and not yet due for removal, or waiting for arbitration)."""

    why: str


@dataclass(frozen=True)
class Wait:
    """Look again after ``after`` seconds; write ``status`` first when not None."""

    after: float
    status: dict[str, Any] | None = None
    events: tuple[JobEvent, ...] = ()


@dataclass(frozen=True)
class Start:
    """Pending -> Running: set ``spec.podRef.uid`` to ``pod_uid`` (when empty), then write ``status``."""

    pod_uid: str
    status: dict[str, Any]
    events: tuple[JobEvent, ...] = ()


@dataclass(frozen=True)
class Evict:
    """Write ``status`` (write-ahead record), then evict the pod with ``evictor``.

    ``Eviction``: create ``pods/eviction`` with ``delete_options``; ``Delete``: delete the pod with them;
    ``SoftEviction``: set ``soft_eviction`` as the pod annotation ``scheduling.koordinator.sh/soft-eviction``. On
    failure call :func:`~koordpy.descheduler.lifecycle.after_eviction_error`; on success emit ``events`` and record
    the eviction in the object limiter (``ObjectLimiter.record(workload, ...)``), as upstream tracks only evicted
    pods. The ``evictQPS`` token this decision was taken with is already consumed (client-go ``TryAccept``).
    """

    evictor: EvictorName
    namespace: str
    name: str
    uid: str
    delete_options: dict[str, Any] | None
    status: dict[str, Any]
    soft_eviction: str | None = None
    workload: str | None = None
    max_migrating: int = 1
    """The workload's limit the object limiter was checked with."""
    events: tuple[JobEvent, ...] = ()


@dataclass(frozen=True)
class Finish:
    """Write the terminal ``status`` (phase Succeeded or Failed), then delete the Reservation
    ``delete_reservation`` when set (the one a failed ``ReservationFirst`` job created, with its UID as a
    precondition; 404 is fine)."""

    status: dict[str, Any]
    events: tuple[JobEvent, ...] = ()
    delete_reservation: OwnedReservation | None = None


@dataclass(frozen=True)
class Reserve:
    """Create the Reservation ``manifest`` (None: it exists already and carries this job's marker, adopt
    it), record ``ref`` as the job's ``spec.reservationOptions.reservationRef``, then write ``status``.

    A 409 on create (the name is taken, by a Reservation the cache has not shown yet) records nothing:
    the job is looked at again, and the next decision reads that Reservation and adopts it only if it is
    the job's. On another refused create call :func:`~koordpy.descheduler.lifecycle.after_reservation_error`.
    """

    name: str
    manifest: dict[str, Any] | None
    ref: dict[str, Any]
    status: dict[str, Any]
    events: tuple[JobEvent, ...] = ()


@dataclass(frozen=True)
class Scavenge:
    """Delete the finished job (older than its ttl + 5 minutes)."""

    why: str


Decision = Ignore | Wait | Start | Evict | Finish | Scavenge | Reserve


def finish_failed(
    status: Mapping[str, Any], reason: str, message: str, reservation: OwnedReservation | None = None
) -> Finish:
    """The job fails: ``status`` with phase Failed, ``reason`` and ``message``, a Warning Event, and the job's own
    Reservation ``reservation`` (when set) to delete."""
    new = dict(status)
    new.update(phase=FAILED, reason=reason, message=message)
    return Finish(new, (JobEvent("Warning", reason, message),), reservation)


def end_wait(status: dict[str, Any], now: float) -> dict[str, Any]:
    """``status`` with condition ``Waiting`` turned False when it was True (the job moves on); the status'
    own reason and message are left to the step that follows."""
    old = condition(status, CONDITION_WAITING)
    if old is None or old.get("status") != "True":
        return status
    stamp = format_rfc3339(now)
    done = {**old, "status": "False", "reason": "", "message": "", "lastProbeTime": stamp, "lastTransitionTime": stamp}
    new = dict(status)
    new["conditions"] = [done if c is old else c for c in status.get("conditions") or ()]
    return new


def named_wait(
    status: dict[str, Any],
    reason: str,
    message: str,
    now: float,
    *,
    changed: bool = False,
    events: tuple[JobEvent, ...] = (),
    after: float = REQUEUE_SECONDS,
) -> Wait:
    """Wait ``after`` seconds with condition ``Waiting`` True naming ``reason``; the status is written and
    an Event posted only when the condition changes (``changed``: the status differs already)."""
    new, more = put_condition(status, CONDITION_WAITING, "True", reason=reason, message=message, now=now)
    if more:
        events = (*events, JobEvent("Normal", reason, message))
    return Wait(after, new if changed or more else None, events)
