"""The manager's LowNodeLoad loop against the API emulator over loopback HTTP: the views fed by the manager's watch
caches, jobs filed after ``consecutiveAbnormalities`` rounds and not again while their move counts, ``dryRun`` and
``paused`` filing nothing, the ledger following the jobs, a manager that starts adopting the jobs already filed,
repeat moves counted and told on the workload, a refused create counted.

The cluster: node ``hot`` at 80 % cpu (four pods of 800m on 4 cpu), two idle nodes at 10 %; thresholds low 30 %,
high 70 %. Moving one pod takes ``hot`` to 2400m = 60 %, under 70 %: one move per acting round.
"""

from __future__ import annotations

import asyncio
import copy
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.descheduler.lownodeload import LABEL_PLUGIN, NAME
from koordpy.kube import resources
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import write_kubeconfig
from koordpy.manager.api import KubeBalanceApi
from koordpy.manager.balance import BalanceController, BalanceMetrics, BalanceViews, balance_loop
from koordpy.manager.cache import ManagerCache
from koordpy.manager.operator import run
from koordpy.model.durations import format_rfc3339
from koordpy.runtime.metrics import new_registry, render
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.apiserver.state import ResourceInfo
from koordpy_testkit.balance import NOW, BalanceCluster
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.processes import free_port

__all__ = ["api_client", "apiserver"]

PMJ = resources.PODMIGRATIONJOBS
KINDS = ("pods", "podmigrationjobs", "nodes", "nodemetrics", "workloads")
LOW_NODE_LOAD = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 70}}


def config(abnormalities: int = 2, **low_node_load: Any) -> ManagerConfiguration:
    """``lowNodeLoad`` with ``consecutiveAbnormalities: abnormalities`` and ``low_node_load`` merged in."""
    anomaly = {"anomalyCondition": {"consecutiveAbnormalities": abnormalities}}
    return validate(
        ManagerConfiguration,
        {
            "lowNodeLoad": {**LOW_NODE_LOAD, **anomaly, **low_node_load},
            "migrationController": {"schedulerNames": ["koordpy-scheduler"]},
            "repeatMoveWindowSeconds": 600,
        },
    )


def cluster() -> BalanceCluster:
    found = BalanceCluster()
    for name in ("hot", "idle-1", "idle-2"):
        found.node(name, cpu="4", memory="8Gi")
    for i in range(4):
        found.pod(f"web-{i}", "hot", cpu="400m", usage=(800, 1 << 28))
    found.pod("q-1", "idle-1", cpu="400m", usage=(400, 1 << 28))
    found.pod("q-2", "idle-2", cpu="400m", usage=(400, 1 << 28))
    return found


