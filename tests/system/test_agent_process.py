"""The agent as its own OS process against the emulator: report, throttle, restart re-adoption, exact restore.

Fabricated cgroup v2 tree and /proc (the CI machine runs cgroup v1; v1 writes are covered in tests/node).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from scenario_kit import PODS_PATH, BusyProc, create, node, start_agent, wait_for
from system_cluster import Cluster
from system_harness import LOOPBACK

from koordpy.model.objects import nodemetric_from_dict
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.builders import PodBuilder
from koordpy_testkit.cgroupfs import FakeCgroupTree

NODE = "node-sys"
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


@pytest.mark.system
async def test_agent_process_throttles_survives_restart_and_restores_exactly(cluster: Cluster, tmp_path: Path) -> None:
    busy = BusyProc(tmp_path / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
    busy.busy_fraction = 0.5  # 8 of 16 cores: above the 4-core line
    tree = FakeCgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
    async with cluster.admin() as admin:
        await create(admin, "/api/v1/nodes", node(NODE))
        raw = PodBuilder("batch-0").node(NODE).phase("Running").build()
        raw["metadata"].pop("uid")
        uid = (await create(admin, PODS_PATH, raw))["metadata"]["uid"]
        await create(admin, "/apis/ensurance.crane.io/v1alpha1/nodeqosensurancepolicies", POLICY)
        await create(admin, "/apis/ensurance.crane.io/v1alpha1/avoidanceactions", ACTION)
    rel = tree.add_pod(uid, qos="besteffort", containers=["b" * 64])
    pod_cores = {"value": 3.0}

    async def burn() -> None:
        while True:
            await asyncio.sleep(0.1)
            busy.tick()
            tree.advance_cpu(rel, pod_cores["value"] * 0.1)

    ticker = asyncio.ensure_future(burn())
    try:
        agent = start_agent(cluster, NODE, tmp_path, busy)
        # 3.0 cores x (1 - 50 %) = 1.5 cores -> 150000 us per 100000 us period
        await wait_for(lambda: tree.quota(rel) != "max 100000", HANG_BACKSTOP, "the agent process throttles the pod")
        first = tree.quota(rel)
        quota, period = (int(x) for x in first.split())
        assert period == 100000 and 10000 <= quota <= 200000, first

        async with cluster.admin() as admin:
            reported: dict[str, object] = {}

            async def poll_metric() -> None:
                while True:
                    resp = await admin.get(f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE}")
                    if resp.status_code == 200 and (resp.json().get("status") or {}).get("podsMetric"):
                        reported.update(resp.json())
                        return
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(poll_metric(), HANG_BACKSTOP)
            info = nodemetric_from_dict(reported)
            assert info.node_usage is not None and info.update_time is not None
            assert 7000 <= info.node_usage["cpu"] <= 9000  # 50 % of 16 cores
            assert [(p.namespace, p.name) for p in info.pods] == [("default", "batch-0")]

        # SIGTERM and start again: the cap is re-adopted, not restored and not forgotten.
        agent.stop()
        assert tree.quota(rel) != "max 100000"
        config = Path(agent.args[agent.args.index("--config") + 1])
        cluster.restart(agent, f"http://{LOOPBACK}:{_port_of(config)}/readyz")
        assert (tmp_path / "agent-state" / "throttle-originals.json").read_text().count(uid) == 1

        # Load drops: after 2 consecutive samples below the line the cap steps up back to exactly "max".
        busy.busy_fraction = 0.05
        pod_cores["value"] = 0.2
        await wait_for(
            lambda: tree.quota(rel) == "max 100000", HANG_BACKSTOP, "the agent restores the original cpu.max"
        )
    finally:
        ticker.cancel()
    deletes = [r for r in cluster.recorded_requests() if r.get("user") == "agent" and r.get("verb") == "delete"]
    assert deletes == []


def _port_of(config: Path) -> int:
    return int(yaml.safe_load(config.read_text())["server"]["port"])
