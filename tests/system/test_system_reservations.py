"""Reservations through real processes: the emulator, the manager (places Reservations, keeps
their status, reserves for starving jobs), the extender (enforces them) and the scheduler driver playing
kube-scheduler; the real kubectl where a user would use it.

Cluster: n0 and n1 with 8 cpu / 64 GiB each. The manager's NodeMetric bookkeeping is off and no NodeMetric
exists, so load-aware filtering passes (as in ``test_system_reservations_extender.py``) and only the
in-tree fit, LeastAllocated and the reservations decide. Starving story (``starving``): three 2-cpu filler
pods on each node (6 of 8 cpu), then ``big`` (6 cpu, priority 100) fits nowhere. The manager runs every
second with ``starvingJobTimeThreshold`` 2 s and ``reservedNodePercent`` 50 (floor(2 × 50 / 100) = 1 node).
Its Reservation for ``big`` is Waiting on node R (6 ≤ 8 allocatable; 2 free < 6). A non-owner then sees
8 − 6 requested − 6 reserved < 0 free on R, so new small pods go to the other node O; when R drains,
``big`` binds there and its Reservation is deleted (the job is Ready).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from scenario_kit import PODS_PATH, create, driver_for, node, pod
from system_cluster import Cluster
from system_harness import BIN, Proc

from koordpy.kube.resources import EVENTS, RESERVATIONS
from koordpy_testkit import PodBuilder
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.schedulerdriver import SchedulerDriver

KUBECTL = BIN / "kubectl"
RESERVED = "node(s) resource was(were) reserved"
STARVING_LABEL = "koordpy.io/starving-job"
MANAGER = {
    "nodeMetric": {"enabled": False},
    "reservation": {
        "enabled": True,
        "starvingJobTimeThreshold": 2,
        "reservedNodePercent": 50,
        "intervalSeconds": 1,
        "maxHoldSeconds": 600,
    },
}
Raw = dict[str, Any]
JSON = {"Content-Type": "application/json"}


async def until(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    """Poll the async ``check`` until it returns something truthy; fail loudly after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not reached in {timeout}s (last: {found!r})"
        await asyncio.sleep(0.1)


async def populate(admin: httpx.AsyncClient) -> None:
    resp = await admin.post(
        "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    )
    assert resp.status_code in (200, 201, 409), resp.text
    for name in ("n0", "n1"):
        await create(admin, "/api/v1/nodes", node(name, cpu=8))


async def running_on(admin: httpx.AsyncClient, name: str, node_name: str, cpu: str = "2") -> None:
    """A pod already bound and running (scheduled before the story starts)."""
    raw = pod(name, cpu=cpu, memory="1Gi")
    raw["spec"]["nodeName"] = node_name
    raw["status"] = {"phase": "Running"}
    await create(admin, PODS_PATH, raw)


async def delete_pod(admin: httpx.AsyncClient, name: str) -> None:
    resp = await admin.request(
        "DELETE", f"{PODS_PATH}/{name}", content=orjson.dumps({"gracePeriodSeconds": 0}), headers=JSON
    )
    assert resp.status_code == 200, resp.text


async def reservations(admin: httpx.AsyncClient, starving: bool = True) -> list[Raw]:
    resp = await admin.get(RESERVATIONS.path())
    assert resp.status_code == 200, resp.text
    items: list[Raw] = resp.json()["items"]
    return [r for r in items if not starving or STARVING_LABEL in (r["metadata"].get("labels") or {})]


async def placed_reservation(admin: httpx.AsyncClient) -> Raw | None:
    found = [r for r in await reservations(admin) if (r.get("status") or {}).get("nodeName")]
    return found[0] if len(found) == 1 else None


async def blocks(url: str, node_name: str, cpu: str = "2") -> bool:
    """True when the extender's /filter fails a non-owner probe pod on ``node_name`` for the reservation."""
    probe = PodBuilder("probe").requests(cpu=cpu).build()
    body = orjson.dumps({"Pod": probe, "Nodes": None, "NodeNames": ["n0", "n1"]})
    async with httpx.AsyncClient(base_url=url, timeout=HANG_BACKSTOP) as http:
        resp = await http.post("/filter", content=body, headers=JSON)
    return bool(resp.json()["FailedNodes"].get(node_name) == RESERVED)


def placed(driver: SchedulerDriver) -> dict[str, str]:
    """Pod name → node of every pod the driver bound."""
    by_uid = driver.bound()
    return {p["metadata"]["name"]: by_uid[uid] for uid, p in driver.pods.items() if uid in by_uid}


def manager_calls(cluster: Cluster, verb: str, since: int = 0) -> int:
    """``verb`` requests on Reservations (not their status) the manager made after record position ``since``."""
    return sum(
        1
        for r in cluster.recorded_requests()[since:]
        if r.get("user") == "manager"
        and r.get("resource") == "reservations"
        and r.get("verb") == verb
        and not r.get("subresource")
    )


def kubectl(cluster: Cluster, *args: str) -> str:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(cluster.kubeconfig("admin")), *args],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def start(cluster: Cluster, manager: dict[str, Any] = MANAGER) -> tuple[Proc, str, str, SchedulerDriver]:
    _, extender_url = cluster.start_extender(cluster.extender_config())
    proc, manager_url = cluster.start_manager(manager)
    driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, extender_url)
    return proc, manager_url, extender_url, driver