def workloads() -> list[dict[str, Any]]:
    """The pods' ReplicaSet (``ReplicaSet-workload``) and its Deployment ``web``, 10 replicas."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "Deployment-web"},
        "spec": {"replicas": 10, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "Deployment-web", "controller": True}
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "workload",
            "namespace": "default",
            "uid": "ReplicaSet-workload",
            "ownerReferences": [owner],
        },
        "spec": {"replicas": 10, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    return [deployment, replicaset]


def serve_workloads(apiserver: ApiServerEmulator) -> None:
    for ref in (resources.DEPLOYMENTS, resources.REPLICASETS, resources.STATEFULSETS):
        apiserver.state.register(ResourceInfo(ref, status_subresource=True))


class Clock:
    def __init__(self, at: float = NOW) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


async def manager(
    apiserver: ApiServerEmulator,
    api_client: ApiClient,
    cfg: ManagerConfiguration,
    clock: Clock,
    objects: list[dict[str, Any]] | None = None,
) -> tuple[BalanceController, ManagerCache, BalanceMetrics]:
    serve_workloads(apiserver)
    apiserver.seed(*(objects if objects is not None else [*cluster().documents(), *workloads()]))
    cache = ManagerCache(api_client, KINDS)
    await cache.resync()
    assert cfg.low_node_load is not None
    views = BalanceViews(cache, cfg.low_node_load, validate(SchedulerConfiguration, {}), clock=clock)
    metrics = BalanceMetrics(new_registry())
    controller = BalanceController(views, cache, KubeBalanceApi(api_client), cfg, clock=clock, metrics=metrics)
    return controller, cache, metrics


async def round_at(controller: BalanceController, cache: ManagerCache, clock: Clock, at: float) -> Any:
    clock.at = at
    await cache.resync()
    return await controller.run_round()


def creates(apiserver: ApiServerEmulator) -> list[dict[str, Any]]:
    return [r for r in apiserver.requests if r.get("resource") == "podmigrationjobs" and r.get("verb") == "create"]


def exposition(metrics: BalanceMetrics) -> str:
    return render(metrics.registry)[0].decode()


def sample(text: str, line: str) -> float | None:
    for found in text.splitlines():
        if found.startswith(line + " "):
            return float(found.rsplit(" ", 1)[1])
    return None


async def test_jobs_are_filed_once_the_node_is_hot_for_more_than_consecutive_abnormalities_rounds(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    clock = Clock()
    controller, cache, metrics = await manager(apiserver, api_client, config(), clock)
    # consecutiveAbnormalities 2: acted on in the third consecutive hot round
    for k in (1, 2):
        result = await round_at(controller, cache, clock, NOW + 10 * k)
        assert result.moves == () and creates(apiserver) == [], k
    with capture_logs() as logs:
        third = await round_at(controller, cache, clock, NOW + 30)
    (move,) = third.moves
    assert move.node == "hot" and move.pod.startswith("default/web-")
    (job,) = (await api_client.list(PMJ)).items
    assert job["metadata"]["labels"] == {LABEL_PLUGIN: NAME}
    annotations = job["metadata"]["annotations"]
    assert annotations["koordinator.sh/evict-reason"] == "node is overutilized, cpu usage(80.00%)>threshold(70.00%)"
    assert annotations["koordinator.sh/job-created-by"] == "koordpy-manager"
    assert annotations["koordpy.io/source-node"] == "hot"
    assert annotations["koordpy.io/expected-destination"] in ("idle-1", "idle-2")
    assert f"default/{job['spec']['podRef']['name']}" == move.pod and job["spec"]["mode"] == "ReservationFirst"
    filed = [e for e in logs if e["event"] == "balance.job_filed"]
    assert [(e["pod"], e["node"], e["job"]) for e in filed] == [(move.pod, "hot", job["metadata"]["name"])]
    acted = [e for e in logs if e["event"] == "balance.node_acted"]
    assert [(e["node"], e["moved"], e["stopped"]) for e in acted] == [
        ("hot", 1, "back at or below its high thresholds")
    ]
    # the NodeMetric is unchanged (no agent reported since), the ledger takes the pod's usage off: no more jobs
    for k in (4, 5, 6):
        later = await round_at(controller, cache, clock, NOW + 10 * k)
        assert later.moves == (), k
    assert len(creates(apiserver)) == 1
    text = exposition(metrics)
    assert sample(text, 'koordpy_descheduler_moves_total{kind="node",outcome="filed",reason="cpu"}') == 1.0
    # hot counts 3200m - 800m (the ledger) = 60 %: normal while the move counts
    assert sample(text, 'koordpy_descheduler_nodes{pool="__default_node_pool__",state="hot"}') == 0.0
    assert sample(text, 'koordpy_descheduler_nodes{pool="__default_node_pool__",state="normal"}') == 1.0
    assert sample(text, 'koordpy_descheduler_nodes{pool="__default_node_pool__",state="idle"}') == 2.0
    assert sample(text, "koordpy_descheduler_recent_moves") == 1.0
    loop = balance_loop(controller, 10.0, cache)
    assert await loop.run_once()
    text = exposition(metrics)
    assert sample(text, 'koordpy_descheduler_rounds_total{outcome="done"}') == 1.0
    assert loop.health()["lastOutcome"] == "done"


async def test_dry_run_logs_and_counts_the_same_moves_and_files_nothing(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Two controllers on one cache, round by round at the same instants: the dry run first, then the one that
    files. They decide the same moves; only the second files them."""
    clock = Clock()
    filing, cache, _ = await manager(apiserver, api_client, config(), clock)
    dry_cfg = config(dryRun=True)
    assert dry_cfg.low_node_load is not None
    views = BalanceViews(cache, dry_cfg.low_node_load, validate(SchedulerConfiguration, {}), clock=clock)
    metrics = BalanceMetrics(new_registry())
    dry = BalanceController(views, cache, KubeBalanceApi(api_client), dry_cfg, clock=clock, metrics=metrics)
    with capture_logs() as logs:
        for k in (1, 2, 3):
            clock.at = NOW + 10 * k
            await cache.resync()
            planned = await dry.run_round()
            assert creates(apiserver) == []
            decided = await filing.run_round()
    assert planned.dry_run and len(planned.moves) == 1
    assert [(m.pod, m.node, m.reason, m.landing.node) for m in planned.moves] == [
        (m.pod, m.node, m.reason, m.landing.node) for m in decided.moves
    ]
    assert len(creates(apiserver)) == 1 and dry.ledger == {}
    told = [e for e in logs if e["event"] == "balance.dry_run_move"]
    assert [(e["pod"], e["node"], e["reason"]) for e in told] == [
        (planned.moves[0].pod, "hot", "node is overutilized, cpu usage(80.00%)>threshold(70.00%)")
    ]
    text = exposition(metrics)
    assert sample(text, 'koordpy_descheduler_moves_total{kind="node",outcome="dry_run",reason="cpu"}') == 1.0
    assert sample(text, 'koordpy_descheduler_moves_total{kind="node",outcome="filed",reason="cpu"}') is None


