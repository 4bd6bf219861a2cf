"""MigrationController against the API server emulator over loopback HTTP: eviction, PDB 429 retries,
restart adoption, rate limits and arbitration verdicts. Each step relists the cache first (``step``), so
a round sees every write of the step before, as a watch would a moment later."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from migration_kit import Clock, controller_for, evictions, phase, pmj, running_pod, step

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import Verdict
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.objects import MigrationJob
from koordpy.descheduler.ratelimit import ObjectLimiter
from koordpy.kube import errors
from koordpy.kube.client import ApiClient
from koordpy.kube.resources import EVENTS, PDBS, PODMIGRATIONJOBS, PODS
from koordpy.manager.api import KubeMigrationApi
from koordpy.manager.arbitrate import make_arbitrate
from koordpy.manager.cache import ManagerCache
from koordpy.manager.migration import controller_from_args
from koordpy.manager.migration_metrics import MigrationMetrics
from koordpy.runtime.metrics import new_registry, render
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver

__all__ = ["api_client", "apiserver"]


async def test_evict_directly_through_the_eviction_api(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    await running_pod(api_client, "web-1")
    await pmj(api_client, "m1", "web-1")
    metrics = MigrationMetrics(new_registry())
    controller = await controller_for(api_client, metrics=metrics)
    await step(controller)  # Pending -> Running, podRef.uid recorded
    job = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert job["status"]["phase"] == "Running" and job["spec"]["podRef"]["uid"]
    await step(controller)  # evict (grace 0: gone at once)
    with pytest.raises(errors.NotFound):
        await api_client.get(PODS, "web-1", "shop")
    controller.clock = lambda: time.time() + 2  # past the 1 s look-again delay after an eviction
    await step(controller)
    job = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert job["status"]["phase"] == "Succeeded"
    assert job["status"]["status"] == "Complete"
    assert evictions(apiserver, "web-1") == 1
    exposition = render(metrics.registry)[0].decode()
    assert 'koordpy_migration_evictions_total{evictor="Eviction",outcome="evicted"} 1.0' in exposition
    assert 'koordpy_migration_jobs{phase="Succeeded"} 1.0' in exposition
    reasons = {e["reason"] for e in (await api_client.list(EVENTS, namespace="default")).items}
    assert {"Running", "Evicting", "Complete"} <= reasons


async def test_pdb_429_is_retried_with_backoff_never_deleted(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await running_pod(api_client, "web-1")
    pdb = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"minAvailable": 1, "selector": {}}}
    pdb["spec"]["selector"] = {"matchLabels": {"app": "rs-web"}}
    await api_client.create(PDBS, pdb)
    await pmj(api_client, "m1", "web-1")
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    await step(controller)  # Running
    for _ in range(4):  # refused each time: 1 healthy pod, minAvailable 1 -> 0 disruptions allowed
        await step(controller)
        clock.offset += 31  # past the longest retry delay (30 s)
    assert controller.evictions["refused"] == 4
    job = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert job["status"]["phase"] == "Running"
    assert job["status"]["conditions"][-1]["reason"] == "FailedEvict"
    assert (await api_client.get(PODS, "web-1", "shop"))["metadata"].get("deletionTimestamp") is None
    deletes = [r for r in apiserver.requests if r.get("verb") == "delete" and r.get("resource") == "pods"]
    assert deletes == []  # never turned into a plain delete
    await api_client.delete(PDBS, "web", "shop")
    await step(controller)
    clock.offset += 2
    await step(controller)
    assert await phase(api_client, "m1") == "Succeeded"
    # the ttl ends a job whose PDB never relents: 5m after creation
    await running_pod(api_client, "web-2")
    await api_client.create(PDBS, pdb)
    await pmj(api_client, "m2", "web-2")
    await step(controller)
    clock.offset += 301
    await step(controller)
    job = await api_client.get(PODMIGRATIONJOBS, "m2")
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")


async def test_restarted_controller_adopts_running_jobs_and_never_evicts_twice(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await running_pod(api_client, "web-1", grace=30)  # terminates slowly: deletionTimestamp for 30 s
    await pmj(api_client, "m1", "web-1")
    first = await controller_for(api_client)
    await step(first)
    await step(first)
    assert evictions(apiserver, "web-1") == 1
    assert (await api_client.get(PODS, "web-1", "shop"))["metadata"]["deletionTimestamp"]
    # the manager dies; a new one (fresh limiters, no memory) takes over the Running job
    clock = Clock()
    second = await controller_for(api_client, clock=clock)
    for _ in range(3):
        await step(second)
        clock.offset += 4
    assert evictions(apiserver, "web-1") == 1
    assert await phase(api_client, "m1") == "Running"
    # the kubelet finishes: the pod is gone, the adopted job succeeds
    apiserver.state.delete(apiserver.state.infos[("", "pods")], "shop", "web-1", {"gracePeriodSeconds": 0})
    await step(second)
    assert await phase(api_client, "m1") == "Succeeded"
    assert evictions(apiserver, "web-1") == 1


async def test_limits_hold_when_many_jobs_arrive_at_once(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    # 12 pods of one workload, 6 of another; evictQPS 1 burst 3, object limiter 1 per 300 s per workload
    for i in range(12):
        await running_pod(api_client, f"a-{i}", owner="rs-a")
        await pmj(api_client, f"ja-{i}", f"a-{i}")
    for i in range(6):
        await running_pod(api_client, f"b-{i}", owner="rs-b")
        await pmj(api_client, f"jb-{i}", f"b-{i}")
    clock = Clock()
    controller = await controller_for(
        api_client,
        evict_qps=1,
        evict_burst=3,
        object_limiter=ObjectLimiter(300),
        clock=lambda: 1e9 + clock.offset,
    )
    await step(controller)  # all Running
    for _ in range(5):  # no time passes: burst 3 allows 3, the object limiter 1 per workload -> 2
        await step(controller)
    assert evictions(apiserver) == 2
    clock.offset += 300  # one more token per workload, plenty of QPS tokens
    for _ in range(3):
        await step(controller)
    assert evictions(apiserver) == 4


async def test_arbitration_verdicts_start_or_fail_jobs(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    for name in ("web-1", "web-2", "web-3"):
        await running_pod(api_client, name, owner=name)
    await pmj(api_client, "pass", "web-1", passed=False)
    await pmj(api_client, "fail", "web-2", passed=False)
    await pmj(api_client, "wait", "web-3", passed=False)
    seen: list[list[str]] = []

    async def arbitrate(jobs: Sequence[MigrationJob], now: float) -> dict[str, Verdict]:
        seen.append(sorted(j.name for j in jobs))
        return {
            "pass": Verdict("pass", None, "ok"),
            "fail": Verdict("fail", "ExpectedReplicas", "workload has 1 replica"),
            "wait": Verdict("requeue", "MaxMigratingPerNode", "node n1 has 2 migrating"),
        }

    controller = await controller_for(api_client)
    await step(controller, arbitrate)
    assert seen == [["fail", "pass", "wait"]]
    passed = await api_client.get(PODMIGRATIONJOBS, "pass")
    assert passed["metadata"]["annotations"][ANNOTATION_PASSED_ARBITRATION] == "true"
    assert passed["status"]["phase"] == "Running"
    failed = await api_client.get(PODMIGRATIONJOBS, "fail")
    assert (failed["status"]["phase"], failed["status"]["reason"]) == ("Failed", "ForbiddenMigratePod")
    waiting = await api_client.get(PODMIGRATIONJOBS, "wait")
    assert (waiting.get("status") or {}).get("phase") in (None, "", "Pending")
    named = [c for c in waiting["status"]["conditions"] if c["type"] == "Waiting"]
    assert [(c["status"], c["reason"], c["message"]) for c in named] == [
        ("True", "MaxMigratingPerNode", "node n1 has 2 migrating")
    ]
    events = (await api_client.list(EVENTS, namespace="default")).items
    assert [e["reason"] for e in events if e["type"] == "Warning"] == ["ForbiddenMigratePod"]
    assert [e["reason"] for e in events if e["involvedObject"]["name"] == "wait"] == ["MaxMigratingPerNode"]
    await step(controller, arbitrate)  # requeued again by the same filter: no second write, no second Event
    events = (await api_client.list(EVENTS, namespace="default")).items
    assert [e["reason"] for e in events if e["involvedObject"]["name"] == "wait"] == ["MaxMigratingPerNode"]


async def test_real_arbitration_keeps_max_migrating_per_node(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    # 5 jobs for 5 pods on node n1, maxMigratingPerNode 2 (upstream default): 2 pass, 3 wait; once the
    # first two finish, the next two pass. Owners are not served by the emulator: workload filters pass.
    for i in range(5):
        await running_pod(api_client, f"web-{i}", owner=f"rs-{i}")
        await pmj(api_client, f"m{i}", f"web-{i}", passed=False)
    args = MigrationControllerArgs.model_validate({"defaultJobMode": "EvictDirectly"})
    clock = Clock()
    api = KubeMigrationApi(api_client)
    cache = ManagerCache(api_client)
    await cache.resync()
    controller = controller_from_args(api, args, cache, clock=clock)
    arbitrate = make_arbitrate(api, args, controller)
    await step(controller, arbitrate)
    jobs = (await api_client.list(PODMIGRATIONJOBS)).items
    started = [j["metadata"]["name"] for j in jobs if (j.get("status") or {}).get("phase") == "Running"]
    assert len(started) == 2
    for _ in range(12):
        await step(controller, arbitrate)
        clock.offset += 4  # past the 3 s requeue of an evictQPS wait
        phases = [
            str((j.get("status") or {}).get("phase") or "Pending")
            for j in (await api_client.list(PODMIGRATIONJOBS)).items
        ]
        assert phases.count("Running") <= 2  # never more than maxMigratingPerNode at once
    phases = [
        str((j.get("status") or {}).get("phase") or "Pending") for j in (await api_client.list(PODMIGRATIONJOBS)).items
    ]
    assert phases.count("Succeeded") == 5
    assert evictions(apiserver) == 5


async def test_scavenger_deletes_finished_jobs_after_ttl_plus_five_minutes(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await running_pod(api_client, "web-1")
    await pmj(api_client, "m1", "web-1")
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    for _ in range(3):
        await step(controller)
        clock.offset += 2
    assert await phase(api_client, "m1") == "Succeeded"
    clock.offset = 590  # ttl 5m + 5m = 600 s after creation: not yet
    await step(controller)
    assert await phase(api_client, "m1") == "Succeeded"
    clock.offset = 602
    await step(controller)
    with pytest.raises(errors.NotFound):
        await api_client.get(PODMIGRATIONJOBS, "m1")
