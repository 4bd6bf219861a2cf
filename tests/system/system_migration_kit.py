"""PodMigrationJob building blocks of the system scenarios: pods of a ``shop`` namespace the emulator
serves, jobs applied with the real kubectl, the manager's evictions read from the emulator's record."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
from scenario_kit import create
from system_cluster import Cluster
from system_harness import BIN

from koordpy_testkit.bounds import HANG_BACKSTOP

__all__ = ["FAST", "PMJS", "controlled_pod", "evictions", "jobs", "kubectl_apply", "phase", "running", "shop"]

KUBECTL = BIN / "kubectl"
PMJS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
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
