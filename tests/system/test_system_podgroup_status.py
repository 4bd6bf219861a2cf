"""(e) PodGroup status and gang Events with real processes: API emulator, manager, extender and the
kube-scheduler driver configured from the chart.

The emulator serves ``scheduling.sigs.k8s.io`` PodGroups but not ``scheduling.x-k8s.io``: the manager
runs without that CRD, as on a cluster without scheduler-plugins. There is no kubelet: the test sets pod
phases itself. Assertions hold whether or not the extender holds gang binds (the quorum Events come
before the gang is complete; the phases after every member is bound).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from scenario_kit import PODS_PATH, create, driver_for, node, pod
from system_cluster import Cluster

from koordpy_testkit.bounds import HANG_BACKSTOP

PODGROUPS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/podgroups"
EVENTS = "/api/v1/namespaces/default/events"
LABEL = "pod-group.scheduling.sigs.k8s.io"


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 600},
    }


def member(name: str, group: str, scheduler: str = "koordpy-scheduler") -> dict[str, Any]:
    raw = pod(name, cpu="500m", memory="1Gi")
    raw["metadata"]["labels"] = {LABEL: group}
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": group, "uid": f"job-{group}", "controller": True}
    ]
    raw["spec"]["schedulerName"] = scheduler
    return raw


async def status(admin: httpx.AsyncClient, name: str) -> dict[str, Any]:
    resp = await admin.get(f"{PODGROUPS}/{name}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json().get("status") or {})


async def events(admin: httpx.AsyncClient) -> list[dict[str, Any]]:
    resp = await admin.get(EVENTS)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def until(check: Any, what: str, timeout: float = HANG_BACKSTOP) -> Any:
    """Poll the async ``check`` until it returns truthy; a deadline, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.2)


@pytest.mark.system
async def test_podgroup_status_and_events(cluster: Cluster) -> None:
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409)
        for i in range(3):
            await create(admin, "/api/v1/nodes", node(f"gang-{i}"))
        _, extender_url = cluster.start_extender(
            cluster.extender_config(load_aware={"filterExpiredNodeMetrics": False})
        )
        cluster.start_manager()
        await create(admin, PODGROUPS, podgroup("mpi", 3))
        await create(admin, PODGROUPS, podgroup("idle", 2))
        # "idle": one member that no scheduler takes (another scheduler name): it waits for a second member.
        await create(admin, PODS_PATH, member("idle-0", "idle", scheduler="nobody"))

        driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, extender_url)
        async with driver:
            for i in range(2):
                await create(admin, PODS_PATH, member(f"mpi-{i}", "mpi"))

            async def quorum_event() -> list[dict[str, Any]]:
                return [
                    e
                    for e in await events(admin)
                    if e["involvedObject"]["kind"] == "PodGroup"
                    and e["involvedObject"]["name"] == "mpi"
                    and e["message"] == "gang default/mpi: 2 of 3 members exist"
                ]

            (pg_event,) = await until(quorum_event, "the PodGroup's quorum Event")
            assert pg_event["reason"] == "GangWaiting"
            assert pg_event["involvedObject"]["apiVersion"] == "scheduling.sigs.k8s.io/v1alpha1"
            assert pg_event["source"]["component"] == "koordpy-manager"
            assert (await status(admin, "mpi"))["phase"] == "Pending"  # 2 of 3 exist: stays Pending

            # The third member: all three get bound (the driver binds through the extender).
            await create(admin, PODS_PATH, member("mpi-2", "mpi"))
            await driver.wait_until(lambda: len(driver.bound()) == 3, HANG_BACKSTOP, "3 members bound")

            async def scheduled() -> dict[str, Any] | None:
                got = await status(admin, "mpi")
                return got if got.get("phase") == "Scheduled" else None

            # 3 bound ≥ min 3, none running yet (no kubelet): Koordinator's Scheduled.
            got = await until(scheduled, "phase Scheduled")
            assert (got["scheduled"], got["running"], got["succeeded"], got["failed"]) == (3, 0, 0, 0)
            assert got["occupiedBy"] == "default/mpi"

            # The kubelet's part: the three start running → Running (3 + 0 ≥ 3).
            for i in range(3):
                resp = await admin.patch(
                    f"{PODS_PATH}/mpi-{i}/status",
                    json={"status": {"phase": "Running"}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                assert resp.status_code == 200, resp.text

            async def running() -> dict[str, Any] | None:
                got = await status(admin, "mpi")
                return got if got.get("phase") == "Running" and got.get("running") == 3 else None

            await until(running, "phase Running")

        # The waiting pod of "idle" and its PodGroup got the quorum Event; "idle" stays Pending.
        async def idle_events() -> set[tuple[str, str]] | None:
            got = {
                (e["involvedObject"]["kind"], e["involvedObject"]["name"])
                for e in await events(admin)
                if e["message"] == "gang default/idle: 1 of 2 members exist"
            }
            return got if got == {("PodGroup", "idle"), ("Pod", "idle-0")} else None

        await until(idle_events, "Events on idle and idle-0")
        assert (await status(admin, "idle"))["phase"] == "Pending"
        # Rate limit: one Event per object and message, never a repeat.
        keys = [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in await events(admin)]
        assert len(keys) == len(set(keys)), keys

    # The manager only ever patched PodGroup status, never a PodGroup's spec nor a pod.
    manager_writes = [c for c in cluster.recorded_calls() if c.user == "manager" and c.verb in ("patch", "update")]
    assert manager_writes and {(c.resource, c.subresource) for c in manager_writes} == {("podgroups", "status")}
