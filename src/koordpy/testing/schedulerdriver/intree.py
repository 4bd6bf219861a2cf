"""The in-tree plugins the driver runs before the extender: a small, faithful subset.

Filter (first failure wins, like the framework's ordered filter plugins):

* ``NodeUnschedulable``: ``spec.unschedulable`` unless the pod tolerates
  ``node.kubernetes.io/unschedulable:NoSchedule``;
* ``NodeAffinity``: ``spec.nodeSelector`` only (no affinity terms);
* ``TaintToleration``: ``NoSchedule``/``NoExecute`` taints must be tolerated;
* ``NodeResourcesFit`` (``fitsRequest``): pod count against ``allocatable.pods``, then every
  resource the pod requests (> 0) against ``allocatable − requested`` of the node, where
  ``requested`` sums the pods on the node *including assumed ones*; resources listed as ignored
  (``managedResources[].ignoredByScheduler``) are skipped.

Score: ``NodeResourcesFit`` LeastAllocated over cpu and memory (weights 1), on requests with the
scheduler's non-zero defaults (100m cpu, 200 MiB memory), 0..100, plugin weight 1.

Not guaranteed: affinity terms, topology spread, inter-pod affinity, ports, volumes, image
locality and BalancedAllocation are not modelled; non-zero defaults are applied per pod, not per
container.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.model.objects import NodeInfo
from koordpy.model.resources import ResourceList

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "NodeUsage",
    "filter_node",
    "least_allocated_score",
    "num_feasible_nodes_to_find",
]

DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


@dataclass(slots=True)
class NodeUsage:
    """Sum of requests of the pods on a node (assigned and assumed)."""

    requested: ResourceList
    non_zero_cpu: int = 0
    non_zero_memory: int = 0
    pods: int = 0

    @classmethod
    def of(cls, pod_requests: Iterable[ResourceList]) -> NodeUsage:
        usage = cls({})
        for requests in pod_requests:
            usage.add(requests)
        return usage

    def add(self, requests: ResourceList) -> None:
        for name, amount in requests.items():
            self.requested[name] = self.requested.get(name, 0) + amount
        self.non_zero_cpu += requests.get("cpu") or DEFAULT_MILLI_CPU_REQUEST
        self.non_zero_memory += requests.get("memory") or DEFAULT_MEMORY_REQUEST
        self.pods += 1


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        key = tol.get("key") or ""
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def filter_node(
    pod: Mapping[str, Any],
    requests: ResourceList,
    node: NodeInfo,
    usage: NodeUsage,
    ignored_resources: frozenset[str] = frozenset(),
) -> str | None:
    """The first in-tree filter failure for ``pod`` on ``node``, or None when it fits."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node.unschedulable and not _tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return "node(s) were unschedulable"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity/selector"
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    allowed_pods = node.allocatable.get("pods", 0)
    if usage.pods + 1 > allowed_pods:
        return "Too many pods"
    for name, amount in requests.items():
        if amount <= 0 or name == "pods" or name in ignored_resources:
            continue
        free = node.allocatable.get(name, 0) - usage.requested.get(name, 0)
        if amount > free:
            return f"Insufficient {name}"
    return None


def least_allocated_score(requests: ResourceList, node: NodeInfo, usage: NodeUsage) -> int:
    """``NodeResourcesFit`` LeastAllocated, cpu and memory weight 1, 0..100."""
    total = 0
    weights = 0
    pairs = (
        ("cpu", usage.non_zero_cpu + (requests.get("cpu") or DEFAULT_MILLI_CPU_REQUEST)),
        ("memory", usage.non_zero_memory + (requests.get("memory") or DEFAULT_MEMORY_REQUEST)),
    )
    for name, requested in pairs:
        capacity = node.allocatable.get(name, 0)
        score = 0 if capacity == 0 or requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity
        total += score
        weights += 1
    return total // weights


MAX_NODE_SCORE = 100


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int) -> int:
    """``numFeasibleNodesToFind``: how many feasible nodes a cycle looks for."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = num_all_nodes * adaptive // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)
