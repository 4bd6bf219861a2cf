"""Hostile PodMigrationJobs against the real ``koordpy manager`` process and the emulator: jobs the
lifecycle cannot use fail once each, with one Event, and never hold up a valid job.

Why on the emulator: these objects are content a real API server with koordpy's CRD refuses (422, see
``tests/cluster/test_cluster_migrations.py``), yet an older CRD or another operator's could have let them
in. The emulator checks no CRD schema, so it can store them and show what the manager does with them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from scenario_kit import create
from system_cluster import Cluster
from system_migration_kit import PMJS, controlled_pod, jobs, phase, running, shop

FAST = {"migrationController": {"arbitrationArgs": {"interval": "200ms"}, "defaultJobMode": "EvictDirectly"}}
EVENTS = "/api/v1/namespaces/default/events"


def job(name: str, spec: Any) -> dict[str, Any]:
    kind = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob"}
    return {**kind, "metadata": {"name": name}, "spec": spec}


async def until_phases(admin: httpx.AsyncClient, wanted: dict[str, str], timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = await jobs(admin)
        if all(name in found and phase(found[name]) == want for name, want in wanted.items()):
            return found
        assert time.monotonic() < deadline, {
            n: (phase(j), (j.get("status") or {}).get("reason")) for n, j in found.items()
        }
        await asyncio.sleep(0.2)


async def events_by_job(admin: httpx.AsyncClient) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for event in (await admin.get(EVENTS)).json()["items"]:
        involved = event["involvedObject"]
        if involved.get("kind") == "PodMigrationJob":
            out.setdefault(involved["name"], []).append((event["type"], event["reason"]))
    return out


@pytest.mark.system
async def test_unusable_jobs_fail_once_and_a_valid_job_completes(cluster: Cluster) -> None:
    bad = {
        "subresource": ({"podRef": {"namespace": "shop", "name": "web-1/status"}, "ttl": "5m"}, "InvalidPodRef"),
        "long-name": ({"podRef": {"namespace": "shop", "name": "w" * 9000}, "ttl": "5m"}, "InvalidPodRef"),
        "no-pod-ref": ({"ttl": "5m"}, "InvalidPodRef"),
        "spec-text": ("move web-1", "InvalidSpec"),
        "absurd-ttl": ({"podRef": {"namespace": "shop", "name": "web-1"}, "ttl": "1e99h"}, "InvalidSpec"),
    }
    async with cluster.admin() as admin:
        await shop(admin)
        await running(admin, controlled_pod("web-1"))
        for name, (spec, _) in bad.items():
            await create(admin, PMJS, job(name, spec))
        await create(admin, PMJS, job("good", {"podRef": {"namespace": "shop", "name": "web-1"}, "ttl": "5m"}))
        proc, _ = cluster.start_manager(FAST)
        found = await until_phases(admin, {"good": "Succeeded", **{name: "Failed" for name in bad}})
        for name, (_, reason) in bad.items():
            assert found[name]["status"]["reason"] == reason, name
        await asyncio.sleep(3)  # fifteen more rounds
        events = await events_by_job(admin)
    for name, (_, reason) in bad.items():
        assert events[name] == [("Warning", reason)], name  # exactly one, and no more on later rounds
    log = proc.log.read_text(errors="replace")
    assert "Traceback" not in log
    for name in bad:
        # one warning when it was failed, none per round
        assert sum(1 for line in log.splitlines() if f"PodMigrationJob {name[:100]}" in line) <= 1, name
