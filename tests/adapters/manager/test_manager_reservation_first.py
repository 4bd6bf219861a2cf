"""ReservationFirst migrations against the API server emulator over loopback HTTP.

The Reservation's placement is written by the test, as the manager's reservation controller would write
it (status.phase / nodeName / conditions): this file tests the migration's side only.
"""

from __future__ import annotations

import time
from typing import Any

from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.kube.client import ApiClient
from koordpy.kube.resources import EVENTS, PODMIGRATIONJOBS, PODS, RESERVATIONS
from koordpy.manager.api import KubeMigrationApi
from koordpy.manager.cache import ManagerCache
from koordpy.manager.migration import MigrationController
from koordpy.scheduler.plugins.reservation.spec import (
    allocated_annotations,
    reservation_allocated,
    reservation_from_dict,
)
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver

__all__ = ["api_client", "apiserver"]

SETTINGS = LifecycleSettings()  # defaultJobMode ReservationFirst
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "uid-web-rs", "controller": True}


class Clock:
    """Real time plus a test-controlled offset (to skip look-again delays without sleeping)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


async def pod_on(
    api: ApiClient, name: str, node: str, *, ready: bool = True, through: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A pod of the ReplicaSet bound to ``node``; ``through``: the Reservation its binding allocates
    (the annotation the extender's binding carries), None: bound outside every Reservation."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}, "ownerReferences": [RS]},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}],
            "terminationGracePeriodSeconds": 0,
        },
    }
    created = await api.create(PODS, body)
    annotations = allocated_annotations(reservation_from_dict(through)) if through is not None else None
    await api.create_binding("shop", name, created["metadata"]["uid"], node, annotations=annotations)
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return await api.patch_status(
        PODS, name, {"status": {"phase": "Running", "conditions": conditions}}, namespace="shop"
    )


async def pmj(api: ApiClient, name: str, pod: str) -> dict[str, Any]:
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "annotations": {ANNOTATION_PASSED_ARBITRATION: "true"}},
        "spec": {"podRef": {"namespace": "shop", "name": pod}, "ttl": "5m"},
    }
    return await api.create(PODMIGRATIONJOBS, body)


async def place(api: ApiClient, name: str, node: str, phase: str = "Available", **extra: Any) -> None:
    """Write the Reservation's status as the manager's reservation controller does after placing it."""
    status = {
        "phase": phase,
        "nodeName": node,
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}],
        **extra,
    }
    await api.patch_status(RESERVATIONS, name, {"status": status})


async def job_status(api: ApiClient, name: str) -> dict[str, Any]:
    return dict((await api.get(PODMIGRATIONJOBS, name)).get("status") or {})


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or () if c["type"] == kind)


def calls(server: ApiServerEmulator, verb: str, resource: str, subresource: str | None = None) -> int:
    return sum(
        1
        for r in server.requests
        if r.get("verb") == verb and r.get("resource") == resource and r.get("subresource") == subresource
    )


async def controller_for(api: ApiClient, **kwargs: Any) -> MigrationController:
    cache = ManagerCache(api)
    await cache.resync()
    return MigrationController(KubeMigrationApi(api), SETTINGS, cache, **kwargs)


async def step(controller: MigrationController) -> None:
    """One round on a freshly relisted cache (what the watches give a moment after each write)."""
    await controller.cache.resync()
    await controller.run_round(None)


async def test_reserve_evict_bind_ready(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    await pod_on(api_client, "web-1", "n1")
    await pod_on(api_client, "web-0", "n2")  # a sibling, Ready, on the node the Reservation will take
    job = await pmj(api_client, "m1", "web-1")
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)

    await step(controller)  # Pending -> Running
    await step(controller)  # create the Reservation, record it on the job
    res_name = job["metadata"]["uid"]  # deterministic: the job's UID, as upstream
    res = await api_client.get(RESERVATIONS, res_name)
    assert res["spec"]["owners"] == [{"controller": {**RS, "namespace": "shop"}}]
    assert res["spec"]["allocateOnce"] is True and res["spec"]["ttl"] == "300s"
    terms = res["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}
    ]
    stored = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert stored["spec"]["reservationOptions"]["reservationRef"]["name"] == res_name
    assert condition(stored["status"], "ReservationCreated")["status"] == "True"

    await step(controller)  # Reservation still Pending: no eviction
    assert calls(apiserver, "create", "pods", "eviction") == 0

    await place(api_client, res_name, "n2")
    clock.offset += 4  # past the 3 s look-again delay (upstream requeue)
    await step(controller)  # Available on n2: evict web-1
    assert calls(apiserver, "create", "pods", "eviction") == 1
    status = await job_status(api_client, "m1")
    assert status["nodeName"] == "n2"
    assert condition(status, "ReservationScheduled")["status"] == "True"

    clock.offset += 2  # past the 1 s look-again delay after an eviction
    await step(controller)  # the pod is gone: wait for a pod to bind the Reservation
    status = await job_status(api_client, "m1")
    assert condition(status, "Eviction")["reason"] == "EvictComplete"
    assert condition(status, "PodBoundReservation")["reason"] == "WaitForPodBindReservation"

    # the sibling web-0 on n2 did not bind through the Reservation: the job keeps waiting
    clock.offset += 4
    await controller.run_round(None)
    status = await job_status(api_client, "m1")
    assert status["phase"] == "Running" and "podRef" not in status
    assert condition(status, "PodBoundReservation")["reason"] == "WaitForPodBindReservation"

    # the ReplicaSet's replacement binds on n2 through the Reservation (not Ready yet); the manager has not
    # written currentOwners yet, so the ledger finds it among the pods on n2 by its annotation
    web2 = await pod_on(api_client, "web-2", "n2", ready=False, through=await api_client.get(RESERVATIONS, res_name))
    assert reservation_allocated(web2["metadata"]["annotations"]) is not None  # the binding wrote it
    clock.offset += 4
    await step(controller)
    status = await job_status(api_client, "m1")
    assert status["phase"] == "Running"
    assert status["podRef"]["name"] == "web-2"
    assert condition(status, "BoundPodReady")["reason"] == "WaitForBoundPodReady"

    ready = [{"type": "Ready", "status": "True"}]
    await api_client.patch_status(PODS, "web-2", {"status": {"conditions": ready}}, namespace="shop")
    clock.offset += 4
    await step(controller)
    status = await job_status(api_client, "m1")
    assert (status["phase"], status["status"]) == ("Succeeded", "Complete")
    assert status["message"] == f'Bind Pod "shop/web-2" in Reservation "{res_name}"'
    assert calls(apiserver, "create", "pods", "eviction") == 1
    assert calls(apiserver, "create", "reservations") == 1
    reasons = {e["reason"] for e in (await api_client.list(EVENTS, namespace="default")).items}
    assert {"Running", "ReservationCreated", "ReservationScheduled", "Evicting", "EvictComplete", "Complete"} <= reasons


async def test_restarted_manager_adopts_the_reservation_it_created(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await pod_on(api_client, "web-1", "n1")
    await pmj(api_client, "m1", "web-1")
    first = await controller_for(api_client)
    await step(first)  # Running
    # crash between creating the Reservation and recording it: a stale (empty) list makes the second
    # controller try to create it again; the 409 records nothing until the Reservation is read
    await first.drive("m1", {})
    await api_client.patch(PODMIGRATIONJOBS, "m1", {"spec": {"reservationOptions": None}})
    second = await controller_for(api_client)
    await second.drive("m1", {})  # create -> 409 -> look again
    stored = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert "reservationOptions" not in stored["spec"] and stored["status"]["phase"] == "Running"
    second._not_before.clear()
    await step(second)  # with a fresh list: found by name, carries the job's marker: adopted
    stored = await api_client.get(PODMIGRATIONJOBS, "m1")
    assert stored["spec"]["reservationOptions"]["reservationRef"]["name"] == stored["metadata"]["uid"]
    assert len((await api_client.list(RESERVATIONS)).items) == 1
    assert calls(apiserver, "create", "reservations") == 2  # the original and the refused (409) attempt


def team_b_reservation(name: str) -> dict[str, Any]:
    """A Reservation another team holds for its own database pods."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {"team": "b"}},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
            "owners": [{"labelSelector": {"matchLabels": {"app": "team-b-db"}}}],
            "ttl": "1h",
        },
    }


