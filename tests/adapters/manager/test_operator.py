"""The manager's kopf operator against kmock's Kubernetes emulator, over real HTTP on loopback.

kmock workarounds (reference §5.1): the backbone resources kopf waits for are declared, and kopf's
consistency wait is off (the emulator never changes resourceVersion), and every object the test creates
carries a ``metadata.uid`` as a real API server would assign (kopf keys its indexes by namespace, name and
uid, so a Node and a NodeMetric both named ``web-1`` without uids would evict each other's index entries).
The operator authenticates with a kubeconfig file, as ``koordpy manager --kubeconfig`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import pytest
import yaml

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.manager.operator import run
from koordpy_testkit.bounds import HANG_BACKSTOP

NODES = "v1/nodes"
NODEMETRICS = "slo.koordinator.sh/v1alpha1/nodemetrics"
NM_URL = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"

DEFAULT_POLICY = {
    "aggregateDurationSeconds": 300,
    "reportIntervalSeconds": 60,
    "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
}
BATCH_POLICY = {**DEFAULT_POLICY, "reportIntervalSeconds": 30}

CONFIG = {
    "leaderElection": {"leaderElect": False},  # kmock keeps no resourceVersions: no Lease to elect on
    "nodeMetric": {"overrides": [{"nodeSelector": {"pool": "batch"}, "reportIntervalSeconds": 30}]},
    "health": {"host": "127.0.0.1", "port": 8080},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "resourceVersion": "1", "uid": f"node-{name}"},
    }


def nodemetric(name: str, policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name, "resourceVersion": "1", "uid": f"nm-{name}"},
        "spec": {"metricCollectPolicy": policy},
    }


VERBS = {"get", "list", "watch", "create", "patch", "update", "delete"}


@pytest.fixture()
def emulator(kmock: kmock.KubernetesEmulator) -> kmock.KubernetesEmulator:
    declared = {
        "v1/namespaces": ("Namespace", False),
        "v1/events": ("Event", True),
        "apiextensions.k8s.io/v1/customresourcedefinitions": ("CustomResourceDefinition", False),
        NODES: ("Node", False),
        NODEMETRICS: ("NodeMetric", False),
    }
    for resource, (kind, namespaced) in declared.items():
        kmock.resources[resource] = kmock.ResourceInfo(kind=kind, namespaced=namespaced, verbs=VERBS)
    return kmock


@pytest.fixture()
def kubeconfig(emulator: kmock.KubernetesEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "emu", "cluster": {"server": str(emulator.url)}}],
                "users": [{"name": "manager", "user": {"token": "manager-token"}}],
                "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "manager"}}],
                "current-context": "emu",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return path


@contextlib.asynccontextmanager
async def running_manager(raw: dict[str, Any], liveness: bool = False) -> AsyncIterator[None]:
    config = validate(ManagerConfiguration, raw)
    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.create_task(run(config, stop_flag=stop, ready_flag=ready, liveness=liveness))
    try:
        await asyncio.wait_for(ready.wait(), HANG_BACKSTOP)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)


async def eventually(check: Callable[[], Any], what: str, deadline: float = HANG_BACKSTOP) -> None:
    """Poll ``check`` until it returns truthy; fail naming ``what``. A deadline, not a timing assertion."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while True:
        if check():
            return
        if loop.time() > end:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.05)


def stored(emulator: kmock.KubernetesEmulator, resource: str, name: str) -> dict[str, Any] | None:
    """The emulator's current object, or None when absent or deleted."""
    key = (kmock.resource(resource), None, name)
    if key not in emulator.objects:
        return None
    obj = emulator.objects[key]
    return None if obj.deleted else obj.raw


async def api(emulator: kmock.KubernetesEmulator, method: str, path: str, body: Any = None) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, f"{emulator.url}{path}", json=body) as resp,
    ):
        await resp.read()
        return resp.status


def policy_of(emulator: kmock.KubernetesEmulator, name: str) -> Any:
    obj = stored(emulator, NODEMETRICS, name)
    return None if obj is None else obj.get("spec", {}).get("metricCollectPolicy")


async def test_start_up_creates_fixes_and_garbage_collects(
    emulator: kmock.KubernetesEmulator, kubeconfig: Path
) -> None:
    assert await api(emulator, "POST", "/api/v1/nodes", node("web-1")) < 300
    assert await api(emulator, "POST", "/api/v1/nodes", node("batch-1", pool="batch")) < 300
    drifted = {**DEFAULT_POLICY, "reportIntervalSeconds": 5, "nodeMemoryCollectPolicy": "usageWithPageCache"}
    assert await api(emulator, "POST", NM_URL, nodemetric("web-1", drifted)) < 300
    assert await api(emulator, "POST", NM_URL, nodemetric("ghost", DEFAULT_POLICY)) < 300

    port = free_port()
    async with running_manager({**CONFIG, "health": {"host": "127.0.0.1", "port": port}}, liveness=True):
        await eventually(lambda: policy_of(emulator, "batch-1") == BATCH_POLICY, "batch-1 NodeMetric created")
        await eventually(lambda: policy_of(emulator, "web-1") == DEFAULT_POLICY, "web-1 policy restored")
        await eventually(lambda: stored(emulator, NODEMETRICS, "ghost") is None, "ghost NodeMetric deleted")
        # the liveness endpoint (in place of kopf's), which the chart's livenessProbe calls: what it checked.
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200
            body = await resp.json()
        assert body["status"] == "ok"
        assert body["checks"]["eventLoop"] == "ok" and body["checks"]["operator"] == "running"
        # no leaderElection entry: election is off against kmock (CONFIG)
        assert set(body["checks"]) == {"eventLoop", "operator", "migrationRounds", "reservationRounds", "caches"}
        assert body["checks"]["caches"]["nodes"] == 2  # web-1 and batch-1: the manager's watch cache of nodes
        assert body["checks"]["reservationRounds"]["intervalSeconds"] == 10

    # The drifted object was patched, not replaced: the foreign key was removed by the merge-patch.
    patches = [r for r in emulator if r.method == "PATCH" and r.url.path == f"{NM_URL}/web-1"]
    assert patches and patches[0].data["spec"]["metricCollectPolicy"]["nodeMemoryCollectPolicy"] is None
    # Index lag can repeat the same patch (the watch event of the first one arrives later); never a different one.
    assert all(r.data == patches[0].data for r in patches)
    assert {r.headers.get("Authorization") for r in patches} == {"Bearer manager-token"}


