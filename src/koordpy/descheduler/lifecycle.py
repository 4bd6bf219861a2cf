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
  ``WaitForBoundPodReady``), which Koordinator added after v1.4 (#1022); a Reservation stuck Pending
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

Gangs: jobs that passed arbitration together (a gang that moves as one, see
:mod:`koordpy.descheduler.arbitration`) carry the annotation ``koordpy.io/gang-migration`` naming the gang
and the jobs (:func:`gang_migration`). Such a job is not held by ``objectLimiters.workload`` (its unit
passed the limiter's arbitration filter as one disruption of the workload; its eviction is still recorded),
and in ``ReservationFirst`` it evicts only once every job of its unit has its Reservation Available or
has evicted already (condition ``Waiting``, reason ``WaitForGang``; :func:`gang_eviction_barrier`); a job of the
unit that failed before its eviction fails the others that have not evicted (``ForbiddenMigratePod``).

Not guaranteed: the adapter's writes may lose a race with another writer; the next decision on the
re-read job corrects course. Rate limiters live in memory and start full after a restart. Preemption
for a Reservation (``preemptionOptions``) is not built, nor upstream's path for a pod not yet scheduled
(it is reserved for without a node exclusion and evicted like any other).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
    template_problem,
)
from koordpy.model.durations import DurationError, format_rfc3339, parse_duration, parse_rfc3339
from koordpy.model.names import dns1123_label_problem, dns1123_subdomain_problem
from koordpy.model.objects import PodInfo

__all__ = [
    "ANNOTATION_GANG_MIGRATION",
    "ANNOTATION_PASSED_ARBITRATION",
    "ANNOTATION_SOFT_EVICTION",
    "CONDITION_INVALID",
    "CONDITION_WAITING",
    "EVICTOR_VERBS",
    "LABEL_EVICT_POLICY",
    "Decision",
    "Evict",
    "EvictorName",
    "Finish",
    "GangEvictionBarrier",
    "GangMigration",
    "Ignore",
    "JobEvent",
    "JobFacts",
    "LifecycleSettings",
    "ObjectLimiter",
    "PodView",
    "Reserve",
    "Scavenge",
    "Start",
    "TokenBucket",
    "Wait",
    "after_eviction_error",
    "after_reservation_error",
    "arbitration_wait",
    "bound_for",
    "decide",
    "eviction_retry_delay",
    "examine",
    "gang_eviction_barrier",
    "gang_migration",
    "gang_migration_value",
    "needs_node_pods",
    "needs_pod",
    "reservation_lookup",
    "select_evictor",
]

ANNOTATION_PASSED_ARBITRATION = "descheduler.koordinator.sh/passed-arbitration"
ANNOTATION_GANG_MIGRATION = "koordpy.io/gang-migration"
"""On jobs that passed arbitration together: JSON ``{"gang": <gang or GangGroup>, "jobs": [<job names>]}``."""
ANNOTATION_SOFT_EVICTION = "scheduling.koordinator.sh/soft-eviction"
ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
LABEL_EVICT_POLICY = "koordinator.sh/evict-policy"

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

REQUEUE_SECONDS = 3.0
"""Upstream ``defaultRequeueAfter``: how soon a waiting job is looked at again."""
SCAVENGE_AFTER_TTL_SECONDS = 300.0
SCAVENGE_WITHOUT_TTL_SECONDS = 1800.0
RETRY_BASE_SECONDS = 1.0
RETRY_CAP_SECONDS = 30.0

EvictorName = Literal["Eviction", "Delete", "SoftEviction"]
EVICTORS: tuple[EvictorName, ...] = ("Eviction", "Delete", "SoftEviction")


@dataclass(frozen=True)
class LifecycleSettings:
    """The ``migrationController`` fields the lifecycle reads (upstream defaults)."""

    default_job_mode: Literal["ReservationFirst", "EvictDirectly"] = "ReservationFirst"
    default_job_ttl_seconds: float = 300.0
    eviction_policy: EvictorName = "Eviction"
    default_delete_options: Mapping[str, Any] | None = None
    arbitration_enabled: bool = True


@dataclass(frozen=True)
class PodView:
    """What the lifecycle needs of the referenced pod (absent pod: ``None``)."""

    namespace: str
    name: str
    uid: str
    node_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    """``metadata.deletionTimestamp`` is set."""
    ready: bool = False
    """Condition Ready is True and the pod is not terminated."""
    obj: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The pod object as read (a ``ReservationFirst`` Reservation's template is built from it)."""

    @classmethod
    def from_object(cls, pod: Mapping[str, Any]) -> PodView:
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        ready = status.get("phase") not in ("Succeeded", "Failed") and any(
            isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            node_name=str((pod.get("spec") or {}).get("nodeName") or ""),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            deleting=meta.get("deletionTimestamp") is not None,
            ready=ready,
            obj=pod,
        )


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
    ``SoftEviction``: set ``soft_eviction`` as the pod annotation ``scheduling.koordinator.sh/soft-eviction``.
    On failure call :func:`after_eviction_error`; on success emit ``events`` and record the eviction in
    the object limiter (``ObjectLimiter.record(workload, ...)``), as upstream tracks only evicted pods.
    The ``evictQPS`` token this decision was taken with is already consumed (client-go ``TryAccept``).
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
    the job's. On another refused create call :func:`after_reservation_error`.
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


@dataclass(frozen=True)
class GangMigration:
    """A job's ``koordpy.io/gang-migration`` annotation: the jobs it passed arbitration with."""

    gang: str
    """The gang or GangGroup, as arbitration names it (``gang ns/name``, ``GangGroup [a,b]``)."""
    jobs: tuple[str, ...]
    """Every job of the unit, this one included."""


def gang_migration_value(gang: str, jobs: Sequence[str]) -> str:
    """The annotation's value for the jobs of one unit."""
    return json.dumps({"gang": gang, "jobs": sorted(jobs)}, sort_keys=True, separators=(",", ":"))


def gang_migration(job: Mapping[str, Any]) -> GangMigration | None:
    """The job's unit, None without the annotation (or with one that does not parse: the job then moves
    as any other)."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_GANG_MIGRATION)
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, Mapping):
        return None
    gang, jobs = value.get("gang"), value.get("jobs")
    if not isinstance(gang, str) or not isinstance(jobs, list) or not all(isinstance(j, str) for j in jobs):
        return None
    return GangMigration(gang, tuple(jobs))


@dataclass(frozen=True)
class GangEvictionBarrier:
    """Whether a ``ReservationFirst`` job of a gang unit may evict now (:func:`gang_eviction_barrier`)."""

    state: Literal["go", "wait", "broken"]
    message: str = ""


def gang_eviction_barrier(
    job: Mapping[str, Any],
    unit: GangMigration,
    jobs: Mapping[str, Mapping[str, Any] | None],
    reservations: Mapping[str, Mapping[str, Any]],
    *,
    now: float,
    settings: LifecycleSettings,
) -> GangEvictionBarrier:
    """``go`` when every other job of ``unit`` has evicted (condition ``Eviction`` present), finished
    Succeeded, runs ``EvictDirectly``, or has its Reservation Available; ``broken`` when one is gone, or
    Failed or Aborted before its eviction; else ``wait``. ``jobs``: the unit's jobs by name as read now
    (None: not found); ``reservations``: by name."""
    own = str((job.get("metadata") or {}).get("name") or "")
    waiting: list[str] = []
    for name in unit.jobs:
        if name == own:
            continue
        other = jobs.get(name)
        if other is None:
            return GangEvictionBarrier("broken", f"{unit.gang} moves as one, and its job {name} is gone")
        status = other.get("status") or {}
        phase = status.get("phase") or PENDING
        if _condition(status, CONDITION_EVICTION) is not None or phase == SUCCEEDED:
            continue
        if phase not in (PENDING, RUNNING):
            why = status.get("reason") or phase
            return GangEvictionBarrier(
                "broken", f"{unit.gang} moves as one, and its job {name} ended {why} before its eviction"
            )
        mode = (other.get("spec") or {}).get("mode") or settings.default_job_mode
        if phase == RUNNING and mode == "EvictDirectly":
            continue
        found = reservations.get(reservation_name(other)) if phase == RUNNING else None
        if found is not None and not foreign(other, found):
            state = read_reservation(found, now)
            if state.placed and state.phase == "Available":
                continue
        waiting.append(name)
    if not waiting:
        return GangEvictionBarrier("go")
    return GangEvictionBarrier(
        "wait",
        f"{unit.gang} moves as one: its member is evicted once the Reservations of jobs "
        f"{', '.join(waiting)} are Available",
    )


class TokenBucket:
    """client-go's ``NewTokenBucketRateLimiter(qps, burst)`` with ``TryAccept``; time is an argument.

    Starts full. Not guaranteed: fairness between callers.
    """

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._tokens = float(self.burst)
        self._at: float | None = None

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        if self._at is None or now > self._at:
            self._at = now

    def available(self, now: float) -> bool:
        """Whether one token is there now (without taking it)."""
        self._refill(now)
        return self._tokens >= 1.0

    def full(self, now: float) -> bool:
        """Whether the bucket holds ``burst`` tokens at ``now`` (as it starts)."""
        self._refill(now)
        return self._tokens >= float(self.burst)

    def try_accept(self, now: float) -> bool:
        """Take one token if there is one."""
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class ObjectLimiter:
    """Upstream ``objectLimiters.workload``: per workload, at most ``max_migrating`` evictions per
    ``duration`` (token bucket, rate max_migrating/duration, burst ``burst``). Keys are workload UIDs.

    ``max_migrating`` per workload comes from the caller (the arbitration's per-workload rule).
    :meth:`prune` drops the buckets that have refilled (a full bucket allows what a new one would), so the
    buckets of workloads that went away do not stay.
    """

    def __init__(self, duration_seconds: float, burst: int = 1) -> None:
        self.duration = float(duration_seconds)
        self.burst = max(1, int(burst))
        self._buckets: dict[str, TokenBucket] = {}

    def _bucket(self, workload: str, max_migrating: int) -> TokenBucket:
        qps = max(1, max_migrating) / self.duration if self.duration > 0 else float("inf")
        bucket = self._buckets.get(workload)
        if bucket is None or bucket.qps != qps:
            old = bucket
            bucket = TokenBucket(qps, self.burst)
            if old is not None:
                bucket._tokens, bucket._at = min(old._tokens, float(self.burst)), old._at
            self._buckets[workload] = bucket
        return bucket

    def allows(self, workload: str, max_migrating: int, now: float) -> bool:
        if self.duration <= 0:
            return True
        return self._bucket(workload, max_migrating).available(now)

    def record(self, workload: str, max_migrating: int, now: float) -> None:
        """Count one eviction of a pod of ``workload``."""
        if self.duration > 0:
            self._bucket(workload, max_migrating).try_accept(now)

    def forget(self, workload: str) -> None:
        self._buckets.pop(workload, None)

    def prune(self, now: float) -> None:
        """Drop every bucket that is full again at ``now``: the workload is then as free as one never seen."""
        full = [key for key, bucket in self._buckets.items() if bucket.full(now)]
        for key in full:
            del self._buckets[key]


def eviction_retry_delay(failures: int) -> float:
    """Backoff after ``failures`` failed evictions in a row: 1 s, 2 s, 4 s, ... capped at 30 s."""
    exponent = max(0, min(failures - 1, 16))
    return float(min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2**exponent))


def select_evictor(pod: PodView | None, job: Mapping[str, Any], settings: LifecycleSettings) -> EvictorName:
    """Pod label ``koordinator.sh/evict-policy``, then the job's, then ``evictionPolicy``.

    An unknown label value is skipped (the next source decides), never turned into ``Delete``.
    """
    job_labels = (job.get("metadata") or {}).get("labels") or {}
    for labels in ((pod.labels if pod is not None else {}), job_labels):
        value = labels.get(LABEL_EVICT_POLICY)
        if value in EVICTORS:
            return value
    return settings.eviction_policy


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _with_condition(
    status: Mapping[str, Any], kind: str, state: str, *, reason: str, message: str, now: float
) -> dict[str, Any]:
    """Upstream ``updateCondition``: replace the condition of ``kind`` and mirror it in status/reason/message."""
    stamp = format_rfc3339(now)
    old = _condition(status, kind)
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


def _fail(status: Mapping[str, Any], reason: str, message: str, reservation: OwnedReservation | None = None) -> Finish:
    new = dict(status)
    new.update(phase=FAILED, reason=reason, message=message)
    return Finish(new, (JobEvent("Warning", reason, message),), reservation)


def _ttl_seconds(spec: Mapping[str, Any], settings: LifecycleSettings) -> float:
    raw = spec.get("ttl")
    if raw in (None, ""):
        return settings.default_job_ttl_seconds
    try:
        return parse_duration(raw)
    except DurationError:
        return settings.default_job_ttl_seconds


def _created(job: Mapping[str, Any]) -> float | None:
    raw = (job.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(raw, str):
        return None
    try:
        return parse_rfc3339(raw)
    except DurationError:
        return None


Stage = Literal["waiting", "active", "finished", "deleting", "invalid"]
_MODES = (None, "", "ReservationFirst", "EvictDirectly")


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a round needs to know of one PodMigrationJob without deciding its next step (:func:`examine`).

    ``stage``: ``waiting`` (Pending, arbitration decides on it), ``active`` (:func:`decide` takes its next
    step: Running, or Pending once passed or with arbitration off, paused ones included), ``finished``
    (Succeeded, Failed, Aborted or a phase koordpy does not know: only the scavenger looks at it),
    ``deleting`` (Pending, not passed, being deleted: nothing to do), ``invalid`` (cannot be processed:
    :attr:`problem` says why, :attr:`reason` is the terminal reason to report).
    """

    name: str
    stage: Stage
    phase: str
    deadline: float | None = None
    """When the job fails with ``Timeout`` (creation + ttl), None without a ttl or creation time."""
    scavenge_at: float | None = None
    """When a finished job is deleted (creation + ttl + 5 minutes, or + 30 minutes without a ttl)."""
    reason: str = ""
    problem: str = ""


def _spec_problem(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, problem) of a spec the lifecycle cannot work with, or None. Names are checked as the API
    server checks them, before any of them reaches a request path."""
    ref = spec.get("podRef")
    if ref is None:
        return REASON_INVALID_POD_REF, "spec.podRef: required"
    if not isinstance(ref, Mapping):
        return REASON_INVALID_POD_REF, "spec.podRef: expected an object"
    problem = dns1123_label_problem(ref.get("namespace"))
    if problem is not None:
        return REASON_INVALID_POD_REF, f"spec.podRef.namespace: {problem}"
    problem = dns1123_subdomain_problem(ref.get("name"))
    if problem is not None:
        return REASON_INVALID_POD_REF, f"spec.podRef.name: {problem}"
    ttl = spec.get("ttl")
    if ttl not in (None, ""):
        if not isinstance(ttl, str):
            return REASON_INVALID_SPEC, "spec.ttl: expected a duration string such as 5m"
        try:
            if parse_duration(ttl) < 0:
                return REASON_INVALID_SPEC, f"spec.ttl: {ttl[:40]!r} is negative"
        except DurationError as exc:
            return REASON_INVALID_SPEC, f"spec.ttl: {exc}"
    if spec.get("mode") not in _MODES:
        return (
            REASON_INVALID_SPEC,
            f"spec.mode: {str(spec.get('mode'))[:40]!r} is not ReservationFirst or EvictDirectly",
        )
    options = spec.get("reservationOptions")
    if options is not None:
        if not isinstance(options, Mapping):
            return REASON_INVALID_SPEC, "spec.reservationOptions: expected an object"
        res_ref = options.get("reservationRef")
        if res_ref is not None:
            if not isinstance(res_ref, Mapping):
                return REASON_INVALID_SPEC, "spec.reservationOptions.reservationRef: expected an object"
            problem = dns1123_subdomain_problem(res_ref.get("name"))
            if problem is not None:
                return REASON_INVALID_SPEC, f"spec.reservationOptions.reservationRef.name: {problem}"
        template = options.get("template")
        if template is not None and not isinstance(template, Mapping):
            return REASON_INVALID_SPEC, "spec.reservationOptions.template: expected an object"
        meta = (template or {}).get("metadata")
        if meta is not None and not isinstance(meta, Mapping):
            return REASON_INVALID_SPEC, "spec.reservationOptions.template.metadata: expected an object"
        if (meta or {}).get("name") not in (None, ""):
            problem = dns1123_subdomain_problem((meta or {}).get("name"))
            if problem is not None:
                return REASON_INVALID_SPEC, f"spec.reservationOptions.template.metadata.name: {problem}"
    if spec.get("deleteOptions") is not None and not isinstance(spec.get("deleteOptions"), Mapping):
        return REASON_INVALID_SPEC, "spec.deleteOptions: expected an object"
    return None


def examine(job: Mapping[str, Any], settings: LifecycleSettings) -> JobFacts:
    """Classify ``job`` (a PodMigrationJob object as read): its stage, deadline and scavenge time.

    An unfinished job whose spec is not an object, whose ``spec.podRef`` is missing or names a pod the API
    server could not hold (``web-1/status``, 9,000 characters), whose ttl is not a Go duration (``1e99h``)
    or whose status is not an object is ``invalid``: :func:`decide` fails it once, with ``reason``.
    """
    raw_meta = job.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    name = str(meta.get("name") or "")
    raw_status = job.get("status")
    status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    phase = str(status.get("phase") or PENDING)
    created = _created(job)
    raw_spec = job.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    ttl = _ttl_seconds(spec, settings)
    if phase not in (PENDING, RUNNING):
        wait = ttl + SCAVENGE_AFTER_TTL_SECONDS if ttl > 0 else SCAVENGE_WITHOUT_TTL_SECONDS
        return JobFacts(name, "finished", phase, scavenge_at=created + wait if created is not None else None)
    if raw_status is not None and not isinstance(raw_status, Mapping):
        return JobFacts(name, "invalid", phase, reason=REASON_INVALID_SPEC, problem="status: expected an object")
    if not isinstance(status.get("conditions") or [], list):
        return JobFacts(
            name, "invalid", phase, reason=REASON_INVALID_SPEC, problem="status.conditions: expected a list"
        )
    if not isinstance(raw_spec, Mapping):
        return JobFacts(name, "invalid", phase, reason=REASON_INVALID_SPEC, problem="spec: expected an object")
    found = _spec_problem(spec)
    if found is not None:
        return JobFacts(name, "invalid", phase, reason=found[0], problem=found[1])
    problem = template_problem(job, ttl)
    if problem is not None:
        return JobFacts(name, "invalid", phase, reason=REASON_INVALID_SPEC, problem=problem)
    deadline = created + ttl if created is not None and ttl > 0 else None
    passed = (meta.get("annotations") or {}).get(ANNOTATION_PASSED_ARBITRATION) == "true"
    if phase == PENDING and settings.arbitration_enabled and not passed:
        stage: Stage = "deleting" if meta.get("deletionTimestamp") else "waiting"
        return JobFacts(name, stage, phase, deadline=deadline)
    return JobFacts(name, "active", phase, deadline=deadline)


def arbitration_wait(
    status: Mapping[str, Any], filter_name: str, message: str, now: float
) -> tuple[dict[str, Any], JobEvent] | None:
    """A waiting job that arbitration requeued: its status with condition ``Waiting`` True, reason the
    filter's name (``MaxMigratingPerNode``, ``ObjectLimiter``, ...), and the Event to post; None when the
    condition already names that filter (a count in the message that moved is not worth a write)."""
    old = _condition(status, CONDITION_WAITING)
    if old is not None and old.get("status") == "True" and old.get("reason") == filter_name:
        return None
    new = _with_condition(status, CONDITION_WAITING, "True", reason=filter_name, message=message, now=now)
    return new, JobEvent("Normal", filter_name, message)


def _end_wait(status: dict[str, Any], now: float) -> dict[str, Any]:
    """``status`` with condition ``Waiting`` turned False when it was True (the job moves on); the status'
    own reason and message are left to the step that follows."""
    old = _condition(status, CONDITION_WAITING)
    if old is None or old.get("status") != "True":
        return status
    stamp = format_rfc3339(now)
    done = {**old, "status": "False", "reason": "", "message": "", "lastProbeTime": stamp, "lastTransitionTime": stamp}
    new = dict(status)
    new["conditions"] = [done if c is old else c for c in status.get("conditions") or ()]
    return new


def _named_wait(
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
    new, more = _put_condition(status, CONDITION_WAITING, "True", reason=reason, message=message, now=now)
    if more:
        events = (*events, JobEvent("Normal", reason, message))
    return Wait(after, new if changed or more else None, events)


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


def needs_node_pods(job: Mapping[str, Any], reservation: Mapping[str, Any] | None) -> str | None:
    """The node whose pods :func:`decide` needs (for the ledger): the evicted job's Reservation node
    while no bound pod is known from the job or ``status.currentOwners``; else None."""
    status = job.get("status") or {}
    if (
        reservation is None
        or _condition(status, CONDITION_EVICTION) is None
        or (status.get("podRef") or {}).get("name")
    ):
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


def _put_condition(
    status: Mapping[str, Any], kind: str, state: str, *, reason: str, message: str, now: float
) -> tuple[dict[str, Any], bool]:
    """Upstream ``updateCondition``: unchanged (False) when the condition already says the same."""
    old = _condition(status, kind)
    if old is not None and (old.get("status"), old.get("reason") or "", old.get("message") or "") == (
        state,
        reason,
        message,
    ):
        return dict(status), False
    return _with_condition(status, kind, state, reason=reason, message=message, now=now), True


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
    ``evictQPS``/``evictBurst`` bucket and ``object_limiter`` the per-workload limiter for ``workload``
    (the pod's owning workload UID, shown as ``workload_name`` in messages); an :class:`Evict` decision has
    consumed one ``evictQPS`` token and checked (not consumed) the workload's. A job held back by either
    gets condition ``Waiting`` True naming it (:data:`CONDITION_WAITING`), written with an Event only when
    it changes; the condition turns False when the job moves on.

    ``ReservationFirst`` only: ``reservation`` is the object named by :func:`reservation_lookup` (None:
    not found), ``node_pods`` the pods on its node (for the ledger, when ``status.currentOwners`` is
    still empty) and ``replacement`` the pod that bound it (see :func:`bound_pod`), as read now; ``gang``
    the :func:`gang_eviction_barrier` of a job of a gang unit (None: evict as any job).
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
        status = _with_condition(status, CONDITION_INVALID, "True", reason=facts.reason, message=facts.problem, now=now)
        return _fail(status, facts.reason, facts.problem)
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    phase = facts.phase
    created = _created(job)
    ttl = _ttl_seconds(spec, settings)
    if spec.get("paused"):
        message = "spec.paused is true: the job waits until it is unpaused"
        wait = _named_wait(status, REASON_PAUSED, message, now)
        return wait if wait.status is not None else Ignore("paused")
    mode = spec.get("mode") or settings.default_job_mode
    ours = owned(job, reservation) if mode != "EvictDirectly" else None
    if ttl > 0 and created is not None and now - created >= ttl:
        return _fail(status, REASON_TIMEOUT, "Abort job caused by timeout", ours if phase == RUNNING else None)
    annotations = meta.get("annotations") or {}
    if phase == PENDING and settings.arbitration_enabled and annotations.get(ANNOTATION_PASSED_ARBITRATION) != "true":
        return Ignore("waiting for arbitration")

    pod_ref = spec.get("podRef") or {}
    namespace, name = pod_ref.get("namespace"), pod_ref.get("name")
    key = f"{namespace}/{name}"
    recorded_uid = pod_ref.get("uid") or ""

    if phase == PENDING:
        if pod is None or (recorded_uid and pod.uid != recorded_uid):
            return _fail(status, REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"')
        new = _end_wait(dict(status), now)
        new["phase"] = RUNNING
        return Start(pod.uid, new, (JobEvent("Normal", RUNNING, f'Start migrating Pod "{key}"'),))

    step = _Step(
        job, key, now, settings, evict_tokens, workload, workload_max_migrating, object_limiter, workload_name, gang
    )
    if mode != "EvictDirectly":
        return _reservation_first(
            step, status, pod, reservation=reservation, replacement=replacement, node_pods=node_pods
        )

    # Running, EvictDirectly.
    eviction = _condition(status, CONDITION_EVICTION)
    done = f'Pod "{key}" has been evicted'
    if eviction is not None and eviction.get("status") == "True":
        return _succeed(status, done, now)
    gone = pod is None or (bool(recorded_uid) and pod.uid != recorded_uid)
    if gone:
        if eviction is None:
            return _fail(status, REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"')
        return _succeed(status, done, now)
    assert pod is not None
    return _evict_step(step, status, pod)


@dataclass(frozen=True)
class _Step:
    """What one :func:`decide` call on a Running job works with."""

    job: Mapping[str, Any]
    key: str
    now: float
    settings: LifecycleSettings
    evict_tokens: TokenBucket | None
    workload: str | None
    workload_max_migrating: int
    object_limiter: ObjectLimiter | None
    workload_name: str = ""
    gang: GangEvictionBarrier | None = None


def _evict_step(
    step: _Step,
    status: dict[str, Any],
    pod: PodView,
    *,
    changed: bool = False,
    events: tuple[JobEvent, ...] = (),
) -> Evict | Wait:
    """Evict ``pod`` (present, with the recorded UID) unless it is already being evicted or a limit
    says wait. ``status`` (``changed``: differs from the job's) and ``events`` go with the decision."""
    job, key, now, settings = step.job, step.key, step.now, step.settings
    spec = job.get("spec") or {}
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    eviction = _condition(status, CONDITION_EVICTION)
    evictor = select_evictor(pod, job, settings)
    already = pod.deleting or (evictor == "SoftEviction" and ANNOTATION_SOFT_EVICTION in pod.annotations)
    if already:
        if eviction is None:  # evicted by us before a crash, or by someone else: record it, keep waiting
            message = f'Pod "{key}" is being evicted'
            new = _with_condition(status, CONDITION_EVICTION, "False", reason=REASON_EVICTING, message=message, now=now)
            return Wait(REQUEUE_SECONDS, new, events)
        return Wait(REQUEUE_SECONDS, status if changed else None, events)
    workload, limiter = step.workload, step.object_limiter
    if gang_migration(job) is not None:
        limiter = None  # the unit passed the limiter's filter as one disruption of its workload
    if limiter is not None and workload is not None and not limiter.allows(workload, step.workload_max_migrating, now):
        message = (
            f"objectLimiters.workload: {step.workload_name or workload} may lose "
            f"{step.workload_max_migrating} pod(s) to eviction per {limiter.duration:g}s; "
            f'Pod "{key}" is evicted at its next turn'
        )
        return _named_wait(status, REASON_OBJECT_LIMITER, message, now, changed=changed, events=events)
    if step.evict_tokens is not None and not step.evict_tokens.try_accept(now):
        tokens = step.evict_tokens
        message = f'evictQPS {tokens.qps:g} (evictBurst {tokens.burst}): Pod "{key}" waits for its turn to be evicted'
        # looked at again once the next token is due, not after the 3 s requeue: jobs that all missed a
        # token together would otherwise come back together and share one token per 3 s
        return _named_wait(
            status, REASON_EVICT_QPS, message, now, changed=changed, events=events, after=1.0 / tokens.qps
        )
    status = _end_wait(status, now)
    delete_options = spec.get("deleteOptions")
    if delete_options is None and settings.default_delete_options is not None:
        delete_options = dict(settings.default_delete_options)
    reason = annotations.get(ANNOTATION_EVICT_REASON, "")
    message = f'Pod "{key}" evicted from node "{pod.node_name}" by the reason "{reason}"'
    new = _with_condition(status, CONDITION_EVICTION, "False", reason=REASON_EVICTING, message=message, now=now)
    soft = None
    if evictor == "SoftEviction":
        soft = json.dumps(
            {
                "timestamp": format_rfc3339(now),
                "deleteOptions": delete_options,
                "initiator": "koordpy-manager",
                "reason": reason,
            },
            sort_keys=True,
        )
    return Evict(
        evictor=evictor,
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        delete_options=dict(delete_options) if delete_options is not None else None,
        status=new,
        soft_eviction=soft,
        workload=workload,
        max_migrating=step.workload_max_migrating,
        events=(*events, JobEvent("Normal", REASON_EVICTING, message)),
    )


def _reservation_first(
    step: _Step,
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
        return _fail(at, reason, message, ours)

    if foreign(job, reservation):
        assert reservation is not None
        marker = ((reservation.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_MIGRATION_JOB)
        message = (
            f'Reservation "{res_name}" exists and was not created by this job (annotation '
            f"{ANNOTATION_MIGRATION_JOB} is {str(marker)[:120]!r}, not {job_marker(job)!r}): it is left as it is"
        )
        failed = _with_condition(
            status,
            CONDITION_RESERVATION_CREATED,
            "False",
            reason=REASON_FAILED_CREATE_RESERVATION,
            message=message,
            now=now,
        )
        return _fail(failed, REASON_FAILED_CREATE_RESERVATION, message)

    eviction = _condition(status, CONDITION_EVICTION)
    evicted = eviction is not None and eviction.get("status") == "True"
    gone = pod is None or (bool(recorded_uid) and pod.uid != recorded_uid)
    events: tuple[JobEvent, ...] = ()
    changed = False

    if not evicted and gone:
        if eviction is None:
            return fail(REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"')
        message = f'Pod "{key}" has been evicted'
        status = _with_condition(
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
        status, more = _put_condition(
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
    status, more = _put_condition(status, CONDITION_POD_BOUND_RESERVATION, "True", reason="", message=message, now=now)
    changed = changed or more
    same = replacement is not None and (not bound.uid or replacement.uid == bound.uid)
    if not (same and replacement is not None and replacement.ready):
        status, more = _put_condition(
            status,
            CONDITION_BOUND_POD_READY,
            "False",
            reason=REASON_WAIT_FOR_BOUND_POD_READY,
            message=f'Waiting for Pod "{bound.key}" to be Ready',
            now=now,
        )
        return Wait(REQUEUE_SECONDS, status if changed or more else None, events)
    status, _ = _put_condition(status, CONDITION_BOUND_POD_READY, "True", reason="", message=message, now=now)
    status.update(phase=SUCCEEDED, status=STATUS_COMPLETE, reason="", message=message)
    return Finish(status, (*events, JobEvent("Normal", STATUS_COMPLETE, message)))


def _before_eviction(
    step: _Step,
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
        return _fail(status, reason, message, ours)

    created_message = f'Successfully create Reservation "{res_name}"'
    ref = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation", "name": res_name}
    if reservation is None:
        if reservation_ref(job) is not None:
            return fail(REASON_MISSING_RESERVATION, f'Abort job caused by missing Reservation "{res_name}"')
        manifest = reservation_manifest(
            job, pod.obj or _minimal_pod(pod), _ttl_seconds(job.get("spec") or {}, step.settings)
        )
        if isinstance(manifest, str):
            failed = _with_condition(
                status,
                CONDITION_RESERVATION_CREATED,
                "False",
                reason=REASON_FAILED_CREATE_RESERVATION,
                message=manifest,
                now=now,
            )
            return _fail(failed, REASON_FAILED_CREATE_RESERVATION, manifest)
        new = _with_condition(
            status, CONDITION_RESERVATION_CREATED, "True", reason="", message=created_message, now=now
        )
        return Reserve(
            res_name,
            manifest,
            ref,
            new,
            (JobEvent("Normal", CONDITION_RESERVATION_CREATED, created_message),),
        )
    if reservation_ref(job) is None:  # ours (foreign ones failed above), created before a restart: adopt it
        new, _ = _put_condition(
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
    if state.phase == "Succeeded" and _condition(status, CONDITION_EVICTION) is None:
        return fail(REASON_FORBIDDEN_MIGRATE_POD, "Reservation is already bound by another Pod")
    if not state.placed:
        if state.unschedulable is None:
            message = f'Waiting for Reservation "{res_name}" to be scheduled'
            new, changed = _put_condition(
                status,
                CONDITION_RESERVATION_SCHEDULED,
                "False",
                reason=REASON_WAIT_FOR_RESERVATION_SCHEDULED,
                message=message,
                now=now,
            )
            told = (JobEvent("Normal", REASON_WAIT_FOR_RESERVATION_SCHEDULED, message),) if changed else ()
            return Wait(REQUEUE_SECONDS, new if changed else None, told)
        new, changed = _put_condition(
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
        status = _with_condition(status, CONDITION_RESERVATION_SCHEDULED, "True", reason="", message=message, now=now)
        status["nodeName"] = state.node_name
        events, changed = (JobEvent("Normal", CONDITION_RESERVATION_SCHEDULED, message),), True
    if state.phase != "Available":
        message = (
            f'Reservation "{res_name}" is {state.phase or "Pending"} on node "{state.node_name}": '
            f'Pod "{step.key}" is evicted once it is Available'
        )
        return _named_wait(status, REASON_WAIT_FOR_RESERVATION_AVAILABLE, message, now, changed=changed, events=events)
    barrier = step.gang
    if barrier is not None and barrier.state == "broken":
        return _fail(status, REASON_FORBIDDEN_MIGRATE_POD, barrier.message, ours)
    if barrier is not None and barrier.state == "wait":
        return _named_wait(status, REASON_WAIT_FOR_GANG, barrier.message, now, changed=changed, events=events)
    return _evict_step(step, status, pod, changed=changed, events=events)


def _minimal_pod(pod: PodView) -> dict[str, Any]:
    return {
        "metadata": {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "labels": dict(pod.labels)},
        "spec": {"nodeName": pod.node_name},
    }


def _succeed(status: Mapping[str, Any], message: str, now: float) -> Finish:
    new = _with_condition(status, CONDITION_EVICTION, "True", reason=REASON_EVICT_COMPLETE, message=message, now=now)
    new.update(phase=SUCCEEDED, status=STATUS_COMPLETE, reason="", message=message)
    return Finish(new, (JobEvent("Normal", STATUS_COMPLETE, message),))


EVICTOR_VERBS: Mapping[str, str] = {
    "Eviction": "create pods/eviction",
    "Delete": "delete pods",
    "SoftEviction": "patch pods",
}
"""The permission each evictor needs (the chart grants the first only)."""


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

    Retried after :func:`eviction_retry_delay` (``failures`` counts this one) until the ttl ends the job;
    never turned into a delete. The Eviction condition stays False with reason ``FailedEvict``; its
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
    old = _condition(job.get("status") or {}, CONDITION_EVICTION)
    if code == 403:
        verb = EVICTOR_VERBS.get(evictor, evictor)
        message = (
            f'Failed evict Pod "{key}" caused by {code}: the manager may not {verb} with evictor {evictor} '
            f"({detail}); grant it to the manager's ServiceAccount or choose another evictor "
            f"(label {LABEL_EVICT_POLICY}, evictionPolicy)"
        )
        status = _with_condition(
            job.get("status") or {}, CONDITION_EVICTION, "False", reason=REASON_FAILED_EVICT, message=message, now=now
        )
        mode = spec.get("mode") or (settings.default_job_mode if settings is not None else "ReservationFirst")
        ours = owned(job, reservation) if mode != "EvictDirectly" else None
        return _fail(status, REASON_FAILED_EVICT, message, ours)
    message = f'Failed evict Pod "{key}" caused by {code}: {detail}'
    status = _with_condition(
        job.get("status") or {}, CONDITION_EVICTION, "False", reason=REASON_FAILED_EVICT, message=message, now=now
    )
    repeated = old is not None and old.get("reason") == REASON_FAILED_EVICT and old.get("message") == message
    events = () if repeated else (JobEvent("Warning", REASON_EVICTING, message),)
    return Wait(eviction_retry_delay(failures), status, events)


def after_reservation_error(job: Mapping[str, Any], code: int, detail: str, failures: int, now: float) -> Wait | Finish:
    """Creating the job's Reservation failed with HTTP ``code``.

    429 and 5xx are retried after :func:`eviction_retry_delay` until the ttl; any other refusal (403
    without RBAC, 404 when the Reservation CRD is not installed, 422 invalid) fails the job with
    condition ``ReservationCreated`` False, reason ``FailedCreateReservation``, as upstream's message.
    """
    message = f"Failed to create Reservation caused by {code}: {detail}"
    status = _with_condition(
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
    return _fail(status, REASON_FAILED_CREATE_RESERVATION, message)
