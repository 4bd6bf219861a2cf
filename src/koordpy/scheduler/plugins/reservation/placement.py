"""Placing a Pending Reservation on a node, and the node score shared with starving-job reservations.

For each node, in input order, the template is checked with kube-scheduler's in-tree filters
(:func:`koordpy.scheduler.framework.fit.filter_node`: cordon, nodeName, taints, node affinity, then
resources), where the resources it may use are:

* without ``preAllocation``: ``allocatable − requested − reserved by others`` (``requested``: the
  assigned, non-terminated pods on the node; ``reserved by others``: Σ ``remaining`` of the other
  reservations holding there, :mod:`.ledger`). The reservation becomes **Available**. The load-aware
  filter (the extender's ``LoadAwareScheduling``, run through the same ``ClusterState`` as ``koordpy
  scheduler explain``) must pass too.
* with ``preAllocation``: ``allocatable − reserved by others`` only (running pods are expected to
  leave: the seed's *Reserved* state). It becomes **Available** when the node's free resources
  (as above) already cover it, else **Waiting**. The load-aware filter is not applied: the node is
  expected to be busy until it drains.

Among the nodes that pass, the one with the highest :func:`node_score` is chosen (ties: node name).
No node passes: the reservation stays **Pending** with a kube-scheduler style summary
(``0/3 nodes are available: 2 Insufficient cpu, 1 node(s) were unschedulable.``).

Not guaranteed: the pod slot (``pods``) is not checked (a reservation does not hold one); inter-pod
affinity, topology spread, ports and volumes of the template are not read.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo
from koordpy.model.placement import PodPlacement, Toleration
from koordpy.model.priority import KubeQoS, priority_class
from koordpy.model.resources import ResourceList
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.framework.fit import (
    RequestsTable,
    filter_node,
    node_affinity,
    node_name,
    node_unschedulable,
    taint_toleration,
)
from koordpy.scheduler.framework.status import Status
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin
from koordpy.scheduler.plugins.reservation.ledger import Holding
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo

__all__ = [
    "HOLD_TOLERATION",
    "TAINT_KEY",
    "Candidate",
    "LoadFilter",
    "NodeTables",
    "NodeUse",
    "PlacementResult",
    "constraints",
    "load_aware_filter",
    "node_score",
    "node_scores",
    "node_uses",
    "place",
    "requests_table",
    "reservation_pod",
    "reserved_by_others",
    "template_fits",
    "template_vector",
    "tolerating_hold",
    "unavailable_summary",
]

LoadFilter = Callable[[PodInfo, Sequence[str]], Mapping[str, Status]]
"""Given a pod and node names, the failing load-aware status per node name (passing nodes absent)."""

SCORE_MAX = 10.0
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class NodeUse:
    """One node's assigned, non-terminated pods and the sum of their requests."""

    node: NodeInfo
    pods: tuple[PodInfo, ...]
    requested: ResourceList


def node_uses(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo]) -> dict[str, NodeUse]:
    by_node: dict[str, list[PodInfo]] = {}
    for pod in pods:
        if pod.node_name and not pod.terminated:
            by_node.setdefault(pod.node_name, []).append(pod)
    out: dict[str, NodeUse] = {}
    for node in nodes:
        assigned = tuple(by_node.get(node.name, ()))
        requested: ResourceList = {}
        for pod in assigned:
            for name, amount in pod.requests.items():
                requested[name] = requested.get(name, 0) + amount
        out[node.name] = NodeUse(node, assigned, requested)
    return out


def reserved_by_others(name: str, holdings: Iterable[Holding]) -> ResourceList:
    """Σ remaining of the holdings of every reservation but ``name``."""
    out: ResourceList = {}
    for holding in holdings:
        if holding.reservation.name == name:
            continue
        for resource, amount in holding.remaining.items():
            out[resource] = out.get(resource, 0) + amount
    return out


def _sum(*lists: Mapping[str, int]) -> ResourceList:
    out: ResourceList = {}
    for resources in lists:
        for name, amount in resources.items():
            out[name] = out.get(name, 0) + amount
    return out


def requests_table(
    nodes: Sequence[NodeInfo], used: Mapping[str, Mapping[str, int]], requests: Iterable[str] = ()
) -> RequestsTable:
    """One :class:`RequestsTable` over ``nodes`` where row ``i`` has ``used[nodes[i].name]`` bound (what
    may not be used of its allocatable); the pod slot is left free. ``requests`` adds columns."""
    columns = {r for u in used.values() for r in u} | set(requests)
    table = RequestsTable.of_nodes(nodes, columns)
    for row, node in enumerate(nodes):
        taken = used.get(node.name)
        if taken:
            vec = table.vector(taken)
            vec[0] = 0
            table.bind(row, vec)
    return table


