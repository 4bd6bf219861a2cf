"""Carries out :mod:`koordpy.descheduler.lifecycle` decisions: one round over every PodMigrationJob.

A round reads the manager's caches (:mod:`koordpy.manager.cache`: the jobs, their pods, the
Reservations), never lists: :class:`JobIndex` keeps each job's stage from its watch events, so a round
costs nothing for a finished job (the scavenger's heap holds it until ``ttl + 5m``), arbitrates the
waiting ones (:mod:`koordpy.descheduler.arbitration`) and takes one lifecycle step for each active one.

The controller holds what must outlive one round (the ``evictQPS``/``evictBurst`` bucket, the
per-workload object limiter, the per-job retry times after a failed call, the owners read through the
API, ...) and writes only through a :class:`MigrationApi`; what a write returns is stored in the cache at
once, so the next round sees it. Decisions are taken without an ``await`` between reading the limiters
and consuming their tokens, so concurrent calls on one event loop cannot exceed a limit.

Errors are per job: a call that fails for one job (an API error, a timeout) is logged at most once a
minute per job and kind of error, counted in ``koordpy_migration_errors_total``, and that job is looked
at again after a backoff; the round goes on with the others. A job the lifecycle cannot process (no
``podRef``, a name the API server would refuse, a ttl that is not a duration) is failed once with
reason ``InvalidPodRef`` or ``InvalidSpec``, condition ``Invalid`` and one Warning Event, and is not
looked at again. Bookkeeping writes (those failures, scavenging, naming an arbitration wait) are
bounded per round (:data:`BOOKKEEPING_WRITES_PER_ROUND`), so 10,000 jobs that all start waiting do not
make one round of 10,000 writes.

``ReservationFirst`` jobs: a job's Reservation is created with the job's marker, recorded as the job's
``reservationRef``, read back from the cache, and deleted when the job fails, with its UID as a
precondition. A 409 on create records nothing: the job is looked at again once the cache shows the
Reservation of that name, which is adopted only when it carries the job's marker (a restarted manager
finding its own) and otherwise fails the job untouched. Every :data:`SWEEP_SECONDS` the round also
deletes the Reservations a migration created (by their marker) whose job is gone, Failed or Aborted
(:func:`~koordpy.descheduler.reservation_first.stale_reservations`).

Not guaranteed: limiter, retry and owner state live in memory and start fresh after a restart (jobs
themselves are adopted from their status, see the lifecycle module); an owner's replica count is read
again at most every :data:`OWNER_TTL_SECONDS`.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import GANG_FILTERS, Verdict, arbitrate
from koordpy.descheduler.decisions import (
    REQUEUE_SECONDS,
    Decision,
    Evict,
    Finish,
    Ignore,
    JobEvent,
    Reserve,
    Scavenge,
    Start,
    Wait,
)
from koordpy.descheduler.gang_migration import (
    ANNOTATION_GANG_MIGRATION,
    gang_eviction_barrier,
    gang_migration,
    gang_migration_value,
)
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION, JobFacts, examine
from koordpy.descheduler.lifecycle import (
    after_eviction_error,
    after_reservation_error,
    arbitration_wait,
    decide,
    reservation_lookup,
)
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings, PodView
from koordpy.descheduler.limits import workload_limit
from koordpy.descheduler.objects import (
    MigrationJob,
    MigrationObjectError,
    MigrationPod,
    Workload,
    pod_from_dict,
    resolve_workload,
    workload_from_dict,
)
from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket, eviction_retry_delay
from koordpy.descheduler.reservation_first import OwnedReservation, stale_reservations
from koordpy.descheduler.reservation_first_steps import bound_for, needs_node_pods
from koordpy.kube import errors as kube_errors
from koordpy.manager.cache import JobViews, ManagerCache, ObjectStore
from koordpy.manager.gangs import GangFeed
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import ObjectError, PodInfo
from koordpy.model.objects import pod_from_dict as pod_info_from_dict

__all__ = [
    "BOOKKEEPING_SECONDS_PER_ROUND",
    "BOOKKEEPING_WRITES_PER_ROUND",
    "OWNER_TTL_SECONDS",
    "Arbitrate",
    "EvictionRefusedError",
    "JobIndex",
    "MigrationApi",
    "MigrationController",
    "MigrationMetrics",
    "ReservationRefusedError",
    "WorkloadLimit",
    "controller_from_args",
    "make_arbitrate",
]


class EvictionRefusedError(Exception):
    """The API server refused an eviction (``code`` 429: a PodDisruptionBudget allows none now)."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class ReservationRefusedError(Exception):
    """The API server refused to create a Reservation (``code`` 409: it exists already)."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


SWEEP_SECONDS = 10.0
"""How often a round deletes the Reservations of gone, Failed or Aborted migrations."""
BOOKKEEPING_WRITES_PER_ROUND = 100
"""Writes per round for invalid jobs, scavenging and arbitration waits (each kind its own budget)."""
BOOKKEEPING_SECONDS_PER_ROUND = 0.25
"""...and no more of them once a round has spent this long (a slow API server stretches no round)."""
OWNER_READS_PER_ROUND = 100
"""Owner (ReplicaSet, Deployment, ...) reads per round; a waiting job whose owners are not read yet waits."""
OWNER_TTL_SECONDS = 30.0
"""How long an owner read through the API is reused (its replica count) before it is read again."""
ERROR_LOG_SECONDS = 60.0
"""One log line per job and kind of error in this many seconds (the counter counts every one)."""
JOB_RETRY_CAP_SECONDS = 60.0

Raw = dict[str, Any]


class MigrationApi(Protocol):
    """The calls the controller makes. Writes return the object as the API server stored it (stored in the
    cache at once). Implementations raise :class:`EvictionRefusedError` for a refused eviction, delete or
    annotation of the pod, :class:`ReservationRefusedError` for a refused Reservation create;
    :meth:`delete_reservation` (only while the Reservation has ``uid``: 409 otherwise) and :meth:`delete_job`
    ignore a missing object; other API errors propagate (:mod:`koordpy.kube.errors`)."""

    async def annotate_job(self, job: str, key: str, value: str) -> Raw: ...

    async def get_owner(self, namespace: str, ref: Mapping[str, Any]) -> Raw | None: ...

    async def set_pod_uid(self, job: str, uid: str) -> Raw: ...

    async def write_status(self, job: str, status: dict[str, Any]) -> Raw: ...

    async def delete_job(self, job: str) -> None: ...

    async def evict_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None: ...

    async def delete_pod(
        self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None
    ) -> Raw | None: ...

    async def annotate_pod(self, namespace: str, name: str, key: str, value: str) -> Raw: ...

    async def post_event(self, job: Mapping[str, Any], event: JobEvent) -> None: ...

    async def create_reservation(self, body: Mapping[str, Any]) -> Raw: ...

    async def delete_reservation(self, name: str, uid: str) -> None: ...

    async def set_reservation_ref(self, job: str, ref: Mapping[str, Any]) -> Raw: ...


Arbitrate = Callable[[Sequence[MigrationJob], float], Awaitable[Mapping[str, Verdict]]]
"""One arbitration round over the waiting and active jobs (the waiting ones are judged): verdicts by name."""


class MigrationMetrics:
    """Prometheus metrics of the migration rounds, on ``registry``."""

    PHASES = ("Pending", "Running", "Succeeded", "Failed", "Aborted")

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.jobs = Gauge(
            "koordpy_migration_jobs", "PodMigrationJobs by phase after the last round.", ["phase"], registry=registry
        )
        self.evictions = PromCounter(
            "koordpy_migration_evictions",
            "Evictor calls by evictor and outcome (evicted, refused).",
            ["evictor", "outcome"],
            registry=registry,
        )
        self.arbitration_seconds = Histogram(
            "koordpy_migration_arbitration_seconds",
            "Time of one arbitration call (reading pods and owners included).",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=registry,
        )
        self.round_seconds = Histogram(
            "koordpy_migration_round_seconds",
            "Time of one migration round (arbitration, writes and lifecycle steps).",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=registry,
        )
        self.last_round = Gauge(
            "koordpy_migration_last_round_seconds", "Time of the last migration round.", registry=registry
        )
        self.rounds = PromCounter(
            "koordpy_migration_rounds",
            "Migration rounds by outcome: done, or error (the round stopped on an error it did not expect).",
            ["outcome"],
            registry=registry,
        )
        self.errors = PromCounter(
            "koordpy_migration_errors",
            "Per-job failures by step (step, arbitration, owner, bookkeeping) and kind of error; the job is "
            "retried after a backoff, the round goes on.",
            ["step", "error"],
            registry=registry,
        )
        # zero series from the start: the first failed round counts in increase() (one born at 1 would not)
        for outcome in ("done", "error"):
            self.rounds.labels(outcome=outcome)
        self.observe_phases({})

        self.gang_units = PromCounter(
            "koordpy_migration_gang_units",
            "Gangs (or GangGroups) whose PodMigrationJobs passed arbitration together, in one round.",
            registry=registry,
        )
        self.gang_held = Gauge(
            "koordpy_migration_gang_held_jobs",
            "Waiting PodMigrationJobs the gang rule requeued in the last arbitration (GangBelowMinimum, "
            "GangDisruptionAll, GangMemberWaiting, GangUnknown).",
            registry=registry,
        )

    def observe_phases(self, phases: Mapping[str, int]) -> None:
        for phase in {*self.PHASES, *phases}:
            self.jobs.labels(phase=phase).set(phases.get(phase, 0))


@dataclass(frozen=True)
class WorkloadLimit:
    """The pod's owning workload (a UID), how many of its pods may migrate at once, and its display name."""

    uid: str
    max_migrating: int
    name: str = ""