async def two_rounds(manager_url: str) -> bool:
    """Two whole reservation rounds of the (re)started manager at ``manager_url`` (its own counter)."""
    async with httpx.AsyncClient(base_url=manager_url, timeout=10) as scrape:
        exposition = (await scrape.get("/metrics")).text
    line = 'koordpy_reservation_rounds_total{outcome="done"} '
    done = [float(row[len(line) :]) for row in exposition.splitlines() if row.startswith(line)]
    return bool(done) and done[0] >= 2


async def no_starving_reservations(admin: httpx.AsyncClient) -> bool:
    return await reservations(admin) == []


async def starving_story(cluster: Cluster, admin: httpx.AsyncClient, *, restart_manager: bool) -> dict[str, Any]:
    """The module docstring's story; with ``restart_manager`` the manager is killed once its Reservation is
    placed and a new one is started (it must adopt, not duplicate). Returns what the assertions need."""
    await populate(admin)
    for node_name in ("n0", "n1"):
        for i in range(3):
            await running_on(admin, f"fill-{node_name}-{i}", node_name)
    proc, manager_url, extender_url, driver = start(cluster)
    restart_index = None
    async with driver:
        big = pod("big", cpu="6", memory="1Gi")
        big["spec"]["priority"] = 100
        await create(admin, PODS_PATH, big)
        res = await until(lambda: placed_reservation(admin), HANG_BACKSTOP, "a starving-job Reservation placed")
        assert res["status"]["phase"] == "Waiting"  # 6 cpu of 8 allocatable, only 2 free yet
        reserved = res["status"]["nodeName"]
        other = "n1" if reserved == "n0" else "n0"
        if restart_manager:
            proc.kill()  # mid-story: the Reservation created and placed, the job not started
            restart_index = len(cluster.recorded_requests())
            proc, manager_url = cluster.start_manager(MANAGER)
            await until(lambda: two_rounds(manager_url), HANG_BACKSTOP, "two rounds after the restart")
            assert [r["metadata"]["uid"] for r in await reservations(admin)] == [res["metadata"]["uid"]]
        await until(lambda: blocks(extender_url, reserved), HANG_BACKSTOP, f"the extender blocks {reserved}")
        assert not await blocks(extender_url, other)
        # one filler ends on each node: 4 cpu free on both, but on R 6 of them are reserved for big
        await delete_pod(admin, f"fill-{reserved}-0")
        await delete_pod(admin, f"fill-{other}-0")
        for i in range(2):
            await create(admin, PODS_PATH, pod(f"stream-{i}", cpu="2", memory="1Gi"))
        await driver.wait_until(
            lambda: {"stream-0", "stream-1"} <= set(placed(driver)), HANG_BACKSTOP, "stream pods bound"
        )
        stream = {name: placed(driver)[name] for name in ("stream-0", "stream-1")}
        assert "big" not in placed(driver)
        # R drains: big (the owner) binds there
        for i in (1, 2):
            await delete_pod(admin, f"fill-{reserved}-{i}")
        await driver.wait_until(lambda: "big" in placed(driver), HANG_BACKSTOP, "big bound")
        big_node = placed(driver)["big"]
        decisions = list(driver.decisions)
    await until(lambda: no_starving_reservations(admin), HANG_BACKSTOP, "the starving-job Reservation deleted")
    async with httpx.AsyncClient(base_url=manager_url, timeout=HANG_BACKSTOP) as scrape:
        exposition = (await scrape.get("/metrics")).text

    async def released() -> list[Raw]:
        """The manager's Events once the release (posted after the delete, same round) is among them."""
        items = (await admin.get(EVENTS.path())).json()["items"]
        mine = [e for e in items if e.get("reportingComponent") == "koordpy-manager"]
        return mine if any(e["reason"] == "StarvingJobReleased" for e in mine) else []

    events = await until(released, HANG_BACKSTOP, "the StarvingJobReleased Event")
    return {
        "reservation": res,
        "reserved": reserved,
        "other": other,
        "stream": stream,
        "big_node": big_node,
        "decisions": decisions,
        "exposition": exposition,
        "events": events,
        "restart_index": restart_index,
    }


