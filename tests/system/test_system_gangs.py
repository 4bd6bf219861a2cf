"""Gang scheduling through real processes: the emulator, the extender (the binder) and the driver.

Gangs use Koordinator's annotations (``gang.scheduling.koordinator.sh/*``) in ``default``. Nodes are
16 cpu / 64 GiB reporting 5 % cpu; the chart's thresholds (cpu 65 %) leave room for every pod here, so
only the gang rules and the in-tree resource fit decide. Bindings are read from the emulator's record
of the extender's ``create pods/binding`` calls, so a partial bind could not hide.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
import pytest
import yaml
from scenario_kit import PODS_PATH, create, create_metric, driver_for, metric, node, pod
from system_cluster import Cluster

from koordpy.scheduler.plugins.gang import keys
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually_awaited
from koordpy_testkit.schedulerdriver import SchedulerDriver

GiB = 1 << 30


def member(name: str, gang: str, minimum: int, cpu: str = "800m", **annotations: str) -> dict[str, Any]:
    raw = pod(name, cpu=cpu)
    meta = raw["metadata"]
    meta["annotations"] = {
        keys.ANNOTATION_NAME: gang,
        keys.ANNOTATION_MIN_AVAILABLE: str(minimum),
        **{keys._PREFIX + k.replace("_", "-"): v for k, v in annotations.items()},
    }
    return raw


async def populate(cluster: Cluster, names: list[str], cpu: int = 16) -> None:
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409), resp.text
        for name in names:
            await add_node(admin, name, cpu)


async def add_node(admin: httpx.AsyncClient, name: str, cpu: int = 16) -> None:
    """The NodeMetric first: the node's creation is the driver's cue to retry pods, and the extender must
    know the node's usage by then (the driver, like kube-scheduler, does not watch NodeMetrics)."""
    await create_metric(admin, metric(name, cpu * 1000 * 5 // 100, 64 * GiB * 30 // 100, updated=time.time()))
    await create(admin, "/api/v1/nodes", node(name, cpu=cpu))


def start(cluster: Cluster, gang: dict[str, Any] | None = None, **queue: float) -> tuple[Any, str, SchedulerDriver]:
    """The extender with the chart's config (plus ``gang`` args) and a driver from the chart's two extender
    entries: filter/prioritize with the short ``httpTimeout``, the binder with the long one, which the
    extender's ``gang.binderHttpTimeoutSeconds`` must equal (the chart renders both from one value)."""
    path = cluster.extender_config()
    config = yaml.safe_load(path.read_text())
    chart_gang = config.get("gang") or {}
    config["gang"] = {**chart_gang, "binderAnswerMarginSeconds": 2, **(gang or {})}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    proc, url = cluster.start_extender(path)
    driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, url, **queue)
    assert driver.extender.http_timeout < driver.extender.bind_http_timeout
    assert driver.extender.bind_http_timeout == config["gang"].get("binderHttpTimeoutSeconds", 660)
    return proc, url, driver


def bindings(cluster: Cluster) -> Counter[str]:
    """Per pod name: ``create pods/binding`` requests the extender made."""
    return Counter(
        c.name
        for c in cluster.recorded_calls()
        if c.user == "extender" and c.resource == "pods" and c.subresource == "binding" and c.verb == "create"
    )


def attempted(driver: SchedulerDriver, name: str) -> int:
    return sum(1 for d in driver.decisions if d.pod == f"default/{name}")


@pytest.mark.system
async def test_a_gang_of_five_binds_only_after_the_fifth_member_exists(cluster: Cluster) -> None:
    """(a) members arrive over time; nothing binds before the 5th exists, then all 5 bind."""
    await populate(cluster, ["n0", "n1", "n2"])
    _, _, driver = start(cluster)
    names = [f"train-{i}" for i in range(5)]
    async with driver, cluster.admin() as admin:
        for name in names[:4]:  # one at a time: each is tried before the next exists
            await create(admin, PODS_PATH, member(name, "train", 5))
            await driver.wait_until(lambda n=name: attempted(driver, n) > 0, HANG_BACKSTOP, f"{name} tried")  # type: ignore[misc]
        # every early member was tried and refused at quorum (unresolvable), none bound
        await driver.wait_until(lambda: all(attempted(driver, n) for n in names[:4]), HANG_BACKSTOP, "4 members tried")
        refused = [d for d in driver.decisions if d.outcome == "unschedulable"]
        assert refused and all("gang default/train: " in next(iter(d.unresolvable.values())) for d in refused)
        assert driver.bound() == {} and bindings(cluster) == Counter()
        await create(admin, PODS_PATH, member(names[4], "train", 5))
        await driver.wait_until(lambda: len(driver.bound()) == 5, HANG_BACKSTOP, "all 5 members bound")
    assert sorted(bindings(cluster)) == names
    assert set(bindings(cluster).values()) == {1}


@pytest.mark.system
async def test_a_strict_gang_that_cannot_fit_releases_every_hold_and_binds_nothing(cluster: Cluster) -> None:
    """(b) 3 members of 10 cpu, 2 nodes of 16 cpu: two are held, the third never fits. Its failure
    (``PodScheduled=False``, Insufficient cpu, as kube-scheduler writes it) makes the Strict gang release
    every held member, and so does the wait time (3 s) of any member held later; no binding is created."""
    await populate(cluster, ["n0", "n1"])
    _, _, driver = start(cluster)
    async with driver, cluster.admin() as admin:
        for i in range(3):
            await create(admin, PODS_PATH, member(f"big-{i}", "big", 3, cpu="10", waiting_time="3s"))
        # held binds answered with an error (expired, then the Strict cascade): at least 2 releases
        await driver.wait_until(lambda: driver.stats.binds_failed >= 2, HANG_BACKSTOP, "held members released")
        cycles = len(driver.decisions)
        await driver.wait_until(lambda: len(driver.decisions) >= cycles + 3, HANG_BACKSTOP, "3 more cycles")
        assert driver.bound() == {}
    errors = [d.error for d in driver.decisions if d.bind_outcome == "error"]
    strict = [e for e in errors if "gang default/big (Strict): member default/big-" in e and "Insufficient cpu" in e]
    assert strict or any("waited 3s" in e for e in errors), errors
    assert bindings(cluster) == Counter()


@pytest.mark.system
async def test_a_gang_group_binds_only_when_both_gangs_are_satisfied(cluster: Cluster) -> None:
    """(c) gangs ga and gb (min 2 each) in one GangGroup: 2 + 1 members wait; gb's 2nd binds all 4."""
    await populate(cluster, ["n0", "n1"])
    _, _, driver = start(cluster)
    groups = '["default/ga","default/gb"]'
    async with driver, cluster.admin() as admin:
        for name, gang in (("ga-0", "ga"), ("ga-1", "ga"), ("gb-0", "gb")):
            await create(admin, PODS_PATH, member(name, gang, 2, groups=groups))
        await driver.wait_until(
            lambda: all(attempted(driver, n) for n in ("ga-0", "ga-1", "gb-0")), HANG_BACKSTOP, "3 members tried"
        )
        assert driver.bound() == {}
        await create(admin, PODS_PATH, member("gb-1", "gb", 2, groups=groups))
        await driver.wait_until(lambda: len(driver.bound()) == 4, HANG_BACKSTOP, "the whole GangGroup bound")
    assert sorted(bindings(cluster)) == ["ga-0", "ga-1", "gb-0", "gb-1"]


@pytest.mark.system
async def test_extender_killed_while_binds_are_held(cluster: Cluster) -> None:
    """(d) 3 of 4 members held (the 4th needs 12 cpu, no node has it free); SIGKILL the extender: the held
    requests fail, nothing is bound; after the restart a 32-cpu node arrives and the gang completes."""
    await populate(cluster, ["n0", "n1"], cpu=8)
    proc, url, driver = start(cluster)
    names = ["mpi-0", "mpi-1", "mpi-2", "mpi-3"]
    async with driver, cluster.admin() as admin:
        for name in names[:3]:
            await create(admin, PODS_PATH, member(name, "mpi", 4, mode="NonStrict", waiting_time="10m"))
        await create(admin, PODS_PATH, member(names[3], "mpi", 4, cpu="12", mode="NonStrict", waiting_time="10m"))
        async with httpx.AsyncClient(base_url=url, timeout=HANG_BACKSTOP) as http:

            async def three_held() -> dict[str, Any] | None:
                gang: dict[str, Any] = (await http.get("/debug/gangs/default/mpi")).json()
                return gang if len(gang.get("held", [])) == 3 else None

            await eventually_awaited(three_held, "3 members held at the barrier", interval=0.1)
        proc.kill()
        await driver.wait_until(
            lambda: driver.stats.binds_failed >= 3, HANG_BACKSTOP, "held binds fail with the extender"
        )
        assert driver.bound() == {}
        cluster.restart(proc, url + "/readyz")
        cycles = len(driver.decisions)
        await driver.wait_until(
            lambda: len(driver.decisions) >= cycles + 3, HANG_BACKSTOP, "3 cycles after the restart"
        )
        assert driver.bound() == {} and bindings(cluster) == Counter()
        # 32 cpu: the 12-cpu member's estimate (85 % → 10.2 cpu) + 5 % usage stays under the 65 % threshold
        await add_node(admin, "big", cpu=32)
        await driver.wait_until(lambda: len(driver.bound()) == 4, HANG_BACKSTOP, "the gang completes after the restart")
    assert sorted(bindings(cluster)) == names
    assert set(bindings(cluster).values()) == {1}


def requeue_patches(cluster: Cluster) -> Counter[str]:
    """Per pod name: the extender's patches of the pod (the requeue annotation)."""
    return Counter(
        c.name
        for c in cluster.recorded_calls()
        if c.user == "extender" and c.resource == "pods" and not c.subresource and c.verb == "patch"
    )


@pytest.mark.system
@pytest.mark.parametrize("requeue", [True, False])
async def test_a_late_member_completes_its_gang_through_the_requeue_not_the_flush(
    cluster: Cluster, requeue: bool
) -> None:
    """(e) The late-member reproduction: minMember 2, member a, then b once a was refused. The driver queues
    as kube-scheduler v1.37 does: b's creation does not move a. With the extender's requeue, its patch
    of a moves a at once; without it (``requeueQPS: 0``) only the unschedulable flush does (shortened
    here to 3 s, checked every second; kube-scheduler's is 5 minutes, checked every 30 s)."""
    await populate(cluster, ["n0", "n1"])
    gang = {} if requeue else {"requeueQPS": 0}
    _, _, driver = start(cluster, gang, max_in_unschedulable=3.0, flush_interval=1.0)
    async with driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, member("late-a", "late", 2))
        await driver.wait_until(lambda: attempted(driver, "late-a") >= 1, 30, "a tried")
        uid_a = next(d.uid for d in driver.decisions if d.pod == "default/late-a")
        parked = lambda: attempted(driver, "late-a") >= 2 and uid_a in driver.queue.unschedulable  # noqa: E731
        await driver.wait_until(parked, 30, "a refused, retried once (its condition changed), parked")
        await create(admin, PODS_PATH, member("late-b", "late", 2))
        await driver.wait_until(lambda: len(driver.bound()) == 2, 60, "both bound")
    why = [w for uid, w in driver.queue.moves if uid == uid_a]
    # The first move is a's own condition update (kube-scheduler retries it once then, as the real one does).
    assert why[0] == "UnscheduledPodUpdate"
    if requeue:
        assert why[-1] == "UnscheduledPodUpdate" and "UnschedulableTimeout" not in why
        assert requeue_patches(cluster) == Counter({"late-a": 1})
    else:
        assert why[-1] == "UnschedulableTimeout"
        assert requeue_patches(cluster) == Counter()
    assert sorted(bindings(cluster)) == ["late-a", "late-b"] and set(bindings(cluster).values()) == {1}
