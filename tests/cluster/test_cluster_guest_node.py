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
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from cluster_kit import KOORDPY, Components, Kube, Space, deep_merge, wait_until

from koordpy.model.objects import nodemetric_from_dict
from koordpy.model.quantity import resource_value
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane, ensure_kubelet
from koordpy_testkit.controlplane.pki import client_certificate
from koordpy_testkit.guest import GUEST_HOST, Guest, GuestUnavailableError, images, kubelet, node, psi

pytestmark = [pytest.mark.cluster, pytest.mark.guest]

API_PORT = 6443  # in the guest: 10.0.2.100:6443 -> the API server's port on the host's 127.0.0.1
AGENT_PORT = 9316  # the agent's /metrics and probes, inside the guest
AGENT_STATE_DIR = "/run/koordpy-agent"  # in the guest: its policy state (cool-downs) and throttle originals
MiB = 1 << 20


@pytest.fixture(scope="module")
def guest(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    port = urlparse(control_plane.url).port
    assert port is not None
    booted = Guest(tmp_path_factory.mktemp("guest"), memory_mib=1536, forwards={API_PORT: port})
    try:
        booted.start()
    except GuestUnavailableError as exc:
        pytest.fail(f"the guest cannot run: {exc}")
    try:
        yield booted
    finally:
        booted.stop()
        print(
            f"\ncluster-tier guest: qemu used {booted.cpu_seconds or 0:.0f} s of host CPU over {booted.wall_seconds or 0:.0f} s"
        )


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
    """The guest, emptied afterwards: every process the test started there ends, every pod cgroup goes, and
    the agent's state directory goes before and after (the tests' actions share names: an agent started
    on an earlier test's state would take its cool-downs for its own and not act for an hour)."""
    guest.call(node.remove_tree, path=AGENT_STATE_DIR)
    yield guest
    guest.call(node.clear)
    guest.call(node.remove_tree, path=AGENT_STATE_DIR)


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


def _kubeconfig(guest: Guest, control_plane: ControlPlane, name: str, user: dict[str, str]) -> str:
    """A kubeconfig in the guest's job folder for the API server through the forward (its serving
    certificate names 127.0.0.1 and localhost, so the client checks it as ``localhost``)."""
    shutil.copy(control_plane.ca_cert, guest.job / "ca.crt")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "host",
                "cluster": {
                    "server": f"https://{GUEST_HOST}:{API_PORT}",
                    "certificate-authority": str(guest.job / "ca.crt"),
                    "tls-server-name": "localhost",
                },
            }
        ],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": "host", "user": name}}],
        "current-context": name,
    }
    path = guest.job / f"{name}.kubeconfig"
    path.write_text(json.dumps(config))
    return str(path)


def _spawn_agent(guest: Guest, control_plane: ControlPlane, koordpy: Components, node_name: str) -> int:
    """``koordpy agent run`` in the guest with the chart's configuration (collecting every second, reporting
    every 2 s) and a token bound to the agent pod the chart's DaemonSet put on ``node_name``; its pid.

    Its start-up (imports, about 30 s of the guest's one CPU under TCG) is best left without busy
    neighbours: a test starts its load once :func:`_wait_ready` returned."""
    config = deep_merge(
        koordpy.release.component_config("agent"),
        {
            "collectIntervalSeconds": 1,
            "stateDir": AGENT_STATE_DIR,
            "server": {"host": "127.0.0.1", "port": AGENT_PORT},
            "nodeMetric": {"reportIntervalSeconds": 2, "aggregateDurationSeconds": 2},
        },
    )
    agent_pod = koordpy.agent_pod(node_name)
    token = koordpy.release.token("agent", bound_pod=(agent_pod["metadata"]["name"], agent_pod["metadata"]["uid"]))
    kubeconfig = _kubeconfig(guest, control_plane, "agent", {"token": token})
    (guest.job / "agent.yaml").write_text(yaml.safe_dump(config))
    argv = [str(KOORDPY), "agent", "run", "--config", str(guest.job / "agent.yaml"), "--node", node_name]
    agent: int = guest.call(node.spawn, argv=[*argv, "--kubeconfig", kubeconfig], log=str(guest.job / "agent.log"))
    return agent