TAINT_KEY = "koordpy.io/reserved"
"""The taint koordpy puts on a node held against every scheduler (:mod:`.hold`)."""
HOLD_TOLERATION = Toleration(key=TAINT_KEY, operator="Exists", effect="NoSchedule")


def tolerating_hold(placement: PodPlacement) -> PodPlacement:
    """``placement`` that also tolerates koordpy's own hold taint: placement and the pass's fit checks
    account for a held node through its Reservations, never through the taint koordpy put there."""
    if HOLD_TOLERATION in placement.tolerations:
        return placement
    return replace(placement, tolerations=(*placement.tolerations, HOLD_TOLERATION))


def constraints(placement: PodPlacement, node: NodeInfo) -> Status:
    """The in-tree filters before NodeResourcesFit (for a row whose resources ``feasible`` already passed);
    koordpy's hold taint is tolerated (:func:`tolerating_hold`)."""
    placement = tolerating_hold(placement)
    for check in (node_unschedulable, node_name, taint_toleration, node_affinity):
        status = check(placement, node)
        if not status.is_success:
            return status
    return status


def template_vector(table: RequestsTable, requests: Mapping[str, int]) -> I64:
    """The template's requests as a table vector, without the pod slot (a reservation holds none)."""
    vec = table.vector(requests)
    vec[0] = 0
    return vec


def template_fits(
    placement: PodPlacement, node: NodeInfo, used: Mapping[str, int], requests: Mapping[str, int]
) -> Status:
    """kube-scheduler's in-tree filters for a template on ``node``, where ``used`` is what the template
    may not use of ``node.allocatable`` (the pod slot is not checked)."""
    table = requests_table([node], {node.name: used}, requests)
    return filter_node(tolerating_hold(placement), node, table, 0, template_vector(table, requests))


def node_scores(free: I64, columns: Sequence[str], requests: Mapping[str, int]) -> F64:
    """The seed's map step, per row of ``free`` (columns named by ``columns``): how much of the task's
    request the node has free, 0..10.

    Per requested resource ``r`` (amount > 0): ``s_r = 10 × min(max(free_r, 0) / request_r, 1)``
    (a resource without a column has free 0). ``cpu`` and ``memory`` score 10 when not requested;
    the scalar score is the mean of ``s_r`` over every other requested resource. Node score =
    ``((s_cpu + s_memory) / 2 + 2 × s_scalar) / 3`` when a scalar resource is requested, else
    ``(s_cpu + s_memory) / 2``.

    Worked example: request cpu 3, memory 3Gi, nvidia.com/gpu 1; free cpu 2, memory 1Gi, gpu 1:
    ``s_cpu = 10 × 2/3 = 6.67``, ``s_memory = 10 × 1/3 = 3.33``, ``s_gpu = 10``, score =
    ``((6.67 + 3.33) / 2 + 2 × 10) / 3 = (5 + 20) / 3 = 8.33``. A node with everything free scores 10.
    """
    rows = free.shape[0]
    position = {name: i for i, name in enumerate(columns)}

    def single(name: str) -> F64:
        want = requests.get(name, 0)
        if want <= 0:
            return np.full(rows, SCORE_MAX)
        column = position.get(name)
        have = np.maximum(free[:, column], 0) if column is not None else np.zeros(rows, np.int64)
        out: F64 = SCORE_MAX * np.minimum(have / want, 1.0)
        return out

    base: F64 = (single("cpu") + single("memory")) / 2
    scalars = [n for n, a in requests.items() if a > 0 and n not in ("cpu", "memory", "pods")]
    if not scalars:
        return base
    scalar = sum((single(n) for n in scalars), np.zeros(rows)) / len(scalars)
    combined: F64 = (base + 2 * scalar) / 3
    return combined


def node_score(free: Mapping[str, int], requests: Mapping[str, int]) -> float:
    """:func:`node_scores` for one node whose free resources are given as a mapping."""
    columns = sorted(free)
    row = np.array([[free[name] for name in columns]], np.int64).reshape(1, len(columns))
    return float(node_scores(row, columns, requests)[0])


