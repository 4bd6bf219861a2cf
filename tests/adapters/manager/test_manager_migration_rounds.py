"""One migration round over many PodMigrationJobs (emulator over loopback HTTP): unusable jobs fail once and
never hold up a valid one, a failing call backs one job off while the round goes on, ttl fires at its
deadline, a forbidden evictor fails at once, finished jobs and evicted pods cost no request, and every
wait is named."""

from __future__ import annotations

import time
from typing import Any

from migration_kit import Clock, controller_for, evictions, phase, pmj, running_pod, step

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.eviction import LABEL_EVICT_POLICY
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.ratelimit import ObjectLimiter
from koordpy.kube.client import ApiClient
from koordpy.kube.resources import EVENTS, PDBS, PODMIGRATIONJOBS, PODS
from koordpy.manager.api import KubeMigrationApi
from koordpy.manager.arbitrate import make_arbitrate
from koordpy.manager.cache import ManagerCache
from koordpy.manager.migration import MigrationController, controller_from_args
from koordpy.manager.migration_metrics import MigrationMetrics
from koordpy.manager.owners import WorkloadLimit
from koordpy.model.durations import format_rfc3339, parse_rfc3339
from koordpy.runtime.metrics import new_registry, render
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver

__all__ = ["api_client", "apiserver"]

PMJ = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob"}


