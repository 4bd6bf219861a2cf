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
        assert set(body["checks"]) == {"eventLoop", "operator", "migrationRounds", "reservationRounds"}
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


PEERINGS = "kopf.dev/v1/clusterkopfpeerings"
PEERING_URL = "/apis/kopf.dev/v1/clusterkopfpeerings"


def peering_status(emulator: kmock.KubernetesEmulator) -> dict[str, Any]:
    obj = stored(emulator, PEERINGS, "koordpy-manager")
    return {} if obj is None else dict(obj.get("status") or {})


async def test_peering_creates_its_object_and_stands_by_for_a_higher_priority_peer(
    emulator: kmock.KubernetesEmulator, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kopf")
    emulator.resources[PEERINGS] = kmock.ResourceInfo(kind="ClusterKopfPeering", namespaced=False, verbs=VERBS)
    assert await api(emulator, "POST", "/api/v1/nodes", node("web-1")) < 300
    async with running_manager({**CONFIG, "peering": {"enabled": True}}):
        # The manager created the shared object and announces itself in it (random priority below 2**31).
        await eventually(lambda: len(peering_status(emulator)) == 1, "own keep-alive in the peering object")
        (me,) = peering_status(emulator)
        assert 1 <= peering_status(emulator)[me]["priority"] < 2**31
        await eventually(lambda: policy_of(emulator, "web-1") == DEFAULT_POLICY, "a lone peer acts")

        # Another replica with a higher priority appears: this one pauses.
        now = datetime.datetime.now(datetime.UTC).isoformat()
        other = {"status": {"other-replica": {"priority": 2**40, "lifetime": 600, "lastseen": now}}}
        assert await api(emulator, "PATCH", f"{PEERING_URL}/koordpy-manager", other) < 300
        await eventually(lambda: "Pausing operations in favour of" in caplog.text, "kopf pauses this replica")
        assert await api(emulator, "POST", "/api/v1/nodes", node("web-2")) < 300
        # The higher-priority peer leaves: this one resumes and catches up.
        leave = {"status": {"other-replica": None}}
        assert await api(emulator, "PATCH", f"{PEERING_URL}/koordpy-manager", leave) < 300
        await eventually(lambda: policy_of(emulator, "web-2") == DEFAULT_POLICY, "resumed and caught up")
    # Nothing was written for web-2 while paused: its create came after the other peer left.
    requests = list(emulator)
    left = max(i for i, r in enumerate(requests) if r.method == "PATCH" and r.data == leave)
    created = min(
        i
        for i, r in enumerate(requests)
        if r.method == "POST" and r.url.path == NM_URL and r.data["metadata"]["name"] == "web-2"
    )
    assert created > left
    creates = [r for r in requests if r.method == "POST" and r.url.path == PEERING_URL]
    assert len(creates) == 1


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


async def test_ensure_peering_owns_the_object_by_the_cluster_role_and_retries_temporary_errors() -> None:
    from koordpy.kube import errors as kube_errors
    from koordpy.manager.api import ensure_peering

    api = _ScriptedApi(
        kube_errors.ServerError(503, "ServiceUnavailable", "starting"),  # role read fails: retried
        {"metadata": {"uid": "role-uid"}},
        {},
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    created = await ensure_peering(api, "koordpy-manager", "koordpy-manager", logging.getLogger("t"), sleep=sleep)  # type: ignore[arg-type]
    assert created is True
    assert slept == [0.5]
    method, path, body = api.calls[-1]
    assert (method, path) == ("POST", "/apis/kopf.dev/v1/clusterkopfpeerings")
    assert body == {
        "apiVersion": "kopf.dev/v1",
        "kind": "ClusterKopfPeering",
        "metadata": {
            "name": "koordpy-manager",
            "ownerReferences": [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "name": "koordpy-manager",
                    "uid": "role-uid",
                }
            ],
        },
    }


async def test_ensure_peering_adopts_an_ownerless_object_and_raises_on_refusal() -> None:
    from koordpy.kube import errors as kube_errors
    from koordpy.manager.api import ensure_peering

    path = "/apis/kopf.dev/v1/clusterkopfpeerings"
    exists = _ScriptedApi(kube_errors.Conflict(409, "AlreadyExists", "exists"))
    assert await ensure_peering(exists, "p", None, logging.getLogger("t")) is False  # type: ignore[arg-type]
    assert [c[:2] for c in exists.calls] == [("POST", path)]  # no owner asked for: left as found

    role = {"metadata": {"uid": "role-uid"}}
    conflict = kube_errors.Conflict(409, "AlreadyExists", "exists")
    ownerless = _ScriptedApi(role, conflict, {"metadata": {"name": "p", "resourceVersion": "7"}}, {})
    assert await ensure_peering(ownerless, "p", "role", logging.getLogger("t")) is False  # type: ignore[arg-type]
    method, patched, body = ownerless.calls[-1]
    assert (method, patched) == ("PATCH", f"{path}/p")
    owner = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "role", "uid": "role-uid"}
    assert body == {"metadata": {"ownerReferences": [owner], "resourceVersion": "7"}}

    owned = _ScriptedApi(role, conflict, {"metadata": {"name": "p", "ownerReferences": [{"kind": "Other"}]}})
    assert await ensure_peering(owned, "p", "role", logging.getLogger("t")) is False  # type: ignore[arg-type]
    assert [c[0] for c in owned.calls] == ["GET", "POST", "GET"]  # another owner: left as found
    denied = _ScriptedApi(kube_errors.Forbidden(403, "Forbidden", "no"))
    with pytest.raises(kube_errors.Forbidden):
        await ensure_peering(denied, "p", "role", logging.getLogger("t"))  # type: ignore[arg-type]
