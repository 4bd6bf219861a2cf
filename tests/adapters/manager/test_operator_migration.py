"""The manager operator (kopf + koordpy.kube) migrates PodMigrationJobs against the API server emulator."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import write_kubeconfig
from koordpy.kube.errors import NotFound
from koordpy.kube.resources import PODMIGRATIONJOBS, PODS
from koordpy.manager.operator import run
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP

__all__ = ["api_client", "apiserver"]


async def running_pod(api: ApiClient, name: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app": "web"},
            # a controlled pod (bare pods are refused by the arbitration); the emulator serves no
            # ReplicaSets, so the per-workload filters see an unknown workload and pass
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": f"rs-{name}", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "terminationGracePeriodSeconds": 0},
    }
    created = await api.create(PODS, body)
    await api.create_binding("shop", name, created["metadata"]["uid"], "n1")
    ready = [{"type": "Ready", "status": "True"}]
    await api.patch_status(PODS, name, {"status": {"phase": "Running", "conditions": ready}}, namespace="shop")


async def test_operator_arbitrates_and_migrates_without_finalizers(
    apiserver: ApiServerEmulator, api_client: ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "manager")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = validate(
        ManagerConfiguration,
        {"migrationController": {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"interval": "200ms"}}},
    )
    for i in range(3):
        await running_pod(api_client, f"web-{i}")
    stop = asyncio.Event()
    task = asyncio.create_task(run(config, stop_flag=stop, liveness=False))
    try:
        for i in range(3):
            body = {
                "metadata": {"name": f"m{i}"},
                "spec": {"podRef": {"namespace": "shop", "name": f"web-{i}"}, "ttl": "5m"},
            }
            await api_client.create(PODMIGRATIONJOBS, body)
        phases: list[str] = []
        async with asyncio.timeout(HANG_BACKSTOP):
            while not phases or not all(p in ("Succeeded", "Failed") for p in phases):
                await asyncio.sleep(0.1)
                items = (await api_client.list(PODMIGRATIONJOBS)).items
                phases = [str((j.get("status") or {}).get("phase") or "") for j in items]
        assert phases == ["Succeeded"] * 3, [j.get("status") for j in items]
        for job in (await api_client.list(PODMIGRATIONJOBS)).items:
            assert job["metadata"].get("finalizers") in (None, [])  # nothing blocks kubectl delete
            assert job["metadata"]["annotations"]["descheduler.koordinator.sh/passed-arbitration"] == "true"
        for i in range(3):
            with pytest.raises(NotFound):
                await api_client.get(PODS, f"web-{i}", "shop")
        await api_client.delete(PODMIGRATIONJOBS, "m0")
        with pytest.raises(NotFound):
            await api_client.get(PODMIGRATIONJOBS, "m0")
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)
    calls = {(r["verb"], r["resource"], r["subresource"]) for r in apiserver.requests if r["user"] == "manager"}
    assert ("create", "pods", "eviction") in calls
    assert ("delete", "pods", None) not in calls
    assert ("patch", "podmigrationjobs", "status") in calls
