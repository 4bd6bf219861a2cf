"""Building blocks of the system scenarios: cluster objects, population through the API, waiting, checks."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from koordpy_testkit.builders import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.schedulerdriver import ExtenderConfig, SchedulerDriver

__all__ = [
    "NODEMETRICS",
    "PODS_PATH",
    "bound_pods",
    "create",
    "driver_for",
    "metric",
    "node",
    "pod",
    "set_metric_status",
    "wait_for",
]

NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
PODS_PATH = "/api/v1/namespaces/default/pods"
GiB = 1 << 30
Raw = dict[str, Any]


def node(name: str, cpu: int = 16, memory_gi: int = 64) -> Raw:
    return NodeBuilder(name).allocatable(cpu=str(cpu), memory=f"{memory_gi}Gi", pods="110").build()


def metric(name: str, cpu_milli: int, memory_bytes: int, updated: float, report_interval: int = 60) -> Raw:
    raw = (
        NodeMetricBuilder(name)
        .updated(updated)
        .report_interval(report_interval)
        .usage(cpu=f"{cpu_milli}m", memory=str(memory_bytes))
        .build()
    )
    return raw


def pod(name: str, cpu: str = "800m", memory: str = "2Gi", namespace: str = "default") -> Raw:
    raw = PodBuilder(name, namespace).requests(cpu=cpu, memory=memory).build()
    # The API server assigns uids; let it (a builder uid would collide across re-created pods).
    raw["metadata"].pop("uid", None)
    return raw


async def create(admin: httpx.AsyncClient, path: str, body: Raw) -> Raw:
    resp = await admin.post(path, json=body)
    assert resp.status_code in (200, 201), f"POST {path}: {resp.status_code} {resp.text[:300]}"
    created: Raw = resp.json()
    return created


async def set_metric_status(admin: httpx.AsyncClient, raw: Raw) -> None:
    """Write a NodeMetric's status through the status subresource (merge patch)."""
    name = raw["metadata"]["name"]
    resp = await admin.patch(
        f"{NODEMETRICS}/{name}/status",
        json={"status": raw["status"]},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code == 200, f"PATCH {name}/status: {resp.status_code} {resp.text[:300]}"


async def create_metric(admin: httpx.AsyncClient, raw: Raw) -> None:
    await create(admin, NODEMETRICS, raw)
    await set_metric_status(admin, raw)


async def bound_pods(admin: httpx.AsyncClient, scheduler_name: str = "koordpy-scheduler") -> list[Raw]:
    resp = await admin.get("/api/v1/pods")
    assert resp.status_code == 200, resp.text
    items: list[Raw] = resp.json()["items"]
    return [p for p in items if p["spec"].get("schedulerName") == scheduler_name and p["spec"].get("nodeName")]


def driver_for(
    kube_scheduler_config: Mapping[str, Any], api_url: str, extender_url: str, seed: int = 7, **queue: float
) -> SchedulerDriver:
    """A driver configured from the chart's KubeSchedulerConfiguration (only urlPrefix replaced); ``queue``
    overrides its queue's timings (``max_in_unschedulable``, ``flush_interval``, ...)."""
    config = ExtenderConfig.from_entries(kube_scheduler_config["extenders"], url_prefix=extender_url)
    assert config.node_cache_capable and not config.ignorable and config.bind_verb
    profile = kube_scheduler_config["profiles"][0]["schedulerName"]
    return SchedulerDriver(
        api_url,
        "driver",
        config,
        scheduler_name=profile,
        seed=seed,
        percentage_of_nodes_to_score=int(kube_scheduler_config.get("percentageOfNodesToScore") or 0),
        **queue,  # type: ignore[arg-type]
    )


async def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached in {timeout}s")
        await asyncio.sleep(0.05)


def per_node(placements: Mapping[str, str]) -> Counter[str]:
    return Counter(placements.values())
