"""NodeMetrics written by a test on the real API server, as the manager creates them and an agent reports.

Nodes of 16 cpu / 64 GiB report cpu usage at a percentage given per node and memory at 30 % (:func:`report`), or
their pods' usage one by one as the LowNodeLoad round reads it (:func:`report_pods`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from cluster_kit import Kube, Space

from koordpy.model.durations import format_rfc3339

__all__ = ["CPU_MILLI", "FRESH_FOR_THE_RUN", "GiB", "populate", "report", "report_pods", "stored"]

GiB = 1 << 30
CPU_MILLI = 16000
MEMORY = 64 * GiB
FRESH_FOR_THE_RUN = {"loadAware": {"nodeMetricExpirationSeconds": 3600}}
"""Extender overrides for a scenario whose reports are written once by the test: they must not expire while
the run lasts (the default 180 s is not a bound a loaded machine keeps). Expiry itself has its own test."""


def _ensure(kube: Kube, node: str) -> None:
    """``node``'s NodeMetric exists (created here unless a running manager created it first: 409 is fine)."""
    if kube.get("NodeMetric", node) is None:
        body = {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": node},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        }
        resp = kube.client.post("/apis/slo.koordinator.sh/v1alpha1/nodemetrics", json=body)
        assert resp.status_code in (200, 201, 409), f"create NodeMetric {node}: {resp.status_code} {resp.text[:300]}"


def report(
    kube: Kube, node: str, cpu_milli: int, *, memory: int = MEMORY * 30 // 100, updated: float | None = None
) -> None:
    """Create ``node``'s NodeMetric if missing (60 s reports) and write its status (usage, ``updateTime``)."""
    _ensure(kube, node)
    status = {
        "updateTime": format_rfc3339(time.time() if updated is None else updated),
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu_milli}m", "memory": str(memory)}}},
    }
    kube.patch("NodeMetric", node, {"status": status}, subresource="status")


def report_pods(
    kube: Kube, node: str, namespace: str, pods: Mapping[str, int], *, system_milli: int, pod_memory: int = GiB
) -> None:
    """``node``'s NodeMetric as an agent writes it: each pod of ``namespace`` in ``pods`` (name -> cpu milli, memory
    ``pod_memory``) in ``podsMetric``, ``systemUsage`` the rest, ``nodeUsage`` their sum; ``updateTime`` now."""
    _ensure(kube, node)
    entries = [
        {
            "namespace": namespace,
            "name": name,
            "podUsage": {"resources": {"cpu": f"{milli}m", "memory": str(pod_memory)}},
        }
        for name, milli in sorted(pods.items())
    ]
    system_memory = MEMORY * 10 // 100
    node_usage = {
        "cpu": f"{system_milli + sum(pods.values())}m",
        "memory": str(system_memory + pod_memory * len(pods)),
    }
    status = {
        "updateTime": format_rfc3339(time.time()),
        "nodeMetric": {
            "nodeUsage": {"resources": node_usage},
            "systemUsage": {"resources": {"cpu": f"{system_milli}m", "memory": str(system_memory)}},
        },
        "podsMetric": entries,
    }
    kube.patch("NodeMetric", node, {"status": status}, subresource="status")


def stored(kube: Kube, names: list[str], kind: str) -> list[dict[str, Any]]:
    """The objects as the API server stores them (what the extender lists)."""
    out = []
    for name in names:
        obj = kube.get(kind, name)
        assert obj is not None, f"{kind} {name} missing"
        out.append(obj)
    return out


def populate(space: Space, kube: Kube, levels: list[int]) -> dict[str, int]:
    """One kwok node per entry of ``levels`` (its reported cpu %), Ready, with a fresh NodeMetric report.
    Returns node name → level."""
    level_of: dict[str, int] = {}
    for index, level in enumerate(levels):
        level_of[space.node(f"n{index:02d}", cpu="16", memory="64Gi")] = level
    space.wait_nodes_ready()
    for name, level in level_of.items():
        report(kube, name, CPU_MILLI * level // 100)
    return level_of
