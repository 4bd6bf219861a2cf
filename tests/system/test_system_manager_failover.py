"""Two real ``koordpy manager`` processes peering through kopf against the emulator: only the active one
runs migration rounds; killed with SIGKILL, the other takes over once the dead one's keep-alive runs out
(``peering.lifetimeSeconds``), and no pod is evicted twice."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from scenario_kit import create
from system_cluster import Cluster
from system_harness import KOORDPY, LOOPBACK, Proc, free_port, wait_http
from test_system_migration import PMJS, controlled_pod, evictions, jobs, phase, running, shop

LIFETIME = 15


def start_replica(cluster: Cluster, name: str) -> Proc:
    config = cluster.chart.component_config("-manager")
    port = free_port()
    config |= {
        "health": {"host": LOOPBACK, "port": port},
        "peering": {"enabled": True, "lifetimeSeconds": LIFETIME},
        "migrationController": {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"interval": "200ms"}},
    }
    path: Path = cluster.workdir / f"{name}-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    args = [str(KOORDPY), "manager", "--config", str(path), "--kubeconfig", str(cluster.kubeconfig("manager"))]
    proc = cluster._proc(name, args)
    wait_http(f"http://{LOOPBACK}:{port}/healthz", 60, proc)
    return proc


def rounds_running(proc: Proc) -> bool:
    """Whether the replica's migration rounds run now (its log's last start/stop line says started)."""
    lines = [
        line
        for line in proc.log.read_text(errors="replace").splitlines()
        if "migration rounds started" in line or "migration rounds stopped" in line
    ]
    return bool(lines) and "started" in lines[-1]


async def until(check: Any, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, what
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def done(admin: httpx.AsyncClient, name: str) -> bool:
    found = await jobs(admin)
    return name in found and phase(found[name]) == "Succeeded"


@pytest.mark.system
async def test_one_replica_acts_and_the_other_takes_over_after_a_kill(cluster: Cluster) -> None:
    async with cluster.admin() as admin:
        await shop(admin)
        for i in range(2):
            await running(admin, controlled_pod(f"web-{i}"))
        first = start_replica(cluster, "manager-a")
        await until(lambda: rounds_running(first), 60, "the lone replica runs rounds")
        second = start_replica(cluster, "manager-b")
        # kopf settles on the replica with the higher (random) priority: exactly one runs rounds
        await until(lambda: rounds_running(first) != rounds_running(second), 60, "one active replica")
        await asyncio.sleep(3)  # a few keep-alives later, still exactly one
        assert rounds_running(first) != rounds_running(second)
        active, standby = (first, second) if rounds_running(first) else (second, first)
        spec = {"mode": "EvictDirectly", "ttl": "5m", "podRef": {"namespace": "shop", "name": "web-0"}}
        await create(
            admin,
            PMJS,
            {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob"}
            | {"metadata": {"name": "m0"}, "spec": spec},
        )
        deadline = time.monotonic() + 60
        while not await done(admin, "m0"):
            assert time.monotonic() < deadline, "the active replica did not migrate"
            await asyncio.sleep(0.1)
        active.kill()  # no clean exit: its keep-alive stays until it runs out
        killed_at = time.monotonic()
        spec = {**spec, "podRef": {"namespace": "shop", "name": "web-1"}}
        await create(
            admin,
            PMJS,
            {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob"}
            | {"metadata": {"name": "m1"}, "spec": spec},
        )
        await until(lambda: rounds_running(standby), 4 * LIFETIME, "the standby takes over")
        takeover = time.monotonic() - killed_at
        deadline = time.monotonic() + 60
        while not await done(admin, "m1"):
            assert time.monotonic() < deadline, "the new active replica did not migrate"
            await asyncio.sleep(0.1)
    print(f"peering.lifetimeSeconds {LIFETIME}: the standby ran rounds {takeover:.1f} s after the kill")
    # the takeover waits for the dead replica's keep-alive (renewed 5 to 10 s before it runs out)
    assert takeover >= LIFETIME - 10 - 1, takeover
    assert evictions(cluster, "web-0") == 1 and evictions(cluster, "web-1") == 1