def _controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
            return ref
    return None


def owner_workload(pod: Mapping[str, Any]) -> WorkloadLimit | None:
    """Fallback workload of a pod: its controller owner reference, one migration at a time."""
    ref = _controller_ref(pod)
    if ref is None:
        return None
    meta = pod.get("metadata") or {}
    return WorkloadLimit(str(ref["uid"]), 1, f"{ref.get('kind')} {meta.get('namespace')}/{ref.get('name')}")


def _phase_of(facts: JobFacts) -> str:
    return facts.phase if facts.phase else "Pending"


class JobIndex:
    """The PodMigrationJobs of a store by stage (:func:`~koordpy.descheduler.job_facts.examine` on every
    change), the arbitration value of each waiting or active one (read once per version), and a heap of
    the finished ones by scavenge time."""

    def __init__(self, store: ObjectStore, settings: LifecycleSettings, views: JobViews | None = None) -> None:
        self.store = store
        self.views = views if views is not None else JobViews(store)
        self.settings = settings
        self.facts: dict[str, JobFacts] = {}
        self.waiting: dict[str, None] = {}
        self.active: dict[str, None] = {}
        self.invalid: dict[str, None] = {}
        self.phases: Counter[str] = Counter()
        self._finished: list[tuple[float, str]] = []
        store.add_listener(self._changed)
        for key, obj in list(store.objects.items()):
            self._changed(key, None, obj)

    def _drop(self, name: str) -> None:
        old = self.facts.pop(name, None)
        if old is not None:
            self.phases[_phase_of(old)] -= 1
            if not self.phases[_phase_of(old)]:
                del self.phases[_phase_of(old)]
        self.waiting.pop(name, None)
        self.active.pop(name, None)
        self.invalid.pop(name, None)

    def _changed(self, name: str, old: Raw | None, new: Raw | None) -> None:
        self._drop(name)
        if new is None:
            return
        facts = examine(new, self.settings)
        self.facts[name] = facts
        self.phases[_phase_of(facts)] += 1
        if facts.stage == "waiting":
            self.waiting[name] = None
        elif facts.stage == "active":
            self.active[name] = None
        elif facts.stage == "invalid":
            self.invalid[name] = None
        elif facts.stage == "finished" and facts.scavenge_at is not None:
            heapq.heappush(self._finished, (facts.scavenge_at, name))

    def parsed(self, name: str) -> MigrationJob | None:
        """The typed view of job ``name`` (None when it cannot be read), converted once per stored version and
        shared with the other readers of the store (:class:`~koordpy.manager.cache.JobViews`)."""
        return self.views.get(name)

    def due_for_scavenge(self, now: float, limit: int) -> list[str]:
        """Up to ``limit`` finished jobs whose scavenge time has come (taken off the heap)."""
        out: list[str] = []
        heap = self._finished
        while heap and heap[0][0] <= now and len(out) < limit:
            at, name = heapq.heappop(heap)
            facts = self.facts.get(name)
            if facts is not None and facts.stage == "finished" and facts.scavenge_at == at:
                out.append(name)
        return out

    def requeue_scavenge(self, name: str, at: float) -> None:
        heapq.heappush(self._finished, (at, name))


