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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo
from koordpy.model.placement import PodPlacement
from koordpy.model.priority import KubeQoS, priority_class
from koordpy.model.resources import ResourceList
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.framework.fit import RequestsTable, filter_node
from koordpy.scheduler.framework.status import Status
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin
from koordpy.scheduler.plugins.reservation.ledger import Holding
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo

__all__ = [
    "Candidate",
    "LoadFilter",
    "NodeUse",
    "PlacementResult",
    "free_resources",
    "load_aware_filter",
    "node_score",
    "node_uses",
    "place",
    "reservation_pod",
    "reserved_by_others",
    "template_fits",
    "unavailable_summary",
]

LoadFilter = Callable[[PodInfo, Sequence[str]], Mapping[str, Status]]
"""Given a pod and node names, the failing load-aware status per node name (passing nodes absent)."""

SCORE_MAX = 10.0


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


def free_resources(allocatable: Mapping[str, int], *used: Mapping[str, int]) -> ResourceList:
    """``allocatable − Σ used`` per resource named anywhere (may be negative)."""
    total = _sum(*used)
    return {name: allocatable.get(name, 0) - total.get(name, 0) for name in set(allocatable) | set(total)}


def template_fits(
    placement: PodPlacement, node: NodeInfo, used: Mapping[str, int], requests: Mapping[str, int]
) -> Status:
    """kube-scheduler's in-tree filters for a template on ``node``, where ``used`` is what the template
    may not use of ``node.allocatable`` (the pod slot is not checked)."""
    table = RequestsTable([node.allocatable], set(used) | set(requests))
    used_vec = table.vector(used)
    used_vec[0] = 0
    table.bind(0, used_vec)
    vec = table.vector(requests)
    vec[0] = 0
    return filter_node(placement, node, table, 0, vec)


def node_score(free: Mapping[str, int], requests: Mapping[str, int]) -> float:
    """The seed's map step: how much of the task's request the node has free, 0..10.

    Per requested resource ``r`` (amount > 0): ``s_r = 10 × min(max(free_r, 0) / request_r, 1)``.
    ``cpu`` and ``memory`` score 10 when not requested; the scalar score is the mean of ``s_r`` over
    every other requested resource. Node score = ``((s_cpu + s_memory) / 2 + 2 × s_scalar) / 3``
    when a scalar resource is requested, else ``(s_cpu + s_memory) / 2``.

    Worked example: request cpu 3, memory 3Gi, nvidia.com/gpu 1; free cpu 2, memory 1Gi, gpu 1:
    ``s_cpu = 10 × 2/3 = 6.67``, ``s_memory = 10 × 1/3 = 3.33``, ``s_gpu = 10``, score =
    ``((6.67 + 3.33) / 2 + 2 × 10) / 3 = (5 + 20) / 3 = 8.33``. A node with everything free scores 10.
    """

    def single(name: str) -> float:
        want = requests.get(name, 0)
        if want <= 0:
            return SCORE_MAX
        return SCORE_MAX * min(max(free.get(name, 0), 0) / want, 1.0)

    base = (single("cpu") + single("memory")) / 2
    scalars = [n for n, a in requests.items() if a > 0 and n not in ("cpu", "memory", "pods")]
    if not scalars:
        return base
    scalar = sum(single(n) for n in scalars) / len(scalars)
    return (base + 2 * scalar) / 3


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
    ``koordpy scheduler explain``). A node without a NodeMetric passes (Koordinator fails open)."""
    state = ClusterState([LoadAwarePlugin(args)])
    for node in nodes:
        state.upsert_node(node)
    for pod in pods:
        state.upsert_pod(pod, now)
    for metric in metrics.values():
        state.upsert_metric(metric)

    def run(pod: PodInfo, names: Sequence[str]) -> Mapping[str, Status]:
        if not names:
            return {}
        return state.filter(pod, list(names), now).statuses

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
    candidates: tuple[Candidate, ...]


def unavailable_summary(total: int, reasons: Iterable[str]) -> str:
    """kube-scheduler's ``0/N nodes are available: k reason, ...`` (reasons counted, sorted by text)."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"0/{total} nodes are available" + (f": {parts}." if parts else ".")


def place(
    res: ReservationInfo,
    nodes: Sequence[NodeInfo],
    uses: Mapping[str, NodeUse],
    holdings: Mapping[str, Sequence[Holding]],
    *,
    load_filter: LoadFilter | None = None,
    only_nodes: frozenset[str] | None = None,
) -> PlacementResult:
    """Choose a node for ``res`` (module docstring). ``holdings`` maps node name to the holdings placed
    there; ``only_nodes`` restricts the choice (the starving-node cap), nodes outside it fail with
    ``node(s) exceed the reserved node limit``."""
    failures: dict[str, str] = {}
    candidates: list[Candidate] = []
    for node in nodes:
        use = uses.get(node.name) or NodeUse(node, (), {})
        if only_nodes is not None and node.name not in only_nodes:
            failures[node.name] = "node(s) exceed the reserved node limit"
            continue
        others = reserved_by_others(res.name, holdings.get(node.name, ()))
        used = others if res.pre_allocation else _sum(use.requested, others)
        status = template_fits(res.placement, node, used, res.requests)
        if not status.is_success:
            failures[node.name] = status.reason
            continue
        free = free_resources(node.allocatable, use.requested, others)
        covered = all(amount <= free.get(name, 0) for name, amount in res.requests.items() if amount > 0)
        candidates.append(Candidate(node.name, covered, node_score(free, res.requests)))
    if load_filter is not None and not res.pre_allocation and candidates:
        failing = load_filter(reservation_pod(res), [c.node for c in candidates])
        for name, status in failing.items():
            failures[name] = status.reason
        candidates = [c for c in candidates if c.node not in failing]
    if not candidates:
        return PlacementResult(None, "Pending", unavailable_summary(len(nodes), failures.values()), ())
    best = min(candidates, key=lambda c: (-round(c.score, 6), c.node))
    phase: Literal["Available", "Waiting"] = "Available" if best.covered else "Waiting"
    why = "free resources cover the template" if best.covered else "waiting for the node's pods to leave"
    message = f"placed on {best.node} (node score {best.score:.2f}): {why}"
    return PlacementResult(best.node, phase, message, tuple(candidates))
