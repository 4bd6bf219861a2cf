"""PodMigrationJobs end to end: the real kubectl applies manifests to the emulator, the real ``koordpy
manager`` process arbitrates and migrates through the Eviction API."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from scenario_kit import create
from system_cluster import Cluster
from system_harness import BIN

from koordpy_testkit.bounds import HANG_BACKSTOP

KUBECTL = BIN / "kubectl"
PMJS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
PDBS = "/apis/policy/v1/namespaces/shop/poddisruptionbudgets"
SHOP_PODS = "/api/v1/namespaces/shop/pods"
FAST = {"migrationController": {"arbitrationArgs": {"interval": "200ms"}}}


def controlled_pod(name: str, node: str = "n1", grace: int = 0, app: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app": app},
            # Controlled (bare pods are refused); the emulator serves no ReplicaSets, so the workload is
            # unknown to the arbitration and only the per-node and global limits apply.
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": f"rs-{name}", "controller": True}
            ],
        },
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "nodeName": node,
            "terminationGracePeriodSeconds": grace,
        },
    }


async def running(admin: httpx.AsyncClient, pod: dict[str, Any]) -> None:
    await create(admin, SHOP_PODS, pod)
    name = pod["metadata"]["name"]
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    resp = await admin.patch(
        f"/api/v1/namespaces/shop/pods/{name}/status",
        json={"status": status},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, resp.text


def manifest(path: Path, names: list[str]) -> Path:
    docs = [
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": f"move-{name}"},
            "spec": {"mode": "EvictDirectly", "ttl": "5m", "podRef": {"namespace": "shop", "name": name}},
        }
        for name in names
    ]
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return path


def kubectl_apply(cluster: Cluster, path: Path) -> None:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(cluster.kubeconfig("admin")), "apply", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=False,
    )
    assert done.returncode == 0, done.stderr


async def jobs(admin: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    items = (await admin.get(PMJS)).json()["items"]
    return {j["metadata"]["name"]: j for j in items}


def phase(job: dict[str, Any]) -> str:
    return str((job.get("status") or {}).get("phase") or "Pending")


async def wait_phases(admin: httpx.AsyncClient, expected: str, count: int, timeout: float = HANG_BACKSTOP) -> None:
    deadline = time.monotonic() + timeout
    while True:
        found = await jobs(admin)
        if sum(1 for j in found.values() if phase(j) == expected) == count:
            return
        assert time.monotonic() < deadline, {
            n: (phase(j), (j.get("status") or {}).get("reason")) for n, j in found.items()
        }
        await asyncio.sleep(0.1)


def evictions(cluster: Cluster, pod: str | None = None) -> int:
    return sum(
        1
        for r in cluster.recorded_requests()
        if r.get("user") == "manager"
        and r.get("subresource") == "eviction"
        and r.get("verb") == "create"
        and (pod is None or r.get("name") == pod)
    )


async def shop(admin: httpx.AsyncClient) -> None:
    await admin.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})


@pytest.mark.system
async def test_kubectl_apply_then_eviction_api(cluster: Cluster, tmp_path: Path) -> None:
    async with cluster.admin() as admin:
        await shop(admin)
        await running(admin, controlled_pod("web-1"))
        _, base = cluster.start_manager(FAST)
        kubectl_apply(cluster, manifest(tmp_path / "pmj.yaml", ["web-1"]))
        await wait_phases(admin, "Succeeded", 1)
        async with httpx.AsyncClient(base_url=base, timeout=HANG_BACKSTOP) as scrape:
            exposition = (await scrape.get("/metrics")).text
        assert 'koordpy_migration_evictions_total{evictor="Eviction",outcome="evicted"} 1.0' in exposition
        assert (await admin.get("/api/v1/namespaces/shop/pods/web-1")).status_code == 404
        job = (await jobs(admin))["move-web-1"]
        assert job["status"]["status"] == "Complete"
        assert job["metadata"]["annotations"]["descheduler.koordinator.sh/passed-arbitration"] == "true"
    assert evictions(cluster, "web-1") == 1


@pytest.mark.system
async def test_pdb_429_is_retried_until_the_budget_allows(cluster: Cluster, tmp_path: Path) -> None:
    async with cluster.admin() as admin:
        await shop(admin)
        await running(admin, controlled_pod("db-1", app="db"))
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        }
        await create(admin, PDBS, pdb)
        cluster.start_manager(FAST)
        kubectl_apply(cluster, manifest(tmp_path / "pmj.yaml", ["db-1"]))
        deadline = time.monotonic() + HANG_BACKSTOP
        while evictions(cluster, "db-1") < 2:  # refused (429) and retried after the 1 s backoff
            assert time.monotonic() < deadline, "the manager did not retry the refused eviction"
            await asyncio.sleep(0.1)
        job = (await jobs(admin))["move-db-1"]
        assert phase(job) == "Running"
        assert job["status"]["conditions"][-1]["reason"] == "FailedEvict"
        assert (await admin.get("/api/v1/namespaces/shop/pods/db-1")).status_code == 200
        assert (await admin.delete(f"{PDBS}/db")).status_code == 200
        await wait_phases(admin, "Succeeded", 1)
    deletes = [r for r in cluster.recorded_requests() if r.get("user") == "manager" and r.get("verb") == "delete"]
    assert [r for r in deletes if r.get("resource") == "pods"] == []  # a 429 never became a plain delete


@pytest.mark.system
async def test_many_jobs_at_once_keep_max_migrating_per_node(cluster: Cluster, tmp_path: Path) -> None:
    # 10 pods on n1, terminating for 1 s each; maxMigratingPerNode 2 (upstream default): at any moment at
    # most 2 jobs whose pod still exists are between arbitration and completion.
    names = [f"app-{i}" for i in range(10)]
    async with cluster.admin() as admin:
        await shop(admin)
        for name in names:
            await running(admin, controlled_pod(name, grace=1))
        cluster.start_manager(FAST)
        kubectl_apply(cluster, manifest(tmp_path / "pmj.yaml", names))
        peak = 0
        deadline = time.monotonic() + HANG_BACKSTOP
        while True:
            found = await jobs(admin)
            pods = {p["metadata"]["name"] for p in (await admin.get(SHOP_PODS)).json()["items"]}
            active = [n for n, j in found.items() if phase(j) == "Running" and j["spec"]["podRef"]["name"] in pods]
            peak = max(peak, len(active))
            if sum(1 for j in found.values() if phase(j) == "Succeeded") == len(names):
                break
            assert time.monotonic() < deadline, {n: phase(j) for n, j in found.items()}
            await asyncio.sleep(0.05)
    assert 1 <= peak <= 2, peak
    assert evictions(cluster) == len(names)


@pytest.mark.system
async def test_killed_manager_is_replaced_and_adopts_its_jobs(cluster: Cluster, tmp_path: Path) -> None:
    async with cluster.admin() as admin:
        await shop(admin)
        await running(admin, controlled_pod("slow-1", grace=4))
        proc, _ = cluster.start_manager(FAST)
        kubectl_apply(cluster, manifest(tmp_path / "pmj.yaml", ["slow-1"]))
        deadline = time.monotonic() + HANG_BACKSTOP
        while evictions(cluster, "slow-1") < 1:
            assert time.monotonic() < deadline, "no eviction"
            await asyncio.sleep(0.05)
        proc.kill()  # mid-migration: the pod is terminating, the job Running
        job = (await jobs(admin))["move-slow-1"]
        assert phase(job) == "Running"
        cluster.start_manager(FAST)
        await wait_phases(admin, "Succeeded", 1)
    assert evictions(cluster, "slow-1") == 1  # adopted, never evicted twice
