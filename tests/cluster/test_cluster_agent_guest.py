"""The whole agent on a real cgroup v2 node: ``koordpy agent run`` with the chart's rendered configuration
runs inside a QEMU guest (``koordpy_testkit.guest``) against this tier's real control plane, reached through
QEMU user networking (``restrict=on``; ``10.0.2.100:6443`` is forwarded to the API server on the host's
loopback, one ``socat`` per connection).

The guest plays the node ``<ns>-guest`` (kwok keeps the Node object Ready and runs the pods' API side: they
turn Running, an evicted pod is deleted). Its containers are real processes in kubelet-shaped cgroups
(systemd driver) that carry the UIDs of the real Pod objects: two batch pods busy on the whole CPU, a
latency-sensitive Guaranteed pod at 10 %, and later a batch pod that takes memory. The agent reports the
node's NodeMetric, throttles the busy batch pods through ``cpu.max`` when the node's CPU passes its
waterline, evicts the pod that pushed memory past its waterline, and restores every cap exactly when the
load falls. The test plays the kubelet's part only where the agent expects a kubelet: it ends an evicted
pod's processes.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from cluster_kit import KOORDPY, Components, Kube, Space, deep_merge, wait_until

from koordpy.model.objects import nodemetric_from_dict
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.guest import GUEST_HOST, Guest, GuestUnavailableError, node

pytestmark = [pytest.mark.cluster, pytest.mark.guest]

API_PORT = 6443  # in the guest: 10.0.2.100:6443 -> the API server's port on the host's 127.0.0.1
AGENT_PORT = 9316  # the agent's /metrics and probes, inside the guest
MiB = 1 << 20


@pytest.fixture(scope="module")
def guest(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    port = urlparse(control_plane.url).port
    assert port is not None
    booted = Guest(tmp_path_factory.mktemp("guest"), forwards={API_PORT: port})
    try:
        booted.start()
    except GuestUnavailableError as exc:
        pytest.fail(f"the guest cannot run: {exc}")
    try:
        yield booted
    finally:
        booted.stop()


def _pod(space: Space, name: str, qos: str) -> dict[str, Any]:
    """A pod for the guest's node, scheduled by the default scheduler."""
    if qos == "besteffort":
        obj = space.pod(name, cpu="0", memory="0", scheduler="default-scheduler")
        obj["spec"]["containers"][0]["resources"] = {}
    else:
        obj = space.pod(name, cpu="200m", memory="64Mi", scheduler="default-scheduler")
        obj["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "200m", "memory": "64Mi"}
    obj["spec"]["terminationGracePeriodSeconds"] = 1
    return space.kube.create(obj)


def _policy(memory_line: int) -> list[tuple[str, dict[str, Any]]]:
    policy = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "NodeQOSEnsurancePolicy",
        "metadata": {"name": "guest-waterline"},
        "spec": {
            "objectiveEnsurances": [
                {
                    "name": "cpu",
                    "avoidanceThreshold": 2,
                    "restoreThreshold": 2,
                    "actionName": "guest-throttle",
                    "metricRule": {"name": "cpu_total_usage", "value": 600},
                },
                {
                    "name": "memory",
                    "avoidanceThreshold": 1,
                    "actionName": "guest-evict",
                    "metricRule": {"name": "memory_total_usage", "value": memory_line},
                },
            ]
        },
    }
    throttle = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "guest-throttle"},
        "spec": {"coolDownSeconds": 2, "throttle": {"cpuThrottle": {"minCPURatio": 0, "stepCPURatio": 50}}},
    }
    evict = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "guest-evict"},
        "spec": {"coolDownSeconds": 2, "eviction": {"terminationGracePeriodSeconds": 1}},
    }
    return [("nodeqosensurancepolicies", policy), ("avoidanceactions", throttle), ("avoidanceactions", evict)]


@pytest.fixture
def clean_guest(guest: Guest) -> Iterator[Guest]:
    """The guest, emptied afterwards: every process the test started there ends, every pod cgroup goes."""
    yield guest
    guest.call(node.clear)


