"""PodMigrationJob lifecycle as a pure state machine: one call decides the next step of one job.

Follows Koordinator's migration controller (``pkg/descheduler/controllers/migration/controller.go``):
``spec.paused`` is a no-op, a job older than its ``ttl`` fails with reason ``Timeout``, a Pending job
records the pod's UID and turns Running, ``EvictDirectly`` evicts and waits until the pod is gone (or its
UID changed), then Succeeded with ``status.status`` ``Complete``. Phases, condition types and reasons are
the upstream strings. The adapter (``koordpy.manager``) reads the job and its pod, calls :func:`decide`,
and carries out the returned value; time is an argument.

``ReservationFirst`` (the default mode) reserves room elsewhere first, as upstream: Running → create
the Reservation (:mod:`koordpy.descheduler.reservation_first`: the pod's template, owned by its
controller, excluding the current node; or the job's ``reservationRef``) → wait until it is Available
on another node → evict (the same evictor path and rate limits as ``EvictDirectly``) → wait until a
replacement pod has bound the Reservation (``status.currentOwners``, or the ledger finds a pod on its
node bound through it) → wait until that pod is Ready → Succeeded with ``status.podRef`` and ``status.nodeName``.

Where koordpy differs, deliberately:

- ``ReservationFirst`` waits for the replacement to be Ready (condition ``BoundPodReady``, reason
  ``WaitForBoundPodReady``), which Koordinator added after v1.4; a Reservation stuck Pending
  (Unschedulable) ends the job only at its ttl (``Timeout``), as upstream, with the reservation's
  message copied to condition ``ReservationScheduled``. The Reservation a job created is deleted when
  the job fails (a Reservation named by the user in ``reservationRef`` never is: upstream deletes it).
  A job's Reservation is the one carrying the job's marker
  (:func:`~koordpy.descheduler.reservation_first.is_ours`): a Reservation of the job's name without it is
  someone else's, and the job fails (``FailedCreateReservation``) without touching it; a template that
  names the Reservation or sets what only an admin may (owners, expiry, ...) makes the job invalid
  (:func:`~koordpy.descheduler.reservation_first.template_problem`).
- Restart safety: upstream ignores jobs another reconciler started until the 30-minute scavenger; here
  the job status and the pod are the only record, so a restarted manager adopts Running jobs. Before an
  eviction the job gets condition ``Eviction`` False/``Evicting`` (write-ahead), and a pod is evicted only
  while it still has the recorded UID, no ``deletionTimestamp`` and (SoftEviction) no soft-eviction
  annotation: no pod is evicted twice, whatever the crash point.
- A job without ``spec.ttl`` gets ``defaultJobTTL``, so a PodDisruptionBudget that keeps answering 429 ends
  the job with ``Timeout`` instead of retrying for ever.
- The scavenger deletes finished jobs only (``ttl`` + 5 minutes after creation); upstream deletes any job.

Gangs: jobs that passed arbitration together (a gang that moves as one, see :mod:`koordpy.descheduler.arbitration`)
carry the annotation ``koordpy.io/gang-migration`` naming the gang and the jobs
(:func:`~koordpy.descheduler.gang_migration.gang_migration`). Such a job is not held by ``objectLimiters.workload``
(its unit passed the limiter's arbitration filter as one disruption of the workload; its eviction is still recorded),
and in ``ReservationFirst`` it evicts only once every job of its unit has its Reservation Available or has evicted
already (condition ``Waiting``, reason ``WaitForGang``;
:func:`~koordpy.descheduler.gang_migration.gang_eviction_barrier`); a job of the unit that failed before its eviction
fails the others that have not evicted (``ForbiddenMigratePod``).

The parts, one job each: :mod:`~koordpy.descheduler.job_status` (phases, condition types, reasons, the
condition writers), :mod:`~koordpy.descheduler.job_facts` (a job's stage, deadline and spec problems),
:mod:`~koordpy.descheduler.decisions` (the values :func:`decide` returns), :mod:`~koordpy.descheduler.lifecycle_inputs`
(settings, the pod's view), :mod:`~koordpy.descheduler.ratelimit` (``evictQPS``, ``objectLimiters.workload``, the
backoff), :mod:`~koordpy.descheduler.eviction` (the evictor and the eviction step),
:mod:`~koordpy.descheduler.reservation_first_steps` (a ``ReservationFirst`` job's steps) and
:mod:`~koordpy.descheduler.gang_migration` (gang units and their eviction barrier); this module holds the state
machine's entry points (:func:`decide` and what it reads, the follow-ups of a refused call).

Not guaranteed: the adapter's writes may lose a race with another writer; the next decision on the
re-read job corrects course. Rate limiters live in memory and start full after a restart. Preemption
for a Reservation (``preemptionOptions``) is not built, nor upstream's path for a pod not yet scheduled
(it is reserved for without a node exclusion and evicted like any other).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordpy.descheduler.decisions import (
    Decision,
    EvictorName,
    Finish,
    Ignore,
    JobEvent,
    Scavenge,
    Start,
    Wait,
    end_wait,
    finish_failed,
    named_wait,
)
from koordpy.descheduler.eviction import EVICTOR_VERBS, LABEL_EVICT_POLICY, RunningStep, evict_step
from koordpy.descheduler.gang_migration import GangEvictionBarrier
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION, created_at, examine, ttl_seconds
from koordpy.descheduler.job_status import (
    CONDITION_EVICTION,
    CONDITION_INVALID,
    CONDITION_RESERVATION_CREATED,
    CONDITION_WAITING,
    PENDING,
    REASON_EVICT_COMPLETE,
    REASON_EVICTING,
    REASON_FAILED_CREATE_RESERVATION,
    REASON_FAILED_EVICT,
    REASON_MISSING_POD,
    REASON_PAUSED,
    REASON_TIMEOUT,
    RUNNING,
    STATUS_COMPLETE,
    SUCCEEDED,
    condition,
    with_condition,
)
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings, PodView
from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket, eviction_retry_delay
from koordpy.descheduler.reservation_first import owned, reservation_name
from koordpy.descheduler.reservation_first_steps import reservation_first_step
from koordpy.model.objects import PodInfo

__all__ = [
    "after_eviction_error",
    "after_reservation_error",
    "arbitration_wait",
    "decide",
    "needs_pod",
    "reservation_lookup",
]


def needs_pod(job: Mapping[str, Any], settings: LifecycleSettings) -> bool:
    """Whether :func:`decide` will look at the pod (saves a read for waiting, paused and finished jobs)."""
    spec = job.get("spec") or {}
    phase = (job.get("status") or {}).get("phase") or PENDING
    if phase not in (PENDING, RUNNING) or spec.get("paused"):
        return False
    passed = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PASSED_ARBITRATION) == "true"
    return phase == RUNNING or passed or not settings.arbitration_enabled


def reservation_lookup(job: Mapping[str, Any], settings: LifecycleSettings) -> str | None:
    """The Reservation :func:`decide` will read for ``job`` (a Running ``ReservationFirst`` job), else None."""
    spec = job.get("spec") or {}
    phase = (job.get("status") or {}).get("phase") or PENDING
    if phase != RUNNING or spec.get("paused") or (spec.get("mode") or settings.default_job_mode) == "EvictDirectly":
        return None
    return reservation_name(job)


def arbitration_wait(
    status: Mapping[str, Any], filter_name: str, message: str, now: float
) -> tuple[dict[str, Any], JobEvent] | None:
    """A waiting job that arbitration requeued: its status with condition ``Waiting`` True, reason the
    filter's name (``MaxMigratingPerNode``, ``ObjectLimiter``, ...), and the Event to post; None when the
    condition already names that filter (a count in the message that moved is not worth a write)."""
    old = condition(status, CONDITION_WAITING)
    if old is not None and old.get("status") == "True" and old.get("reason") == filter_name:
        return None
    new = with_condition(status, CONDITION_WAITING, "True", reason=filter_name, message=message, now=now)
    return new, JobEvent("Normal", filter_name, message)


def decide(
    job: Mapping[str, Any],
    pod: PodView | None,
    now: float,
    settings: LifecycleSettings,
    *,
    evict_tokens: TokenBucket | None = None,
    workload: str | None = None,
    workload_max_migrating: int = 1,
    object_limiter: ObjectLimiter | None = None,
    workload_name: str = "",
    reservation: Mapping[str, Any] | None = None,
    replacement: PodView | None = None,
    node_pods: Sequence[PodInfo] = (),
    gang: GangEvictionBarrier | None = None,
) -> Decision:
    """The next step for ``job`` (a PodMigrationJob object) whose referenced pod is ``pod``.

    ``pod`` is the pod named by ``spec.podRef`` as read now (``None``: not found). ``evict_tokens`` is the
    ``evictQPS``/``evictBurst`` bucket and ``object_limiter`` the per-workload limiter for ``workload`` (the pod's
    owning workload UID, shown as ``workload_name`` in messages); an :class:`~koordpy.descheduler.decisions.Evict`
    decision has consumed one ``evictQPS`` token and checked (not consumed) the workload's. A job held back by either
    gets condition ``Waiting`` True naming it (:data:`~koordpy.descheduler.job_status.CONDITION_WAITING`), written
    with an Event only when it changes; the condition turns False when the job moves on.

    ``ReservationFirst`` only: ``reservation`` is the object named by :func:`reservation_lookup` (None:
    not found), ``node_pods`` the pods on its node (for the ledger, when ``status.currentOwners`` is still empty) and
    ``replacement`` the pod that bound it (see :func:`~koordpy.descheduler.reservation_first_steps.bound_for`), as
    read now; ``gang`` the :func:`~koordpy.descheduler.gang_migration.gang_eviction_barrier` of a job of a gang unit
    (None: evict as any job).
    """
    facts = examine(job, settings)
    if facts.stage == "finished":
        due = facts.scavenge_at is not None and now >= facts.scavenge_at
        return Scavenge(f"phase {facts.phase}, older than ttl + 5m") if due else Ignore(f"phase {facts.phase}")
    raw_status = job.get("status")
    status: dict[str, Any] = dict(raw_status) if isinstance(raw_status, Mapping) else {}
    if facts.stage == "invalid":
        if not isinstance(status.get("conditions") or [], list):
            status["conditions"] = []  # a merge patch replaces the malformed list
        status = with_condition(status, CONDITION_INVALID, "True", reason=facts.reason, message=facts.problem, now=now)
        return finish_failed(status, facts.reason, facts.problem)
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    phase = facts.phase
    created = created_at(job)
    ttl = ttl_seconds(spec, settings)
    if spec.get("paused"):
        message = "spec.paused is true: the job waits until it is unpaused"
        wait = named_wait(status, REASON_PAUSED, message, now)
        return wait if wait.status is not None else Ignore("paused")
    mode = spec.get("mode") or settings.default_job_mode
    ours = owned(job, reservation) if mode != "EvictDirectly" else None
    if ttl > 0 and created is not None and now - created >= ttl:
        return finish_failed(status, REASON_TIMEOUT, "Abort job caused by timeout", ours if phase == RUNNING else None)
    annotations = meta.get("annotations") or {}
    if phase == PENDING and settings.arbitration_enabled and annotations.get(ANNOTATION_PASSED_ARBITRATION) != "true":
        return Ignore("waiting for arbitration")

    pod_ref = spec.get("podRef") or {}
    namespace, name = pod_ref.get("namespace"), pod_ref.get("name")
    key = f"{namespace}/{name}"
    recorded_uid = pod_ref.get("uid") or ""

    if phase == PENDING:
        if pod is None or (recorded_uid and pod.uid != recorded_uid):
            return finish_failed(status, REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"')
        new = end_wait(dict(status), now)
        new["phase"] = RUNNING
        return Start(pod.uid, new, (JobEvent("Normal", RUNNING, f'Start migrating Pod "{key}"'),))

    step = RunningStep(
        job, key, now, settings, evict_tokens, workload, workload_max_migrating, object_limiter, workload_name, gang
    )
    if mode != "EvictDirectly":
        return reservation_first_step(
            step, status, pod, reservation=reservation, replacement=replacement, node_pods=node_pods
        )

    # Running, EvictDirectly.
    eviction = condition(status, CONDITION_EVICTION)
    done = f'Pod "{key}" has been evicted'
    if eviction is not None and eviction.get("status") == "True":
        return _succeed(status, done, now)
    gone = pod is None or (bool(recorded_uid) and pod.uid != recorded_uid)
    if gone:
        if eviction is None:
            return finish_failed(status, REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"')
        return _succeed(status, done, now)
    assert pod is not None
    return evict_step(step, status, pod)


def _succeed(status: Mapping[str, Any], message: str, now: float) -> Finish:
    new = with_condition(status, CONDITION_EVICTION, "True", reason=REASON_EVICT_COMPLETE, message=message, now=now)
    new.update(phase=SUCCEEDED, status=STATUS_COMPLETE, reason="", message=message)
    return Finish(new, (JobEvent("Normal", STATUS_COMPLETE, message),))


def after_eviction_error(
    job: Mapping[str, Any],
    code: int,
    detail: str,
    failures: int,
    now: float,
    *,
    evictor: EvictorName = "Eviction",
    settings: LifecycleSettings | None = None,
    reservation: Mapping[str, Any] | None = None,
) -> Wait | Finish:
    """The eviction call failed with HTTP ``code`` (429: a PodDisruptionBudget forbids it now).

    Retried after :func:`~koordpy.descheduler.ratelimit.eviction_retry_delay` (``failures`` counts this one) until the
    ttl ends the job; never turned into a delete. The Eviction condition stays False with reason ``FailedEvict``; its
    Warning Event is posted when the message changes (a budget answering 429 forty times is one Event).

    403 is not retried: the manager's ServiceAccount may not use ``evictor`` (the chart grants
    ``pods/eviction`` only, so ``Delete`` and ``SoftEviction`` need a ClusterRole of the user's), and
    waiting until the ttl would not change that. The job fails at once, reason ``FailedEvict``, with a
    message naming the missing permission; its Reservation ``reservation`` (as read) is deleted when it
    is the job's (``settings`` gives the default mode).
    """
    spec = job.get("spec") or {}
    ref = spec.get("podRef") or {}
    key = f"{ref.get('namespace')}/{ref.get('name')}"
    old = condition(job.get("status") or {}, CONDITION_EVICTION)
    if code == 403:
        verb = EVICTOR_VERBS.get(evictor, evictor)
        message = (
            f'Failed evict Pod "{key}" caused by {code}: the manager may not {verb} with evictor {evictor} '
            f"({detail}); grant it to the manager's ServiceAccount or choose another evictor "
            f"(label {LABEL_EVICT_POLICY}, evictionPolicy)"
        )
        status = with_condition(
            job.get("status") or {}, CONDITION_EVICTION, "False", reason=REASON_FAILED_EVICT, message=message, now=now
        )
        mode = spec.get("mode") or (settings.default_job_mode if settings is not None else "ReservationFirst")
        ours = owned(job, reservation) if mode != "EvictDirectly" else None
        return finish_failed(status, REASON_FAILED_EVICT, message, ours)
    message = f'Failed evict Pod "{key}" caused by {code}: {detail}'
    status = with_condition(
        job.get("status") or {}, CONDITION_EVICTION, "False", reason=REASON_FAILED_EVICT, message=message, now=now
    )
    repeated = old is not None and old.get("reason") == REASON_FAILED_EVICT and old.get("message") == message
    events = () if repeated else (JobEvent("Warning", REASON_EVICTING, message),)
    return Wait(eviction_retry_delay(failures), status, events)


def after_reservation_error(job: Mapping[str, Any], code: int, detail: str, failures: int, now: float) -> Wait | Finish:
    """Creating the job's Reservation failed with HTTP ``code``.

    429 and 5xx are retried after :func:`~koordpy.descheduler.ratelimit.eviction_retry_delay` until the ttl; any other
    refusal (403 without RBAC, 404 when the Reservation CRD is not installed, 422 invalid) fails the job with
    condition ``ReservationCreated`` False, reason ``FailedCreateReservation``, as upstream's message.
    """
    message = f"Failed to create Reservation caused by {code}: {detail}"
    status = with_condition(
        job.get("status") or {},
        CONDITION_RESERVATION_CREATED,
        "False",
        reason=REASON_FAILED_CREATE_RESERVATION,
        message=message,
        now=now,
    )
    if code == 429 or code >= 500:
        return Wait(
            eviction_retry_delay(failures), status, (JobEvent("Warning", REASON_FAILED_CREATE_RESERVATION, message),)
        )
    return finish_failed(status, REASON_FAILED_CREATE_RESERVATION, message)
