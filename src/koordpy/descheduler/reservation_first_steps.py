"""The steps of a Running ``ReservationFirst`` job: create or adopt its Reservation
(:mod:`koordpy.descheduler.reservation_first`), wait until it is Available on another node (and, in a
gang unit, until the unit's barrier allows), evict through :func:`~koordpy.descheduler.eviction.evict_step`,
then wait until a replacement pod has bound the Reservation and is Ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordpy.descheduler.decisions import (
    REQUEUE_SECONDS,
    Decision,
    Finish,
    JobEvent,
    Reserve,
    Wait,
    finish_failed,
    named_wait,
)
from koordpy.descheduler.eviction import RunningStep, evict_step
from koordpy.descheduler.job_facts import ttl_seconds
from koordpy.descheduler.job_status import (
    CONDITION_BOUND_POD_READY,
    CONDITION_EVICTION,
    CONDITION_POD_BOUND_RESERVATION,
    CONDITION_RESERVATION_CREATED,
    CONDITION_RESERVATION_SCHEDULED,
    REASON_EVICT_COMPLETE,
    REASON_FAILED_CREATE_RESERVATION,
    REASON_FORBIDDEN_MIGRATE_POD,
    REASON_INVALID_RESERVATION,
    REASON_MISSING_POD,
    REASON_MISSING_RESERVATION,
    REASON_RESERVATION_EXPIRED,
    REASON_UNSCHEDULABLE,
    REASON_WAIT_FOR_BOUND_POD_READY,
    REASON_WAIT_FOR_GANG,
    REASON_WAIT_FOR_POD_BIND_RESERVATION,
    REASON_WAIT_FOR_RESERVATION_AVAILABLE,
    REASON_WAIT_FOR_RESERVATION_SCHEDULED,
    STATUS_COMPLETE,
    SUCCEEDED,
    condition,
    put_condition,
    with_condition,
)
from koordpy.descheduler.lifecycle_inputs import PodView
from koordpy.descheduler.reservation_first import (
    ANNOTATION_MIGRATION_JOB,
    BoundPod,
    OwnedReservation,
    bound_pod,
    foreign,
    job_marker,
    owned,
    read_reservation,
    reservation_manifest,
    reservation_name,
    reservation_ref,
)
from koordpy.model.objects import PodInfo

__all__ = [
    "bound_for",
    "needs_node_pods",
    "reservation_first_step",
]


def needs_node_pods(job: Mapping[str, Any], reservation: Mapping[str, Any] | None) -> str | None:
    """The node whose pods :func:`~koordpy.descheduler.lifecycle.decide` needs (for the ledger): the evicted job's
    Reservation node while no bound pod is known from the job or ``status.currentOwners``; else None."""
    status = job.get("status") or {}
    if reservation is None or condition(status, CONDITION_EVICTION) is None or (status.get("podRef") or {}).get("name"):
        return None
    res_status = reservation.get("status") or {}
    if res_status.get("currentOwners"):
        return None
    return str(res_status.get("nodeName") or "") or None


def bound_for(
    job: Mapping[str, Any], reservation: Mapping[str, Any] | None, node_pods: Sequence[PodInfo], now: float
) -> BoundPod | None:
    """The pod that bound the job's Reservation: ``status.podRef`` once recorded, else
    :func:`~koordpy.descheduler.reservation_first.bound_pod` of the Reservation (None: nobody yet)."""
    recorded = (job.get("status") or {}).get("podRef") or {}
    if recorded.get("name"):
        return BoundPod(str(recorded.get("namespace") or ""), str(recorded["name"]), str(recorded.get("uid") or ""))
    return bound_pod(reservation, node_pods, now) if reservation is not None else None


def reservation_first_step(
    step: RunningStep,
    status: dict[str, Any],
    pod: PodView | None,
    *,
    reservation: Mapping[str, Any] | None,
    replacement: PodView | None,
    node_pods: Sequence[PodInfo],
) -> Decision:
    """A Running ``ReservationFirst`` job: reserve, wait Available, evict, wait for the bound pod Ready."""
    job, key, now = step.job, step.key, step.now
    spec = job.get("spec") or {}
    recorded_uid = (spec.get("podRef") or {}).get("uid") or ""
    res_name = reservation_name(job)
    ours = owned(job, reservation)

    def fail(reason: str, message: str, at: Mapping[str, Any] = status) -> Finish:
        return finish_failed(at, reason, message, ours)

    if foreign(job, reservation):
        assert reservation is not None
        marker = ((reservation.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_MIGRATION_JOB)
        message = (
            f'Reservation "{res_name}" exists and was not created by this job (annotation '
            f"{ANNOTATION_MIGRATION_JOB} is {str(marker)[:120]!r}, not {job_marker(job)!r}): it is left as it is"
        )
        failed = with_condition(
            status,
            CONDITION_RESERVATION_CREATED,
            "False",
            reason=REASON_FAILED_CREATE_RESERVATION,
            message=message,
            now=now,
        )
        return finish_failed(failed, REASON_FAILED_CREATE_RESERVATION, message)

    eviction = condition(status, CONDITION_EVICTION)
    evicted = eviction is not None and eviction.get("status") == "True"
    gone = pod is None or (bool(recorded_uid) and pod.uid != recorded_uid)
    events: tuple[JobEvent, ...] = ()
    changed = False

    if not evicted and gone:
        if eviction is None:
            return fail(REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"')
        message = f'Pod "{key}" has been evicted'
        status = with_condition(
            status, CONDITION_EVICTION, "True", reason=REASON_EVICT_COMPLETE, message=message, now=now
        )
        events, changed, evicted = (JobEvent("Normal", REASON_EVICT_COMPLETE, message),), True, True

    if not evicted:
        assert pod is not None
        return _before_eviction(step, status, pod, reservation=reservation, res_name=res_name, ours=ours)

    # Evicted: wait for the replacement to bind the Reservation, then to be Ready.
    recorded = status.get("podRef") or {}
    bound = bound_for(job, reservation, node_pods, now)
    if bound is None:
        if reservation is None:
            return fail(REASON_MISSING_RESERVATION, f'Abort job caused by missing Reservation "{res_name}"', status)
        state = read_reservation(reservation, now)
        if state.expired:
            return fail(REASON_RESERVATION_EXPIRED, "Reservation expired", status)
        if state.phase == "Failed":
            return fail(REASON_UNSCHEDULABLE, state.unschedulable or f'Reservation "{res_name}" failed', status)
        status, more = put_condition(
            status,
            CONDITION_POD_BOUND_RESERVATION,
            "False",
            reason=REASON_WAIT_FOR_POD_BIND_RESERVATION,
            message=f'Waiting for a Pod to bind Reservation "{res_name}"',
            now=now,
        )
        return Wait(REQUEUE_SECONDS, status if changed or more else None, events)
    message = f'Bind Pod "{bound.key}" in Reservation "{res_name}"'
    if not recorded.get("name"):
        status["podRef"] = {
            "namespace": bound.namespace,
            "name": bound.name,
            **({"uid": bound.uid} if bound.uid else {}),
        }
        changed = True
    status, more = put_condition(status, CONDITION_POD_BOUND_RESERVATION, "True", reason="", message=message, now=now)
    changed = changed or more
    same = replacement is not None and (not bound.uid or replacement.uid == bound.uid)
    if not (same and replacement is not None and replacement.ready):
        status, more = put_condition(
            status,
            CONDITION_BOUND_POD_READY,
            "False",
            reason=REASON_WAIT_FOR_BOUND_POD_READY,
            message=f'Waiting for Pod "{bound.key}" to be Ready',
            now=now,
        )
        return Wait(REQUEUE_SECONDS, status if changed or more else None, events)
    status, _ = put_condition(status, CONDITION_BOUND_POD_READY, "True", reason="", message=message, now=now)
    status.update(phase=SUCCEEDED, status=STATUS_COMPLETE, reason="", message=message)
    return Finish(status, (*events, JobEvent("Normal", STATUS_COMPLETE, message)))


def _before_eviction(
    step: RunningStep,
    status: dict[str, Any],
    pod: PodView,
    *,
    reservation: Mapping[str, Any] | None,
    res_name: str,
    ours: OwnedReservation | None,
) -> Decision:
    """The pod is still there (maybe being evicted): create or adopt the Reservation, wait until it is
    Available on another node, then evict."""
    job, now = step.job, step.now

    def fail(reason: str, message: str) -> Finish:
        return finish_failed(status, reason, message, ours)

    created_message = f'Successfully create Reservation "{res_name}"'
    ref = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation", "name": res_name}
    if reservation is None:
        if reservation_ref(job) is not None:
            return fail(REASON_MISSING_RESERVATION, f'Abort job caused by missing Reservation "{res_name}"')
        manifest = reservation_manifest(
            job, pod.obj or _minimal_pod(pod), ttl_seconds(job.get("spec") or {}, step.settings)
        )
        if isinstance(manifest, str):
            failed = with_condition(
                status,
                CONDITION_RESERVATION_CREATED,
                "False",
                reason=REASON_FAILED_CREATE_RESERVATION,
                message=manifest,
                now=now,
            )
            return finish_failed(failed, REASON_FAILED_CREATE_RESERVATION, manifest)
        new = with_condition(status, CONDITION_RESERVATION_CREATED, "True", reason="", message=created_message, now=now)
        return Reserve(
            res_name,
            manifest,
            ref,
            new,
            (JobEvent("Normal", CONDITION_RESERVATION_CREATED, created_message),),
        )
    if reservation_ref(job) is None:  # ours (foreign ones failed above), created before a restart: adopt it
        new, _ = put_condition(
            status, CONDITION_RESERVATION_CREATED, "True", reason="", message=created_message, now=now
        )
        return Reserve(res_name, None, ref, new)

    state = read_reservation(reservation, now)
    if state.invalid is not None:
        return fail(REASON_INVALID_RESERVATION, f'Reservation "{res_name}": {state.invalid}')
    if state.expired:
        return fail(REASON_RESERVATION_EXPIRED, "Reservation expired")
    if state.phase == "Failed":
        return fail(REASON_UNSCHEDULABLE, state.unschedulable or f'Reservation "{res_name}" failed')
    if state.phase == "Succeeded" and condition(status, CONDITION_EVICTION) is None:
        return fail(REASON_FORBIDDEN_MIGRATE_POD, "Reservation is already bound by another Pod")
    if not state.placed:
        if state.unschedulable is None:
            message = f'Waiting for Reservation "{res_name}" to be scheduled'
            new, changed = put_condition(
                status,
                CONDITION_RESERVATION_SCHEDULED,
                "False",
                reason=REASON_WAIT_FOR_RESERVATION_SCHEDULED,
                message=message,
                now=now,
            )
            told = (JobEvent("Normal", REASON_WAIT_FOR_RESERVATION_SCHEDULED, message),) if changed else ()
            return Wait(REQUEUE_SECONDS, new if changed else None, told)
        new, changed = put_condition(
            status,
            CONDITION_RESERVATION_SCHEDULED,
            "False",
            reason=REASON_UNSCHEDULABLE,
            message=state.unschedulable,
            now=now,
        )
        warn = (JobEvent("Warning", REASON_UNSCHEDULABLE, state.unschedulable),) if changed else ()
        return Wait(REQUEUE_SECONDS, new if changed else None, warn)
    if state.node_name == pod.node_name:
        return fail(
            REASON_FORBIDDEN_MIGRATE_POD,
            f'Scheduler assigned the Reservation "{res_name}" on the same node as the Pod',
        )
    events: tuple[JobEvent, ...] = ()
    changed = False
    if status.get("nodeName") != state.node_name:
        message = f'Assigned Reservation "{res_name}" to node "{state.node_name}"'
        status = with_condition(status, CONDITION_RESERVATION_SCHEDULED, "True", reason="", message=message, now=now)
        status["nodeName"] = state.node_name
        events, changed = (JobEvent("Normal", CONDITION_RESERVATION_SCHEDULED, message),), True
    if state.phase != "Available":
        message = (
            f'Reservation "{res_name}" is {state.phase or "Pending"} on node "{state.node_name}": '
            f'Pod "{step.key}" is evicted once it is Available'
        )
        return named_wait(status, REASON_WAIT_FOR_RESERVATION_AVAILABLE, message, now, changed=changed, events=events)
    barrier = step.gang
    if barrier is not None and barrier.state == "broken":
        return finish_failed(status, REASON_FORBIDDEN_MIGRATE_POD, barrier.message, ours)
    if barrier is not None and barrier.state == "wait":
        return named_wait(status, REASON_WAIT_FOR_GANG, barrier.message, now, changed=changed, events=events)
    return evict_step(step, status, pod, changed=changed, events=events)


def _minimal_pod(pod: PodView) -> dict[str, Any]:
    return {
        "metadata": {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "labels": dict(pod.labels)},
        "spec": {"nodeName": pod.node_name},
    }
