"""What a balance round reads, kept current by object events: the descheduler's view of nodes, pods and NodeMetrics.

:class:`BalanceState` is fed like the extender's ``ClusterState`` (``upsert_node``, ``upsert_metric``,
``upsert_pod``, ``upsert_workload`` and their removals), by the manager's watches, the simulator or a dump, and
keeps per node, in numpy rows indexed by node:

* ``alloc``: raw allocatable (``node.koordinator.sh/raw-allocatable`` over ``status.allocatable``, the extender's
  ``estimate_node``) for cpu (milli), memory (bytes) and pods;
* ``usage``: the NodeMetric's ``systemUsage`` plus every ``podsMetric`` entry, and the number of pods (Koordinator's
  ``getNodeUsage``); ``prod_usage``: the ``podsMetric`` entries of the node's Prod pods and their number;
* ``update_time`` (NaN without a NodeMetric or without ``updateTime``), whether ``status.nodeMetric`` is there, and
  whether the node is schedulable; the pool each node belongs to (``lowNodeLoad.nodePools``, else the default pool).

A row is recomputed from its node's pods and NodeMetric when something of them changed, at the next
:meth:`BalanceState.refresh` (the round calls it): O(pods of the changed nodes), not O(all pods).

Per pod it keeps a :class:`BalancePod`: the ``PodInfo`` the scheduler reads, the pod's sort key, its requests, and,
converted on first use only (a round asks for the pods it tries), the arbitration's view (``MigrationPod``) and the
pod's placement constraints. Pass the raw object (``raw``), or both views.

Not guaranteed: thread safety (one event loop, as ``ClusterState``); that the views agree with the cluster beyond
the events received.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.config.lownodeload import RESOURCES, LowNodeLoadArgs, NodePool
from koordpy.descheduler.objects import (
    ANNOTATION_DELETION_COST,
    ANNOTATION_EVICTION_COST,
    MigrationPod,
    Workload,
    pod_sort_key,
)
from koordpy.descheduler.objects import pod_from_dict as migration_pod_from_dict
from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo
from koordpy.model.placement import PodPlacement, placement_from_dict
from koordpy.model.priority import LABEL_KOORD_QOS, PriorityClass
from koordpy.model.resources import ResourceList
from koordpy.scheduler.plugins.loadaware.estimator import estimate_node

__all__ = ["CPU", "MEMORY", "PODS", "BalancePod", "BalanceState", "int_annotation"]

CPU, MEMORY, PODS = 0, 1, 2
"""Columns of the usage rows, in the order of ``RESOURCES``."""
_WIDTH = len(RESOURCES)
I64 = npt.NDArray[np.int64]


def int_annotation(annotations: Mapping[str, str], name: str) -> int:
    """An int32 annotation (deletion cost, eviction cost); absent or unreadable: 0, as Koordinator reads them."""
    raw = annotations.get(name)
    if raw is None:
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        return 0
    return value if -(2**31) <= value <= 2**31 - 1 else 0


class BalancePod:
    """One pod as the balance round reads it. ``views``: (MigrationPod, PodPlacement) when the caller has them."""

    __slots__ = ("_fit_key", "_migration", "_pending", "_placement", "info", "key", "prod", "raw", "sort_prefix")

    def __init__(
        self,
        info: PodInfo,
        raw: Mapping[str, Any] | None = None,
        views: tuple[MigrationPod, PodPlacement] | None = None,
    ) -> None:
        if raw is None and views is None:
            raise ValueError(f"pod {info.key}: give its raw object or its MigrationPod and PodPlacement")
        self.info = info
        self.raw = raw
        self.key = info.key
        self.prod = info.priority_class is PriorityClass.PROD
        annotations = info.annotations
        key = pod_sort_key(
            klass=info.priority_class,
            priority=info.priority,
            qos=info.qos,
            koord_qos=info.labels.get(LABEL_KOORD_QOS),
            deletion_cost=int_annotation(annotations, ANNOTATION_DELETION_COST),
            eviction_cost=int_annotation(annotations, ANNOTATION_EVICTION_COST),
            creation_time=info.creation_time,
        )
        self.sort_prefix = key
        """Koordinator's pod sorter key (``pod_sort_key``), the usage score goes before its last field."""
        self._migration: MigrationPod | None = None if views is None else views[0]
        self._placement: PodPlacement | None = None if views is None else views[1]
        self._fit_key: tuple[object, ...] | None = None
        self._pending: PodPlacement | None = None

    @property
    def migration(self) -> MigrationPod:
        """The arbitration's view (``MigrationObjectError`` for a pod it cannot read)."""
        if self._migration is None:
            assert self.raw is not None
            self._migration = migration_pod_from_dict(self.raw)
        return self._migration

    @property
    def placement(self) -> PodPlacement:
        """Node name, node selector, required affinity and tolerations (``ObjectError`` when unreadable)."""
        if self._placement is None:
            assert self.raw is not None
            self._placement = placement_from_dict(self.raw)
        return self._placement

    @property
    def pending(self) -> PodPlacement:
        """:attr:`placement` as if the pod were pending (no node name): what it is placed with elsewhere."""
        if self._pending is None:
            self._pending = dataclasses.replace(self.placement, node_name="")
        return self._pending

    @property
    def fit_key(self) -> tuple[object, ...]:
        """What kube-scheduler's in-tree filters read of the pod as pending (requests, constraints but the node
        name): pods with equal keys fit the same nodes."""
        if self._fit_key is None:
            self._fit_key = (tuple(sorted(self.info.requests.items())), repr(self.pending))
        return self._fit_key


