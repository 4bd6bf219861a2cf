"""kube-scheduler's in-tree filters that decide most pending pods, as pure functions.

In the default profile's filter order (the first failure is the node's verdict, as in
kube-scheduler without ``RunAllFilters``):

1. ``NodeUnschedulable``: ``spec.unschedulable`` fails unless the pod tolerates
   ``node.kubernetes.io/unschedulable:NoSchedule`` (unresolvable).
2. ``NodeName``: ``spec.nodeName``, when set, must be this node (unresolvable).
3. ``TaintToleration``: every ``NoSchedule``/``NoExecute`` taint must be tolerated
   (unresolvable); the first untolerated one is reported.
4. ``NodeAffinity``: ``spec.nodeSelector`` (all labels equal) and the required
   ``nodeSelectorTerms`` (any term; within a term every expression and field) (unresolvable).
5. ``NodeResourcesFit``: one pod slot against ``allocatable.pods`` and every requested resource
   (> 0) against ``allocatable − requested``, where ``requested`` sums the requests of the
   assigned, non-terminated pods (preemption may help: plain Unschedulable). A resource the node
   does not list has allocatable 0.

Each failing :class:`Status` carries kube-scheduler's fixed reason string (what its events say)
and a ``detail`` with the numbers (``Insufficient cpu: requested 15, free 11.82 of 15.92``).

:func:`resources_fit` answers for one node from plain mappings (allocatable, requested so far,
pod count, the pod's requests). :class:`RequestsTable` holds allocatable and requested per node
(rows) and resource (columns) as integer arrays: ``feasible`` answers for every node in one pass
(the simulator's hot path) and ``insufficient`` lists the shortfalls of one node with their numbers; both use the single
comparison in ``_short``.

Not guaranteed: NodePorts, volume plugins, topology spread and inter-pod affinity are not
modelled; NodeAffinity's ``addedAffinity`` profile argument and scheduling gates are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeInfo
from koordpy.model.placement import NodeSelectorRequirement, NodeSelectorTerm, PodPlacement, Toleration
from koordpy.model.resources import ResourceList
from koordpy.scheduler.framework.status import Code, Status

__all__ = [
    "FILTER_ORDER",
    "InsufficientResource",
    "RequestsTable",
    "filter_node",
    "filter_one_node",
    "format_amount",
    "node_affinity",
    "node_name",
    "node_unschedulable",
    "resource_columns",
    "resources_fit",
    "taint_toleration",
    "tolerates",
]

I64 = npt.NDArray[np.int64]

NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_RESOURCES_FIT = "NodeResourcesFit"
FILTER_ORDER = (NODE_UNSCHEDULABLE, NODE_NAME, TAINT_TOLERATION, NODE_AFFINITY, NODE_RESOURCES_FIT)

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_TAINT = "node(s) had untolerated taint {{{}: {}}}"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_INSUFFICIENT = "Insufficient {}"

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
PODS = "pods"
GIB = 1024**3
BYTE_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")


def format_amount(resource: str, amount: int) -> str:
    """cpu in cores, byte resources in Gi, others as counts; at most two decimals."""
    if resource == "cpu":
        text = f"{amount / 1000:.2f}"
    elif resource.startswith(BYTE_RESOURCES):
        return _trim(f"{amount / GIB:.2f}") + "Gi"
    else:
        return str(amount)
    return _trim(text)


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True, slots=True)
class InsufficientResource:
    """One shortfall: ``requested`` by the pod, ``used`` by the node's pods, ``capacity`` allocatable."""

    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def reason(self) -> str:
        return REASON_TOO_MANY_PODS if self.resource == PODS else REASON_INSUFFICIENT.format(self.resource)

    @property
    def detail(self) -> str:
        if self.resource == PODS:
            return f"{REASON_TOO_MANY_PODS}: {self.used} of {self.capacity} pods in use"
        free = self.capacity - self.used
        show = self.resource
        return (
            f"{self.reason}: requested {format_amount(show, self.requested)}, "
            f"free {format_amount(show, free)} of {format_amount(show, self.capacity)}"
        )


def _short(free: I64, amount: int | np.int64 | I64) -> npt.NDArray[np.bool_]:
    """THE resource rule: a request does not fit where it exceeds what is free."""
    out: npt.NDArray[np.bool_] = free < amount
    return out