async def test_a_dry_run_decides_afresh_each_time_the_node_acts(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Nothing enters the ledger: the move reset the node's anomaly state, and after its rounds the node acts again
    with the same decision."""
    clock = Clock()
    dry, cache, _ = await manager(apiserver, api_client, config(dryRun=True), clock)
    decisions = [[m.pod for m in (await round_at(dry, cache, clock, NOW + 10 * k)).moves] for k in range(1, 7)]
    assert decisions[0:2] == [[], []] and decisions[3:5] == [[], []]
    assert len(decisions[2]) == 1 and decisions[5] == decisions[2]
    assert creates(apiserver) == []


async def test_paused_decides_nothing_counts_paused_rounds_and_keeps_the_anomaly_state(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    clock = Clock()
    controller, cache, metrics = await manager(apiserver, api_client, config(paused=True), clock)
    loop = balance_loop(controller, 10.0, cache)
    for k in (1, 2, 3, 4):
        clock.at = NOW + 10 * k
        await cache.resync()
        assert await loop.run_once()
        assert controller.last is not None and controller.last.paused
    assert creates(apiserver) == [] and controller.anomalies == {}
    text = exposition(metrics)
    assert sample(text, 'koordpy_descheduler_rounds_total{outcome="paused"}') == 4.0
    assert sample(text, 'koordpy_descheduler_rounds_total{outcome="done"}') == 0.0
    assert sample(text, 'koordpy_descheduler_nodes{pool="__default_node_pool__",state="hot"}') is None


async def test_the_ledger_follows_the_job_and_the_node_metrics(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    clock = Clock()
    controller, cache, _ = await manager(apiserver, api_client, config(), clock)
    for k in (1, 2, 3):
        await round_at(controller, cache, clock, NOW + 10 * k)
    ((name, move),) = controller.ledger.items()
    assert move.pod.startswith("default/web-") and (move.source, move.usage) == ("hot", (800, 1 << 28))
    # ReservationFirst: the job says where the replacement went
    await api_client.patch_status(PMJ, name, {"status": {"phase": "Running", "nodeName": "idle-2"}})
    await round_at(controller, cache, clock, NOW + 40)
    assert controller.ledger[name].destination == "idle-2"
    assert controller.unfinished == {name: move.pod}
    # a NodeMetric of hot newer than the move without the pod, one of idle-2 newer with it: the move no longer counts
    fresh = cluster()
    fresh.now = NOW + 50
    moved = next(p for p in fresh.pods if f"default/{p['metadata']['name']}" == move.pod)
    moved["spec"]["nodeName"] = "idle-2"
    apiserver.seed(*fresh.metrics())
    await api_client.patch_status(PMJ, name, {"status": {"phase": "Succeeded", "nodeName": "idle-2"}})
    await round_at(controller, cache, clock, NOW + 50)
    assert controller.ledger == {} and controller.unfinished == {}


async def test_a_failed_job_leaves_the_ledger_and_the_pod_may_move_again(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    clock = Clock()
    controller, cache, _ = await manager(apiserver, api_client, config(1), clock)
    first = await round_at(controller, cache, clock, NOW + 10)
    (moved,) = [m.pod for m in first.moves]
    (name,) = controller.ledger
    await api_client.patch_status(PMJ, name, {"status": {"phase": "Failed", "reason": "Timeout"}})
    again = await round_at(controller, cache, clock, NOW + 20)
    assert name not in controller.ledger
    assert [m.pod for m in again.moves] == [moved]  # it never left: moved again, by a new job
    assert len(creates(apiserver)) == 2


async def test_a_manager_that_starts_adopts_the_jobs_already_filed(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """A job of the plugin filed by an earlier leader: its pod is not moved again and its usage leaves the node,
    so the new leader files nothing while the NodeMetric has not caught up."""
    found = cluster()
    filed = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": "earlier",
            "labels": {LABEL_PLUGIN: NAME},
            "annotations": {"koordpy.io/source-node": "hot"},
            "creationTimestamp": format_rfc3339(NOW),
        },
        "spec": {"podRef": {"namespace": "default", "name": "web-3"}, "mode": "ReservationFirst", "ttl": "5m"},
        "status": {"phase": "Running"},
    }
    clock = Clock()
    objects = [*found.documents(), *workloads(), filed]
    controller, cache, _ = await manager(apiserver, api_client, config(1), clock, objects)
    result = await round_at(controller, cache, clock, NOW + 10)
    assert result.moves == () and creates(apiserver) == []
    assert controller.ledger["earlier"].source == "hot" and controller.ledger["earlier"].usage == (800, 1 << 28)


async def test_a_pod_moved_again_soon_after_its_workload_moved_is_counted_and_told(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """A pod of web moves off hot onto idle-1; its replacement web-9 (created after the move, on idle-1) is moved off
    idle-1 four minutes later: a repeat move, told on the Deployment."""
    clock = Clock()
    controller, cache, metrics = await manager(apiserver, api_client, config(1), clock)
    await round_at(controller, cache, clock, NOW + 10)
    ((first, first_move),) = controller.ledger.items()
    await api_client.patch_status(PMJ, first, {"status": {"phase": "Succeeded", "nodeName": "idle-1"}})
    # idle-1 becomes hot with the replacement and others; hot cools down
    later = BalanceCluster(now=NOW + 250)
    for name in ("hot", "idle-1", "idle-2"):
        later.node(name, cpu="4", memory="8Gi")
    later.pod("web-0", "hot", cpu="400m", usage=(400, 1 << 28))
    later.pod("web-9", "idle-1", cpu="400m", usage=(1600, 1 << 28), created=NOW + 60)
    later.pod("q-1", "idle-1", cpu="400m", usage=(1600, 1 << 28))
    later.pod("q-2", "idle-2", cpu="400m", usage=(400, 1 << 28))
    for pod in apiserver.state.objects[("", "pods")].copy():
        apiserver.state.delete(apiserver.state.infos[("", "pods")], pod[0], pod[1], {"gracePeriodSeconds": 0})
    apiserver.seed(*later.documents())
    with capture_logs() as logs:
        result = await round_at(controller, cache, clock, NOW + 250)
    moved = [m.pod for m in result.moves]
    assert "default/web-9" in moved, (moved, [k.why for k in result.kept])
    text = exposition(metrics)
    assert sample(text, 'koordpy_descheduler_repeat_moves_total{cause="moved_again"}') == 1.0
    (told,) = [e for e in logs if e["event"] == "balance.repeat_move"]
    assert (told["workload"], told["pod"], told["node"], told["earlier_job"]) == (
        "Deployment default/web",
        "default/web-9",
        "idle-1",
        first,
    )
    events = [
        e for e in (await api_client.list(resources.EVENTS, namespace="default")).items if e["reason"] == "RepeatMove"
    ]
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"]) for e in events] == [
        ("Deployment", "web", "Warning")
    ]
    expected = f"after PodMigrationJob {first} moved pod {first_move.pod} of this workload off hot onto idle-1"
    assert expected in events[0]["message"]


async def test_a_refused_create_is_counted_and_logged_once_and_nothing_enters_the_ledger(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    clock = Clock()
    controller, cache, metrics = await manager(apiserver, api_client, config(1), clock)
    apiserver.inject_error(403, verb="create", resource="podmigrationjobs", count=2)
    with capture_logs() as logs:
        await round_at(controller, cache, clock, NOW + 10)
        await round_at(controller, cache, clock, NOW + 20)
    assert controller.ledger == {} and (await api_client.list(PMJ)).items == []
    text = exposition(metrics)
    assert sample(text, 'koordpy_descheduler_moves_total{kind="node",outcome="refused",reason="cpu"}') == 2.0
    refused = [e for e in logs if e["event"] == "balance.job_refused"]
    assert len(refused) == 1 and "Forbidden" in refused[0]["error"]
    third = await round_at(controller, cache, clock, NOW + 30)  # allowed again
    assert len(third.moves) == 1 and len(controller.ledger) == 1


async def test_the_views_follow_the_stores(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    clock = Clock()
    controller, cache, _ = await manager(apiserver, api_client, config(), clock)
    views = controller.views
    assert sorted(views.pods) == ["default/q-1", "default/q-2", *(f"default/web-{i}" for i in range(4))]
    assert set(views.state.workloads) == {"Deployment-web", "ReplicaSet-workload"}
    assert set(views.cluster.assigned) == {p.info.uid for p in views.pods.values()}
    # the workloads are kept slim: the pod template is gone, the replica count stays
    stored = cache.replicasets.get("default/workload")
    assert stored is not None and stored["spec"] == {"replicas": 10} and stored["kind"] == "ReplicaSet"
    # a pod deleted leaves both views; a pod recreated under the same name is the new one
    web0 = copy.deepcopy(cache.pods.get("default/web-0"))
    assert web0 is not None
    cache.pods.discard("default/web-0")
    assert "default/web-0" not in views.pods and web0["metadata"]["uid"] not in views.cluster.assigned
    web0["metadata"]["uid"] = "new-uid"
    cache.pods.handle("ADDED", web0)
    assert views.pods["default/web-0"].info.uid == "new-uid" and "new-uid" in views.cluster.assigned
    # an unreadable node is neither hot nor idle, and its NodeMetric's node unknown to the extender
    node = copy.deepcopy(cache.nodes.get("idle-2"))
    assert node is not None
    node["status"]["allocatable"]["cpu"] = "lots"
    node["metadata"]["resourceVersion"] = str(10**15)
    cache.nodes.handle("MODIFIED", node)
    assert views.unreadable["Node"] == 1
    assert views.state.row("idle-2") is None and "idle-2" in views.cluster.invalid_nodes


async def test_the_operator_runs_the_balance_loop_on_the_leader_and_health_lists_it(
    apiserver: ApiServerEmulator, api_client: ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole manager (kopf, the Lease, the caches) with lowNodeLoad: it files the job for the hot node, its
    migration runs (EvictDirectly), and ``/healthz`` reports the balance rounds beside the others."""
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "manager")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    serve_workloads(apiserver)
    found = cluster()
    found.now = time.time()  # the NodeMetrics must be fresh by the manager's own clock
    apiserver.seed(*found.documents(), *workloads())
    port = free_port()
    cfg = validate(
        ManagerConfiguration,
        {
            "health": {"host": "127.0.0.1", "port": port},
            "deschedulingInterval": "1s",
            "lowNodeLoad": {**LOW_NODE_LOAD, "anomalyCondition": {"consecutiveAbnormalities": 1}},
            "migrationController": {
                "schedulerNames": ["koordpy-scheduler"],
                "defaultJobMode": "EvictDirectly",
                "arbitrationArgs": {"interval": "200ms"},
            },
        },
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run(cfg, stop_flag=stop, scheduler=validate(SchedulerConfiguration, {})))
    try:
        async with asyncio.timeout(HANG_BACKSTOP):
            while not (jobs := (await api_client.list(PMJ)).items) or (
                (jobs[0].get("status") or {}).get("phase") != "Succeeded"
            ):
                await asyncio.sleep(0.1)
        (job,) = jobs
        assert job["metadata"]["labels"] == {LABEL_PLUGIN: NAME}
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as resp:
            health = await resp.json()
        rounds = health["checks"]["balanceRounds"]
        assert (rounds["running"], rounds["intervalSeconds"], rounds["lastOutcome"]) == (True, 1.0, "done")
        assert {"migrationRounds", "reservationRounds"} <= set(health["checks"])
        assert {"deployments", "replicasets", "statefulsets"} <= set(health["checks"]["caches"])
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)
    calls = {(r["verb"], r["resource"]) for r in apiserver.requests if r["user"] == "manager"}
    assert ("create", "podmigrationjobs") in calls
    # the workloads' watch caches (the arbitration still reads a job's owners with get, as before)
    assert {("list", "replicasets"), ("watch", "replicasets"), ("watch", "deployments")} <= calls