def reservation_pod(res: ReservationInfo) -> PodInfo:
    """A stand-in pod for the template (what the load-aware filter and the fit rule are asked about)."""
    qos = KubeQoS.BURSTABLE if any(a > 0 for a in res.requests.values()) else KubeQoS.BEST_EFFORT
    return PodInfo(
        uid=f"reservation/{res.uid}",
        namespace="",
        name=res.name,
        node_name="",
        scheduler_name="",
        phase="Pending",
        priority=res.template_priority,
        labels={},
        annotations={},
        requests=dict(res.requests),
        limits={},
        qos=qos,
        priority_class=priority_class({}, res.template_priority, qos),
        owner_kinds=(),
        creation_time=res.creation_time,
        deletion_time=None,
        scheduled_time=None,
        initialized_time=None,
    )


def load_aware_filter(
    args: LoadAwareSchedulingArgs,
    nodes: Sequence[NodeInfo],
    pods: Iterable[PodInfo],
    metrics: Mapping[str, NodeMetricInfo],
    now: float,
) -> LoadFilter:
    """The extender's LoadAwareScheduling filter over a snapshot (the same ``ClusterState`` path as
    ``koordpy scheduler explain``). A node without a NodeMetric passes (Koordinator fails open).

    The state is built on the first call only (a pass that places no reservation without
    ``preAllocation`` never pays for it); ``nodes``, ``pods`` and ``metrics`` must not change until then.
    """
    built: list[ClusterState] = []

    def state() -> ClusterState:
        if not built:
            fresh = ClusterState([LoadAwarePlugin(args)])
            for node in nodes:
                fresh.upsert_node(node)
            for pod in pods:
                fresh.upsert_pod(pod, now)
            for metric in metrics.values():
                fresh.upsert_metric(metric)
            built.append(fresh)
        return built[0]

    def run(pod: PodInfo, names: Sequence[str]) -> Mapping[str, Status]:
        if not names:
            return {}
        return state().filter(pod, list(names), now).statuses

    return run


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    covered: bool
    """The node's free resources (after pods and other reservations) cover the template now."""
    score: float


@dataclass(frozen=True, slots=True)
class PlacementResult:
    node: str | None
    phase: Literal["Available", "Waiting", "Pending"]
    message: str
    """Why this node (placed) or the per-node reasons summarised (Pending)."""
    candidate_list: Callable[[], tuple[Candidate, ...]] = field(default=tuple, repr=False, compare=False)
    """Builds :attr:`candidates` on demand (a pass only needs the chosen node)."""

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """The nodes that passed every filter, in node order."""
        return self.candidate_list()


def unavailable_summary(total: int, reasons: Iterable[str]) -> str:
    """kube-scheduler's ``0/N nodes are available: k reason, ...`` (reasons counted, sorted by text)."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"0/{total} nodes are available" + (f": {parts}." if parts else ".")


class NodeTables:
    """What one pass reuses across placements over the same ``nodes`` and ``uses``: one
    :class:`RequestsTable` with nothing bound (``empty``) and one with the pods' requests bound
    (``busy``), and the in-tree constraint verdict per node for each distinct placement.

    Not guaranteed: a template naming a resource outside ``resources`` (and every node's
    allocatable) has no column; :meth:`covers` says so and callers then build fresh tables. The
    tables are never mutated; :meth:`with_used` returns copies.
    """

    def __init__(self, nodes: Sequence[NodeInfo], uses: Mapping[str, NodeUse], resources: Iterable[str] = ()) -> None:
        self.nodes = nodes
        self.names = [n.name for n in nodes]
        self.row = {name: i for i, name in enumerate(self.names)}
        self.name_rank: I64 = np.empty(len(self.names), np.int64)
        """Each row's position in node-name order (ties between equal scores go to the first name)."""
        self.name_rank[sorted(range(len(self.names)), key=self.names.__getitem__)] = np.arange(len(self.names))
        columns = {r for u in uses.values() for r in u.requested} | set(resources)
        self.empty = RequestsTable.of_nodes(nodes, columns)
        self.busy = _copy(self.empty)
        for row, node in enumerate(nodes):
            use = uses.get(node.name)
            if use is not None and use.requested:
                vec = self.busy.vector(use.requested)
                vec[0] = 0
                self.busy.bind(row, vec)
        self._verdicts: list[tuple[PodPlacement, list[Status], npt.NDArray[np.bool_]]] = []

    def covers(self, resources: Iterable[str]) -> bool:
        """Has every resource named a column?"""
        return all(name in self.empty.position for name in resources)

    def with_used(self, extra: Mapping[str, Mapping[str, int]], *, pods: bool) -> RequestsTable:
        """A copy of ``busy`` (``pods``) or ``empty`` with ``extra[node]`` bound on each named row
        (the pod slot left free)."""
        table = _copy(self.busy if pods else self.empty)
        for name, taken in extra.items():
            row = self.row.get(name)
            if row is not None and taken:
                vec = table.vector(taken)
                vec[0] = 0
                table.bind(row, vec)
        return table

    def verdicts(self, placement: PodPlacement) -> tuple[list[Status], npt.NDArray[np.bool_]]:
        """:func:`constraints` for ``placement`` on every node and which rows pass, computed once per
        distinct placement."""
        for seen, statuses, passing in self._verdicts:
            if seen == placement:
                return statuses, passing
        statuses = [constraints(placement, node) for node in self.nodes]
        passing = np.fromiter((v.is_success for v in statuses), np.bool_, len(statuses))
        self._verdicts.append((placement, statuses, passing))
        return statuses, passing