class RequestsTable:
    """Allocatable and requested per node (rows) and resource (columns); column 0 is the pod slot.

    ``missing_pods`` is the pod capacity of a node that does not list ``allocatable.pods``
    (kube-scheduler: 0; the simulator's synthetic nodes: 110).
    """

    def __init__(
        self, allocatables: Sequence[Mapping[str, int]], resources: Iterable[str], missing_pods: int = 0
    ) -> None:
        self.resources = (PODS, *sorted(set(resources) - {PODS}))
        self.position = {name: i for i, name in enumerate(self.resources)}
        width = len(self.resources)
        self.alloc: I64 = np.array(
            [[a.get(r, missing_pods if r == PODS else 0) for r in self.resources] for a in allocatables], np.int64
        ).reshape(len(allocatables), width)
        self.requested: I64 = np.zeros_like(self.alloc)
        self.free: I64 = self.alloc.copy()
        """``alloc − requested``, kept in step by bind/unbind."""

    @classmethod
    def of_nodes(
        cls, nodes: Sequence[NodeInfo], extra_resources: Iterable[str] = (), missing_pods: int = 0
    ) -> RequestsTable:
        names = {r for n in nodes for r in n.allocatable}
        return cls([n.allocatable for n in nodes], names | set(extra_resources), missing_pods)

    def vector(self, requests: Mapping[str, int], ignored: frozenset[str] = frozenset()) -> I64:
        """One pod slot plus the pod's requests. Raises KeyError for a resource with no column."""
        vec = np.zeros(len(self.resources), np.int64)
        vec[0] = 1
        for name, amount in requests.items():
            if amount and name != PODS and name not in ignored:
                position = self.position.get(name)
                if position is None:
                    raise KeyError(f"resource {name} has no column")
                vec[position] = amount
        return vec

    def feasible(self, vec: I64) -> npt.NDArray[np.bool_]:
        """Per row: does the pod fit? One pass per requested resource."""
        short = np.zeros(self.alloc.shape[0], np.bool_)
        for position in np.flatnonzero(vec).tolist():
            short |= _short(self.free[:, position], vec[position])
        fits: npt.NDArray[np.bool_] = ~short
        return fits

    def insufficient(self, row: int, vec: I64) -> list[InsufficientResource]:
        """The shortfalls of one row, pod slot first, then resources in name order."""
        positions = np.flatnonzero(vec)
        short = _short(self.free[row, positions], vec[positions])
        return [
            InsufficientResource(self.resources[p], int(vec[p]), int(self.requested[row, p]), int(self.alloc[row, p]))
            for p in positions[short].tolist()
        ]

    def status(self, row: int, vec: I64) -> Status:
        """``NodeResourcesFit``'s verdict for one row, with every shortfall in reason and detail."""
        missing = self.insufficient(row, vec)
        if not missing:
            return Status(plugin=NODE_RESOURCES_FIT)
        return Status(
            Code.UNSCHEDULABLE,
            ", ".join(m.reason for m in missing),
            NODE_RESOURCES_FIT,
            "; ".join(m.detail for m in missing),
        )

    def bind(self, row: int, vec: I64) -> None:
        self.requested[row] += vec
        self.free[row] -= vec

    def unbind(self, row: int, vec: I64) -> None:
        self.requested[row] -= vec
        self.free[row] += vec


# ---- taints --------------------------------------------------------------------------------


def tolerates(toleration: Toleration, key: str, value: str, effect: str) -> bool:
    """Kubernetes ``ToleratesTaint``: an empty effect or key matches any; Exists ignores the value."""
    if toleration.effect and toleration.effect != effect:
        return False
    if toleration.key and toleration.key != key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("", "Equal"):
        return toleration.value == value
    return False


def _tolerated(tolerations: Iterable[Toleration], taint: Mapping[str, object]) -> bool:
    key = str(taint.get("key") or "")
    value = str(taint.get("value") or "")
    effect = str(taint.get("effect") or "")
    return any(tolerates(t, key, value, effect) for t in tolerations)


def node_unschedulable(pod: PodPlacement, node: NodeInfo) -> Status:
    if node.unschedulable and not _tolerated(
        pod.tolerations, {"key": TAINT_NODE_UNSCHEDULABLE, "effect": "NoSchedule"}
    ):
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            REASON_UNSCHEDULABLE,
            NODE_UNSCHEDULABLE,
            f"{REASON_UNSCHEDULABLE}: cordoned (spec.unschedulable), no toleration for "
            f"{TAINT_NODE_UNSCHEDULABLE}:NoSchedule",
        )
    return Status(plugin=NODE_UNSCHEDULABLE)


def node_name(pod: PodPlacement, node: NodeInfo) -> Status:
    if pod.node_name and pod.node_name != node.name:
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            REASON_NODE_NAME,
            NODE_NAME,
            f"{REASON_NODE_NAME}: the pod asks for spec.nodeName {pod.node_name}",
        )
    return Status(plugin=NODE_NAME)