def _vector(resources: Mapping[str, int]) -> list[int]:
    return [resources.get("cpu", 0), resources.get("memory", 0)]


class _Node:
    """One node's pods and NodeMetric (the inputs of its row)."""

    __slots__ = ("metric", "pod_usage", "pods", "requested")

    def __init__(self) -> None:
        self.pods: dict[str, BalancePod] = {}
        self.metric: NodeMetricInfo | None = None
        self.pod_usage: dict[str, tuple[int, int]] = {}
        """``podsMetric`` usage (cpu, memory) by ``namespace/name`` (the last entry of a repeated name)."""
        self.requested: dict[str, int] = {}
        """Sum of the requests of the node's pods (the in-tree NodeResourcesFit's ``requested``)."""


class BalanceState:
    """The descheduler's rows per node; see the module docstring. ``args`` decide the pools."""

    def __init__(self, args: LowNodeLoadArgs) -> None:
        self.args = args
        self.pools: tuple[NodePool, ...] = args.pools
        self.nodes: dict[str, NodeInfo] = {}
        self.workloads: dict[str, Workload] = {}
        self._row: dict[str, int] = {}
        self._names: list[str | None] = []
        self._free: list[int] = []
        self._data: dict[str, _Node] = {}
        self._dirty: set[str] = set()
        self._pod_node: dict[str, str] = {}
        self._allocate(64)

    alloc: I64
    usage: I64
    prod_usage: I64
    update_time: npt.NDArray[np.float64]
    has_status: npt.NDArray[np.bool_]
    schedulable: npt.NDArray[np.bool_]
    pool: npt.NDArray[np.int32]
    """Pool index per row into :attr:`pools` (-1: no pool)."""
    present: npt.NDArray[np.bool_]

    def _allocate(self, capacity: int) -> None:
        def grow(name: str, shape: tuple[int, ...], dtype: Any, fill: Any) -> None:
            new = np.full(shape, fill, dtype)
            old = getattr(self, name, None)
            if old is not None:
                new[: old.shape[0]] = old
            setattr(self, name, new)

        grow("alloc", (capacity, _WIDTH), np.int64, 0)
        grow("usage", (capacity, _WIDTH), np.int64, 0)
        grow("prod_usage", (capacity, _WIDTH), np.int64, 0)
        grow("update_time", (capacity,), np.float64, np.nan)
        grow("has_status", (capacity,), np.bool_, False)
        grow("schedulable", (capacity,), np.bool_, False)
        grow("pool", (capacity,), np.int32, -1)
        grow("present", (capacity,), np.bool_, False)
        self._names.extend([None] * (capacity - len(self._names)))

    @property
    def capacity(self) -> int:
        return len(self._names)

    def row(self, name: str) -> int | None:
        return self._row.get(name)

    def name(self, row: int) -> str:
        found = self._names[row]
        assert found is not None
        return found

    def rows(self) -> npt.NDArray[np.int64]:
        """Rows of the known nodes, in node-name order."""
        return np.array([self._row[name] for name in sorted(self._row)], np.int64)

    def _node(self, name: str) -> _Node:
        data = self._data.get(name)
        if data is None:
            data = self._data[name] = _Node()
        return data

    # ---- events ------------------------------------------------------------------------------------------------

    def upsert_node(self, node: NodeInfo) -> None:
        row = self._row.get(node.name)
        if row is None:
            if not self._free:
                start = self.capacity
                self._allocate(max(64, 2 * start))
                self._free.extend(range(self.capacity - 1, start - 1, -1))
            row = self._free.pop()
            self._row[node.name] = row
            self._names[row] = node.name
        self.nodes[node.name] = node
        alloc = estimate_node(node)
        self.alloc[row] = (alloc.get("cpu", 0), alloc.get("memory", 0), alloc.get("pods", 0))
        self.schedulable[row] = not node.unschedulable
        self.present[row] = True
        self.pool[row] = self._pool_of(node.labels)
        self._dirty.add(node.name)

    def _pool_of(self, labels: Mapping[str, str]) -> int:
        default = -1
        for i, pool in enumerate(self.pools):
            selector = pool.node_selector
            matches = selector is None or selector.matches(labels)
            if pool.default:
                default = i if matches else -1
            elif matches:
                return i
        return default

    def remove_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        row = self._row.pop(name, None)
        if row is None:
            return
        self._names[row] = None
        self._free.append(row)
        self.present[row] = False
        self.pool[row] = -1
        self.alloc[row] = 0
        self.usage[row] = 0
        self.prod_usage[row] = 0
        self.update_time[row] = np.nan
        self.has_status[row] = False
        self._dirty.discard(name)
        data = self._data.get(name)
        if data is not None and not data.pods and data.metric is None:
            del self._data[name]

    def upsert_metric(self, metric: NodeMetricInfo) -> None:
        """A NodeMetric (an unreadable one, ``NodeMetricInfo.unreadable``, makes the node unknown: neither hot nor
        idle)."""
        data = self._node(metric.name)
        data.metric = metric if metric.error is None else None
        data.pod_usage = {}
        if data.metric is not None:
            for entry in metric.pods:
                if entry.usage:
                    data.pod_usage[f"{entry.namespace}/{entry.name}"] = (
                        entry.usage.get("cpu", 0),
                        entry.usage.get("memory", 0),
                    )
        self._dirty.add(metric.name)

    def remove_metric(self, name: str) -> None:
        data = self._data.get(name)
        if data is not None:
            data.metric = None
            data.pod_usage = {}
            self._dirty.add(name)

    def upsert_pod(self, pod: BalancePod) -> None:
        """A pod event; pods without ``spec.nodeName`` or terminated ones are forgotten."""
        info = pod.info
        self.remove_pod(info.uid)
        if not info.node_name or info.terminated:
            return
        data = self._node(info.node_name)
        data.pods[info.uid] = pod
        for name, amount in info.requests.items():
            data.requested[name] = data.requested.get(name, 0) + amount
        self._pod_node[info.uid] = info.node_name
        self._dirty.add(info.node_name)

    def remove_pod(self, uid: str) -> None:
        node = self._pod_node.pop(uid, None)
        if node is None:
            return
        data = self._data[node]
        pod = data.pods.pop(uid)
        for name, amount in pod.info.requests.items():
            left = data.requested.get(name, 0) - amount
            if left:
                data.requested[name] = left
            else:
                data.requested.pop(name, None)
        self._dirty.add(node)

    def upsert_workload(self, workload: Workload) -> None:
        self.workloads[workload.uid] = workload

    def remove_workload(self, uid: str) -> None:
        self.workloads.pop(uid, None)

    # ---- reads -------------------------------------------------------------------------------------------------

    def refresh(self) -> int:
        """Recompute the rows of the nodes that changed; returns how many."""
        dirty, self._dirty = self._dirty, set()
        count = 0
        for name in dirty:
            row = self._row.get(name)
            if row is not None:
                self._recount(row, self._data.get(name))
                count += 1
        return count

    def _recount(self, row: int, data: _Node | None) -> None:
        metric = data.metric if data is not None else None
        if data is None or metric is None or metric.node_usage is None:
            self.usage[row] = (0, 0, 0 if data is None else len(data.pods))
            self.prod_usage[row] = 0
            self.update_time[row] = np.nan if metric is None or metric.update_time is None else metric.update_time
            self.has_status[row] = False
            return
        cpu, memory = _vector(metric.system_usage)
        prod_cpu = prod_memory = prod_pods = 0
        for used in data.pod_usage.values():
            cpu += used[0]
            memory += used[1]
        for pod in data.pods.values():
            if pod.prod:
                prod_pods += 1
                reported = data.pod_usage.get(pod.key)
                if reported is not None:
                    prod_cpu += reported[0]
                    prod_memory += reported[1]
        self.usage[row] = (cpu, memory, len(data.pods))
        self.prod_usage[row] = (prod_cpu, prod_memory, prod_pods)
        self.update_time[row] = math.nan if metric.update_time is None else metric.update_time
        self.has_status[row] = True

    def pods_on(self, name: str) -> Iterable[BalancePod]:
        data = self._data.get(name)
        return () if data is None else data.pods.values()

    def pod_usage(self, node: str, key: str) -> tuple[int, int] | None:
        """The pod's (cpu milli, memory bytes) in its node's NodeMetric; None when not reported."""
        data = self._data.get(node)
        return None if data is None else data.pod_usage.get(key)

    def listed(self, node: str, key: str) -> bool:
        """Whether ``node``'s NodeMetric lists the pod ``namespace/name``."""
        data = self._data.get(node)
        return data is not None and key in data.pod_usage

    def has_pod(self, node: str, key: str) -> bool:
        data = self._data.get(node)
        return data is not None and any(pod.key == key for pod in data.pods.values())

    def requested(self, node: str) -> tuple[Mapping[str, int], int]:
        """The sum of the requests of the node's pods and their number (for the in-tree NodeResourcesFit)."""
        data = self._data.get(node)
        return ({}, 0) if data is None else (data.requested, len(data.pods))

    def metric(self, node: str) -> NodeMetricInfo | None:
        data = self._data.get(node)
        return None if data is None else data.metric


def resources_of(values: Iterable[int]) -> ResourceList:
    """A usage row as a resource list (cpu milli, memory bytes, pods)."""
    return dict(zip(RESOURCES, (int(v) for v in values), strict=True))