@dataclass
class _OwnerEntry:
    expires: float
    workload: Workload | None
    parent: Mapping[str, Any] | None
    """The owner's own controller reference (to follow the chain), None at the top."""


class MigrationController:
    """Drives PodMigrationJobs through their lifecycle from the ``cache``. ``workload_of`` names a pod's
    workload and limit (default: the controller owner reference, limit 1); ``clock`` returns epoch seconds."""

    def __init__(
        self,
        api: MigrationApi,
        settings: LifecycleSettings,
        cache: ManagerCache,
        *,
        evict_qps: float = 10.0,
        evict_burst: int = 1,
        object_limiter: ObjectLimiter | None = None,
        workload_of: Callable[[Mapping[str, Any]], WorkloadLimit | None] = owner_workload,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
        metrics: MigrationMetrics | None = None,
    ) -> None:
        self.api = api
        self.cache = cache
        self.index = JobIndex(cache.jobs, settings, cache.job_views)
        self.metrics = metrics
        self.settings = settings
        self.evict_tokens = TokenBucket(evict_qps, evict_burst)
        self.object_limiter = object_limiter if object_limiter is not None else ObjectLimiter(300.0)
        self.workload_of = workload_of
        self.clock = clock
        self._logger = logger or logging.getLogger("koordpy.manager")
        self._not_before: dict[str, float] = {}
        self._failures: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._logged: dict[tuple[str, str], float] = {}
        self.evictions: Counter[str] = Counter()
        """Eviction calls by outcome (``evicted``, ``refused``), for metrics and tests."""
        self.errors: Counter[str] = Counter()
        """Per-job failures by step, for metrics and tests."""
        self.phases: dict[str, int] = {}
        """Jobs by phase after the last round."""
        self.last_round_seconds = 0.0
        """Duration of the last arbitration call."""
        self._swept_at: float | None = None
        self._bookkeeping_until = 0.0
        # a job or pod deleted meanwhile: its retry time and failure counts go with it
        cache.jobs.add_listener(self._on_gone)
        cache.pods.add_listener(self._on_gone)

    def _on_gone(self, key: str, old: Raw | None, new: Raw | None) -> None:
        if new is None:
            self._forget(key)

    def _may_bookkeep(self) -> bool:
        return time.monotonic() < self._bookkeeping_until

    # -- errors -----------------------------------------------------------------------------------

    def _job_error(self, step: str, name: str, exc: BaseException, now: float) -> None:
        """Count a failure of ``step`` for job ``name``, log it at most once a minute, back the job off."""
        kind = type(exc).__name__
        self.errors[step] += 1
        if self.metrics is not None:
            self.metrics.errors.labels(step=step, error=kind).inc()
        self._errors[name] += 1
        self._not_before[name] = now + min(JOB_RETRY_CAP_SECONDS, eviction_retry_delay(self._errors[name]))
        key = (name, f"{step}:{kind}")
        if now - self._logged.get(key, -ERROR_LOG_SECONDS) >= ERROR_LOG_SECONDS:
            self._logged[key] = now
            self._logger.warning(
                "PodMigrationJob %s: %s failed (%s: %s); retried after a backoff, the round goes on",
                name[:100],
                step,
                kind,
                str(exc)[:300],
            )
        if len(self._logged) > 10_000:
            self._logged = {k: t for k, t in self._logged.items() if now - t < ERROR_LOG_SECONDS}

    async def _guarded(self, step: str, name: str, call: Awaitable[object], now: float) -> bool:
        """Await ``call`` for job ``name``; False (counted, logged, backed off) when it failed. A 404 on the
        job itself drops it from the cache (deleted meanwhile)."""
        try:
            await call
        except kube_errors.NotFound:
            # the only calls of a step that can answer 404 are the job's own writes: it was deleted
            self.cache.jobs.discard(name)
            self._forget(name)
            return False
        except Exception as exc:  # why: one job's failure must never stop the round for the others
            self._job_error(step, name, exc, now)
            return False
        self._errors.pop(name, None)
        return True

    # -- one job ----------------------------------------------------------------------------------

    def _pod(self, job: Mapping[str, Any]) -> Raw | None:
        ref = (job.get("spec") or {}).get("podRef") or {}
        return self.cache.pods.get(f"{ref.get('namespace')}/{ref.get('name')}")

    async def drive(self, name: str, reservations: Mapping[str, Mapping[str, Any]]) -> Decision | None:
        """Take and carry out the next step of job ``name``; ``None`` while a retry delay runs (unless its
        ttl has run out: the deadline wins over any delay) or when the job is gone."""
        job = self.cache.jobs.get(name)
        if job is None:
            return None
        now = self.clock()
        facts = self.index.facts.get(name)
        deadline = facts.deadline if facts is not None else None
        if self._not_before.get(name, 0.0) > now and (deadline is None or now < deadline):
            return None
        raw_pod = self._pod(job)
        pod = PodView.from_object(raw_pod) if raw_pod is not None else None
        limit = self.workload_of(raw_pod) if raw_pod is not None else None
        reservation, node_pods, replacement = self._reservation_inputs(job, reservations, now)
        unit = gang_migration(job)
        barrier = None
        if unit is not None and reservation_lookup(job, self.settings) is not None:
            siblings = {other: self.cache.jobs.get(other) for other in unit.jobs}
            barrier = gang_eviction_barrier(job, unit, siblings, reservations, now=now, settings=self.settings)
        decision = decide(
            job,
            pod,
            self.clock(),
            self.settings,
            evict_tokens=self.evict_tokens,
            object_limiter=self.object_limiter,
            workload=limit.uid if limit is not None else None,
            workload_max_migrating=limit.max_migrating if limit is not None else 1,
            workload_name=limit.name if limit is not None else "",
            reservation=reservation,
            replacement=replacement,
            node_pods=node_pods,
            gang=barrier,
        )
        await self._carry_out(name, job, decision)
        return decision

    def _reservation_inputs(
        self, job: Mapping[str, Any], reservations: Mapping[str, Mapping[str, Any]], now: float
    ) -> tuple[Mapping[str, Any] | None, list[PodInfo], PodView | None]:
        """A ReservationFirst job's Reservation, the pods on its node (for the ledger) and the bound pod."""
        res_name = reservation_lookup(job, self.settings)
        if res_name is None:
            return None, [], None
        reservation = reservations.get(res_name)
        node_pods: list[PodInfo] = []
        node = needs_node_pods(job, reservation)
        if node is not None:
            for key in sorted(self.cache.pods.keys_by(node)):
                raw = self.cache.pods.get(key)
                if raw is None:
                    continue
                try:
                    node_pods.append(pod_info_from_dict(raw))
                except ObjectError as exc:
                    self._logger.debug("pod %s on node %s skipped: %s", key, node, exc)
        bound = bound_for(job, reservation, node_pods, now)
        replacement = None
        if bound is not None:
            raw_bound = self.cache.pods.get(f"{bound.namespace}/{bound.name}")
            replacement = PodView.from_object(raw_bound) if raw_bound is not None else None
        return reservation, node_pods, replacement

    async def _events(self, job: Mapping[str, Any], events: tuple[JobEvent, ...]) -> None:
        name = str((job.get("metadata") or {}).get("name") or "")
        for event in events:
            try:
                await self.api.post_event(job, event)
            except Exception as exc:  # why: an Event is best effort, never blocks a migration
                self._job_error("event", name, exc, self.clock())
                self._not_before.pop(name, None)  # a lost Event does not delay the job

    async def _write_status(self, name: str, status: dict[str, Any]) -> None:
        self.cache.jobs.observe(await self.api.write_status(name, status))

    async def _carry_out(self, name: str, job: Mapping[str, Any], decision: Decision) -> None:
        if isinstance(decision, Ignore):
            return
        if isinstance(decision, Scavenge):
            await self.api.delete_job(name)
            self.cache.jobs.discard(name)
            self._forget(name)
            return
        if isinstance(decision, Wait):
            if decision.status is not None:
                await self._write_status(name, decision.status)
            await self._events(job, decision.events)
            self._not_before[name] = self.clock() + decision.after
            return
        if isinstance(decision, Start):
            if not ((job.get("spec") or {}).get("podRef") or {}).get("uid"):
                self.cache.jobs.observe(await self.api.set_pod_uid(name, decision.pod_uid))
            await self._write_status(name, decision.status)
            await self._events(job, decision.events)
            return
        if isinstance(decision, Finish):
            await self._write_status(name, decision.status)
            await self._events(job, decision.events)
            self._forget(name)
            if decision.delete_reservation is not None:
                await self._delete_reservation(decision.delete_reservation, f"its PodMigrationJob {name} failed")
            return
        if isinstance(decision, Reserve):
            await self._reserve(name, job, decision)
            return
        await self._evict(name, job, decision)

    async def _reserve(self, name: str, job: Mapping[str, Any], decision: Reserve) -> None:
        if decision.manifest is not None:
            try:
                self.cache.reservations.observe(await self.api.create_reservation(decision.manifest))
                self._logger.info("PodMigrationJob %s: created Reservation %s", name, decision.name)
            except ReservationRefusedError as refused:
                if refused.code == 409:
                    # the name is taken by a Reservation the cache has not shown yet: whether it is this
                    # job's (created before a restart) is decided from its marker once it shows
                    self._logger.info(
                        "PodMigrationJob %s: Reservation %s exists already; looked at again once it is read",
                        name,
                        decision.name,
                    )
                    self._not_before[name] = self.clock() + REQUEUE_SECONDS
                    return
                self._failures[name] += 1
                follow = after_reservation_error(job, refused.code, refused.detail, self._failures[name], self.clock())
                self._logger.info("PodMigrationJob %s: Reservation %s refused (%s)", name, decision.name, refused)
                await self._carry_out(name, job, follow)
                return
        self.cache.jobs.observe(await self.api.set_reservation_ref(name, decision.ref))
        await self._write_status(name, decision.status)
        await self._events(job, decision.events)
        self._failures.pop(name, None)

    def _mark_evicted(self, namespace: str, pod: str, now: float) -> None:
        """The pod was evicted: its cached copy is marked terminating (the eviction answers no pod object)
        until its own watch event arrives, so no later round evicts it again."""

        def terminating(raw: Raw) -> Raw:
            meta = dict(raw.get("metadata") or {})
            meta.setdefault("deletionTimestamp", format_rfc3339(now))
            return {**raw, "metadata": meta}

        self.cache.pods.mark(f"{namespace}/{pod}", terminating)

    async def _evict(self, name: str, job: Mapping[str, Any], decision: Evict) -> None:
        await self._write_status(name, decision.status)  # write-ahead: a restart sees the attempt
        try:
            if decision.evictor == "Eviction":
                await self.api.evict_pod(decision.namespace, decision.name, decision.uid, decision.delete_options)
                self._mark_evicted(decision.namespace, decision.name, self.clock())
            elif decision.evictor == "Delete":
                answer = await self.api.delete_pod(
                    decision.namespace, decision.name, decision.uid, decision.delete_options
                )
                self._mark_evicted(decision.namespace, decision.name, self.clock())
                if answer and (answer.get("metadata") or {}).get("deletionTimestamp"):
                    self.cache.pods.observe(answer)
            else:
                assert decision.soft_eviction is not None
                self.cache.pods.observe(
                    await self.api.annotate_pod(
                        decision.namespace,
                        decision.name,
                        "scheduling.koordinator.sh/soft-eviction",
                        decision.soft_eviction,
                    )
                )
        except EvictionRefusedError as refused:
            if refused.code == 404:  # the pod is gone already: the next step sees it so
                self.cache.pods.discard(f"{decision.namespace}/{decision.name}")
                self._not_before[name] = self.clock()
                return
            self.evictions["refused"] += 1
            if self.metrics is not None:
                self.metrics.evictions.labels(evictor=decision.evictor, outcome="refused").inc()
            self._failures[name] += 1
            lookup = reservation_lookup(job, self.settings)
            follow = after_eviction_error(
                dict(job, status=decision.status),
                refused.code,
                refused.detail,
                self._failures[name],
                self.clock(),
                evictor=decision.evictor,
                settings=self.settings,
                reservation=self.cache.reservations.get(lookup) if lookup is not None else None,
            )
            if isinstance(follow, Wait):
                self._logger.info(
                    "eviction for PodMigrationJob %s refused (%s), retry in %.0fs", name, refused, follow.after
                )
            else:
                self._logger.warning("eviction for PodMigrationJob %s refused (%s): job failed", name, refused)
            await self._carry_out(name, job, follow)
            return
        self.evictions["evicted"] += 1
        if self.metrics is not None:
            self.metrics.evictions.labels(evictor=decision.evictor, outcome="evicted").inc()
        if decision.workload is not None:
            self.object_limiter.record(decision.workload, decision.max_migrating, self.clock())
        self._failures.pop(name, None)
        self._logger.info("PodMigrationJob %s: %s %s/%s", name, decision.evictor, decision.namespace, decision.name)
        await self._events(job, decision.events)
        self._not_before[name] = self.clock() + 1.0

    async def _delete_reservation(self, reservation: OwnedReservation, why: str) -> None:
        """Delete a Reservation a job created, only while it has the UID it was read with (one made again
        under its name meanwhile answers 409 and stays)."""
        name = reservation.name
        try:
            await self.api.delete_reservation(name, reservation.uid)
        except Exception as exc:  # why: the sweep retries; one refused delete must not stop the round
            self._logger.warning("Reservation %s not deleted (%s): %s", name, why, exc)
            return
        self.cache.reservations.discard(name)
        self._logger.info("deleted Reservation %s: %s", name, why)

    def _forget(self, name: str) -> None:
        """Drop the retry time and failure counts of a job (or of a pod whose owner read failed)."""
        self._not_before.pop(name, None)
        self._failures.pop(name, None)
        self._errors.pop(name, None)

    # -- the round --------------------------------------------------------------------------------

    async def _sweep(self, now: float) -> None:
        """Every :data:`SWEEP_SECONDS`: delete the Reservations of gone, Failed or Aborted migrations."""
        if self._swept_at is not None and now - self._swept_at < SWEEP_SECONDS:
            return
        self._swept_at = now
        if not len(self.cache.reservations):
            return
        jobs = list(self.cache.jobs.values())
        for stale in stale_reservations(jobs, list(self.cache.reservations.values())):
            await self._delete_reservation(stale, "its PodMigrationJob is gone, Failed or Aborted")

    async def _report_invalid(self, now: float) -> None:
        """Fail the jobs :func:`examine` found unusable: once each (a job failed is finished), bounded."""
        budget = BOOKKEEPING_WRITES_PER_ROUND
        for name in list(self.index.invalid):
            if budget <= 0 or not self._may_bookkeep():
                return
            if self._not_before.get(name, 0.0) > now:
                continue
            job = self.cache.jobs.get(name)
            if job is None:
                continue
            budget -= 1
            decision = decide(job, None, now, self.settings)
            if isinstance(decision, Finish):
                self._logger.warning(
                    "PodMigrationJob %s cannot be processed: %s", name[:100], decision.status["message"]
                )
            await self._guarded("bookkeeping", name, self._carry_out(name, job, decision), now)

    async def _scavenge(self, now: float) -> None:
        for name in self.index.due_for_scavenge(now, BOOKKEEPING_WRITES_PER_ROUND):
            job = self.cache.jobs.get(name)
            if job is None:
                continue
            if not self._may_bookkeep():
                self.index.requeue_scavenge(name, now)
                continue
            decision = decide(job, None, now, self.settings)
            if not isinstance(decision, Scavenge):
                continue
            if not await self._guarded("bookkeeping", name, self._carry_out(name, job, decision), now):
                self.index.requeue_scavenge(name, now + JOB_RETRY_CAP_SECONDS)

    async def _arbitrate(self, arbitrate: Arbitrate, now: float) -> None:
        if not self.index.waiting:
            return
        considered: list[MigrationJob] = []
        for name in (*self.index.waiting, *self.index.active):
            parsed = self.index.parsed(name)
            if parsed is not None:
                considered.append(parsed)
        started = time.perf_counter()
        verdicts = await arbitrate(considered, now)
        self.last_round_seconds = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.arbitration_seconds.observe(self.last_round_seconds)
        waits = BOOKKEEPING_WRITES_PER_ROUND
        together: dict[str, list[str]] = {}
        for name, verdict in verdicts.items():
            if verdict.gang and verdict.verdict == "pass":
                together.setdefault(verdict.gang, []).append(name)
        for gang, names in together.items():
            self._logger.info("PodMigrationJobs %s pass together: %s moves as one", ", ".join(sorted(names)), gang)
        if self.metrics is not None:
            self.metrics.gang_units.inc(len(together))
            held = sum(1 for v in verdicts.values() if v.verdict == "requeue" and v.filter in GANG_FILTERS)
            self.metrics.gang_held.set(held)
        for name, verdict in verdicts.items():
            job = self.cache.jobs.get(name)
            if job is None or name not in self.index.waiting:
                continue
            if verdict.verdict == "pass":
                unit = together.get(verdict.gang) if verdict.gang else None
                await self._guarded("arbitration", name, self._pass(name, verdict.gang, unit), now)
            elif verdict.verdict == "fail":
                message = f"{verdict.filter}: {verdict.reason}" if verdict.filter else verdict.reason
                status = dict(job.get("status") or {})
                status.update(phase="Failed", reason=verdict.job_reason, message=message)
                finish = Finish(status, (JobEvent("Warning", verdict.job_reason, message),))
                await self._guarded("arbitration", name, self._carry_out(name, job, finish), now)
            elif waits > 0 and verdict.filter and self._may_bookkeep():
                found = arbitration_wait(job.get("status") or {}, verdict.filter, verdict.reason, now)
                if found is not None:
                    waits -= 1
                    wait = Wait(0.0, found[0], (found[1],))
                    await self._guarded("arbitration", name, self._carry_out(name, job, wait), now)
                    self._not_before.pop(name, None)

    async def _pass(self, name: str, gang: str = "", unit: Sequence[str] | None = None) -> None:
        """Annotate a job that passed; a job of a gang unit first gets ``koordpy.io/gang-migration``, so
        every passed job of a unit carries it (a crash between the two writes leaves a job that is
        arbitrated again, with the members of its unit that passed counted as leaving)."""
        if gang and unit:
            value = gang_migration_value(gang, unit)
            self.cache.jobs.observe(await self.api.annotate_job(name, ANNOTATION_GANG_MIGRATION, value))
        self.cache.jobs.observe(await self.api.annotate_job(name, ANNOTATION_PASSED_ARBITRATION, "true"))

    async def run_round(self, arbitrate: Arbitrate | None) -> dict[str, int]:
        """One round: fail the invalid jobs, scavenge the finished ones that are due, arbitrate the waiting
        ones, then drive every active job one step (and every waiting one whose ttl ran out). Returns jobs
        by phase. A job that fails arbitration ends Failed with reason ``ForbiddenMigratePod`` and a Warning
        Event; one whose wait changes gets condition ``Waiting`` naming the filter, and an Event."""
        started = time.perf_counter()
        self._bookkeeping_until = time.monotonic() + BOOKKEEPING_SECONDS_PER_ROUND
        now = self.clock()
        await self._report_invalid(now)
        await self._scavenge(now)
        if arbitrate is not None and self.settings.arbitration_enabled:
            await self._arbitrate(arbitrate, now)
        reservations: Mapping[str, Mapping[str, Any]] = self.cache.reservations.objects
        expired = [
            name
            for name in self.index.waiting
            if (facts := self.index.facts.get(name)) is not None
            and facts.deadline is not None
            and facts.deadline <= now
        ]
        for name in sorted({*self.index.active, *expired}):
            await self._guarded("step", name, self.drive(name, reservations), self.clock())
        await self._sweep(now)
        self.object_limiter.prune(self.clock())
        self.phases = {phase: count for phase, count in self.index.phases.items() if count}
        if self.metrics is not None:
            self.metrics.observe_phases(self.phases)
            took = time.perf_counter() - started
            self.metrics.round_seconds.observe(took)
            self.metrics.last_round.set(took)
        return self.phases