def taint_toleration(pod: PodPlacement, node: NodeInfo) -> Status:
    for taint in node.taints:
        effect = str(taint.get("effect") or "")
        if effect in FILTERED_EFFECTS and not _tolerated(pod.tolerations, taint):
            reason = REASON_TAINT.format(taint.get("key") or "", taint.get("value") or "")
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                reason,
                TAINT_TOLERATION,
                f"{reason}: effect {effect}, no matching toleration",
            )
    return Status(plugin=TAINT_TOLERATION)


# ---- node affinity -------------------------------------------------------------------------


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _matches(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    """One requirement against a label (or field) value, None when the node does not have it."""
    op = requirement.operator
    if op == "In":
        return value is not None and value in requirement.values
    if op == "NotIn":
        return value is None or value not in requirement.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    # Gt / Lt: both sides integers, exactly one value
    if value is None or len(requirement.values) != 1:
        return False
    have, want = _integer(value), _integer(requirement.values[0])
    if have is None or want is None:
        return False
    return have > want if op == "Gt" else have < want


def _term_failure(term: NodeSelectorTerm, node: NodeInfo) -> str | None:
    """Why ``term`` does not match ``node`` (None when it matches)."""
    if not term.match_expressions and not term.match_fields:
        return "empty term matches no node"
    for req in term.match_expressions:
        value = node.labels.get(req.key)
        if not _matches(req, value):
            return f"{_describe(req)} (node: {req.key}={value if value is not None else '<unset>'})"
    for req in term.match_fields:
        value = node.name if req.key == "metadata.name" else None
        if not _matches(req, value):
            return f"field {_describe(req)} (node: {node.name})"
    return None


def _describe(req: NodeSelectorRequirement) -> str:
    values = f" [{','.join(req.values)}]" if req.values else ""
    return f"{req.key} {req.operator}{values}"


def node_affinity(pod: PodPlacement, node: NodeInfo) -> Status:
    failure = None
    for key, want in (pod.node_selector or {}).items():
        have = node.labels.get(key)
        if have != want:
            failure = f"nodeSelector {key}={want} (node: {key}={have if have is not None else '<unset>'})"
            break
    if failure is None and pod.required_terms is not None:
        reasons = [_term_failure(term, node) for term in pod.required_terms]
        if not reasons:
            failure = "required nodeSelectorTerms is empty"
        elif all(r is not None for r in reasons):
            failure = "no required nodeSelectorTerm matched: " + "; ".join(
                f"term[{i}] {r}" for i, r in enumerate(reasons)
            )
    if failure is None:
        return Status(plugin=NODE_AFFINITY)
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_AFFINITY, NODE_AFFINITY, f"{REASON_AFFINITY}: {failure}")


_NODE_CHECKS = (node_unschedulable, node_name, taint_toleration, node_affinity)
"""The filters before ``NodeResourcesFit``, in kube-scheduler's order."""


def filter_node(pod: PodPlacement, node: NodeInfo, table: RequestsTable, row: int, vec: I64) -> Status:
    """The first failing in-tree filter for the pod on ``node`` (row ``row`` of ``table``), or success."""
    for check in _NODE_CHECKS:
        status = check(pod, node)
        if not status.is_success:
            return status
    return table.status(row, vec)


def filter_one_node(
    pod: PodPlacement, node: NodeInfo, requested: Mapping[str, int], pods: int, pod_requests: Mapping[str, int]
) -> Status:
    """:func:`filter_node` for one node from plain mappings (``requested``: the sum of the requests of the
    ``pods`` already there; ``pod_requests``: the incoming pod's), as :func:`resources_fit` takes them."""
    for check in _NODE_CHECKS:
        status = check(pod, node)
        if not status.is_success:
            return status
    return resources_fit(node.allocatable, requested, pods, pod_requests)


def resources_fit(
    allocatable: Mapping[str, int], requested: Mapping[str, int], pods: int, pod_requests: Mapping[str, int]
) -> Status:
    """``NodeResourcesFit`` for one node: ``requested`` sums the requests of the ``pods`` already
    there (assigned or reserved); ``pod_requests`` is the incoming pod's. A one-row
    :class:`RequestsTable`, so the same rule and numbers as everywhere else."""
    table = RequestsTable([allocatable], set(requested) | set(pod_requests))
    used = table.vector(requested)
    used[0] = pods
    table.bind(0, used)
    return table.status(0, table.vector(pod_requests))


def resource_columns(requests: Iterable[ResourceList]) -> set[str]:
    """Every resource named by some request list (to size a table's columns)."""
    return {name for r in requests for name in r}