async def test_a_reservation_of_the_jobs_name_made_by_someone_else_is_never_touched(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await pod_on(api_client, "web-1", "n1")
    job = await pmj(api_client, "m1", "web-1")
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    await step(controller)  # Running
    theirs = await api_client.create(RESERVATIONS, team_b_reservation(job["metadata"]["uid"]))
    await place(api_client, job["metadata"]["uid"], "n2")  # Available elsewhere: pre-fix it was adopted
    before = await api_client.get(RESERVATIONS, job["metadata"]["uid"])
    await step(controller)
    status = await job_status(api_client, "m1")
    assert (status["phase"], status["reason"]) == ("Failed", "FailedCreateReservation")
    assert "exists and was not created by this job" in status["message"]
    clock.offset += 400  # past the job's ttl, and the sweep's period
    await step(controller)
    after = await api_client.get(RESERVATIONS, job["metadata"]["uid"])
    assert after == before and after["metadata"]["uid"] == theirs["metadata"]["uid"]  # unchanged, unconsumed
    assert "reservationOptions" not in (await api_client.get(PODMIGRATIONJOBS, "m1"))["spec"]  # not adopted
    assert calls(apiserver, "create", "pods", "eviction") == 0
    assert calls(apiserver, "delete", "reservations") == 0
    warnings = [
        e
        for e in (await api_client.list(EVENTS, namespace="default")).items
        if e["reason"] == "FailedCreateReservation"
    ]
    assert [e["type"] for e in warnings] == ["Warning"]


async def test_a_failed_job_deletes_its_reservation_only_while_it_has_the_uid_read(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await pod_on(api_client, "web-1", "n1")
    job = await pmj(api_client, "m1", "web-1")
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    await step(controller)
    await step(controller)  # the job's own Reservation, recorded
    name = job["metadata"]["uid"]
    # between the manager's read and its delete, the Reservation is deleted and made again by someone else
    await api_client.delete(RESERVATIONS, name)
    theirs = await api_client.create(RESERVATIONS, team_b_reservation(name))
    clock.offset += 301  # the job's ttl (5m) has run out: it fails and deletes what it read as its own
    await controller.run_round(None)  # on the cache as it was: the manager has not seen the swap
    status = await job_status(api_client, "m1")
    assert (status["phase"], status["reason"]) == ("Failed", "Timeout")
    # the test's own, then the failed job's and the sweep's (the cached job is Failed), both refused (409)
    assert calls(apiserver, "delete", "reservations") == 3
    assert (await api_client.get(RESERVATIONS, name))["metadata"]["uid"] == theirs["metadata"]["uid"]


async def test_expired_reservation_fails_the_job_and_is_deleted(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await pod_on(api_client, "web-1", "n1")
    job = await pmj(api_client, "m1", "web-1")
    controller = await controller_for(api_client)
    await step(controller)
    await step(controller)
    res_name = job["metadata"]["uid"]
    expired = [{"type": "Ready", "status": "False", "reason": "Expired", "message": "expired"}]
    await place(api_client, res_name, "", phase="Failed", conditions=expired)
    await step(controller)
    status = await job_status(api_client, "m1")
    assert (status["phase"], status["reason"]) == ("Failed", "ReservationExpired")
    assert (await api_client.list(RESERVATIONS)).items == []
    assert calls(apiserver, "create", "pods", "eviction") == 0  # never evicted without a reservation


async def test_reservation_of_a_deleted_job_is_swept(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    await pod_on(api_client, "web-1", "n1")
    await pod_on(api_client, "web-9", "n1")
    await pmj(api_client, "m1", "web-1")
    await pmj(api_client, "m9", "web-9")  # keeps rounds running after m1 is gone
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    await step(controller)
    await step(controller)
    assert len((await api_client.list(RESERVATIONS)).items) == 2
    await api_client.delete(PODMIGRATIONJOBS, "m1")
    await step(controller)  # sweep not due yet (every 10 s)
    assert len((await api_client.list(RESERVATIONS)).items) == 2
    clock.offset += 11
    await step(controller)
    names = [
        r["metadata"]["annotations"]["koordpy.io/migration-job"] for r in (await api_client.list(RESERVATIONS)).items
    ]
    assert [n.split("/")[0] for n in names] == ["m9"]


async def test_user_reservation_ref_is_used_and_never_deleted(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await pod_on(api_client, "web-1", "n1")
    shared = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "shared"},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}},
            "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
        },
    }
    await api_client.create(RESERVATIONS, shared)
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": "m1", "annotations": {ANNOTATION_PASSED_ARBITRATION: "true"}},
        "spec": {
            "podRef": {"namespace": "shop", "name": "web-1"},
            "ttl": "5m",
            "reservationOptions": {"reservationRef": {"name": "shared"}},
        },
    }
    await api_client.create(PODMIGRATIONJOBS, body)
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    await step(controller)
    await step(controller)
    assert calls(apiserver, "create", "reservations") == 1  # only the test's own
    await place(api_client, "shared", "n1")  # on the pod's own node: the job fails
    clock.offset += 4
    await step(controller)
    status = await job_status(api_client, "m1")
    assert (status["phase"], status["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert [r["metadata"]["name"] for r in (await api_client.list(RESERVATIONS)).items] == ["shared"]


async def test_refused_create_is_retried_on_503_and_fails_on_422(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await pod_on(api_client, "web-1", "n1")
    await pmj(api_client, "m1", "web-1")
    clock = Clock()
    controller = await controller_for(api_client, clock=clock)
    await step(controller)  # Running
    apiserver.inject_error(503, verb="create", resource="reservations")
    await step(controller)  # 503: retried after 1 s, the job stays Running
    status = await job_status(api_client, "m1")
    assert status["phase"] == "Running"
    assert condition(status, "ReservationCreated")["reason"] == "FailedCreateReservation"
    apiserver.inject_error(422, verb="create", resource="reservations", message="spec.owners: Required value")
    clock.offset += 2
    await step(controller)  # 422: the Reservation can never be created as it is
    status = await job_status(api_client, "m1")
    assert (status["phase"], status["reason"]) == ("Failed", "FailedCreateReservation")
    assert "422" in status["message"]
    assert (await api_client.list(RESERVATIONS)).items == []
    assert calls(apiserver, "create", "pods", "eviction") == 0