@pytest.fixture
def qos_objects(kube: Kube) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    created: list[tuple[str, dict[str, Any]]] = []
    yield created
    for plural, obj in created:
        kube.client.delete(f"/apis/ensurance.crane.io/v1alpha1/{plural}/{obj['metadata']['name']}")


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_the_agent_in_a_cgroup_v2_guest_reports_throttles_evicts_and_restores(
    control_plane: ControlPlane,
    koordpy: Components,
    space: Space,
    kube: Kube,
    clean_guest: Guest,
    qos_objects: list[tuple[str, dict[str, Any]]],
) -> None:
    guest = clean_guest
    name = space.node("guest", cpu="1", memory="1Gi")
    space.wait_nodes_ready()
    pods = {
        "batch-a": _pod(space, "batch-a", "besteffort"),
        "batch-b": _pod(space, "batch-b", "besteffort"),
        "latency": _pod(space, "latency", "guaranteed"),
        "hungry": _pod(space, "hungry", "besteffort"),
    }
    wait_until("the pods Running on the guest's node", lambda: len(space.bound()) == len(pods))

    # Their containers in the guest: cgroups with the Pods' UIDs, as the kubelet's systemd driver makes them.
    cgroups: dict[str, dict[str, Any]] = {}
    for pod_name, obj in pods.items():
        qos = "guaranteed" if pod_name == "latency" else "besteffort"
        cpu_max = "20000 100000" if qos == "guaranteed" else "max 100000"
        cid = obj["metadata"]["uid"].replace("-", "") * 2
        cgroups[pod_name] = guest.call(
            node.make_pod, driver="systemd", uid=obj["metadata"]["uid"], qos=qos, containers=[cid], cpu_max=cpu_max
        )
        cgroups[pod_name]["container"] = cgroups[pod_name]["containers"][cid]
    burners = {
        "batch-a": guest.call(node.start, rel=cgroups["batch-a"]["container"], duty=1.0),
        "batch-b": guest.call(node.start, rel=cgroups["batch-b"]["container"], duty=1.0),
        "latency": guest.call(node.start, rel=cgroups["latency"]["container"], duty=0.1),
    }

    # The agent: the chart's configuration and ServiceAccount token, the API server through the forward.
    koordpy.start_manager({"nodeMetric": {"reportIntervalSeconds": 2, "aggregateDurationSeconds": 2}})
    config = deep_merge(
        koordpy.release.component_config("agent"),
        {
            "collectIntervalSeconds": 1,
            "stateDir": "/run/koordpy-agent",
            "server": {"host": "127.0.0.1", "port": AGENT_PORT},
            "nodeMetric": {"reportIntervalSeconds": 2, "aggregateDurationSeconds": 2},
        },
    )
    agent_pod = koordpy.agent_pod(name)
    token = koordpy.release.token("agent", bound_pod=(agent_pod["metadata"]["name"], agent_pod["metadata"]["uid"]))
    shutil.copy(control_plane.ca_cert, guest.job / "ca.crt")
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "host",
                "cluster": {
                    "server": f"https://{GUEST_HOST}:{API_PORT}",
                    "certificate-authority": str(guest.job / "ca.crt"),
                    "tls-server-name": "localhost",  # the serving certificate names 127.0.0.1 and localhost
                },
            }
        ],
        "users": [{"name": "agent", "user": {"token": token}}],
        "contexts": [{"name": "agent", "context": {"cluster": "host", "user": "agent"}}],
        "current-context": "agent",
    }
    (guest.job / "kubeconfig").write_text(json.dumps(kubeconfig))
    (guest.job / "agent.yaml").write_text(yaml.safe_dump(config))
    argv = [str(KOORDPY), "agent", "run", "--config", str(guest.job / "agent.yaml"), "--node", name]
    argv += ["--kubeconfig", str(guest.job / "kubeconfig")]
    agent = guest.call(node.spawn, argv=argv, log=str(guest.job / "agent.log"))
    readyz = f"http://127.0.0.1:{AGENT_PORT}/readyz"

    def ready() -> bool:
        assert guest.call(node.alive, pid=agent), (guest.job / "agent.log").read_text()[-3000:]
        answer = guest.call(node.http_get, url=readyz)
        return answer is not None and answer[0] == 200

    wait_until("the agent in the guest ready", ready, interval=1.0)

    # Its NodeMetric: the guest's CPU (the two busy pods fill it) and every pod by its UID.
    def reported() -> dict[str, Any] | None:
        obj = kube.get("NodeMetric", name)
        status = (obj or {}).get("status") or {}
        return obj if len(status.get("podsMetric") or []) == len(pods) else None

    metric = nodemetric_from_dict(wait_until("the agent's NodeMetric", reported, interval=1.0))
    assert metric.node_usage is not None and metric.node_usage["cpu"] >= 700, metric.node_usage
    assert {p.name for p in metric.pods} == set(pods)

    # The waterlines: node CPU above 600m throttles; node memory 100 MiB above what it uses now evicts.
    used = guest.call(node.meminfo)
    memory_line = used["MemTotal"] - used["MemAvailable"] + 100 * MiB
    for plural, obj in _policy(memory_line):
        resp = kube.client.post(f"/apis/ensurance.crane.io/v1alpha1/{plural}", json=obj)
        assert resp.status_code == 201, resp.text
        qos_objects.append((plural, obj))

    def cpu_max(pod_name: str) -> str:
        return str(guest.call(node.read, rel=cgroups[pod_name]["pod"], name="cpu.max")).strip()

    wait_until(
        "the agent throttles both busy batch pods",
        lambda: cpu_max("batch-a") != "max 100000" and cpu_max("batch-b") != "max 100000",
        interval=1.0,
    )

    # The agent keeps stepping (down above the line, up below it): a window counts when its cap held throughout.
    def held(pod_name: str) -> dict[str, Any] | None:
        window: dict[str, Any] = guest.call(node.share, rel=cgroups[pod_name]["pod"], seconds=3.0)
        first, last = window["cpu_max"]
        return window if first == last and first != "max 100000" else None

    for pod_name in ("batch-a", "batch-b"):
        window = wait_until(f"a window of {pod_name} under one cap", lambda p=pod_name: held(p), interval=0.5)
        quota, period = (int(v) for v in window["cpu_max"][0].split())
        print(f"\n{pod_name}: cap {quota / period * 100:.1f} %, measured {window['share'] * 100:.1f} % of a CPU")
        assert abs(window["share"] - quota / period) <= 0.03, (pod_name, window)
        assert window["nr_throttled"] > 0
    assert cpu_max("latency") == "20000 100000"  # the Guaranteed pod is not a candidate while batch pods are

    # Memory: the hungry batch pod takes 160 MiB; the agent evicts it (and only it) through the API.
    burners["hungry"] = guest.call(node.start, rel=cgroups["hungry"]["container"], anon_mib=160, wait=False)
    wait_until(
        "the agent evicts the hungry pod",
        lambda: (
            (kube.get("Pod", "hungry", space.namespace) or {}).get("metadata", {}).get("deletionTimestamp")
            or kube.get("Pod", "hungry", space.namespace) is None
        ),
        interval=1.0,
    )
    guest.call(node.stop, pids=burners.pop("hungry"))  # the kubelet's part: the evicted pod's processes end
    guest.call(node.remove_pod, rel=cgroups["hungry"]["pod"])
    assert {n for n in ("batch-a", "batch-b", "latency") if kube.get("Pod", n, space.namespace)} == {
        "batch-a",
        "batch-b",
        "latency",
    }

    # The load falls: the batch pods go idle; after two samples under the line the caps step back up to
    # exactly what was there.
    for pod_name in ("batch-a", "batch-b"):
        guest.call(node.stop, pids=burners.pop(pod_name))
    wait_until(
        "the agent restores both caps exactly",
        lambda: cpu_max("batch-a") == "max 100000" and cpu_max("batch-b") == "max 100000",
        interval=1.0,
    )
    assert cpu_max("latency") == "20000 100000"

    # What one tick of the agent costs in the guest (TCG: several times a real CPU's cost).
    metrics = guest.call(node.http_get, url=f"http://127.0.0.1:{AGENT_PORT}/metrics")[1]
    ticks0, cpu0, t0 = (
        _metric(metrics, "koordpy_agent_ticks_total"),
        guest.call(node.cpu_seconds, pid=agent),
        time.monotonic(),
    )
    time.sleep(10)
    metrics = guest.call(node.http_get, url=f"http://127.0.0.1:{AGENT_PORT}/metrics")[1]
    ticks1, cpu1 = _metric(metrics, "koordpy_agent_ticks_total"), guest.call(node.cpu_seconds, pid=agent)
    assert ticks0 is not None and ticks1 is not None and ticks1 > ticks0
    print(
        f"agent in the guest: {(cpu1 - cpu0) / (ticks1 - ticks0) * 1000:.1f} ms CPU per tick "
        f"({ticks1 - ticks0:.0f} ticks, {len(pods) - 1} pods, over {time.monotonic() - t0:.0f} s)"
    )
    assert _metric(metrics, "koordpy_agent_evictions_total") is not None
    assert 'koordpy_agent_pod_psi{degree="some",namespace="' in metrics
    assert guest.call(node.terminate, pid=agent) == 0
