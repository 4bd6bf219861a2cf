"""The manager operator (kopf + koordpy.kube) migrates PodMigrationJobs against the API server emulator."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import socket
from pathlib import Path

import pytest

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration, deprecation_warnings
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import write_kubeconfig
from koordpy.kube.errors import NotFound
from koordpy.kube.resources import LEASES, PODMIGRATIONJOBS, PODS
from koordpy.manager.operator import operator_settings, run, stop_kopf
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.faultproxy import FaultProxy

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


async def wait_phase(api: ApiClient, name: str, wanted: str, timeout: float = HANG_BACKSTOP) -> None:
    async with asyncio.timeout(timeout):
        while True:
            job = await api.get(PODMIGRATIONJOBS, name)
            if ((job.get("status") or {}).get("phase") or "") == wanted:
                return
            await asyncio.sleep(0.1)


def held_lease(holder: str, seconds: int) -> dict[str, object]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {"holderIdentity": holder, "leaseDurationSeconds": seconds, "renewTime": now, "acquireTime": now}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "koordpy-manager", "namespace": "koordpy-system"},
        "spec": spec,
    }


async def test_a_standby_acts_only_once_it_holds_the_lease_and_releases_it_when_stopped(
    apiserver: ApiServerEmulator,
    api_client: ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Another replica holds the manager's Lease (renewed, as far as this one can tell): the manager stands
    by and writes nothing (the job stays untouched for ten arbitration intervals); the holder releases
    the Lease as a stopping leader does, and the manager takes it and migrates. Stopped, it releases it."""
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "manager")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = validate(
        ManagerConfiguration,
        {
            "leaderElection": {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "1s"},
            "migrationController": {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"interval": "200ms"}},
        },
    )
    await api_client.create(LEASES, held_lease("other-replica", 3600), namespace="koordpy-system")
    await running_pod(api_client, "web-0")
    stop = asyncio.Event()
    task = asyncio.create_task(run(config, stop_flag=stop, liveness=False))
    body = {"metadata": {"name": "m0"}, "spec": {"podRef": {"namespace": "shop", "name": "web-0"}, "ttl": "5m"}}
    try:
        await api_client.create(PODMIGRATIONJOBS, body)
        async with asyncio.timeout(HANG_BACKSTOP):
            while "standing by; held by other-replica" not in caplog.text:
                await asyncio.sleep(0.05)
        await asyncio.sleep(2)  # ten arbitration intervals: a standby touches nothing
        untouched = await api_client.get(PODMIGRATIONJOBS, "m0")
        assert untouched.get("status") in (None, {}) and not (untouched["metadata"].get("annotations") or {})
        assert "migration rounds started" not in caplog.text
        writes = [r for r in apiserver.requests if r["user"] == "manager" and r["verb"] not in ("get", "list", "watch")]
        assert writes == [], writes
        # the holder stops and releases the Lease (client-go's release: empty holder, duration 1 s)
        current = await api_client.get(LEASES, "koordpy-manager", "koordpy-system")
        released = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
        await api_client.replace(LEASES, {**current, "spec": released}, namespace="koordpy-system")
        await wait_phase(api_client, "m0", "Succeeded")
        lease = await api_client.get(LEASES, "koordpy-manager", "koordpy-system")
        assert lease["spec"]["holderIdentity"].startswith(socket.gethostname() + "_")
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)
    lease = await api_client.get(LEASES, "koordpy-manager", "koordpy-system")
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseDurationSeconds"]) == ("", 1)


async def test_a_standby_stopped_before_it_leads_writes_nothing(
    apiserver: ApiServerEmulator, api_client: ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "manager")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    await api_client.create(LEASES, held_lease("other-replica", 3600), namespace="koordpy-system")
    stop = asyncio.Event()
    task = asyncio.create_task(run(validate(ManagerConfiguration, {}), stop_flag=stop, liveness=False))
    async with asyncio.timeout(HANG_BACKSTOP):
        while not any(r["resource"] == "leases" and r["user"] == "manager" for r in apiserver.requests):
            await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, HANG_BACKSTOP)
    assert {r["verb"] for r in apiserver.requests if r["user"] == "manager"} <= {"get", "list", "watch"}
    lease = await api_client.get(LEASES, "koordpy-manager", "koordpy-system")
    assert lease["spec"]["holderIdentity"] == "other-replica"


def test_kopf_runs_standalone_and_the_deprecated_peering_fields_say_so() -> None:
    settings = operator_settings(validate(ManagerConfiguration, {}))
    assert (settings.peering.standalone, settings.peering.mandatory) == (True, False)
    backoffs = list(settings.networking.error_backoffs)  # type: ignore[arg-type]
    assert backoffs[:3] == [0.5, 1.0, 2.0] and max(backoffs) == 2.0 and sum(backoffs) > 100  # prompt, patient
    old = validate(ManagerConfiguration, {"peering": {"enabled": True, "lifetimeSeconds": 20}})
    assert operator_settings(old).peering.standalone is True  # peering no longer decides who acts
    warnings = deprecation_warnings(old)
    assert [w.split(" ", 1)[0] for w in warnings] == ["peering.enabled", "peering.lifetimeSeconds"]
    assert all("Lease (leaderElection)" in w for w in warnings)
    assert deprecation_warnings(validate(ManagerConfiguration, {})) == []
    assert deprecation_warnings(validate(ManagerConfiguration, {"peering": {"name": "old"}})) == []  # still read


