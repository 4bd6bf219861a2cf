"""Carries out :mod:`koordpy.descheduler.lifecycle` decisions: one PodMigrationJob at a time.

The controller holds what must outlive one call (the ``evictQPS``/``evictBurst`` bucket, the per-workload
object limiter, the per-job retry times after a failed eviction) and talks to the cluster only through a
:class:`MigrationApi`. Decisions are taken without an ``await`` between reading the limiters and
consuming their tokens, so concurrent calls on one event loop cannot exceed a limit.

``ReservationFirst`` jobs: each round lists the Reservations once; a job's Reservation is created (a 409
means a restarted manager finds its own: adopted, never duplicated), recorded as the job's
``reservationRef``, read back for its placement, and deleted when the job fails. Every
:data:`SWEEP_SECONDS` the round also deletes the Reservations a migration created whose job is gone,
Failed or Aborted (:func:`~koordpy.descheduler.reservation_first.stale_reservations`).

Not guaranteed: limiter and retry state live in memory and start fresh after a restart (jobs themselves
are adopted from their status, see the lifecycle module). A Reservation whose job was deleted while no
round runs (no jobs left) stays until the next round, or until Kubernetes' garbage collector removes it
through its ownerReference to the job.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import Verdict, arbitrate
from koordpy.descheduler.lifecycle import (
    ANNOTATION_PASSED_ARBITRATION,
    Decision,
    Evict,
    Finish,
    Ignore,
    JobEvent,
    LifecycleSettings,
    ObjectLimiter,
    PodView,
    Reserve,
    Scavenge,
    Start,
    TokenBucket,
    Wait,
    after_eviction_error,
    after_reservation_error,
    bound_for,
    decide,
    needs_node_pods,
    needs_pod,
    reservation_lookup,
)
from koordpy.descheduler.limits import workload_limit
from koordpy.descheduler.objects import (
    MigrationObjectError,
    MigrationPod,
    Workload,
    job_from_dict,
    pod_from_dict,
    resolve_workload,
    workload_from_dict,
)
from koordpy.descheduler.reservation_first import stale_reservations
from koordpy.manager.rounds import RoundGate
from koordpy.model.objects import ObjectError, PodInfo
from koordpy.model.objects import pod_from_dict as pod_info_from_dict

__all__ = [
    "Arbitrate",
    "EvictionRefusedError",
    "MigrationApi",
    "MigrationController",
    "MigrationMetrics",
    "ReservationRefusedError",
    "WorkloadLimit",
    "controller_from_args",
    "make_arbitrate",
    "migration_gate",
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


class MigrationApi(Protocol):
    """The calls the controller makes. Implementations raise :class:`EvictionRefusedError` for a refused
    eviction, delete or annotation of the pod, :class:`ReservationRefusedError` for a refused Reservation
    create, and return ``None`` from :meth:`get_pod` for a missing pod; :meth:`list_reservations` is
    empty when the API does not serve Reservations and :meth:`delete_reservation` ignores a missing one."""

    async def list_jobs(self) -> list[dict[str, Any]]: ...

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def annotate_job(self, job: str, key: str, value: str) -> None: ...

    async def get_owner(self, namespace: str, ref: Mapping[str, Any]) -> dict[str, Any] | None: ...

    async def set_pod_uid(self, job: str, uid: str) -> None: ...

    async def write_status(self, job: str, status: dict[str, Any]) -> None: ...

    async def delete_job(self, job: str) -> None: ...

    async def evict_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None: ...

    async def delete_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None: ...

    async def annotate_pod(self, namespace: str, name: str, key: str, value: str) -> None: ...

    async def post_event(self, job: Mapping[str, Any], event: JobEvent) -> None: ...

    async def list_reservations(self) -> list[dict[str, Any]]: ...

    async def create_reservation(self, body: Mapping[str, Any]) -> None: ...

    async def delete_reservation(self, name: str) -> None: ...

    async def set_reservation_ref(self, job: str, ref: Mapping[str, Any]) -> None: ...

    async def list_pods_on_node(self, node: str) -> list[dict[str, Any]]: ...


Arbitrate = Callable[[Sequence[Mapping[str, Any]], float], Awaitable[Mapping[str, Verdict]]]
"""One arbitration round over all jobs (the waiting ones are judged) at a time: verdicts by job name."""


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

    def observe_phases(self, phases: Mapping[str, int]) -> None:
        for phase in {*self.PHASES, *phases}:
            self.jobs.labels(phase=phase).set(phases.get(phase, 0))


@dataclass(frozen=True)
class WorkloadLimit:
    """The pod's owning workload (a UID) and how many of its pods may migrate at once."""

    uid: str
    max_migrating: int


