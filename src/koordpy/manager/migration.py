"""Carries out :mod:`koordpy.descheduler.lifecycle` decisions: one round over every PodMigrationJob.

A round reads the manager's caches (:mod:`koordpy.manager.cache`: the jobs, their pods, the Reservations), never
lists: :class:`~koordpy.manager.job_index.JobIndex` keeps each job's stage from its watch events, so a round costs
nothing for a finished job (the scavenger's heap holds it until ``ttl + 5m``), arbitrates the waiting ones
(:mod:`koordpy.descheduler.arbitration`) and takes one lifecycle step for each active one.

The controller holds what must outlive one round (the ``evictQPS``/``evictBurst`` bucket, the per-workload object
limiter, the per-job retry times after a failed call, the owners read through the API, ...) and writes only through a
:class:`~koordpy.manager.migration_api.MigrationApi`; what a write returns is stored in the cache at once, so the next
round sees it. Decisions are taken without an ``await`` between reading the limiters and consuming their tokens, so
concurrent calls on one event loop cannot exceed a limit.

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

Beside this module: :mod:`~koordpy.manager.job_index` (the jobs by stage), :mod:`~koordpy.manager.arbitrate` (the
arbitration round: pods, owners, the pure arbitration), :mod:`~koordpy.manager.owners` (a pod's owning workload),
:mod:`~koordpy.manager.migration_api` (the calls made and their refusals) and
:mod:`~koordpy.manager.migration_metrics`.

Not guaranteed: limiter, retry and owner state live in memory and start fresh after a restart (jobs
themselves are adopted from their status, see the lifecycle module); an owner's replica count is read
again at most every :data:`~koordpy.manager.owners.OWNER_TTL_SECONDS`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import GANG_FILTERS, Verdict
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
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.lifecycle import (
    after_eviction_error,
    after_reservation_error,
    arbitration_wait,
    decide,
    reservation_lookup,
)
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings, PodView
from koordpy.descheduler.objects import MigrationJob
from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket, eviction_retry_delay
from koordpy.descheduler.reservation_first import OwnedReservation, stale_reservations
from koordpy.descheduler.reservation_first_steps import bound_for, needs_node_pods
from koordpy.kube import errors as kube_errors
from koordpy.manager.cache import ManagerCache
from koordpy.manager.job_index import JobIndex
from koordpy.manager.migration_api import EvictionRefusedError, MigrationApi, ReservationRefusedError
from koordpy.manager.migration_metrics import MigrationMetrics
from koordpy.manager.owners import WorkloadLimit, owner_workload
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import ObjectError, PodInfo
from koordpy.model.objects import pod_from_dict as pod_info_from_dict

__all__ = [
    "BOOKKEEPING_SECONDS_PER_ROUND",
    "BOOKKEEPING_WRITES_PER_ROUND",
    "Arbitrate",
    "MigrationController",
    "controller_from_args",
]

SWEEP_SECONDS = 10.0
"""How often a round deletes the Reservations of gone, Failed or Aborted migrations."""
BOOKKEEPING_WRITES_PER_ROUND = 100
"""Writes per round for invalid jobs, scavenging and arbitration waits (each kind its own budget)."""
BOOKKEEPING_SECONDS_PER_ROUND = 0.25
"""...and no more of them once a round has spent this long (a slow API server stretches no round)."""
ERROR_LOG_SECONDS = 60.0
"""One log line per job and kind of error in this many seconds (the counter counts every one)."""
JOB_RETRY_CAP_SECONDS = 60.0
Raw = dict[str, Any]
Arbitrate = Callable[[Sequence[MigrationJob], float], Awaitable[Mapping[str, Verdict]]]
"""One arbitration round over the waiting and active jobs (the waiting ones are judged): verdicts by name."""


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
        """Fail the jobs :func:`~koordpy.descheduler.job_facts.examine` found unusable: once each (a job failed is
        finished), bounded."""
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
