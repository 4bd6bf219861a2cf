"""Load-aware placement on the real control plane: the chart's koordpy-scheduler (stock kube-scheduler with
the extender) against the stock default-scheduler, on two identical groups of kwok nodes with the same
NodeMetric reports.

Nodes of 16 cpu / 64 GiB report cpu usage at 5, 20, 40, 70 and 85 % (memory 10 %); the chart's default
threshold is cpu 65 %. Pods request 500m / 1 GiB. The koordpy group must leave the two hot nodes empty; the
stock group, which places on requests alone, must not (it spreads evenly).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from cluster_kit import PROFILE, Components, Kube, Space, bindings_by_pod, wait_until

from koordpy.model.durations import format_rfc3339
from koordpy_testkit.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

CPU_PERCENT = (5, 20, 40, 70, 85)
HOT = {3, 4}
PODS_PER_GROUP = 20


def report_usage(kube: Kube, node: str, cpu_percent: int, cores: int = 16) -> None:
    """A NodeMetric for ``node`` (as the manager would create it) with a fresh report (as an agent writes it)."""
    if kube.get("NodeMetric", node) is None:
        kube.create(
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": node},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
            }
        )
    usage = {"cpu": f"{cores * 10 * cpu_percent}m", "memory": f"{64 * 1024 // 10}Mi"}
    kube.patch(
        "NodeMetric",
        node,
        {"status": {"updateTime": format_rfc3339(time.time()), "nodeMetric": {"nodeUsage": {"resources": usage}}}},
        subresource="status",
    )


def test_koordpy_profile_avoids_hot_nodes_where_the_stock_profile_does_not(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    groups: dict[str, list[str]] = {"koordpy": [], "stock": []}
    for group, nodes in groups.items():
        for index, percent in enumerate(CPU_PERCENT):
            node = space.node(f"{group}-{index}", labels={"koordpy.test/group": f"{space.namespace}-{group}"})
            nodes.append(node)
            report_usage(kube, node, percent)
    space.wait_nodes_ready()
    koordpy.start_scheduling()

    for group, scheduler in (("koordpy", PROFILE), ("stock", "default-scheduler")):
        for index in range(PODS_PER_GROUP):
            space.create_pod(
                f"{group}-{index:02d}",
                cpu="500m",
                memory="1Gi",
                scheduler=scheduler,
                node_selector={**space.selector, "koordpy.test/group": f"{space.namespace}-{group}"},
            )
    bound = wait_until("every pod bound", lambda: space.count_bound(2 * PODS_PER_GROUP))

    per_node = {node: 0 for nodes in groups.values() for node in nodes}
    for node in bound.values():
        per_node[node] += 1
    koordpy_counts = [per_node[n] for n in groups["koordpy"]]
    stock_counts = [per_node[n] for n in groups["stock"]]
    # The load-aware filter refuses nodes over 65 % cpu; its score prefers the least used of the rest.
    assert [koordpy_counts[i] for i in sorted(HOT)] == [0, 0], koordpy_counts
    assert koordpy_counts[0] >= koordpy_counts[1] >= koordpy_counts[2], koordpy_counts
    # kube-scheduler's NodeResourcesFit sees requests only: the hot nodes take pods like the others.
    assert sum(stock_counts[i] for i in HOT) > 0, stock_counts

    # Exactly one binding per pod; the koordpy group's by the extender (the chart's scheduler
    # ServiceAccount), the stock group's by the default scheduler.
    def logged() -> dict[str, list[dict[str, Any]]] | None:
        """The bindings once every bound pod's is in the audit log (written after its answer)."""
        found = bindings_by_pod(control_plane, space.namespace)
        return found if set(found) >= set(bound) else None

    bindings = wait_until("every pod's binding in the audit log", logged)
    assert sorted(bindings) == sorted(bound), sorted(set(bindings) ^ set(bound))
    for pod, events in bindings.items():
        assert len(events) == 1, (pod, [e["responseStatus"] for e in events])
        assert events[0]["responseStatus"]["code"] == 201
        user = events[0]["user"]["username"]
        expected = (
            "system:serviceaccount:koordpy-system:koordpy-scheduler"
            if pod.startswith("koordpy")
            else "system:kube-scheduler"
        )
        assert user == expected, (pod, user)