def _copy(table: RequestsTable) -> RequestsTable:
    out = copy.copy(table)
    out.requested = table.requested.copy()
    out.free = table.free.copy()
    return out


def place(
    res: ReservationInfo,
    nodes: Sequence[NodeInfo],
    uses: Mapping[str, NodeUse],
    holdings: Mapping[str, Sequence[Holding]],
    *,
    load_filter: LoadFilter | None = None,
    only_nodes: frozenset[str] | None = None,
    tables: NodeTables | None = None,
) -> PlacementResult:
    """Choose a node for ``res`` (module docstring). ``holdings`` maps node name to the holdings placed
    there; ``only_nodes`` restricts the choice (the starving-node cap), nodes outside it fail with
    ``node(s) exceed the reserved node limit``. ``tables``: built over the same ``nodes`` and ``uses``
    (one pass reuses them; None or not covering the template: built here)."""
    others = {name: reserved_by_others(res.name, held) for name, held in holdings.items() if held}
    named = set(res.requests).union(*others.values())
    if tables is None or not tables.covers(named):
        tables = NodeTables(nodes, uses, named)
    # with preAllocation the pods running there do not count; "covered" always counts them
    now_table = tables.with_used(others, pods=True)
    table = tables.with_used(others, pods=False) if res.pre_allocation else now_table
    vec = template_vector(table, res.requests)
    covered_rows = now_table.feasible(vec)
    scores = node_scores(now_table.free, now_table.resources, res.requests)  # free after pods and others
    fitting = table.feasible(vec)  # the in-tree filters run on these rows; the others only for the message
    verdicts, passing = tables.verdicts(res.placement)
    if only_nodes is not None:
        passing = passing & np.fromiter((n in only_nodes for n in tables.names), np.bool_, len(nodes))
    rows = np.flatnonzero(fitting & passing)
    failing: Mapping[str, Status] = {}
    if load_filter is not None and not res.pre_allocation and rows.size:
        failing = load_filter(reservation_pod(res), [tables.names[r] for r in rows.tolist()])
        if failing:
            rows = np.array([r for r in rows.tolist() if tables.names[r] not in failing], np.int64)
    if not rows.size:
        failures: list[str] = []
        for row, node in enumerate(nodes):
            if only_nodes is not None and node.name not in only_nodes:
                failures.append("node(s) exceed the reserved node limit")
            elif not fitting[row]:
                failures.append(filter_node(tolerating_hold(res.placement), node, table, row, vec).reason)
            elif not verdicts[row].is_success:
                failures.append(verdicts[row].reason)
            else:
                failures.append(failing[node.name].reason)
        return PlacementResult(None, "Pending", unavailable_summary(len(nodes), failures))
    # the highest score rounded to 6 places, ties to the node name; only rows near the top are rounded
    near = rows[scores[rows] >= scores[rows].max() - 1e-5]
    distinct = np.unique(scores[near]).tolist()
    rounded = [round(score, 6) for score in distinct]
    top = max(rounded)
    tied = near[np.isin(scores[near], [v for v, r in zip(distinct, rounded, strict=True) if r == top])]
    best_row = int(tied[np.argmin(tables.name_rank[tied])])
    best = Candidate(tables.names[best_row], bool(covered_rows[best_row]), float(scores[best_row]))
    names = tables.names

    def candidates() -> tuple[Candidate, ...]:
        return tuple(Candidate(names[r], bool(covered_rows[r]), float(scores[r])) for r in rows.tolist())

    phase: Literal["Available", "Waiting"] = "Available" if best.covered else "Waiting"
    why = "free resources cover the template" if best.covered else "waiting for the node's pods to leave"
    message = f"placed on {best.node} (node score {best.score:.2f}): {why}"
    return PlacementResult(best.node, phase, message, candidates)