def _controller_owner(pod: Mapping[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    return None


def owner_workload(pod: Mapping[str, Any]) -> WorkloadLimit | None:
    """Fallback workload of a pod: its controller owner reference, one migration at a time."""
    owner = _controller_owner(pod)
    return WorkloadLimit(owner, 1) if owner is not None else None


class MigrationController:
    """Drives PodMigrationJobs through their lifecycle. ``workload_of`` names a pod's workload and limit
    (default: the controller owner reference, limit 1); ``clock`` returns epoch seconds."""

    def __init__(
        self,
        api: MigrationApi,
        settings: LifecycleSettings,
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
        self.metrics = metrics
        self.settings = settings
        self.evict_tokens = TokenBucket(evict_qps, evict_burst)
        self.object_limiter = object_limiter if object_limiter is not None else ObjectLimiter(300.0)
        self.workload_of = workload_of
        self.clock = clock
        self._logger = logger or logging.getLogger("koordpy.manager")
        self._not_before: dict[str, float] = {}
        self._failures: Counter[str] = Counter()
        self.evictions: Counter[str] = Counter()
        """Eviction calls by outcome (``evicted``, ``refused``), for metrics and tests."""
        self.phases: dict[str, int] = {}
        """Jobs by phase after the last round."""
        self.last_round_seconds = 0.0
        """Duration of the last arbitration call."""
        self._swept_at: float | None = None

    async def drive(
        self, job: Mapping[str, Any], reservations: Mapping[str, Mapping[str, Any]] | None = None
    ) -> Decision | None:
        """Take and carry out the next step of ``job``; ``None`` while a retry delay runs.

        ``reservations`` (by name) is the round's list; None: listed here when the job needs one.
        """
        name = str((job.get("metadata") or {}).get("name") or "")
        now = self.clock()
        if self._not_before.get(name, 0.0) > now:
            return None
        ref = (job.get("spec") or {}).get("podRef") or {}
        raw_pod = None
        if needs_pod(job, self.settings) and ref.get("namespace") and ref.get("name"):
            raw_pod = await self.api.get_pod(str(ref["namespace"]), str(ref["name"]))
        pod = PodView.from_object(raw_pod) if raw_pod is not None else None
        limit = self.workload_of(raw_pod) if raw_pod is not None else None
        reservation, node_pods, replacement = await self._reservation_inputs(job, reservations, now)
        decision = decide(
            job,
            pod,
            self.clock(),
            self.settings,
            evict_tokens=self.evict_tokens,
            object_limiter=self.object_limiter,
            workload=limit.uid if limit is not None else None,
            workload_max_migrating=limit.max_migrating if limit is not None else 1,
            reservation=reservation,
            replacement=replacement,
            node_pods=node_pods,
        )
        await self._carry_out(name, job, decision)
        return decision

    async def _reservation_inputs(
        self, job: Mapping[str, Any], reservations: Mapping[str, Mapping[str, Any]] | None, now: float
    ) -> tuple[Mapping[str, Any] | None, list[PodInfo], PodView | None]:
        """A ReservationFirst job's Reservation, the pods on its node (for the ledger) and the bound pod."""
        res_name = reservation_lookup(job, self.settings)
        if res_name is None:
            return None, [], None
        if reservations is None:
            reservations = _by_name(await self.api.list_reservations())
        reservation = reservations.get(res_name)
        node_pods: list[PodInfo] = []
        node = needs_node_pods(job, reservation)
        if node is not None:
            for raw in await self.api.list_pods_on_node(node):
                try:
                    node_pods.append(pod_info_from_dict(raw))
                except ObjectError as exc:
                    self._logger.warning("pod on node %s skipped: %s", node, exc)
        bound = bound_for(job, reservation, node_pods, now)
        replacement = None
        if bound is not None:
            raw_bound = await self.api.get_pod(bound.namespace, bound.name)
            replacement = PodView.from_object(raw_bound) if raw_bound is not None else None
        return reservation, node_pods, replacement

    async def _events(self, job: Mapping[str, Any], events: tuple[JobEvent, ...]) -> None:
        for event in events:
            try:
                await self.api.post_event(job, event)
            except Exception as exc:  # why: an Event is best effort, never blocks a migration
                self._logger.warning("event %s on PodMigrationJob %s not posted: %s", event.reason, job, exc)

    async def _carry_out(self, name: str, job: Mapping[str, Any], decision: Decision) -> None:
        if isinstance(decision, Ignore):
            return
        if isinstance(decision, Scavenge):
            await self.api.delete_job(name)
            self._forget(name)
            return
        if isinstance(decision, Wait):
            if decision.status is not None:
                await self.api.write_status(name, decision.status)
            await self._events(job, decision.events)
            self._not_before[name] = self.clock() + decision.after
            return
        if isinstance(decision, Start):
            if not ((job.get("spec") or {}).get("podRef") or {}).get("uid"):
                await self.api.set_pod_uid(name, decision.pod_uid)
            await self.api.write_status(name, decision.status)
            await self._events(job, decision.events)
            return
        if isinstance(decision, Finish):
            await self.api.write_status(name, decision.status)
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
                await self.api.create_reservation(decision.manifest)
                self._logger.info("PodMigrationJob %s: created Reservation %s", name, decision.name)
            except ReservationRefusedError as refused:
                if refused.code != 409:  # 409: ours, created before a restart: adopt it
                    self._failures[name] += 1
                    follow = after_reservation_error(
                        job, refused.code, refused.detail, self._failures[name], self.clock()
                    )
                    self._logger.info("PodMigrationJob %s: Reservation %s refused (%s)", name, decision.name, refused)
                    await self._carry_out(name, job, follow)
                    return
        await self.api.set_reservation_ref(name, decision.ref)
        await self.api.write_status(name, decision.status)
        await self._events(job, decision.events)
        self._failures.pop(name, None)

    async def _evict(self, name: str, job: Mapping[str, Any], decision: Evict) -> None:
        await self.api.write_status(name, decision.status)  # write-ahead: a restart sees the attempt
        try:
            if decision.evictor == "Eviction":
                await self.api.evict_pod(decision.namespace, decision.name, decision.uid, decision.delete_options)
            elif decision.evictor == "Delete":
                await self.api.delete_pod(decision.namespace, decision.name, decision.uid, decision.delete_options)
            else:
                assert decision.soft_eviction is not None
                await self.api.annotate_pod(
                    decision.namespace, decision.name, "scheduling.koordinator.sh/soft-eviction", decision.soft_eviction
                )
        except EvictionRefusedError as refused:
            self.evictions["refused"] += 1
            if self.metrics is not None:
                self.metrics.evictions.labels(evictor=decision.evictor, outcome="refused").inc()
            self._failures[name] += 1
            wait = after_eviction_error(
                dict(job, status=decision.status), refused.code, refused.detail, self._failures[name], self.clock()
            )
            self._logger.info("eviction for PodMigrationJob %s refused (%s), retry in %.0fs", name, refused, wait.after)
            await self._carry_out(name, job, wait)
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

    async def _round_reservations(
        self, jobs: Sequence[Mapping[str, Any]], now: float
    ) -> Mapping[str, Mapping[str, Any]] | None:
        """The Reservations by name when a job needs them or the sweep is due (then sweep); else None."""
        sweep = self._swept_at is None or now - self._swept_at >= SWEEP_SECONDS
        if not sweep and all(reservation_lookup(job, self.settings) is None for job in jobs):
            return None
        listed = await self.api.list_reservations()
        if sweep:
            self._swept_at = now
            for stale in stale_reservations(jobs, listed):
                await self._delete_reservation(stale, "its PodMigrationJob is gone, Failed or Aborted")
        return _by_name(listed)

    async def _delete_reservation(self, name: str, why: str) -> None:
        try:
            await self.api.delete_reservation(name)
        except Exception as exc:  # why: the sweep retries; one refused delete must not stop the round
            self._logger.warning("Reservation %s not deleted (%s): %s", name, why, exc)
            return
        self._logger.info("deleted Reservation %s: %s", name, why)

    def _forget(self, name: str) -> None:
        self._not_before.pop(name, None)
        self._failures.pop(name, None)

    async def run_round(self, arbitrate: Arbitrate | None) -> dict[str, int]:
        """List the jobs, arbitrate the waiting ones, then drive every job one step. Returns jobs by phase.

        A job that fails arbitration ends Failed with reason ``ForbiddenMigratePod`` and a Warning Event.
        """
        jobs = await self.api.list_jobs()
        now = self.clock()
        if arbitrate is not None and self.settings.arbitration_enabled:
            started = time.perf_counter()
            verdicts = await arbitrate(jobs, now)
            self.last_round_seconds = time.perf_counter() - started
            if self.metrics is not None:
                self.metrics.arbitration_seconds.observe(self.last_round_seconds)
            by_name = {str((j.get("metadata") or {}).get("name")): j for j in jobs}
            for name, verdict in verdicts.items():
                job = by_name.get(name)
                if job is None:
                    continue
                if verdict.verdict == "pass":
                    await self.api.annotate_job(name, ANNOTATION_PASSED_ARBITRATION, "true")
                    meta = dict(job.get("metadata") or {})
                    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_PASSED_ARBITRATION: "true"}
                    by_name[name] = dict(job, metadata=meta)
                elif verdict.verdict == "fail":
                    message = f"{verdict.filter}: {verdict.reason}" if verdict.filter else verdict.reason
                    status = dict(job.get("status") or {})
                    status.update(phase="Failed", reason=verdict.job_reason, message=message)
                    await self.api.write_status(name, status)
                    await self._events(job, (JobEvent("Warning", verdict.job_reason, message),))
                    by_name[name] = dict(job, status=status)
            jobs = list(by_name.values())
        reservations = await self._round_reservations(jobs, now)
        phases: Counter[str] = Counter()
        for job in jobs:
            decision = await self.drive(job, reservations)
            phase = ((job.get("status") or {}).get("phase")) or "Pending"
            if isinstance(decision, Start):
                phase = "Running"
            elif isinstance(decision, Finish):
                phase = str(decision.status.get("phase"))
            elif isinstance(decision, Scavenge):
                continue
            phases[phase] += 1
        self.phases = dict(phases)
        if self.metrics is not None:
            self.metrics.observe_phases(self.phases)
        return self.phases


def _by_name(items: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str((item.get("metadata") or {}).get("name")): item for item in items}


def migration_gate(
    controller: MigrationController,
    arbitrate: Arbitrate | None,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
) -> RoundGate:
    """The gate each PodMigrationJob's timer knocks on: one migration round (arbitration, then one
    lifecycle step per job) per ``interval``."""
    return RoundGate(lambda: controller.run_round(arbitrate), interval, clock)


def controller_from_args(
    api: MigrationApi,
    args: MigrationControllerArgs,
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
        evict_qps=args.evict_qps,
        evict_burst=args.evict_burst,
        object_limiter=limiter,
        clock=clock,
        logger=logger,
        metrics=metrics,
    )


MAX_OWNER_DEPTH = 3
"""Controller chain followed per pod (Pod -> ReplicaSet -> Deployment is 2)."""


def make_arbitrate(
    api: MigrationApi,
    args: MigrationControllerArgs,
    controller: MigrationController,
    logger: logging.Logger | None = None,
) -> Arbitrate:
    """An :data:`Arbitrate` that reads each job's pod and its controller chain, runs
    :func:`koordpy.descheduler.arbitration.arbitrate`, and teaches ``controller`` each pod's workload
    and object-limiter limit (``objectLimiters.workload.maxMigrating``, else the per-workload rule).

    Not guaranteed: an owner the API does not serve or forbids is treated as unknown (its per-workload
    filters pass, as the arbitration documents).
    """
    log = logger or logging.getLogger("koordpy.manager")
    limiter_args = args.object_limiters.get("workload")
    configured = limiter_args.max_migrating if limiter_args else None
    known: dict[str, WorkloadLimit] = {}

    def workload_of(pod: Mapping[str, Any]) -> WorkloadLimit | None:
        meta = pod.get("metadata") or {}
        found = known.get(f"{meta.get('namespace')}/{meta.get('name')}")
        return found if found is not None else owner_workload(pod)

    controller.workload_of = workload_of

    async def run(raw_jobs: Sequence[Mapping[str, Any]], now: float) -> Mapping[str, Verdict]:
        jobs = []
        for raw in raw_jobs:
            try:
                jobs.append(job_from_dict(raw))
            except MigrationObjectError as exc:
                log.warning("PodMigrationJob %s skipped: %s", (raw.get("metadata") or {}).get("name"), exc)
        pods: dict[str, MigrationPod] = {}
        raw_pods: dict[str, Mapping[str, Any]] = {}
        for job in jobs:
            if not (job.waiting or job.active) or job.pod_key in pods:
                continue
            raw_pod = await api.get_pod(job.pod_namespace, job.pod_name)
            if raw_pod is None:
                continue
            try:
                pods[job.pod_key] = pod_from_dict(raw_pod)
                raw_pods[job.pod_key] = raw_pod
            except MigrationObjectError as exc:
                log.warning("pod %s read as missing: %s", job.pod_key, exc)
        workloads: dict[str, Workload] = {}
        for pod_object in raw_pods.values():
            await _read_chain(api, pod_object, workloads, log)
        known.clear()
        limited: set[str] = set()
        for key, pod in pods.items():
            workload = resolve_workload(pod, workloads)
            if workload is None:
                continue
            limit = workload_limit(workload.replicas, configured) if workload.replicas else 1
            known[key] = WorkloadLimit(workload.uid, max(1, limit))
            if not controller.object_limiter.allows(workload.uid, max(1, limit), now):
                limited.add(workload.uid)
        result = arbitrate(jobs, pods, workloads, args, now, limited_workloads=frozenset(limited))
        return result.verdicts

    return run


async def _read_chain(
    api: MigrationApi, obj: Mapping[str, Any], workloads: dict[str, Workload], log: logging.Logger
) -> None:
    current = obj
    for _ in range(MAX_OWNER_DEPTH):
        meta = current.get("metadata") or {}
        ref = next(
            (r for r in meta.get("ownerReferences") or () if isinstance(r, Mapping) and r.get("controller")), None
        )
        if ref is None or str(ref.get("uid") or "") in workloads:
            return
        owner = await api.get_owner(str(meta.get("namespace") or ""), ref)
        if owner is None:
            return
        try:
            workloads[str(ref.get("uid"))] = workload_from_dict(owner)
        except MigrationObjectError as exc:
            log.warning("owner %s/%s read as unknown: %s", ref.get("kind"), ref.get("name"), exc)
            return
        current = owner