def _wait_ready(guest: Guest, agent: int) -> float:
    """Wait until the agent's ``/readyz`` answers 200 inside the guest; the seconds it took from here."""
    started = time.monotonic()

    def ready() -> bool:
        assert guest.call(node.alive, pid=agent), (guest.job / "agent.log").read_text()[-3000:]
        answer = guest.call(node.http_get, url=f"http://127.0.0.1:{AGENT_PORT}/readyz")
        return answer is not None and answer[0] == 200

    wait_until("the agent in the guest ready", ready, interval=1.0)
    return time.monotonic() - started


def _agent_metrics(guest: Guest) -> str:
    answer = guest.call(node.http_get, url=f"http://127.0.0.1:{AGENT_PORT}/metrics")
    assert answer is not None and answer[0] == 200, answer
    return str(answer[1])


def _psi_matches(guest: Guest, cgroups: dict[str, str], stalled: tuple[str, ...]) -> None:
    """Every PSI series of the running agent for the node and the pods ``cgroups`` names (pod key -> cgroup)
    lies within what the kernel's files said from just before the scrape until just after it, read in the
    guest meanwhile (``koordpy_testkit.guest.psi``): ratios to 1e-9, stall totals to 1 us. The pods
    ``stalled`` must have waited for the CPU in the last 10 s (so that a constant or a stale figure would be
    caught)."""
    snapshot = guest.call(psi.beside_scrape, url=f"http://127.0.0.1:{AGENT_PORT}/metrics", cgroups=cgroups)
    assert psi.differences(snapshot) == []
    exposed = psi.series(snapshot["metrics"])
    first, last = snapshot["readings"][0], snapshot["readings"][-1]
    for key in stalled:
        assert first[key]["cpu"]["some"]["avg10"] > 0 and first[key]["cpu"]["some"]["total"] > 0, (key, first[key])
    print(f"\nPSI scrape: {snapshot['seconds']:.2f} s of the guest's clock, {len(snapshot['readings'])} readings")
    for key in ("", *cgroups):
        some = (first[key]["cpu"]["some"], last[key]["cpu"]["some"])
        print(
            f"{key or 'node'}: cpu some avg10 {exposed[(key, 'cpu', 'some', '10s')]:.4f} "
            f"(files {some[0]['avg10'] / 100:.4f}..{some[1]['avg10'] / 100:.4f}), stalled "
            f"{exposed[(key, 'cpu', 'some', 'total')]:.6f} s (files {some[0]['total'] / 1e6:.6f}..{some[1]['total'] / 1e6:.6f})"
        )


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

    # The agent: the chart's configuration and ServiceAccount token, the API server through the forward.
    koordpy.start_manager({"nodeMetric": {"reportIntervalSeconds": 2, "aggregateDurationSeconds": 2}})
    agent = _spawn_agent(guest, control_plane, koordpy, name)
    print(f"\nthe agent ready in the guest after {_wait_ready(guest, agent):.0f} s")
    burners = {
        "batch-a": guest.call(node.start, rel=cgroups["batch-a"]["container"], duty=1.0),
        "batch-b": guest.call(node.start, rel=cgroups["batch-b"]["container"], duty=1.0),
        "latency": guest.call(node.start, rel=cgroups["latency"]["container"], duty=0.1),
    }

    # Its NodeMetric: the guest's CPU (the two busy pods fill it) and every pod by its UID.
    def reported() -> dict[str, Any] | None:
        obj = kube.get("NodeMetric", name)
        status = (obj or {}).get("status") or {}
        return obj if len(status.get("podsMetric") or []) == len(pods) else None

    metric = nodemetric_from_dict(wait_until("the agent's NodeMetric", reported, interval=1.0))
    assert metric.node_usage is not None and metric.node_usage["cpu"] >= 700, metric.node_usage
    assert {p.name for p in metric.pods} == set(pods)

    # The waterlines: node CPU above 600m throttles; node memory 64 MiB above what it uses now evicts.
    used = guest.call(node.meminfo)
    memory_line = used["MemTotal"] - used["MemAvailable"] + 64 * MiB
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
    # PSI on the running agent: its /metrics read between two readings of the kernel's files.
    _psi_matches(
        guest,
        {f"{space.namespace}/{n}": cgroups[n]["pod"] for n in ("batch-a", "batch-b", "latency")},
        stalled=(f"{space.namespace}/batch-a", f"{space.namespace}/batch-b"),
    )

    # Memory: the hungry batch pod takes 112 MiB, past the line 64 MiB above what the node used; the agent
    # evicts it (and only it) through the API.
    burners["hungry"] = guest.call(node.start, rel=cgroups["hungry"]["container"], anon_mib=112, wait=False)
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
    metrics = _agent_metrics(guest)
    ticks0, cpu0, t0 = (
        _metric(metrics, "koordpy_agent_ticks_total"),
        guest.call(node.cpu_seconds, pid=agent),
        time.monotonic(),
    )
    time.sleep(6)
    metrics = _agent_metrics(guest)
    ticks1, cpu1 = _metric(metrics, "koordpy_agent_ticks_total"), guest.call(node.cpu_seconds, pid=agent)
    assert ticks0 is not None and ticks1 is not None and ticks1 > ticks0
    decide = (_metric(metrics, "koordpy_agent_tick_seconds_sum") or 0) / ticks1
    print(
        f"agent in the guest: {(cpu1 - cpu0) / (ticks1 - ticks0) * 1000:.1f} ms of process CPU per tick "
        f"({ticks1 - ticks0:.0f} ticks, {len(pods) - 1} pods, over {time.monotonic() - t0:.0f} s); "
        f"collection + decision {decide * 1000:.1f} ms wall per tick (koordpy_agent_tick_seconds)"
    )
    assert _metric(metrics, "koordpy_agent_evictions_total") is not None
    assert guest.call(node.terminate, pid=agent) == 0


