"""The extender enforces a Reservation it learns from its watch, through real processes.

The emulator, the extender (chart config) and the scheduler driver run as in the other system tests;
no manager: the test writes the Reservation and its status (``Available`` on ``n1``) itself, as the
manager would. Nodes n0, n1, n2 have 16 cpu and no NodeMetric (load-aware filtering passes, its
score is 0), so only the in-tree fit, the driver's LeastAllocated score and the reservation decide.

Reservation ``hold-big``: 14 cpu on n1 for pod ``default/big``. For any other pod n1 has
16 − 14 = 2 cpu free, so none of the four 4-cpu pods may land there, although n1 is the emptiest
node (LeastAllocated alone would put pods there first). They fit two per node on n0 and n2
(8 of 16 cpu each). ``big`` (14 cpu) then fits only on n1 (n0 and n2 have 8 free) and is its owner.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from scenario_kit import PODS_PATH, create, driver_for, node, pod
from system_cluster import Cluster

from koordpy.kube.resources import RESERVATIONS
from koordpy_testkit import PodBuilder
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually_awaited
from koordpy_testkit.reservations import owner_pod, reservation_manifest
from koordpy_testkit.schedulerdriver import SchedulerDriver

RESERVED = "node(s) resource was(were) reserved"
SMALL = [f"small-{i}" for i in range(4)]


async def reserve(admin: httpx.AsyncClient) -> None:
    """Create the Reservation, then write its status through the status subresource, as the manager does."""
    raw = reservation_manifest("hold-big", owners=[owner_pod("default", "big")], cpu="14")
    raw["metadata"].pop("uid")
    status = {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "14"}}
    raw.pop("status")
    await create(admin, RESERVATIONS.path(), raw)
    resp = await admin.patch(
        RESERVATIONS.path(name="hold-big", subresource="status"),
        json={"status": status},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text


async def extender_blocks_n1(url: str) -> None:
    """Poll the extender's /filter with a 4-cpu probe pod until its watch delivered the reservation."""
    probe = PodBuilder("probe").requests(cpu="4").build()
    body = orjson.dumps({"Pod": probe, "Nodes": None, "NodeNames": ["n0", "n1", "n2"]})
    async with httpx.AsyncClient(base_url=url, timeout=HANG_BACKSTOP) as http:

        async def blocked() -> Any:
            failed = (await http.post("/filter", content=body, headers={"Content-Type": "application/json"})).json()
            return failed["FailedNodes"] == {"n1": RESERVED} or None

        await eventually_awaited(blocked, "the extender blocks n1", interval=0.05)


def placed(driver: SchedulerDriver) -> dict[str, str]:
    """``namespace/name`` → node of every bound pod of the driver's scheduler."""
    by_uid = driver.bound()
    return {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": by_uid[uid]
        for uid, p in driver.pods.items()
        if uid in by_uid
    }


@pytest.mark.system
async def test_non_owners_avoid_the_reserved_node_and_the_owner_lands_there(cluster: Cluster) -> None:
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409), resp.text
        for name in ("n0", "n1", "n2"):
            await create(admin, "/api/v1/nodes", node(name, cpu=16))
        _, url = cluster.start_extender(cluster.extender_config())
        await reserve(admin)  # after the extender's first list: it arrives through the watch
        await extender_blocks_n1(url)
        driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, url)
        async with driver:
            for name in SMALL:
                await create(admin, PODS_PATH, pod(name, cpu="4", memory="1Gi"))
            await driver.wait_until(lambda: len(driver.bound()) == 4, HANG_BACKSTOP, "the small pods bound")
            small = placed(driver)
            assert sorted(small) == [f"default/{n}" for n in SMALL]
            assert "n1" not in small.values(), small
            assert sorted(small.values()) == ["n0", "n0", "n2", "n2"]
            await create(admin, PODS_PATH, pod("big", cpu="14", memory="1Gi"))
            await driver.wait_until(lambda: len(driver.bound()) == 5, HANG_BACKSTOP, "big bound")
            assert placed(driver)["default/big"] == "n1"
        # every filter answer for a small pod kept n1 out with the reservation's reason
        small_filters = [d for d in driver.decisions if d.pod in small and "n1" in d.failed]
        assert small_filters and all(d.failed["n1"] == RESERVED for d in small_filters)
