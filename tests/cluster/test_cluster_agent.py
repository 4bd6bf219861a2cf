"""The agent on the real control plane, for a kwok node: it reads its node's pods and QoS policy through the
real API with the chart's agent ServiceAccount (a token bound to the agent pod the real DaemonSet put on
that node), writes the NodeMetric status the manager created, and throttles a pod's cgroup.

kwok runs no containers, so the node's /proc and cgroup tree are fabricated (``koordpy_testkit.cgroupfs``):
a cgroup v2 tree with the pod's real uid, and /proc counters that advance at a set busy fraction. Real cgroup
v1 writes are the node tier's (``tests/node``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cluster_kit import Components, Kube, Space, wait_until

from koordpy.model.objects import nodemetric_from_dict
from koordpy_testkit.cgroupfs import BusyProc, FakeCgroupTree
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.processes import LOOPBACK, free_port, wait_http

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


def test_agent_reports_its_node_and_throttles_a_pod_with_the_charts_identity(
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

    def burn() -> None:
        while not stop.wait(0.1):
            busy.tick()
            tree.advance_cpu(rel, 3.0 * 0.1)  # the pod uses 3 cores

    ticker = threading.Thread(target=burn, daemon=True)
    ticker.start()
    try:
        port = free_port()
        agent = koordpy.start_agent(
            node,
            ["--cgroup-root", str(tree.root), "--proc-root", str(busy.root)],
            {
                "collectIntervalSeconds": 0.2,
                "stateDir": str(tmp_path / "agent-state"),
                "server": {"host": LOOPBACK, "port": port},
                "nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1},
            },
        )
        wait_http(f"http://{LOOPBACK}:{port}/readyz", 180, agent)
        # 3.0 cores x (1 - 50 %) = 1.5 cores -> 150000 us per 100000 us period (within the step's bounds)
        wait_until("the agent throttles the pod", lambda: tree.quota(rel) != "max 100000")
        quota, period = (int(x) for x in tree.quota(rel).split())
        assert period == 100000 and 10000 <= quota <= 200000, tree.quota(rel)

        def reported() -> dict[str, object] | None:
            obj = kube.get("NodeMetric", node)
            return obj if obj and (obj.get("status") or {}).get("podsMetric") else None

        info = nodemetric_from_dict(wait_until("the agent's report", reported))
        assert info.node_usage is not None and info.update_time is not None
        assert 7000 <= info.node_usage["cpu"] <= 9000  # 50 % of 16 cores, in millicores
        assert [(p.namespace, p.name) for p in info.pods] == [(space.namespace, "batch-0")]
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