# ---- a real kubelet beside the agent -------------------------------------------------------------------

PAUSE_IMAGE = "koordpy.local/pause:test"
BUSYBOX_IMAGE = "koordpy.local/busybox:test"
LOAD_DIR = "/run/koordpy-load"  # in the guest; the batch pod idles while LOAD_DIR/idle exists


@pytest.fixture(scope="module")
def kubelet_binary() -> Path:
    try:
        return ensure_kubelet()
    except RuntimeError as exc:
        pytest.fail(str(exc))


def _real_pod(space: Space, name: str, node_name: str, *, command: str, resources: dict[str, Any]) -> dict[str, Any]:
    """A pod of busybox (imported, never pulled) for the kubelet in the guest, placed by the default scheduler."""
    obj = space.pod(name, scheduler="default-scheduler", node_selector={"kubernetes.io/hostname": node_name})
    obj["spec"]["terminationGracePeriodSeconds"] = 1
    obj["spec"]["containers"] = [
        {
            "name": "main",
            "image": BUSYBOX_IMAGE,
            "imagePullPolicy": "Never",
            "command": ["/bin/busybox", "sh", "-c", command],
            "resources": resources,
            "volumeMounts": [{"name": "load", "mountPath": "/load"}],
        }
    ]
    obj["spec"]["volumes"] = [{"name": "load", "hostPath": {"path": LOAD_DIR, "type": "DirectoryOrCreate"}}]
    return space.kube.create(obj)


def _running(kube: Kube, namespace: str, name: str) -> bool:
    pod = kube.get("Pod", name, namespace) or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