def check_story(cluster: Cluster, story: dict[str, Any]) -> None:
    reserved, other = story["reserved"], story["other"]
    name = story["reservation"]["metadata"]["name"]
    assert story["reservation"]["metadata"]["annotations"][STARVING_LABEL] == "default/big"
    # small pods stopped landing on R (LeastAllocated alone would have sent one there: both had 4 free)
    assert story["stream"] == {"stream-0": other, "stream-1": other}
    stream_filters = [d for d in story["decisions"] if d.pod in ("default/stream-0", "default/stream-1")]
    assert stream_filters and all(d.failed.get(reserved) == RESERVED for d in stream_filters if reserved in d.failed)
    assert any(d.failed.get(reserved) == RESERVED for d in stream_filters)
    assert story["big_node"] == reserved
    # Events: which job holds which node and why, on the Reservation and on the pod; and the release
    reasons = {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in story["events"]}
    assert ("Reservation", name, "StarvingJobReserved") in reasons
    assert ("Pod", "big", "Reserved") in reasons
    assert ("Reservation", name, "StarvingJobReleased") in reasons
    held = next(e for e in story["events"] if e["reason"] == "StarvingJobReserved")
    assert f"node {reserved} held for default/big" in held["message"], held["message"]
    # exactly one create over the whole story (a restart adopts), one delete
    assert manager_calls(cluster, "create") == 1
    assert manager_calls(cluster, "delete") == 1
    assert 'koordpy_reservation_actions_total{action="delete",outcome="done"} 1.0' in story["exposition"]
    assert "koordpy_reservation_starving_jobs 0.0" in story["exposition"]


@pytest.mark.system
async def test_a_starving_big_pod_gets_a_node_reserved_and_binds_there_when_it_drains(cluster: Cluster) -> None:
    """(a) the seed's story end to end."""
    async with cluster.admin() as admin:
        story = await starving_story(cluster, admin, restart_manager=False)
    check_story(cluster, story)
    assert 'koordpy_reservation_actions_total{action="create",outcome="done"} 1.0' in story["exposition"]


@pytest.mark.system
async def test_a_restarted_manager_adopts_its_reservation_and_the_story_completes(cluster: Cluster) -> None:
    """(c) SIGKILL the manager once its Reservation is placed; the new process creates no duplicate."""
    async with cluster.admin() as admin:
        story = await starving_story(cluster, admin, restart_manager=True)
    check_story(cluster, story)
    assert manager_calls(cluster, "create", story["restart_index"]) == 0
    # the new process's counters: it created nothing, it deleted the adopted Reservation
    assert 'koordpy_reservation_actions_total{action="create",outcome="done"}' not in story["exposition"]


def user_reservation(path: Path) -> Path:
    doc = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "hold-web"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "web", "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}}]}
            },
            "owners": [{"object": {"kind": "Pod", "namespace": "default", "name": "web"}}],
            "ttl": "1h",
        },
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def kubectl_reservation(cluster: Cluster) -> Raw:
    found: Raw = json.loads(kubectl(cluster, "get", "reservations.scheduling.koordinator.sh", "hold-web", "-o", "json"))
    return found


@pytest.mark.system
async def test_a_kubectl_applied_reservation_is_placed_and_consumed_by_its_owner(
    cluster: Cluster, tmp_path: Path
) -> None:
    """(b) user-created: ``reservation.enabled`` stays false (the default); placing is not starving-job work.
    6 cpu held for pod ``web`` on node R; a 4-cpu non-owner then fits only on the other node (R: 8 − 6 = 2
    for others); ``web`` (6 cpu) then fits only on R and consumes the reservation (allocateOnce)."""
    manager = {"nodeMetric": {"enabled": False}, "reservation": {"intervalSeconds": 1}}
    async with cluster.admin() as admin:
        await populate(admin)
        _, _, extender_url, driver = start(cluster, manager)
        kubectl(cluster, "apply", "-f", str(user_reservation(tmp_path / "reservation.yaml")))

        async def available() -> Raw | None:
            found = kubectl_reservation(cluster)
            return found if (found.get("status") or {}).get("phase") == "Available" else None

        res = await until(available, HANG_BACKSTOP, "hold-web Available")
        reserved = res["status"]["nodeName"]
        other = "n1" if reserved == "n0" else "n0"
        assert res["status"]["allocatable"]["cpu"] == "6"
        assert {c["type"]: c["status"] for c in res["status"]["conditions"]} == {"Scheduled": "True", "Ready": "True"}
        await until(lambda: blocks(extender_url, reserved, cpu="4"), HANG_BACKSTOP, f"the extender blocks {reserved}")
        async with driver:
            await create(admin, PODS_PATH, pod("other", cpu="4", memory="1Gi"))
            await driver.wait_until(lambda: "other" in placed(driver), HANG_BACKSTOP, "other bound")
            assert placed(driver)["other"] == other
            await create(admin, PODS_PATH, pod("web", cpu="6", memory="1Gi"))
            await driver.wait_until(lambda: "web" in placed(driver), HANG_BACKSTOP, "web bound")
            assert placed(driver)["web"] == reserved

        async def succeeded() -> Raw | None:
            found = kubectl_reservation(cluster)
            return found if (found.get("status") or {}).get("phase") == "Succeeded" else None

        done = await until(succeeded, HANG_BACKSTOP, "hold-web Succeeded")
    assert [o["name"] for o in done["status"]["currentOwners"]] == ["web"]
    assert done["status"]["allocated"]["cpu"] == "6"
    assert manager_calls(cluster, "create") == 0  # the user's Reservation: only its status is the manager's
    assert manager_calls(cluster, "delete") == 0
    writes = [
        r
        for r in cluster.recorded_requests()
        if r.get("resource") == "reservations" and r.get("subresource") == "status"
    ]
    assert writes and {(r["user"], r["verb"]) for r in writes} == {("manager", "patch")}
