"""NodeMetrics written by a test on the real API server, as the manager creates them and an agent reports.

Nodes of 16 cpu / 64 GiB report cpu usage at a percentage given per node and memory at 30 %.
"""

from __future__ import annotations

import time
from typing import Any

from cluster_kit import Kube, Space

from koordpy.model.durations import format_rfc3339

__all__ = ["CPU_MILLI", "FRESH_FOR_THE_RUN", "GiB", "populate", "report", "stored"]

GiB = 1 << 30
CPU_MILLI = 16000
MEMORY = 64 * GiB
FRESH_FOR_THE_RUN = {"loadAware": {"nodeMetricExpirationSeconds": 3600}}
"""Extender overrides for a scenario whose reports are written once by the test: they must not expire while
the run lasts (the default 180 s is not a bound a loaded machine keeps). Expiry itself has its own test."""


def report(
    kube: Kube, node: str, cpu_milli: int, *, memory: int = MEMORY * 30 // 100, updated: float | None = None
) -> None:
    """Create ``node``'s NodeMetric if missing (60 s reports) and write its status (usage, ``updateTime``)."""
    if kube.get("NodeMetric", node) is None:
        kube.create(
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": node},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
            }
        )
    status = {
        "updateTime": format_rfc3339(time.time() if updated is None else updated),
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu_milli}m", "memory": str(memory)}}},
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