def test_a_real_kubelet_in_the_guest_and_the_agent_share_the_node(
    control_plane: ControlPlane,
    koordpy: Components,
    space: Space,
    kube: Kube,
    clean_guest: Guest,
    kubelet_binary: Path,
    qos_objects: list[tuple[str, dict[str, Any]]],
) -> None:
    """The kubelet (built from the pinned module) registers the guest as a Node and runs two real pods through
    containerd and runc: a latency-sensitive Guaranteed pod and a batch pod busy on the whole CPU. The agent
    finds the pods in the cgroups the kubelet made (cgroupfs driver: the guest has no systemd) and throttles
    the batch pod, whose CPU the kernel holds to the cap in that cgroup; its PSI on ``/metrics`` is the
    kernel's. The pod is resized in place while capped (the kubelet writes its ``cpu.max``): the agent's
    restore that follows takes the superseded path (counted in ``koordpy_agent_restores_superseded_total``,
    logged, the kubelet's limit left), and its next throttle starts from the kubelet's limit, which its
    restore writes back. With an eviction rule the agent evicts the batch pod and the kubelet ends it."""
    guest = clean_guest
    name = f"guest-kubelet-{space.namespace[-4:]}"  # a certificate CN holds 64 characters
    space.nodes.append(name)  # the kubelet registers it; the space deletes it afterwards
    started = time.monotonic()
    images.oci_archive(guest.job / "pause.tar", PAUSE_IMAGE, entrypoint=["/bin/busybox", "sleep", "2147483647"])
    images.oci_archive(guest.job / "busybox.tar", BUSYBOX_IMAGE, entrypoint=["/bin/busybox", "sh"])
    guest.call(
        kubelet.start_containerd, config=kubelet.containerd_config(PAUSE_IMAGE), log=str(guest.job / "containerd.log")
    )
    for archive in ("pause.tar", "busybox.tar"):
        guest.call(kubelet.import_image, archive=str(guest.job / archive))
    assert control_plane.pki is not None
    cert, key = client_certificate(
        control_plane.pki, guest.job, "kubelet", common_name=f"system:node:{name}", organization="system:nodes"
    )
    kubeconfig = _kubeconfig(guest, control_plane, "kubelet", {"client-certificate": str(cert), "client-key": str(key)})
    kubelet_pid = guest.call(
        kubelet.start_kubelet,
        kubelet=str(kubelet_binary),
        config=kubelet.kubelet_config(),
        kubeconfig=kubeconfig,
        node_name=name,
        log=str(guest.job / "kubelet.log"),
    )

    def node_ready() -> bool:
        assert guest.call(node.alive, pid=kubelet_pid), (guest.job / "kubelet.log").read_text()[-4000:]
        conditions = ((kube.get("Node", name) or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_until("the guest's kubelet registers a Ready Node", node_ready, interval=1.0)
    ready_after = time.monotonic() - started
    # The batch pod starts idle; the agent starts now, its imports beside the pods' start-up.
    guest.call(node.touch, path=f"{LOAD_DIR}/idle")
    agent = _spawn_agent(guest, control_plane, koordpy, name)
    latency = _real_pod(
        space,
        "latency",
        name,
        command="while :; do sleep 1; done",
        resources={"requests": {"cpu": "200m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "32Mi"}},
    )
    batch = _real_pod(
        space,
        "batch",
        name,
        command="while :; do if [ -e /load/idle ]; then sleep 1; fi; done",
        resources={"requests": {"cpu": "100m", "memory": "16Mi"}, "limits": {"cpu": "2"}},
    )
    wait_until(
        "both pods running under the kubelet",
        lambda: _running(kube, space.namespace, "latency") and _running(kube, space.namespace, "batch"),
        timeout=3 * HANG_BACKSTOP,  # two sandboxes and containers beside the agent's start-up, under TCG
        interval=1.0,
    )
    running_after = time.monotonic() - started
    # The kubelet's own cgroups (cgroupfs driver) and the limits it wrote: no layout written by the test.
    batch_rel = f"kubepods/burstable/pod{batch['metadata']['uid']}"
    latency_rel = f"kubepods/pod{latency['metadata']['uid']}"

    def cpu_max(rel: str) -> str:
        return str(guest.call(node.read, rel=rel, name="cpu.max")).strip()

    assert cpu_max(batch_rel) == "200000 100000"
    assert cpu_max(latency_rel) == "20000 100000"

    print(f"\nthe agent ready in the guest {_wait_ready(guest, agent):.0f} s after the pods ran")

    def reported() -> dict[str, Any] | None:
        status = (kube.get("NodeMetric", name) or {}).get("status") or {}
        pods = {p.get("name") for p in status.get("podsMetric") or []}
        return status if {"latency", "batch"} <= pods else None

    wait_until("the agent reports the kubelet's pods", reported, interval=1.0)

    # The batch pod turns busy; node CPU above 50m throttles it, the only candidate below the Guaranteed pod.
    # One step: the action cools down for an hour, and the rule never restores by steps (restoreThreshold:
    # a million samples under the line): to the floor max(request 0.1, limit 2 x minCPURatio 5 %) = 0.1 core,
    # "10000 100000" in the cgroup the kubelet made. (A step needs the pod above its floor: little, on an
    # emulated CPU shared with the kubelet, containerd and the agent.)
    guest.call(node.unlink, path=f"{LOAD_DIR}/idle")
    policy, throttle, evict = _policy(memory_line=1 << 40)
    policy[1]["spec"]["objectiveEnsurances"] = policy[1]["spec"]["objectiveEnsurances"][:1]
    policy[1]["spec"]["objectiveEnsurances"][0]["metricRule"]["value"] = 50
    policy[1]["spec"]["objectiveEnsurances"][0]["restoreThreshold"] = 1_000_000
    one_step = {"coolDownSeconds": 3600, "throttle": {"cpuThrottle": {"minCPURatio": 5, "stepCPURatio": 90}}}
    throttle[1]["spec"] = one_step
    again = ("avoidanceactions", deep_merge(throttle[1], {"metadata": {"name": "guest-throttle-again"}}))
    for plural, obj in (policy, throttle, again, evict):
        resp = kube.client.post(f"/apis/ensurance.crane.io/v1alpha1/{plural}", json=obj)
        assert resp.status_code == 201, resp.text
        qos_objects.append((plural, obj))
    path = "/apis/ensurance.crane.io/v1alpha1/nodeqosensurancepolicies/guest-waterline"

    def put_throttle_rule(strategy: str, action: str) -> None:
        rule = policy[1]["spec"]["objectiveEnsurances"][0]
        rule["strategy"], rule["actionName"] = strategy, action
        policy[1]["metadata"]["resourceVersion"] = kube.client.get(path).json()["metadata"]["resourceVersion"]
        resp = kube.client.put(path, json=policy[1])
        assert resp.status_code == 200, resp.text

    wait_until("the agent throttles the batch pod", lambda: cpu_max(batch_rel) != "200000 100000", interval=1.0)
    assert cpu_max(batch_rel) == "10000 100000"

    # Throttle accuracy in the kubelet's own pod cgroup: the pod's CPU over a window of the guest's clock.
    # 10 s: when the host descheduled the emulated CPU, the kernel charges the stolen time to the task that
    # was running and pays the overrun back with throttled periods (100 ms of it: 10 periods at this cap),
    # so a 3 s window can read 0 % or 13 % under a 10 % cap; over 10 s such an overrun moves the share by 1 point.
    window = guest.call(node.share, rel=batch_rel, seconds=10.0)
    print(f"\nbatch pod capped at 10.0 % by the agent: measured {window['share'] * 100:.1f} % of a CPU, {window}")
    assert window["cpu_max"] == ["10000 100000", "10000 100000"], window
    assert abs(window["share"] - 0.1) <= 0.03, window
    assert window["nr_throttled"] > 0, window
    # PSI on the running agent for the kubelet's pods, against their cgroups' files at the same moment.
    _psi_matches(
        guest,
        {f"{space.namespace}/batch": batch_rel, f"{space.namespace}/latency": latency_rel},
        stalled=(f"{space.namespace}/batch",),
    )

    # Resized in place to a 3-CPU limit while throttled: the kubelet writes the pod's and the container's cpu.max.
    resp = kube.client.patch(
        f"/api/v1/namespaces/{space.namespace}/pods/batch/resize",
        json={"spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "3"}}}]}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text

    def resized() -> bool:
        statuses = ((kube.get("Pod", "batch", space.namespace) or {}).get("status") or {}).get(
            "containerStatuses"
        ) or []
        return any(((s.get("resources") or {}).get("limits") or {}).get("cpu") == "3" for s in statuses)

    wait_until("the kubelet actuates the resize", resized, interval=1.0)
    wait_until("the kubelet's new limit in the pod cgroup", lambda: cpu_max(batch_rel) == "300000 100000")
    container_id = kube.get("Pod", "batch", space.namespace)["status"]["containerStatuses"][0]["containerID"]
    container_rel = f"{batch_rel}/{container_id.rsplit('/', 1)[1]}"  # containerd://<id>
    assert _metric(_agent_metrics(guest), "koordpy_agent_restores_superseded_total") == 0.0

    # The throttle rule turns to Preview: the agent hands the cap back at once (its action no longer acts).
    # Its first write since its cap is that restore, and the cgroup holds the kubelet's 300000, not the
    # agent's 10000: the restore leaves it (the superseded path), counted and logged, never writing 200000.
    def restored() -> bool:
        return _metric(_agent_metrics(guest), "koordpy_agent_throttled_pods") == 0.0

    put_throttle_rule("Preview", "guest-throttle")
    wait_until("the agent's restore", restored, interval=1.0)  # the same tick counts a superseded restore
    assert _metric(_agent_metrics(guest), "koordpy_agent_restores_superseded_total") == 1.0
    assert cpu_max(batch_rel) == "300000 100000"
    assert cpu_max(container_rel) == "300000 100000"  # the agent never writes a container's cpu.max on v2
    log = [line for line in (guest.job / "agent.log").read_text().splitlines() if "someone else" in line]
    superseded = f"/sys/fs/cgroup/{batch_rel}: cpu quota changed by someone else since the agent wrote 10000: "
    assert len(log) == 1 and superseded + "not restored to 200000" in log[0], log  # and no step met it before
    print("agent on the kubelet's write:", log)

    # Its later plans start from the kubelet's value. Throttled again (another action: the first one cools
    # down for an hour): floor max(0.1, limit 3 x 5 %) = 0.15 core; the policy's original is the pod's 3 CPUs
    # and the writer's the cgroup's 300000, which the next restore writes back exactly (the writer's own cap
    # still in place: not superseded).
    put_throttle_rule("None", "guest-throttle-again")
    wait_until("the agent throttles the resized pod", lambda: cpu_max(batch_rel) != "300000 100000", interval=1.0)
    assert cpu_max(batch_rel) == "15000 100000"
    uid = batch["metadata"]["uid"]
    planned = guest.call(node.read_json, path=f"{AGENT_STATE_DIR}/policy-state.json")["throttled"][uid]
    assert (planned["cap"], planned["original"]) == (0.15, 3.0), planned
    remembered = guest.call(node.read_json, path=f"{AGENT_STATE_DIR}/throttle-originals.json")[uid]
    assert (remembered["quota"], remembered["period"], remembered["written"]) == (300000, 100000, 15000), remembered
    put_throttle_rule("Preview", "guest-throttle-again")
    wait_until("the agent's second restore", restored, interval=1.0)
    assert cpu_max(batch_rel) == "300000 100000"
    assert _metric(_agent_metrics(guest), "koordpy_agent_restores_superseded_total") == 1.0
    print(f"kubelet Ready after {ready_after:.0f} s, pods running after {running_after:.0f} s")

    def batch_cpu() -> int | None:
        """The batch pod's CPU (millicores) in the agent's last NodeMetric report."""
        status = (kube.get("NodeMetric", name) or {}).get("status") or {}
        for pod in status.get("podsMetric") or []:
            if pod.get("name") == "batch":
                cpu = ((pod.get("podUsage") or {}).get("resources") or {}).get("cpu")
                return None if cpu is None else resource_value("cpu", cpu)
        return None

    guest.call(node.touch, path=f"{LOAD_DIR}/idle")
    wait_until("the agent reports the batch pod idle", lambda: (batch_cpu() or 1000) < 100, interval=1.0)

    # The node's own load with the batch pod idle (kubelet, containerd, the agent: TCG makes them costly),
    # from the agent's reports; the eviction line goes above it, halfway to the guest's one CPU (1000m, what
    # the node reads with the batch pod busy) and at most 250m, so the busy batch pod crosses it and evicting
    # it closes the gap. (A fixed 250m above an idle load of 781m, seen on a loaded host, is never crossed.)
    def node_cpu() -> int | None:
        usage = ((kube.get("NodeMetric", name) or {}).get("status") or {}).get("nodeMetric", {}).get("nodeUsage", {})
        cpu = (usage.get("resources") or {}).get("cpu")
        return None if cpu is None else resource_value("cpu", cpu)

    baseline = max(wait_until("a node usage report", node_cpu, interval=1.0) for _ in range(3))
    print(f"node usage with the batch pod idle: {baseline}m")
    assert baseline <= 900, f"the node's own load {baseline}m leaves the busy batch pod no room to cross a line"
    evict_line = baseline + min(250, (1000 - baseline) // 2)

    # Load again, under an eviction rule that only previews at first (no throttle rule any more); once the
    # agent has seen the batch pod busy, the rule acts: the agent evicts the batch pod, the kubelet ends it
    # and its cgroup goes. (Acting at once could read the batch pod's CPU while it woke, too small to close
    # the gap, and precise execution would rightly take the next pod too.)
    def put_evict_rule(strategy: str) -> None:
        policy[1]["spec"]["objectiveEnsurances"] = [
            {
                "name": "cpu-evict",
                "avoidanceThreshold": 2,
                "actionName": "guest-evict",
                "strategy": strategy,
                "metricRule": {"name": "cpu_total_usage", "value": evict_line},
            }
        ]
        policy[1]["metadata"]["resourceVersion"] = kube.client.get(path).json()["metadata"]["resourceVersion"]
        resp = kube.client.put(path, json=policy[1])
        assert resp.status_code == 200, resp.text

    put_evict_rule("Preview")
    guest.call(node.unlink, path=f"{LOAD_DIR}/idle")

    def closes_the_gap() -> bool:
        """The batch pod alone, as the agent reports it, frees more than the node is above the line (50m spare):
        evicting it is then enough, and the precise plan takes no other pod."""
        busy, used = batch_cpu(), node_cpu()
        return busy is not None and used is not None and busy - 50 >= used - evict_line

    wait_until("the agent reports the batch pod busy enough to close the gap alone", closes_the_gap, interval=1.0)
    assert cpu_max(batch_rel) == "300000 100000"  # still the kubelet's, syncs of both since: nobody fought
    put_evict_rule("None")
    wait_until(
        "the batch pod evicted and gone", lambda: kube.get("Pod", "batch", space.namespace) is None, interval=1.0
    )
    wait_until("its cgroup removed by the kubelet", lambda: not guest.call(node.exists, rel=batch_rel), interval=1.0)
    assert _running(kube, space.namespace, "latency")
    assert cpu_max(latency_rel) == "20000 100000"
    events = [e.get("reason") for e in kube.events(space.namespace, "batch")]
    assert "Evicted" in events, events
    assert guest.call(node.terminate, pid=agent) == 0
    # The kubelet ends the latency pod before it stops itself (else the namespace waits for the pod GC).
    kube.client.delete(f"/api/v1/namespaces/{space.namespace}/pods/latency")
    wait_until("the latency pod ended by the kubelet", lambda: kube.get("Pod", "latency", space.namespace) is None)
    assert guest.call(node.terminate, pid=kubelet_pid) is not None
