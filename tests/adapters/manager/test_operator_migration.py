"""The manager operator (kopf + koordpy.kube) migrates PodMigrationJobs against the API server emulator."""

from __future__ import annotations

import asyncio
import datetime
import logging
from pathlib import Path

import pytest

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import write_kubeconfig
from koordpy.kube.errors import NotFound
from koordpy.kube.resources import PODMIGRATIONJOBS, PODS, ResourceRef
from koordpy.manager.operator import operator_settings, run
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


PEERING = ResourceRef("kopf.dev", "v1", "clusterkopfpeerings", "ClusterKopfPeering", namespaced=False)


async def wait_phase(api: ApiClient, name: str, wanted: str, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while True:
            job = await api.get(PODMIGRATIONJOBS, name)
            if ((job.get("status") or {}).get("phase") or "") == wanted:
                return
            await asyncio.sleep(0.1)


async def test_with_peering_only_the_active_replica_runs_rounds(
    apiserver: ApiServerEmulator,
    api_client: ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "manager")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = validate(
        ManagerConfiguration,
        {
            "peering": {"enabled": True, "lifetimeSeconds": 600},
            "migrationController": {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"interval": "200ms"}},
        },
    )
    for i in range(2):
        await running_pod(api_client, f"web-{i}")
    stop = asyncio.Event()
    task = asyncio.create_task(run(config, stop_flag=stop, liveness=False))
    body = {"metadata": {"name": "m0"}, "spec": {"podRef": {"namespace": "shop", "name": "web-0"}, "ttl": "5m"}}
    try:
        await api_client.create(PODMIGRATIONJOBS, body)
        await wait_phase(api_client, "m0", "Succeeded")  # a lone replica is active: its rounds run
        peering = await api_client.get(PEERING, "koordpy-manager")
        (me,) = peering["status"]
        assert peering["status"][me]["lifetime"] == 600  # peering.lifetimeSeconds reaches kopf
        # a replica with a higher priority appears: this one pauses, and so do its rounds
        now = datetime.datetime.now(datetime.UTC).isoformat()
        other = {"other-replica": {"priority": 2**40, "lifetime": 600, "lastseen": now}}
        await api_client.patch(PEERING, "koordpy-manager", {"status": other})
        async with asyncio.timeout(30):
            while "migration rounds stopped" not in [r.getMessage() for r in caplog.records]:
                await asyncio.sleep(0.1)
        await api_client.create(
            PODMIGRATIONJOBS,
            {**body, "metadata": {"name": "m1"}}
            | {"spec": {**body["spec"], "podRef": {"namespace": "shop", "name": "web-1"}}},
        )
        await asyncio.sleep(2)  # ten intervals: a standby touches nothing
        untouched = await api_client.get(PODMIGRATIONJOBS, "m1")
        assert untouched.get("status") in (None, {}) and not (untouched["metadata"].get("annotations") or {})
        # the other replica leaves: this one resumes its rounds and migrates the job
        await api_client.patch(PEERING, "koordpy-manager", {"status": {"other-replica": None}})
        await wait_phase(api_client, "m1", "Succeeded")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("migration rounds started")]
    assert len(started) == 2  # once at the start, once on resuming
    peering = await api_client.get(PEERING, "koordpy-manager")
    assert peering["metadata"].get("finalizers") in (None, [])  # the rounds' daemon needs none


def test_peering_lifetime_reaches_kopf() -> None:
    default = operator_settings(validate(ManagerConfiguration, {}))
    assert default.peering.lifetime == 60  # kopf's own default, stated in the configuration
    quick = operator_settings(validate(ManagerConfiguration, {"peering": {"enabled": True, "lifetimeSeconds": 20}}))
    assert (quick.peering.lifetime, quick.peering.mandatory, quick.peering.standalone) == (20, True, False)
