"""A ReservationFirst PodMigrationJob waits for the replacement that bound its Reservation to be Ready:
the real kubectl applies the job (mode unset: the default ReservationFirst), the real ``koordpy manager``
process creates the Reservation, evicts once it is Available on another node, and finishes only when the
replacement bound through it is Ready.

Why on the emulator: the step under test is a replacement that is bound but not Ready, and on the real
tier kwok marks every pod Ready the moment it is bound. Here the test writes the pods' status itself, as
the kubelet would. Every other step of the story (the Reservation, its placement next to a sibling, the
eviction, adoption after a SIGKILL, a placement on the pod's own node) runs on the real control plane in
``tests/cluster/test_cluster_reservations.py``.

There are no Node objects, so the manager's reservation controller (a timer on Nodes) never runs and the
test writes the Reservation's placement (its status) as that controller would. The replacement pod is
created and bound by the test, standing in for the ReplicaSet controller and the scheduler whose binder
(koordpy's extender) records the Reservation it allocates on the pod
(``scheduling.koordinator.sh/reservation-allocated``). A sibling of the same ReplicaSet already runs,
Ready, on the node the Reservation takes: it must never complete the job.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from scenario_kit import create
from system_cluster import Cluster
from system_migration_kit import FAST, evictions, kubectl_apply, shop

from koordpy.scheduler.plugins.reservation.spec import ANNOTATION_RESERVATION_ALLOCATED
from koordpy_testkit.bounds import HANG_BACKSTOP

PMJS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
SHOP_PODS = "/api/v1/namespaces/shop/pods"
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "uid-web-rs", "controller": True}


async def pod_on(
    admin: httpx.AsyncClient, name: str, node: str, *, ready: bool = True, through: str | None = None
) -> None:
    """A pod of the ReplicaSet on ``node``; ``through``: the Reservation it was bound through."""
    annotations = {}
    if through is not None:
        res = (await admin.get(f"{RESERVATIONS}/{through}")).json()
        record = json.dumps({"name": through, "uid": res["metadata"]["uid"]}, separators=(",", ":"))
        annotations[ANNOTATION_RESERVATION_ALLOCATED] = record
    meta = {"name": name, "namespace": "shop", "labels": {"app": "web"}, "ownerReferences": [RS]}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**meta, "annotations": annotations},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}],
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
        },
    }
    await create(admin, SHOP_PODS, body)
    await set_ready(admin, name, ready)


async def set_ready(admin: httpx.AsyncClient, name: str, ready: bool) -> None:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    resp = await admin.patch(
        f"{SHOP_PODS}/{name}/status",
        json={"status": status},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text


async def place(admin: httpx.AsyncClient, name: str, node: str) -> None:
    """Status as the manager's reservation controller writes it after placing the Reservation."""
    status = {
        "phase": "Available",
        "nodeName": node,
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}],
    }
    resp = await admin.patch(
        f"{RESERVATIONS}/{name}/status",
        json={"status": status},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text


def manifest(path: Path) -> Path:
    doc = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": "move-web-1"},
        "spec": {"ttl": "5m", "podRef": {"namespace": "shop", "name": "web-1"}},
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


async def job(admin: httpx.AsyncClient) -> dict[str, Any]:
    resp = await admin.get(f"{PMJS}/move-web-1")
    assert resp.status_code == 200, resp.text
    found: dict[str, Any] = resp.json()
    return found


async def reservations(admin: httpx.AsyncClient) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await admin.get(RESERVATIONS)).json()["items"]
    return items


async def until(what: str, check: Callable[[], Awaitable[bool]], timeout: float = HANG_BACKSTOP) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.1)


def manager_calls(cluster: Cluster, verb: str, resource: str) -> int:
    return sum(
        1
        for r in cluster.recorded_requests()
        if r.get("user") == "manager" and r.get("verb") == verb and r.get("resource") == resource
    )


async def migration_rounds(manager: str) -> int:
    """The migration rounds the manager ran (its ``koordpy_migration_rounds_total``, both outcomes); the rounds
    read the manager's watch caches, so no request per round would count them."""
    async with httpx.AsyncClient(base_url=manager, timeout=HANG_BACKSTOP) as scrape:
        text = (await scrape.get("/metrics")).text
    prefix = "koordpy_migration_rounds_total{"
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)))


async def five_more_rounds(manager: str) -> None:
    ran = await migration_rounds(manager)

    async def rounds_ran() -> bool:
        return await migration_rounds(manager) >= ran + 5

    await until("five more migration rounds", rounds_ran)


async def drive_to_success(admin: httpx.AsyncClient, manager: str, res_name: str) -> dict[str, Any]:
    """Place the Reservation on n2 (where the sibling web-0 runs), let the manager evict, bring up the
    replacement, wait for Succeeded."""
    await pod_on(admin, "web-0", "n2")
    await place(admin, res_name, "n2")

    async def evicted() -> bool:
        return (await admin.get(f"{SHOP_PODS}/web-1")).status_code == 404

    await until("web-1 is evicted", evicted)

    async def waiting_for_bind() -> bool:
        conditions = (await job(admin)).get("status", {}).get("conditions") or []
        return any(c.get("reason") == "WaitForPodBindReservation" for c in conditions)

    await until("the job waits for a pod to bind the Reservation", waiting_for_bind)
    # five more rounds with the Ready sibling web-0 on n2
    await five_more_rounds(manager)
    still = (await job(admin))["status"]
    assert still["phase"] == "Running" and "podRef" not in still
    await pod_on(admin, "web-2", "n2", ready=False, through=res_name)

    async def waiting_for_ready() -> bool:
        conditions = (await job(admin)).get("status", {}).get("conditions") or []
        return any(c.get("reason") == "WaitForBoundPodReady" for c in conditions)

    await until("the job waits for the bound pod to be Ready", waiting_for_ready)
    assert (await job(admin))["status"]["phase"] == "Running"
    await set_ready(admin, "web-2", True)

    async def succeeded() -> bool:
        return bool((await job(admin)).get("status", {}).get("phase") == "Succeeded")

    await until("the job Succeeded", succeeded)
    return await job(admin)


@pytest.mark.system
async def test_reservation_first_reserves_evicts_and_waits_for_the_ready_replacement(
    cluster: Cluster, tmp_path: Path
) -> None:
    async with cluster.admin() as admin:
        await shop(admin)
        await pod_on(admin, "web-1", "n1")
        _, manager = cluster.start_manager(FAST)
        kubectl_apply(cluster, manifest(tmp_path / "pmj.yaml"))

        async def reserved() -> bool:
            return bool(await reservations(admin))

        await until("the manager created the Reservation", reserved)
        (res,) = await reservations(admin)
        uid = (await job(admin))["metadata"]["uid"]
        assert res["metadata"]["name"] == uid
        assert res["spec"]["owners"] == [{"controller": {**RS, "namespace": "shop"}}]
        terms = res["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        assert terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}
        ]
        # several rounds while the Reservation is not placed: no eviction
        await five_more_rounds(manager)
        assert evictions(cluster, "web-1") == 0
        assert (await job(admin))["spec"]["reservationOptions"]["reservationRef"]["name"] == uid

        done = await drive_to_success(admin, manager, uid)
    status = done["status"]
    assert (status["status"], status["nodeName"], status["podRef"]["name"]) == ("Complete", "n2", "web-2")
    assert status["message"] == f'Bind Pod "shop/web-2" in Reservation "{uid}"'
    assert evictions(cluster, "web-1") == 1
    assert manager_calls(cluster, "create", "reservations") == 1