def controller_from_args(
    api: MigrationApi,
    args: MigrationControllerArgs,
    cache: ManagerCache,
    *,
    clock: Callable[[], float] = time.time,
    logger: logging.Logger | None = None,
    metrics: MigrationMetrics | None = None,
) -> MigrationController:
    """A controller with ``migrationController`` settings: evictQPS/evictBurst, the workload object limiter."""
    limiter_args = args.object_limiters.get("workload")
    limiter = ObjectLimiter(limiter_args.duration if limiter_args else 0.0, limiter_args.burst if limiter_args else 1)
    settings = LifecycleSettings(
        default_job_mode=args.default_job_mode,
        default_job_ttl_seconds=args.default_job_ttl,
        eviction_policy=args.eviction_policy,
        default_delete_options=args.default_delete_options,
        arbitration_enabled=args.arbitration_args.enabled,
    )
    return MigrationController(
        api,
        settings,
        cache,
        evict_qps=args.evict_qps,
        evict_burst=args.evict_burst,
        object_limiter=limiter,
        clock=clock,
        logger=logger,
        metrics=metrics,
    )


MAX_OWNER_DEPTH = 3
"""Controller chain followed per pod (Pod -> ReplicaSet -> Deployment is 2)."""


class OwnerCache:
    """Owners (ReplicaSets, Deployments, ...) read through the API by UID, reused for
    :data:`OWNER_TTL_SECONDS`. An owner that is gone, forbidden or of a kind the API does not serve is
    remembered as unknown (its per-workload filters pass, as the arbitration documents)."""

    def __init__(self, api: MigrationApi, clock: Callable[[], float], logger: logging.Logger) -> None:
        self.api = api
        self.clock = clock
        self._logger = logger
        self._entries: dict[str, _OwnerEntry] = {}
        self._expiry: collections.deque[tuple[float, str]] = collections.deque()
        """(expiry, uid) in the order the entries were read: their expiries ascend (one TTL for all)."""

    async def _read(self, namespace: str, ref: Mapping[str, Any], now: float) -> _OwnerEntry:
        owner = await self.api.get_owner(namespace, ref)
        workload = None
        parent = None
        if owner is not None:
            try:
                workload = workload_from_dict(owner)
                parent = _controller_ref(owner)
            except MigrationObjectError as exc:
                self._logger.debug("owner %s/%s read as unknown: %s", ref.get("kind"), ref.get("name"), exc)
        entry = _OwnerEntry(now + OWNER_TTL_SECONDS, workload, parent)
        self._remember(str(ref.get("uid")), entry)
        return entry

    def _remember(self, uid: str, entry: _OwnerEntry) -> None:
        self._entries[uid] = entry
        self._expiry.append((entry.expires, uid))

    async def chain(
        self, pod: Mapping[str, Any], workloads: dict[str, Workload], budget: list[int], now: float
    ) -> bool:
        """Put the pod's controller chain into ``workloads`` (by UID); False when a read is still missing
        (``budget`` ran out, or a read failed: tried again next round)."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        ref = _controller_ref(pod)
        for _ in range(MAX_OWNER_DEPTH):
            if ref is None:
                return True
            uid = str(ref.get("uid"))
            entry = self._entries.get(uid)
            if entry is None or entry.expires <= now:
                if budget[0] <= 0:
                    return False
                budget[0] -= 1
                try:
                    entry = await self._read(namespace, ref, now)
                except (kube_errors.ApiError, ValueError) as exc:
                    if isinstance(exc, ValueError) or not kube_errors.is_temporary(exc):
                        # a reference the API cannot address: unknown for good (until it expires)
                        self._logger.debug("owner %s/%s read as unknown: %s", ref.get("kind"), ref.get("name"), exc)
                        entry = _OwnerEntry(now + OWNER_TTL_SECONDS, None, None)
                        self._remember(uid, entry)
                    else:
                        raise
            if entry.workload is None:
                return True
            workloads[uid] = entry.workload
            ref = entry.parent
        return True

    def prune(self, now: float) -> None:
        """Drop the entries that expired (an owner deleted is never read again, so its entry would stay):
        amortised O(1) per entry read."""
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            expires, uid = expiry.popleft()
            entry = self._entries.get(uid)
            if entry is not None and entry.expires == expires:  # not read again since
                del self._entries[uid]


def make_arbitrate(
    api: MigrationApi,
    args: MigrationControllerArgs,
    controller: MigrationController,
    logger: logging.Logger | None = None,
    gangs: GangFeed | None = None,
) -> Arbitrate:
    """An :data:`Arbitrate` that takes each job's pod from the cache and its controller chain from an
    :class:`OwnerCache`, runs :func:`koordpy.descheduler.arbitration.arbitrate` (in a worker thread: the
    event loop keeps serving meanwhile), and teaches ``controller`` each pod's workload and object-limiter
    limit (``objectLimiters.workload.maxMigrating``, else the per-workload rule). The gangs of the jobs'
    pods come from ``gangs`` (default: a :class:`~koordpy.manager.gangs.GangFeed` on the controller's cache).

    A waiting job whose pod's owners are not read yet (at most :data:`OWNER_READS_PER_ROUND` reads per
    round, a failed read is tried again next round) gets no verdict this round: it is never judged with
    its workload's limits unknown because of a slow or failed read.
    """
    log = logger or logging.getLogger("koordpy.manager")
    limiter_args = args.object_limiters.get("workload")
    configured = limiter_args.max_migrating if limiter_args else None
    known: dict[str, WorkloadLimit] = {}
    owners = OwnerCache(api, controller.clock, log)
    converted: dict[str, tuple[str, MigrationPod | None]] = {}
    cache = controller.cache
    feed = gangs if gangs is not None else GangFeed(cache, logger=log)

    def workload_of(pod: Mapping[str, Any]) -> WorkloadLimit | None:
        meta = pod.get("metadata") or {}
        found = known.get(f"{meta.get('namespace')}/{meta.get('name')}")
        return found if found is not None else owner_workload(pod)

    controller.workload_of = workload_of

    def migration_pod(key: str) -> tuple[Raw | None, MigrationPod | None]:
        raw = cache.pods.get(key)
        if raw is None:
            return None, None
        version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        hit = converted.get(key)
        if hit is not None and hit[0] == version and version:
            return raw, hit[1]
        try:
            value: MigrationPod | None = pod_from_dict(raw)
        except MigrationObjectError as exc:
            log.debug("pod %s read as missing: %s", key, exc)
            value = None
        converted[key] = (version, value)
        return raw, value

    async def run(jobs: Sequence[MigrationJob], now: float) -> Mapping[str, Verdict]:
        pods: dict[str, MigrationPod] = {}
        raw_pods: dict[str, Raw] = {}
        for job in jobs:
            if job.pod_key in pods:
                continue
            raw, value = migration_pod(job.pod_key)
            if raw is not None and value is not None:
                pods[job.pod_key] = value
                raw_pods[job.pod_key] = raw
        for key in [k for k in converted if k not in pods]:
            del converted[key]
        workloads: dict[str, Workload] = {}
        budget = [OWNER_READS_PER_ROUND]
        pending: set[str] = set()
        for key, raw in raw_pods.items():
            try:
                if not await owners.chain(raw, workloads, budget, now):
                    pending.add(key)
            except Exception as exc:  # why: a failed owner read defers this pod's jobs, never the round
                pending.add(key)
                controller._job_error("owner", key, exc, now)
        owners.prune(now)
        known.clear()
        limited: set[str] = set()
        for key, pod in pods.items():
            workload = resolve_workload(pod, workloads)
            if workload is None:
                continue
            limit = workload_limit(workload.replicas, configured) if workload.replicas else 1
            known[key] = WorkloadLimit(workload.uid, max(1, limit), workload.key)
            if not controller.object_limiter.allows(workload.uid, max(1, limit), now):
                limited.add(workload.uid)
        judged = [job for job in jobs if not (job.waiting and job.pod_key in pending)]
        nodes = _node_labels(cache) if args.node_selector else None
        table = feed.table(pods)
        result = await asyncio.to_thread(
            arbitrate,
            judged,
            pods,
            workloads,
            args,
            now,
            nodes=nodes,
            limited_workloads=frozenset(limited),
            gangs=table,
        )
        return result.verdicts

    return run


def _node_labels(cache: ManagerCache) -> Mapping[str, Mapping[str, str]]:
    """Node labels for ``nodeSelector`` (empty unless the cache watches nodes)."""
    return {name: dict(((raw.get("metadata") or {}).get("labels")) or {}) for name, raw in cache.nodes.objects.items()}
