"""Carries out :mod:`koordpy.descheduler.lifecycle` decisions: one PodMigrationJob at a time.

The controller holds what must outlive one call (the ``evictQPS``/``evictBurst`` bucket, the per-workload
object limiter, the per-job retry times after a failed eviction) and talks to the cluster only through a
:class:`MigrationApi`. Decisions are taken without an ``await`` between reading the limiters and
consuming their tokens, so concurrent calls on one event loop cannot exceed a limit.

Not guaranteed: limiter and retry state live in memory and start fresh after a restart (jobs themselves
are adopted from their status, see the lifecycle module).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
    Scavenge,
    Start,
    TokenBucket,
    Wait,
    after_eviction_error,
    decide,
    needs_pod,
)

__all__ = [
    "Arbitrate",
    "ArbitrationVerdict",
    "EvictionRefusedError",
    "MigrationApi",
    "MigrationController",
    "RoundGate",
    "WorkloadLimit",
]

REASON_FORBIDDEN = "ForbiddenMigratePod"


class EvictionRefusedError(Exception):
    """The API server refused an eviction (``code`` 429: a PodDisruptionBudget allows none now)."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class MigrationApi(Protocol):
    """The calls the controller makes. Implementations raise :class:`EvictionRefusedError` for a refused
    eviction, delete or annotation of the pod, and return ``None`` from :meth:`get_pod` for a missing pod."""

    async def list_jobs(self) -> list[dict[str, Any]]: ...

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def annotate_job(self, job: str, key: str, value: str) -> None: ...

    async def set_pod_uid(self, job: str, uid: str) -> None: ...

    async def write_status(self, job: str, status: dict[str, Any]) -> None: ...

    async def delete_job(self, job: str) -> None: ...

    async def evict_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None: ...

    async def delete_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None: ...

    async def annotate_pod(self, namespace: str, name: str, key: str, value: str) -> None: ...

    async def post_event(self, job: Mapping[str, Any], event: JobEvent) -> None: ...


@dataclass(frozen=True)
class ArbitrationVerdict:
    """One job's arbitration outcome: ``pass`` starts it, ``fail`` ends it, ``requeue`` keeps it waiting."""

    verdict: str
    filter: str | None = None
    reason: str = ""


Arbitrate = Callable[[Sequence[Mapping[str, Any]], float], Awaitable[Mapping[str, ArbitrationVerdict]]]
"""One arbitration round over all jobs (the waiting ones are judged) at a time: verdicts by job name."""


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
    ) -> None:
        self.api = api
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

    async def drive(self, job: Mapping[str, Any]) -> Decision | None:
        """Take and carry out the next step of ``job``; ``None`` while a retry delay runs."""
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
        decision = decide(
            job,
            pod,
            self.clock(),
            self.settings,
            evict_tokens=self.evict_tokens,
            object_limiter=self.object_limiter,
            workload=limit.uid if limit is not None else None,
            workload_max_migrating=limit.max_migrating if limit is not None else 1,
        )
        await self._carry_out(name, job, decision)
        return decision

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
            return
        await self._evict(name, job, decision)

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
            self._failures[name] += 1
            wait = after_eviction_error(
                dict(job, status=decision.status), refused.code, refused.detail, self._failures[name], self.clock()
            )
            self._logger.info("eviction for PodMigrationJob %s refused (%s), retry in %.0fs", name, refused, wait.after)
            await self._carry_out(name, job, wait)
            return
        self.evictions["evicted"] += 1
        if decision.workload is not None:
            self.object_limiter.record(decision.workload, decision.max_migrating, self.clock())
        self._failures.pop(name, None)
        self._logger.info("PodMigrationJob %s: %s %s/%s", name, decision.evictor, decision.namespace, decision.name)
        await self._events(job, decision.events)
        self._not_before[name] = self.clock() + 1.0

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
                    status.update(phase="Failed", reason=REASON_FORBIDDEN, message=message)
                    await self.api.write_status(name, status)
                    await self._events(job, (JobEvent("Warning", REASON_FORBIDDEN, message),))
                    by_name[name] = dict(job, status=status)
            jobs = list(by_name.values())
        phases: Counter[str] = Counter()
        for job in jobs:
            decision = await self.drive(job)
            phase = ((job.get("status") or {}).get("phase")) or "Pending"
            if isinstance(decision, Start):
                phase = "Running"
            elif isinstance(decision, Finish):
                phase = str(decision.status.get("phase"))
            elif isinstance(decision, Scavenge):
                continue
            phases[phase] += 1
        self.phases = dict(phases)
        return self.phases


class RoundGate:
    """Runs at most one round per ``interval`` however many callers knock (each PodMigrationJob's timer)."""

    def __init__(
        self,
        controller: MigrationController,
        arbitrate: Arbitrate | None,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.controller = controller
        self.arbitrate = arbitrate
        self.interval = interval
        self.clock = clock
        self._lock = asyncio.Lock()
        self._last: float | None = None

    async def knock(self) -> bool:
        """Run a round unless one runs now or ran less than ``interval`` ago; True when this call ran it."""
        if self._lock.locked():
            return False
        async with self._lock:
            now = self.clock()
            if self._last is not None and now - self._last < self.interval:
                return False
            self._last = now
            await self.controller.run_round(self.arbitrate)
            return True
