"""The manager's migration round keeps a running gang whole (emulator over loopback HTTP): a job for one
member of a gang of four (minimum 4) waits, naming ``GangBelowMinimum`` in condition ``Waiting`` and one
Event, and evicts nothing; once every member has a job, the four pass in one round and are evicted. A
ReservationFirst unit evicts only once every member's Reservation is Available (the Reservation's
placement is written by the test, as the reservation controller would)."""

from __future__ import annotations

from typing import Any

from migration_kit import Clock, evictions, pmj
from test_manager_reservation_first import place

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.gang_migration import ANNOTATION_GANG_MIGRATION, gang_migration_value
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.kube.client import ApiClient
from koordpy.kube.resources import EVENTS, PODGROUPS, PODMIGRATIONJOBS, PODS
from koordpy.manager.api import KubeMigrationApi
from koordpy.manager.arbitrate import make_arbitrate
from koordpy.manager.cache import ManagerCache
from koordpy.manager.migration import MigrationController, controller_from_args
from koordpy.manager.migration_metrics import MigrationMetrics
from koordpy.runtime.metrics import new_registry, render
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver

__all__ = ["api_client", "apiserver"]

W = [f"w{i}" for i in range(4)]


async def gang_member(api: ApiClient, name: str, node: str) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"pod-group.scheduling.sigs.k8s.io": "train"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "terminationGracePeriodSeconds": 0},
    }
    created = await api.create(PODS, body)
    await api.create_binding("shop", name, created["metadata"]["uid"], node)
    ready = [{"type": "Ready", "status": "True"}]
    return await api.patch_status(PODS, name, {"status": {"phase": "Running", "conditions": ready}}, namespace="shop")


def waiting(job: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (job.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c["type"] == "Waiting" and c["status"] == "True"), None)


async def test_one_members_job_waits_and_the_whole_gang_moves_together(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await api_client.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "shop"},
            "spec": {"minMember": 4},
        },
    )
    for i, name in enumerate(W):
        await gang_member(api_client, name, f"n{i}")  # one per node: maxMigratingPerNode (2) is no obstacle
    await pmj(api_client, "m0", "w0", passed=False)
    args = MigrationControllerArgs.model_validate({"defaultJobMode": "EvictDirectly"})
    cache = ManagerCache(api_client, ("pods", "podmigrationjobs", "reservations", "podgroups"))
    await cache.resync()
    api = KubeMigrationApi(api_client)
    clock = Clock()
    metrics = MigrationMetrics(new_registry())
    controller = controller_from_args(api, args, cache, clock=clock, metrics=metrics)
    arbitrate = make_arbitrate(api, args, controller)

    async def rounds(count: int) -> None:
        for _ in range(count):
            await cache.resync()
            await controller.run_round(arbitrate)
            clock.offset += 1

    await rounds(4)
    held = await api_client.get(PODMIGRATIONJOBS, "m0")
    condition = waiting(held)
    assert condition is not None and condition["reason"] == "GangBelowMinimum", held.get("status")
    assert "moving pod shop/w0 alone leaves 3 < 4" in condition["message"]
    assert ANNOTATION_PASSED_ARBITRATION not in (held["metadata"].get("annotations") or {})
    events = (await api_client.list(EVENTS, namespace="default")).items
    assert [e["reason"] for e in events if e["involvedObject"]["name"] == "m0"] == ["GangBelowMinimum"]  # once
    assert evictions(apiserver) == 0
    exposition = render(metrics.registry)[0].decode()
    assert "koordpy_migration_gang_held_jobs 1.0" in exposition
    assert "koordpy_migration_gang_units_total 0.0" in exposition

    for i in range(1, 4):
        await pmj(api_client, f"m{i}", W[i], passed=False)
    await rounds(1)
    passed = [
        name
        for name in ("m0", "m1", "m2", "m3")
        if ((await api_client.get(PODMIGRATIONJOBS, name))["metadata"].get("annotations") or {}).get(
            ANNOTATION_PASSED_ARBITRATION
        )
        == "true"
    ]
    assert passed == ["m0", "m1", "m2", "m3"]  # one round admitted the four
    for name in passed:  # each names its unit
        annotations = (await api_client.get(PODMIGRATIONJOBS, name))["metadata"]["annotations"]
        assert annotations[ANNOTATION_GANG_MIGRATION] == '{"gang":"gang shop/train","jobs":["m0","m1","m2","m3"]}'
    await rounds(
        10
    )  # evictQPS 10, evictBurst 1: one token per round; the object limiter (one Job pod per 5 min) does not split the unit
    assert {name: evictions(apiserver, name) for name in W} == dict.fromkeys(W, 1)
    exposition = render(metrics.registry)[0].decode()
    assert "koordpy_migration_gang_units_total 1.0" in exposition
    done = await api_client.get(PODMIGRATIONJOBS, "m0")
    assert waiting(done) is None


async def test_reservation_first_members_of_a_unit_evict_only_once_every_reservation_is_available(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Two jobs that passed together (ReservationFirst): w0's Reservation Available, w1's still Pending:
    nothing is evicted and w0 waits, naming w1's job (WaitForGang); once w1's is Available too, both go."""
    for i, name in enumerate(W[:2]):
        await gang_member(api_client, name, f"n{i}")
    unit = gang_migration_value("gang shop/train", ["u0", "u1"])
    for i in range(2):
        body = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {
                "name": f"u{i}",
                "annotations": {ANNOTATION_PASSED_ARBITRATION: "true", ANNOTATION_GANG_MIGRATION: unit},
            },
            "spec": {"podRef": {"namespace": "shop", "name": W[i]}, "ttl": "5m"},
        }
        await api_client.create(PODMIGRATIONJOBS, body)
    cache = ManagerCache(api_client)
    await cache.resync()
    clock = Clock()
    controller = MigrationController(KubeMigrationApi(api_client), LifecycleSettings(), cache, clock=clock)

    async def rounds(count: int) -> None:
        for _ in range(count):
            await cache.resync()
            await controller.run_round(None)
            clock.offset += 4  # past the 3 s look-again delay

    await rounds(2)  # Running, then each job's Reservation created
    names = {i: (await api_client.get(PODMIGRATIONJOBS, f"u{i}"))["metadata"]["uid"] for i in range(2)}
    await place(api_client, names[0], "n9")
    await rounds(3)
    assert evictions(apiserver) == 0
    held = await api_client.get(PODMIGRATIONJOBS, "u0")
    condition = waiting(held)
    assert condition is not None and condition["reason"] == "WaitForGang", held["status"]
    assert condition["message"] == (
        "gang shop/train moves as one: its member is evicted once the Reservations of jobs u1 are Available"
    )
    await place(api_client, names[1], "n8")
    await rounds(3)
    assert {name: evictions(apiserver, name) for name in W[:2]} == {"w0": 1, "w1": 1}
