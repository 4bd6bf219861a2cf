"""The manager's arbitration round: each waiting job's pod from the cache, its controller chain from an
:class:`~koordpy.manager.owners.OwnerCache`, then :func:`koordpy.descheduler.arbitration.arbitrate` in a
worker thread (:func:`make_arbitrate`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import Verdict, arbitrate
from koordpy.descheduler.limits import workload_limit
from koordpy.descheduler.objects import (
    MigrationJob,
    MigrationObjectError,
    MigrationPod,
    Workload,
    pod_from_dict,
    resolve_workload,
)
from koordpy.manager.cache import ManagerCache
from koordpy.manager.gangs import GangFeed
from koordpy.manager.migration import Arbitrate, MigrationController
from koordpy.manager.migration_api import MigrationApi
from koordpy.manager.owners import OwnerCache, WorkloadLimit, owner_workload

__all__ = [
    "OWNER_READS_PER_ROUND",
    "make_arbitrate",
]

OWNER_READS_PER_ROUND = 100
"""Owner (ReplicaSet, Deployment, ...) reads per round; a waiting job whose owners are not read yet waits."""
Raw = dict[str, Any]


def make_arbitrate(
    api: MigrationApi,
    args: MigrationControllerArgs,
    controller: MigrationController,
    logger: logging.Logger | None = None,
    gangs: GangFeed | None = None,
) -> Arbitrate:
    """An :data:`~koordpy.manager.migration.Arbitrate` that takes each job's pod from the cache and its controller
    chain from an :class:`~koordpy.manager.owners.OwnerCache`, runs :func:`koordpy.descheduler.arbitration.arbitrate`
    (in a worker thread: the event loop keeps serving meanwhile), and teaches ``controller`` each pod's workload and
    object-limiter limit (``objectLimiters.workload.maxMigrating``, else the per-workload rule). The gangs of the
    jobs' pods come from ``gangs`` (default: a :class:`~koordpy.manager.gangs.GangFeed` on the controller's cache).

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
