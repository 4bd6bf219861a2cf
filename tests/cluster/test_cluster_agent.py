"""The agent on the real control plane, for a kwok node: it reads its node's pods and QoS policy through the
real API with the chart's agent ServiceAccount (a token bound to the agent pod the real DaemonSet put on
that node), writes the NodeMetric status the manager created, and throttles a pod's cgroup; restarted, it
re-adopts the cap it set and later restores exactly the original value. Its reports steer the extender:
when its node turns hot, the koordpy-scheduler stops placing pods there.

kwok runs no containers, so the node's /proc and cgroup tree are fabricated (``koordpy_testkit.cgroupfs``):
a cgroup v2 tree with the pod's real uid, and /proc counters that advance at a set busy fraction. Real cgroup
v1 writes are the node tier's (``tests/node``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_kit import Components, Kube, Space, wait_until
from extender_calls import decisions_from, filter_probe
from nodemetrics import CPU_MILLI, FRESH_FOR_THE_RUN, report

from koordpy.model.objects import nodemetric_from_dict
from koordpy.model.quantity import resource_value
from koordpy_testkit.cgroupfs import BusyProc, FakeCgroupTree
from koordpy_testkit.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

AGENT_USER = "system:serviceaccount:koordpy-system:koordpy-agent"
POLICY = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "NodeQOSEnsurancePolicy",
    "metadata": {"name": "waterline"},
    "spec": {
        "objectiveEnsurances": [
            {
                "name": "cpu",
                "avoidanceThreshold": 2,
                "restoreThreshold": 2,
                "actionName": "throttle",
                "metricRule": {"name": "cpu_total_usage", "value": 4000},
            }
        ]
    },
}
ACTION = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "AvoidanceAction",
    "metadata": {"name": "throttle"},
    "spec": {"coolDownSeconds": 1, "throttle": {"cpuThrottle": {"minCPURatio": 0, "stepCPURatio": 50}}},
}


@pytest.fixture
def qos_policy(kube: Kube) -> object:
    for obj, plural in ((POLICY, "nodeqosensurancepolicies"), (ACTION, "avoidanceactions")):
        resp = kube.client.post(f"/apis/ensurance.crane.io/v1alpha1/{plural}", json=obj)
        assert resp.status_code == 201, resp.text
    yield None
    kube.client.delete("/apis/ensurance.crane.io/v1alpha1/nodeqosensurancepolicies/waterline")
    kube.client.delete("/apis/ensurance.crane.io/v1alpha1/avoidanceactions/throttle")


def test_agent_reports_throttles_survives_a_restart_and_restores_exactly_with_the_charts_identity(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube, tmp_path: Path, qos_policy: object
) -> None:
    node = space.node("agent", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    pod = space.create_pod("batch-0", cpu="0", memory="0", scheduler="default-scheduler")
    bound = wait_until(
        "batch-0 Running",
        lambda: (kube.get("Pod", "batch-0", space.namespace) or {}).get("status", {}).get("phase") == "Running",
    )
    assert bound
    uid = pod["metadata"]["uid"]

    # The manager creates the node's NodeMetric (1 s reports); the agent fills its status.
    koordpy.start_manager({"nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1}})
    wait_until("NodeMetric created by the manager", lambda: kube.get("NodeMetric", node))

    busy = BusyProc(tmp_path / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
    busy.busy_fraction = 0.5  # 8 of 16 cores: above the policy's 4-core line
    tree = FakeCgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
    rel = tree.add_pod(uid, qos="besteffort", containers=["b" * 64])
    stop = threading.Event()
    pod_cores = [3.0]  # the pod uses 3 cores

    def burn() -> None:
        """The pod's cpu counter advances by the time that really passed (a loaded machine stretches the
        0.1 s waits), so the rate the agent reads stays near ``pod_cores``."""
        last = time.monotonic()
        while not stop.wait(0.1):
            now = time.monotonic()
            busy.tick()
            tree.advance_cpu(rel, pod_cores[0] * (now - last))
            last = now

    ticker = threading.Thread(target=burn, daemon=True)
    ticker.start()
    try:
        agent, readyz = koordpy.start_ready_agent(node, tree.root, busy.root, tmp_path / "agent-state")
        # 3.0 cores x (1 - 50 %) = 1.5 cores -> 150000 us per 100000 us period. The counter moves in ticks,
        # so the usage the agent reads over its window can be off by a tick either way: the cap must be a
        # step down from the pod's 3 cores (below 300000 us) and no lower than 10000 us.
        wait_until("the agent throttles the pod", lambda: tree.quota(rel) != "max 100000")
        quota, period = (int(x) for x in tree.quota(rel).split())
        assert period == 100000 and 10000 <= quota < 300000, tree.quota(rel)

        def reported() -> dict[str, object] | None:
            obj = kube.get("NodeMetric", node)
            return obj if obj and (obj.get("status") or {}).get("podsMetric") else None

        info = nodemetric_from_dict(wait_until("the agent's report", reported))
        assert info.node_usage is not None and info.update_time is not None
        assert 7000 <= info.node_usage["cpu"] <= 9000  # 50 % of 16 cores, in millicores
        assert [(p.namespace, p.name) for p in info.pods] == [(space.namespace, "batch-0")]

        # SIGTERM and start again: the cap is re-adopted (one record of the original), not restored, not lost.
        agent.stop()
        assert tree.quota(rel) != "max 100000"
        koordpy.restart(agent, readyz)
        assert (tmp_path / "agent-state" / "throttle-originals.json").read_text().count(uid) == 1
        # Load drops: after two samples under the line the cap steps back up to exactly the original "max".
        busy.busy_fraction = 0.05
        pod_cores[0] = 0.2
        wait_until("the agent restores the original cpu.max", lambda: tree.quota(rel) == "max 100000")
    finally:
        stop.set()
        ticker.join()

    # This test's agent: its token names this node, or it wrote this node's object (other tests run agents too).
    writes = [
        e
        for e in control_plane.audit_events()
        if e["user"]["username"] == AGENT_USER
        and (e.get("objectRef") or {}).get("resource") == "nodemetrics"
        and (
            e["objectRef"].get("name") == node
            or node in e["user"].get("extra", {}).get("authentication.kubernetes.io/node-name", [])
        )
    ]
    assert writes, "no NodeMetric write by the agent's ServiceAccount"
    assert {
        (e["objectRef"]["name"], e["objectRef"].get("subresource"), e["responseStatus"]["code"])
        for e in writes
        if e["verb"] in ("patch", "update")
    } == {(node, "status", 200)}
    # The token was bound to the agent's own pod: the API server put its node into the user's extra info.
    extras = {tuple(e["user"].get("extra", {}).get("authentication.kubernetes.io/node-name", [])) for e in writes}
    assert extras == {(node,)}, extras
    # This agent never deleted anything (the throttle and its restore are cgroup writes, not API calls).
    assert [
        e
        for e in control_plane.audit_events()
        if e["user"]["username"] == AGENT_USER
        and e["verb"] == "delete"
        and node in e["user"].get("extra", {}).get("authentication.kubernetes.io/node-name", [])
    ] == []


def reported_cpu(kube: Kube, node: str) -> int | None:
    """The cpu usage (millicores) in ``node``'s NodeMetric status, None before a report."""
    usage = (((kube.get("NodeMetric", node) or {}).get("status") or {}).get("nodeMetric") or {}).get("nodeUsage", {})
    cpu = (usage.get("resources") or {}).get("cpu")
    return None if cpu is None else resource_value("cpu", cpu)


