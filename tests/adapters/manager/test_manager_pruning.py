"""State the manager's migration controller keeps per job, per pod and per workload goes with its object:
nothing grows while PodMigrationJobs, pods and Deployments come and go. The caches are fed as the watches
feed them (``ObjectStore.handle``); the API is a stand-in that answers owner reads (no request is sent)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.descheduler.ratelimit import ObjectLimiter
from koordpy.manager.cache import ManagerCache
from koordpy.manager.migration import MigrationController
from koordpy.manager.owners import OWNER_TTL_SECONDS, OwnerCache


class Owners:
    """Answers every owner read with a ReplicaSet of that name (the only call these tests make)."""

    def __init__(self) -> None:
        self.reads = 0

    async def get_owner(self, namespace: str, ref: dict[str, Any]) -> dict[str, Any] | None:
        self.reads += 1
        return {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": ref["name"], "namespace": namespace, "uid": ref["uid"]},
            "spec": {"replicas": 3},
            "status": {"replicas": 3, "readyReplicas": 3},
        }


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"podRef": {"namespace": "shop", "name": f"pod-{name}"}, "mode": "EvictDirectly"},
    }


def pod(name: str, owner: str) -> dict[str, Any]:
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}", "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "ownerReferences": [ref],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
    }


def controller(clock: Clock) -> MigrationController:
    cache = ManagerCache(None, ("pods", "podmigrationjobs"))  # type: ignore[arg-type]  # fed by hand, never lists
    return MigrationController(
        Owners(),  # type: ignore[arg-type]
        LifecycleSettings(default_job_mode="EvictDirectly"),
        cache,
        object_limiter=ObjectLimiter(300.0),
        clock=clock,
        logger=logging.getLogger("test"),
    )


def test_a_deleted_job_or_pod_leaves_no_retry_time_or_failure_count() -> None:
    clock = Clock()
    ctl = controller(clock)
    ctl.cache.jobs.handle("ADDED", job("m1"))
    ctl.cache.pods.handle("ADDED", pod("pod-m1", "rs-web"))
    ctl._job_error("step", "m1", RuntimeError("API down"), clock())  # the job backs off
    ctl._job_error("owner", "shop/pod-m1", RuntimeError("API down"), clock())  # its pod's owner read failed
    ctl._failures["m1"] += 1
    assert set(ctl._not_before) == {"m1", "shop/pod-m1"} and set(ctl._errors) == {"m1", "shop/pod-m1"}
    ctl.cache.jobs.handle("DELETED", job("m1"))  # a user deleted the job mid-flight
    ctl.cache.pods.handle("DELETED", pod("pod-m1", "rs-web"))
    assert (ctl._not_before, dict(ctl._errors), dict(ctl._failures)) == ({}, {}, {})


def test_owner_entries_expire_and_go_once_their_ttl_passed() -> None:
    async def run() -> None:
        clock = Clock()
        api = Owners()
        owners = OwnerCache(api, clock, logging.getLogger("test"))  # type: ignore[arg-type]
        for i in range(3):
            assert await owners.chain(pod(f"p{i}", f"rs-{i}"), {}, [10], clock())
        assert len(owners._entries) == 3
        clock.now += OWNER_TTL_SECONDS / 2
        assert await owners.chain(pod("p0", "rs-0"), {}, [10], clock())  # still fresh: not read again
        assert api.reads == 3
        clock.now += OWNER_TTL_SECONDS / 2
        await owners.chain(pod("p0", "rs-0"), {}, [10], clock())  # expired: read again, kept another TTL
        owners.prune(clock())
        assert len(owners._entries) == 1  # rs-1 and rs-2 (deleted Deployments, say) are not read again: gone
        clock.now += OWNER_TTL_SECONDS
        owners.prune(clock())
        assert len(owners._entries) == 0

    asyncio.run(run())


def test_the_round_drops_the_object_limiter_buckets_that_refilled() -> None:
    async def run() -> None:
        clock = Clock()
        ctl = controller(clock)
        ctl.object_limiter.record("uid-rs-web", 1, clock())
        await ctl.run_round(None)
        assert len(ctl.object_limiter._buckets) == 1  # just emptied: the workload waits 300 s
        clock.now += 300
        await ctl.run_round(None)
        assert len(ctl.object_limiter._buckets) == 0

    asyncio.run(run())