async def test_follows_node_and_nodemetric_events(emulator: kmock.KubernetesEmulator, kubeconfig: Path) -> None:
    assert await api(emulator, "POST", "/api/v1/nodes", node("web-1")) < 300

    async with running_manager(CONFIG):
        await eventually(lambda: policy_of(emulator, "web-1") == DEFAULT_POLICY, "web-1 NodeMetric created")

        assert await api(emulator, "POST", "/api/v1/nodes", node("batch-2", pool="batch")) < 300
        await eventually(lambda: policy_of(emulator, "batch-2") == BATCH_POLICY, "new node gets a NodeMetric")

        # Someone edits the spec: the manager puts the configured policy back.
        edit = {"spec": {"metricCollectPolicy": {"reportIntervalSeconds": 1}}}
        assert await api(emulator, "PATCH", f"{NM_URL}/batch-2", edit) < 300
        await eventually(lambda: policy_of(emulator, "batch-2") == BATCH_POLICY, "edited policy restored")

        # Someone deletes a live node's NodeMetric: it comes back.
        assert await api(emulator, "DELETE", f"{NM_URL}/web-1") < 300
        await eventually(lambda: policy_of(emulator, "web-1") == DEFAULT_POLICY, "deleted NodeMetric recreated")

        # The node goes away: so does its NodeMetric.
        assert await api(emulator, "DELETE", "/api/v1/nodes/batch-2") < 300
        await eventually(lambda: stored(emulator, NODEMETRICS, "batch-2") is None, "NodeMetric of deleted node gone")

    # Nodes are only ever read: kopf stored no progress annotations or finalizers on them.
    writes = [r for r in emulator if r.url.path.startswith("/api/v1/nodes") and r.method in ("PATCH", "PUT")]
    assert writes == []


async def test_disabled_bookkeeping_writes_nothing(emulator: kmock.KubernetesEmulator, kubeconfig: Path) -> None:
    assert await api(emulator, "POST", "/api/v1/nodes", node("web-1")) < 300
    assert await api(emulator, "POST", NM_URL, nodemetric("ghost", DEFAULT_POLICY)) < 300
    async with running_manager({**CONFIG, "nodeMetric": {"enabled": False}}):
        # Wait until the operator has at least listed NodeMetrics, then check nothing was written.
        await eventually(
            lambda: any(r.method == "GET" and r.url.path == NM_URL for r in emulator), "NodeMetrics listed"
        )
        await eventually(lambda: any(r.method == "GET" and r.url.path == "/api/v1/nodes" for r in emulator), "listed")
    writes = [r for r in emulator if r.headers.get("Authorization") and r.method in ("POST", "PATCH", "PUT", "DELETE")]
    assert writes == []
    assert stored(emulator, NODEMETRICS, "ghost") is not None


class _ScriptedApi:
    """Answers ``request`` from a script of results (an exception is raised), recording each call."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str, object]] = []

    async def request(self, method: str, path: str, *, body: object = None, **_: object) -> dict[str, object]:
        self.calls.append((method, path, body))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, dict)
        return answer


async def test_a_new_manager_waits_out_the_live_keep_alives_of_older_peering_replicas() -> None:
    """``may_lead`` of the elector: an older version's replica that still keeps alive in the ClusterKopfPeering
    (kopf's rule: lastseen + lifetime in the future) holds a new manager back; a dead one, an empty or a
    missing object (or kind) do not; a failed read says "not yet"."""
    from koordpy.kube import errors as kube_errors
    from koordpy.manager.operator import legacy_peers_gone

    now = datetime.datetime.now(datetime.UTC)
    live = {"priority": 7, "lifetime": 60, "lastseen": (now - datetime.timedelta(seconds=30)).isoformat()}
    dead = {"priority": 9, "lifetime": 60, "lastseen": (now - datetime.timedelta(seconds=61)).isoformat()}
    api = _ScriptedApi(
        {"status": {"old-a": live, "old-b": dead}},
        {"status": {"old-b": dead}},
        {"status": {}},
        kube_errors.NotFound(404, "NotFound", "the server could not find the requested resource"),
        kube_errors.ServerError(503, "ServiceUnavailable", "starting"),
    )
    check = legacy_peers_gone(api, "koordpy-manager", logging.getLogger("t"))  # type: ignore[arg-type]
    assert [await check() for _ in range(5)] == [False, True, True, True, False]
    assert {path for _, path, _ in api.calls} == {"/apis/kopf.dev/v1/clusterkopfpeerings/koordpy-manager"}
    assert {method for method, _, _ in api.calls} == {"GET"}  # the new manager never writes the old object