def test_the_agents_report_steers_the_extender(koordpy: Components, space: Space, kube: Kube, tmp_path: Path) -> None:
    """The agent (fabricated cgroup v2 tree and /proc) reports its node at 10 % cpu, the coldest of five: the
    koordpy-scheduler places pods there. Its /proc turns 90 % busy: once its report says so and the extender's
    filter calls the node over its threshold, the next pods all go elsewhere, and every later filter call
    that kube-scheduler sent the node to failed it for its cpu usage."""
    warm = [space.node(f"warm-{i}", cpu="16", memory="64Gi") for i in range(4)]
    node = space.node("agent", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    for name in warm:
        report(kube, name, CPU_MILLI * 40 // 100)
    # The manager creates the agent node's NodeMetric (1 s reports); the agent fills its status.
    koordpy.start_manager({"nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1}})
    wait_until("NodeMetric created by the manager", lambda: kube.get("NodeMetric", node))

    busy = BusyProc(tmp_path / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
    busy.busy_fraction = 0.10
    tree = FakeCgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.1):
            busy.tick()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        koordpy.start_ready_agent(node, tree.root, busy.root, tmp_path / "agent-state")
        wait_until("the agent reports its node cold", lambda: (reported_cpu(kube, node) or CPU_MILLI) < 3000)
        koordpy.start_extender(FRESH_FOR_THE_RUN)  # the warm nodes' reports are written once
        front = koordpy.record_extender_calls()
        koordpy.start_scheduler()
        for i in range(6):
            space.create_pod(f"cold-{i}", cpu="800m", memory="2Gi")
        cold = Counter(wait_until("6 pods bound", lambda: space.count_bound(6)).values())
        assert cold[node] > 0, cold  # the coldest node, by the agent's own report

        busy.busy_fraction = 0.9  # the node turns hot: 14.4 of 16 cpu busy
        wait_until("the agent reports its node hot", lambda: (reported_cpu(kube, node) or 0) > 12000)
        wait_until(
            "the extender's filter calls the node over its threshold",
            lambda: (
                filter_probe(koordpy.extender_base, node)["FailedNodes"].get(node)
                == "node(s) cpu usage exceed threshold"
            ),
        )
        for i in range(6):
            space.create_pod(f"hot-{i}", cpu="800m", memory="2Gi")
        bound = wait_until("12 pods bound", lambda: space.count_bound(12))
    finally:
        stop.set()
        ticker.join()
    print(f"\ncold phase {dict(cold)}; final {dict(Counter(bound.values()))}")
    assert [pod for pod, where in bound.items() if pod.startswith("hot-") and where == node] == []
    later = [d for d in decisions_from(front.exchanges()) if d.pod.split("/")[1].startswith("hot-")]
    assert later and all(
        d.failed.get(node) == "node(s) cpu usage exceed threshold" for d in later if node in d.candidates
    )
    assert any(node in d.candidates for d in later)  # kube-scheduler did send it: only the extender kept pods off
