"""PodMigrationJob status: the upstream phases, condition types and reasons, and the condition writers
every lifecycle step uses (upstream ``updateCondition``: one condition per type, mirrored in the status'
``status``, ``reason`` and ``message``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordpy.model.durations import format_rfc3339

__all__ = [
    "ABORTED",
    "CONDITION_BOUND_POD_READY",
    "CONDITION_EVICTION",
    "CONDITION_INVALID",
    "CONDITION_POD_BOUND_RESERVATION",
    "CONDITION_RESERVATION_CREATED",
    "CONDITION_RESERVATION_SCHEDULED",
    "CONDITION_WAITING",
    "FAILED",
    "PENDING",
    "REASON_EVICTING",
    "REASON_EVICT_COMPLETE",
    "REASON_EVICT_QPS",
    "REASON_FAILED_CREATE_RESERVATION",
    "REASON_FAILED_EVICT",
    "REASON_FORBIDDEN_MIGRATE_POD",
    "REASON_INVALID_POD_REF",
    "REASON_INVALID_RESERVATION",
    "REASON_INVALID_SPEC",
    "REASON_MISSING_POD",
    "REASON_MISSING_RESERVATION",
    "REASON_OBJECT_LIMITER",
    "REASON_PAUSED",
    "REASON_RESERVATION_EXPIRED",
    "REASON_TIMEOUT",
    "REASON_UNSCHEDULABLE",
    "REASON_WAIT_FOR_BOUND_POD_READY",
    "REASON_WAIT_FOR_GANG",
    "REASON_WAIT_FOR_POD_BIND_RESERVATION",
    "REASON_WAIT_FOR_RESERVATION_AVAILABLE",
    "REASON_WAIT_FOR_RESERVATION_SCHEDULED",
    "RUNNING",
    "STATUS_COMPLETE",
    "SUCCEEDED",
    "condition",
    "put_condition",
    "with_condition",
]

# Phases (upstream PodMigrationJobPhase).
PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
ABORTED = "Aborted"
# Condition types and reasons (upstream PodMigrationJobConditionType / Reason constants).
CONDITION_RESERVATION_CREATED = "ReservationCreated"
CONDITION_RESERVATION_SCHEDULED = "ReservationScheduled"
CONDITION_EVICTION = "Eviction"
CONDITION_POD_BOUND_RESERVATION = "PodBoundReservation"
CONDITION_BOUND_POD_READY = "BoundPodReady"
CONDITION_INVALID = "Invalid"
"""koordpy's condition on a job that cannot be processed (no ``podRef``, a name the API server would refuse,
a ttl that is not a duration): True, reason ``InvalidPodRef`` or ``InvalidSpec``, with the field path."""
CONDITION_WAITING = "Waiting"
"""koordpy's condition: True while the job waits, its reason names what for (an arbitration filter such as
``MaxMigratingPerNode``, ``ObjectLimiter``, ``EvictQPS``, ``Paused``, ``WaitForReservationAvailable``);
False once the wait is over. Upstream has none: its waits are silent."""
REASON_TIMEOUT = "Timeout"
REASON_FAILED_CREATE_RESERVATION = "FailedCreateReservation"
REASON_INVALID_RESERVATION = "InvalidReservation"
REASON_RESERVATION_EXPIRED = "ReservationExpired"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_FORBIDDEN_MIGRATE_POD = "ForbiddenMigratePod"
REASON_MISSING_POD = "MissingPod"
REASON_MISSING_RESERVATION = "MissingReservation"
REASON_INVALID_POD_REF = "InvalidPodRef"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_WAIT_FOR_RESERVATION_SCHEDULED = "WaitForReservationScheduled"
REASON_WAIT_FOR_RESERVATION_AVAILABLE = "WaitForReservationAvailable"
REASON_PAUSED = "Paused"
REASON_OBJECT_LIMITER = "ObjectLimiter"
REASON_EVICT_QPS = "EvictQPS"
REASON_EVICTING = "Evicting"
REASON_FAILED_EVICT = "FailedEvict"
REASON_EVICT_COMPLETE = "EvictComplete"
REASON_WAIT_FOR_POD_BIND_RESERVATION = "WaitForPodBindReservation"
REASON_WAIT_FOR_BOUND_POD_READY = "WaitForBoundPodReady"
REASON_WAIT_FOR_GANG = "WaitForGang"
STATUS_COMPLETE = "Complete"


def condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def with_condition(
    status: Mapping[str, Any], kind: str, state: str, *, reason: str, message: str, now: float
) -> dict[str, Any]:
    """Upstream ``updateCondition``: replace the condition of ``kind`` and mirror it in status/reason/message."""
    stamp = format_rfc3339(now)
    old = condition(status, kind)
    cond = {
        "type": kind,
        "status": state,
        "reason": reason,
        "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp if old is None or old.get("status") != state else old.get("lastTransitionTime"),
    }
    others = [c for c in status.get("conditions") or () if not (isinstance(c, Mapping) and c.get("type") == kind)]
    new = dict(status)
    new["conditions"] = [*others, cond]
    new["status"] = kind
    new["reason"] = reason
    new["message"] = message
    return new


def put_condition(
    status: Mapping[str, Any], kind: str, state: str, *, reason: str, message: str, now: float
) -> tuple[dict[str, Any], bool]:
    """Upstream ``updateCondition``: unchanged (False) when the condition already says the same."""
    old = condition(status, kind)
    if old is not None and (old.get("status"), old.get("reason") or "", old.get("message") or "") == (
        state,
        reason,
        message,
    ):
        return dict(status), False
    return with_condition(status, kind, state, reason=reason, message=message, now=now), True