async def test_a_job_that_fails_after_its_pod_left_keeps_its_move(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """A ReservationFirst job whose replacement bound outside its Reservation fails at its ttl although the pod
    moved: the move stays in the ledger (until the NodeMetrics show it) and in the repeat history."""
    clock = Clock()
    controller, cache, _ = await manager(apiserver, api_client, config(1), clock)
    first = await round_at(controller, cache, clock, NOW + 10)
    ((name, move),) = controller.ledger.items()
    namespace, pod = move.pod.split("/")
    apiserver.state.delete(apiserver.state.infos[("", "pods")], namespace, pod, {"gracePeriodSeconds": 0})
    await api_client.patch_status(PMJ, name, {"status": {"phase": "Failed", "reason": "Timeout"}})
    await round_at(controller, cache, clock, NOW + 20)
    assert name in controller.ledger and len(controller.history) == 1
    assert [m.pod for m in first.moves] == [move.pod]


async def test_pods_with_a_job_of_any_origin_are_not_moved_again(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """A user filed a job for each web pod (no plugin label, so not in the ledger): the node stays hot, acts, and
    keeps every pod, counted by cause."""
    clock = Clock()
    controller, cache, metrics = await manager(apiserver, api_client, config(1), clock)
    for i in range(4):
        body = {"metadata": {"name": f"user-{i}"}, "spec": {"podRef": {"namespace": "default", "name": f"web-{i}"}}}
        await api_client.create(PMJ, body)
    result = await round_at(controller, cache, clock, NOW + 10)
    assert result.moves == () and controller.ledger == {}
    assert sorted((k.pod, k.cause) for k in result.kept) == [(f"default/web-{i}", "moving") for i in range(4)]
    assert sample(exposition(metrics), 'koordpy_descheduler_kept_pods_total{cause="moving"}') == 4.0
    assert len(creates(apiserver)) == 4  # the user's
