"""Helpers of the migration adapter tests: pods and jobs in the emulator, a controller on a relisted cache."""

from __future__ import annotations

import time
from typing import Any

from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.kube.client import ApiClient
from koordpy.kube.resources import PODMIGRATIONJOBS, PODS
from koordpy.manager.api import KubeMigrationApi
from koordpy.manager.cache import ManagerCache
from koordpy.manager.migration import Arbitrate, MigrationController
from koordpy_testkit.apiserver import ApiServerEmulator

__all__ = [
    "DIRECT",
    "Clock",
    "controller_for",
    "evictions",
    "phase",
    "pmj",
    "running_pod",
    "step",
]

DIRECT = LifecycleSettings(default_job_mode="EvictDirectly")


class Clock:
    """Real time plus a test-controlled offset (to skip retry delays without sleeping)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


async def running_pod(api: ApiClient, name: str, owner: str = "rs-web", grace: int = 0) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app": owner},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": owner,
                    "uid": f"uid-{owner}",
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "terminationGracePeriodSeconds": grace},
    }
    created = await api.create(PODS, body)
    await api.create_binding("shop", name, created["metadata"]["uid"], "n1")
    ready = [{"type": "Ready", "status": "True"}]
    return await api.patch_status(PODS, name, {"status": {"phase": "Running", "conditions": ready}}, namespace="shop")


async def pmj(api: ApiClient, name: str, pod: str, *, passed: bool = True, ttl: str = "5m") -> dict[str, Any]:
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "annotations": {ANNOTATION_PASSED_ARBITRATION: "true"} if passed else {}},
        "spec": {"podRef": {"namespace": "shop", "name": pod}, "mode": "EvictDirectly", "ttl": ttl},
    }
    return await api.create(PODMIGRATIONJOBS, body)


async def phase(api: ApiClient, name: str) -> str:
    job = await api.get(PODMIGRATIONJOBS, name)
    return str((job.get("status") or {}).get("phase") or "Pending")


async def controller_for(api: ApiClient, settings: LifecycleSettings = DIRECT, **kwargs: Any) -> MigrationController:
    cache = ManagerCache(api)
    await cache.resync()
    return MigrationController(KubeMigrationApi(api), settings, cache, **kwargs)


async def step(controller: MigrationController, arbitrate: Arbitrate | None = None) -> dict[str, int]:
    """One round on a freshly relisted cache."""
    await controller.cache.resync()
    return await controller.run_round(arbitrate)


def evictions(server: ApiServerEmulator, pod: str | None = None) -> int:
    return sum(
        1
        for r in server.requests
        if r.get("subresource") == "eviction" and r.get("verb") == "create" and (pod is None or r.get("name") == pod)
    )