def seeded_job(name: str, spec: Any, *, created: float | None = None, status: Any = None) -> dict[str, Any]:
    """A job as stored, whatever its spec (the emulator does not check CRD schemas, an older CRD might not)."""
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if created is not None:
        meta["creationTimestamp"] = format_rfc3339(created)
    body: dict[str, Any] = {**PMJ, "metadata": meta, "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def events_of(items: list[dict[str, Any]], job: str) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in items if e["involvedObject"]["name"] == job]


def manager_requests(server: ApiServerEmulator, since: int = 0) -> list[dict[str, Any]]:
    return server.requests[since:]


async def test_unusable_jobs_fail_once_and_never_hold_up_a_valid_one(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await running_pod(api_client, "web-1", owner="rs-1")
    bad = {
        "subresource": {"podRef": {"namespace": "shop", "name": "web-1/status"}, "ttl": "5m"},
        "long-name": {"podRef": {"namespace": "shop", "name": "a" * 9000}, "ttl": "5m"},
        "no-pod-ref": {"ttl": "5m"},
        "spec-text": "move web-1 please",
        "absurd-ttl": {"podRef": {"namespace": "shop", "name": "web-1"}, "ttl": "1e99h"},
    }
    apiserver.seed(*(seeded_job(name, spec) for name, spec in bad.items()))
    await pmj(api_client, "good", "web-1", passed=False)
    args = MigrationControllerArgs.model_validate({"defaultJobMode": "EvictDirectly"})
    cache = ManagerCache(api_client)
    await cache.resync()
    api = KubeMigrationApi(api_client)
    controller = controller_from_args(api, args, cache, clock=Clock())
    arbitrate = make_arbitrate(api, args, controller)
    before = len(apiserver.requests)
    await step(controller, arbitrate)
    # the valid job passed arbitration (web-1/status was not counted as a job for pod web-1) and started
    good = await api_client.get(PODMIGRATIONJOBS, "good")
    assert good["metadata"]["annotations"][ANNOTATION_PASSED_ARBITRATION] == "true"
    assert good["status"]["phase"] == "Running"
    events = (await api_client.list(EVENTS, namespace="default")).items
    for name, reason in [
        ("subresource", "InvalidPodRef"),
        ("long-name", "InvalidPodRef"),
        ("no-pod-ref", "InvalidPodRef"),
        ("spec-text", "InvalidSpec"),
        ("absurd-ttl", "InvalidSpec"),
    ]:
        job = await api_client.get(PODMIGRATIONJOBS, name)
        assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", reason), name
        invalid = [c for c in job["status"]["conditions"] if c["type"] == "Invalid"]
        assert [(c["status"], c["reason"]) for c in invalid] == [("True", reason)], name
        assert events_of(events, name) == [("Warning", reason)], name
    # no request ever carried the bad names (nothing read pods/web-1/status or the 9,000 characters)
    assert not [r for r in manager_requests(apiserver, before) if r.get("resource") == "pods" and r["verb"] == "get"]
    assert not [r for r in manager_requests(apiserver, before) if len(str(r.get("name") or "")) > 253]
    # later rounds: not a write, not an Event more for the failed jobs
    mark = len(apiserver.requests)
    for _ in range(3):
        await step(controller, arbitrate)
    written = {r.get("name") for r in manager_requests(apiserver, mark) if r["verb"] in ("patch", "create")}
    assert written.isdisjoint(bad), written
    events = (await api_client.list(EVENTS, namespace="default")).items
    assert all(len(events_of(events, name)) == 1 for name in bad)


async def test_a_failing_call_backs_one_job_off_and_the_round_goes_on(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    for i in range(3):
        await running_pod(api_client, f"web-{i}", owner=f"rs-{i}")
        await pmj(api_client, f"m{i}", f"web-{i}")
    metrics = MigrationMetrics(new_registry())
    clock = Clock()
    controller = await controller_for(api_client, clock=clock, metrics=metrics)
    # the first status write of the round (job m0's) fails with a 500: m1 and m2 still start
    apiserver.inject_error(500, verb="patch", resource="podmigrationjobs", subresource="status", count=1)
    await step(controller)
    assert [await phase(api_client, f"m{i}") for i in range(3)] == ["Pending", "Running", "Running"]
    assert controller.errors["step"] == 1
    exposition = render(metrics.registry)[0].decode()
    assert 'koordpy_migration_errors_total{error="ServerError",step="step"} 1.0' in exposition
    assert 'koordpy_migration_jobs{phase="Running"} 2.0' in exposition
    await step(controller)  # m0 is backed off (1 s): not retried yet
    assert await phase(api_client, "m0") == "Pending"
    clock.offset += 2
    await step(controller)
    assert await phase(api_client, "m0") == "Running"


async def test_ttl_fails_the_job_at_its_deadline_not_at_the_next_retry(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    # a budget that never allows the eviction: retries back off 1, 2, 4, 8, 16, 30 s; the ttl is 40 s
    await running_pod(api_client, "db-1", owner="rs-db")
    await api_client.create(
        PDBS,
        {"metadata": {"name": "db", "namespace": "shop"}, "spec": {"minAvailable": 1, "selector": {}}}
        | {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "rs-db"}}}},
    )
    created = await pmj(api_client, "m1", "db-1", ttl="40s")
    born = parse_rfc3339(created["metadata"]["creationTimestamp"])
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    at = time.time()
    while at - born < 39.0:
        await step(controller)
        clock.offset += 1.0
        at = clock()
    assert await phase(api_client, "m1") == "Running"
    assert evictions(apiserver, "db-1") >= 4  # refused and retried with a growing backoff
    # the next retry is due well after the deadline; the round at 40.5 s fails the job anyway
    clock.offset += born + 40.5 - clock()
    await step(controller)
    job = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")


async def test_a_forbidden_evictor_fails_the_job_at_once(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    await running_pod(api_client, "web-1", owner="rs-1")
    body = {
        **PMJ,
        "metadata": {"name": "m1", "labels": {LABEL_EVICT_POLICY: "Delete"}, "annotations": {}},
        "spec": {"podRef": {"namespace": "shop", "name": "web-1"}, "mode": "EvictDirectly", "ttl": "5m"},
    }
    body["metadata"]["annotations"][ANNOTATION_PASSED_ARBITRATION] = "true"
    await api_client.create(PODMIGRATIONJOBS, body)
    # the chart grants pods/eviction only: a plain delete is refused as RBAC refuses it
    apiserver.inject_error(403, verb="delete", resource="pods", count=100, message='pods "web-1" is forbidden')
    controller = await controller_for(api_client)
    await step(controller)  # Running
    await step(controller)  # Delete evictor: 403 -> Failed at once
    job = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "FailedEvict")
    assert "delete pods" in job["status"]["message"]
    deletes = [r for r in apiserver.requests if r["verb"] == "delete" and r.get("resource") == "pods"]
    assert len(deletes) == 1  # never retried until the ttl
    assert (await api_client.get(PODS, "web-1", "shop"))["metadata"].get("deletionTimestamp") is None


async def test_finished_jobs_and_evicted_pods_cost_no_request(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    now = time.time()
    apiserver.seed(
        *(
            seeded_job(
                f"done-{i}",
                {"podRef": {"namespace": "shop", "name": f"gone-{i}"}, "ttl": "1h"},
                created=now - 60,
                status={"phase": "Succeeded", "status": "Complete"},
            )
            for i in range(200)
        )
    )
    await running_pod(api_client, "web-1", owner="rs-1")
    await pmj(api_client, "m1", "web-1")
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    assert (len(controller.index.active), len(controller.index.facts)) == (1, 201)
    mark = len(apiserver.requests)
    for _ in range(4):
        await controller.run_round(None)  # no relist: what a watched cache gives, with nothing changing
        clock.offset += 2
    calls = [(r["verb"], r.get("resource"), r.get("subresource"), r.get("name")) for r in apiserver.requests[mark:]]
    # Pending -> Running, evict (status written ahead), then Succeeded: all about m1, none about done-*
    assert all(name in ("m1", "web-1", None) for _, _, _, name in calls), calls
    assert ("create", "pods", "eviction", "web-1") in calls
    assert [c for c in calls if c[0] == "get"] == []  # the pod came from the cache, before and after
    assert await phase(api_client, "m1") == "Running"  # waits for the pod's deletion to be watched
    await step(controller)
    assert await phase(api_client, "m1") == "Succeeded"
    assert evictions(apiserver, "web-1") == 1


async def test_a_second_job_of_a_limited_workload_names_its_wait(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    # the object limiter allows 2 evictions per 300 s (burst 1) for the workload: after the first, the
    # second job waits 150 s and says so, once
    for i in range(2):
        await running_pod(api_client, f"web-{i}", owner="rs-web", grace=30)
        await pmj(api_client, f"m{i}", f"web-{i}")
    clock = Clock()
    controller: MigrationController = await controller_for(
        api_client, clock=lambda: 1e9 + clock.offset, object_limiter=ObjectLimiter(300)
    )
    controller.workload_of = lambda pod: WorkloadLimit("uid-rs-web", 2, "ReplicaSet shop/rs-web")
    for _ in range(4):
        await step(controller)
        clock.offset += 4
    assert evictions(apiserver) == 1
    waiting = [
        c
        for name in ("m0", "m1")
        for c in ((await api_client.get(PODMIGRATIONJOBS, name)).get("status") or {}).get("conditions") or ()
        if c["type"] == "Waiting" and c["status"] == "True"
    ]
    assert [(c["reason"]) for c in waiting] == ["ObjectLimiter"]
    assert "ReplicaSet shop/rs-web" in waiting[0]["message"]
    events = (await api_client.list(EVENTS, namespace="default")).items
    assert sum(1 for e in events if e["reason"] == "ObjectLimiter") == 1
    clock.offset += 150
    await step(controller)
    assert evictions(apiserver) == 2
