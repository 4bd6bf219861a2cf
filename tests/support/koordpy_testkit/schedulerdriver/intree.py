"""The in-tree plugins the driver runs before the extender: a small, faithful subset.

Filter: ``koordpy.scheduler.framework.fit`` (NodeUnschedulable, NodeName, TaintToleration,
NodeAffinity with nodeSelector and required terms, NodeResourcesFit), first failure wins. Here
``requested`` sums the pods on the node *including assumed ones*; resources listed as ignored
(``managedResources[].ignoredByScheduler``) are skipped.

Score: ``NodeResourcesFit`` LeastAllocated over cpu and memory (weights 1), on requests with the
scheduler's non-zero defaults (100m cpu, 200 MiB memory), 0..100, plugin weight 1.

Not guaranteed: topology spread, inter-pod affinity, ports, volumes, image
locality and BalancedAllocation are not modelled; non-zero defaults are applied per pod, not per
container.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeInfo, ObjectError
from koordpy.model.placement import PodPlacement, placement_from_dict
from koordpy.model.resources import ResourceList
from koordpy.scheduler.framework.fit import RequestsTable
from koordpy.scheduler.framework.fit import filter_node as filter_status
from koordpy.scheduler.framework.status import Status

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "InTreeFilter",
    "NodeUsage",
    "filter_node",
    "least_allocated_score",
    "num_feasible_nodes_to_find",
]

DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
MIN_FEASIBLE_NODES_TO_FIND = 100
I64 = npt.NDArray[np.int64]
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


class InTreeFilter:
    """The in-tree filters for one pod in one cycle, over the shared fit module: the pod's
    constraints are read once and the nodes' requests go into one ``RequestsTable``."""

    def __init__(
        self,
        pod: Mapping[str, Any],
        requests: ResourceList,
        nodes: Mapping[str, NodeInfo],
        usage: Mapping[str, NodeUsage],
        ignored_resources: frozenset[str] = frozenset(),
    ) -> None:
        try:
            self.placement = placement_from_dict(pod)
        except ObjectError:  # the API server validates these; keep scheduling on what is readable
            self.placement = PodPlacement(node_name=str((pod.get("spec") or {}).get("nodeName") or ""))
        self.names = list(nodes)
        self.nodes = nodes
        self.row = {name: i for i, name in enumerate(self.names)}
        wanted = {r: v for r, v in requests.items() if r not in ignored_resources}
        self.table = RequestsTable.of_nodes([nodes[n] for n in self.names], wanted)
        for name in self.names:
            used = usage.get(name)
            if used is not None:
                self.table.bind(self.row[name], self._usage_vector(used))
        self.vec = self.table.vector(wanted)

    def _usage_vector(self, used: NodeUsage) -> I64:
        vec = np.zeros(len(self.table.resources), np.int64)
        vec[0] = used.pods
        for name, amount in used.requested.items():
            position = self.table.position.get(name)
            if position is not None and position > 0:
                vec[position] = amount
        return vec

    def status(self, name: str) -> Status:
        return filter_status(self.placement, self.nodes[name], self.table, self.row[name], self.vec)


def filter_node(
    pod: Mapping[str, Any],
    requests: ResourceList,
    node: NodeInfo,
    usage: NodeUsage,
    ignored_resources: frozenset[str] = frozenset(),
) -> str | None:
    """The first in-tree filter failure's reason for ``pod`` on ``node``, or None when it fits."""
    status = InTreeFilter(pod, requests, {node.name: node}, {node.name: usage}, ignored_resources).status(node.name)
    return None if status.is_success else status.reason


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