async def test_a_leader_that_loses_its_lease_stops_acting_and_stands_by_again(
    apiserver: ApiServerEmulator,
    api_client: ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Someone else's name appears in the Lease (as after a pause longer than the lease): at its next renewal
    the manager stops kopf and its rounds and stands by, in the same process; once the Lease is free again
    it takes it and acts again."""
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "manager")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = validate(
        ManagerConfiguration,
        {
            "leaderElection": {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "1s"},
            "migrationController": {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"interval": "200ms"}},
        },
    )
    await running_pod(api_client, "web-0")
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run(config, stop_flag=stop, ready_flag=ready, liveness=False))
    try:
        await asyncio.wait_for(ready.wait(), HANG_BACKSTOP)
        current = await api_client.get(LEASES, "koordpy-manager", "koordpy-system")
        taken = {**current["spec"], "holderIdentity": "another-replica"}
        await api_client.replace(LEASES, {**current, "spec": taken}, namespace="koordpy-system")
        async with asyncio.timeout(HANG_BACKSTOP):
            while "stopped acting: the Lease was lost; standing by" not in caplog.text:
                await asyncio.sleep(0.05)
        assert "migration rounds stopped" in caplog.text and not task.done()
        body = {"metadata": {"name": "m0"}, "spec": {"podRef": {"namespace": "shop", "name": "web-0"}, "ttl": "5m"}}
        await api_client.create(PODMIGRATIONJOBS, body)
        await asyncio.sleep(2)  # ten arbitration intervals: a standby touches nothing
        untouched = await api_client.get(PODMIGRATIONJOBS, "m0")
        assert untouched.get("status") in (None, {}), untouched
        # the other holder goes away (releases): this process leads again and migrates
        current = await api_client.get(LEASES, "koordpy-manager", "koordpy-system")
        freed = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
        await api_client.replace(LEASES, {**current, "spec": freed}, namespace="koordpy-system")
        await wait_phase(api_client, "m0", "Succeeded")
        assert [r.getMessage() for r in caplog.records].count("migration rounds started (every 0.2s)") == 2
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)


async def test_a_leader_stopped_during_kopfs_discovery_ends_without_waiting_for_kopfs_leftovers(
    apiserver: ApiServerEmulator,
    api_client: ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Stopped the moment kopf is ready, while kopf's API discovery waits for ``/api/v1`` (held by a proxy):
    kopf's discovery requests outlive their cancelled observer, meet the session kopf closed, and wait for a
    login that never comes (kopf alone would wait 5 s for them). The manager gives kopf 1 s, cancels it,
    and releases the Lease."""
    caplog.set_level(logging.INFO)
    proxy = FaultProxy(apiserver.url).start()
    proxy.delay("/api/v1", HANG_BACKSTOP)
    try:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", proxy.url, "manager")))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        config = validate(ManagerConfiguration, {"leaderElection": {"retryPeriod": "1s"}})
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(run(config, stop_flag=stop, ready_flag=ready, liveness=False))
        await asyncio.wait_for(ready.wait(), HANG_BACKSTOP)
        async with asyncio.timeout(HANG_BACKSTOP):
            while not any(path == "/api/v1" for _, path, _ in proxy.in_flight()):
                await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)
        assert any(path == "/api/v1" for _, path, _ in proxy.in_flight())  # kopf's leftover, still waiting
    finally:
        proxy.stop()
    assert "kopf did not stop within 1s of its stop flag: cancelling it" in caplog.text
    lease = await api_client.get(LEASES, "koordpy-manager", "koordpy-system")
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseDurationSeconds"]) == ("", 1)


async def test_stop_kopf_cancels_a_kopf_that_does_not_stop_by_its_flag() -> None:
    ended: list[str] = []

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ended.append("cleaned up")

    operator = asyncio.create_task(stubborn())
    await asyncio.wait_for(stop_kopf(operator, logging.getLogger("test"), grace=0.01), HANG_BACKSTOP)
    assert operator.cancelled() and ended == ["cleaned up"]

    deafness = [True]

    async def deaf() -> None:
        while deafness[0]:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)

    left = asyncio.create_task(deaf())
    await asyncio.wait_for(stop_kopf(left, logging.getLogger("test"), grace=0.01), HANG_BACKSTOP)
    assert not left.done()  # left behind: the caller goes on (releases the Lease, exits)
    deafness[0] = False
    left.cancel()
    await asyncio.wait_for(left, HANG_BACKSTOP)
