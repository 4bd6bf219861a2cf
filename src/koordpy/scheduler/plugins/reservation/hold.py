"""Holding a reserved node against every scheduler: a node taint, and a toleration for the owners.

A Reservation holds its room against the pods of the ``koordpy-scheduler`` profile only (the extender's
``/filter``): another scheduler, the stock default scheduler included, does not read Reservations and
keeps filling the node. With ``reservation.taintNodes`` the manager also taints every node that holds a
*tainting* Reservation with :data:`TAINT` (``koordpy.io/reserved:NoSchedule``, which every scheduler and
the DaemonSet controller honour) and adds :data:`TOLERATION` to the owner pods that are still pending, so
only they can be scheduled there, by any scheduler. Pods already running on the node stay (``NoSchedule``
evicts nothing): the node drains as they finish.

Tainting Reservations: those that hold (:func:`~.ledger.holds`), are not consumed (no pod bound through an
``allocateOnce`` one yet) and are either starving-job Reservations (label ``koordpy.io/starving-job``) or
annotated :data:`ANNOTATION_TAINT_NODE` ``"true"`` (a user's opt-in). Everything is recomputed from the
cluster each round (:func:`hold_plan`): a node keeps the taint exactly while one of them holds there, so a
restarted manager, a deleted Reservation or a switched-off setting all end with the taint removed.

Worked example: nodes n1 (tainted earlier, its Reservation was deleted since) and n2; starving-job
Reservation ``starving-batch-big-0`` Waiting on n2 for pending pod ``batch/big`` without the toleration.
Plan: tolerate ``batch/big``, taint n2, untaint n1. Once ``big`` is bound through it (consumed), the plan
untaints n2.

Not guaranteed: pods that tolerate every taint (``operator: Exists`` without a key, as many DaemonSets
do) still land on a held node; the taint closes the *whole* node to other pods, not only the reserved
part; a Reservation owned by a controller or a label selector gets the toleration only on owner pods that
exist and are pending when a round runs (a pod created later waits for the next round).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.model.objects import NodeInfo, PodInfo
from koordpy.scheduler.plugins.reservation.ledger import holdings_on_node
from koordpy.scheduler.plugins.reservation.placement import HOLD_TOLERATION, TAINT_KEY, tolerating_hold
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, is_owner
from koordpy.scheduler.plugins.reservation.starving import LABEL_STARVING_JOB

__all__ = [
    "ANNOTATION_TAINT_NODE",
    "HOLD_TOLERATION",
    "TAINT",
    "TAINT_KEY",
    "TOLERATION",
    "HoldPlan",
    "has_hold_taint",
    "hold_plan",
    "taints_with",
    "taints_without",
    "tolerates_hold",
    "tolerating_hold",
    "tolerations_with",
]

TAINT: Mapping[str, str] = {"key": TAINT_KEY, "effect": "NoSchedule"}
"""The taint on a held node (no value: one taint however many Reservations hold there)."""
TOLERATION: Mapping[str, str] = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
"""The toleration added to a tainting Reservation's pending owner pods."""
ANNOTATION_TAINT_NODE = "koordpy.io/taint-node"
"""On a Reservation: ``"true"`` asks for its node to be tainted while it holds (``reservation.taintNodes``)."""


@dataclass(frozen=True, slots=True)
class HoldPlan:
    """What one round changes so that the taints match the tainting Reservations."""

    taint: tuple[str, ...] = ()
    """Nodes to taint, by name."""
    untaint: tuple[str, ...] = ()
    """Nodes that carry :data:`TAINT` and hold no tainting Reservation any more."""
    tolerate: tuple[PodInfo, ...] = ()
    """Pending owner pods of tainting Reservations that lack :data:`TOLERATION`."""
    held: Mapping[str, tuple[str, ...]] | None = None
    """Node -> the tainting Reservations holding there (for logs and Events)."""

    @property
    def empty(self) -> bool:
        return not (self.taint or self.untaint or self.tolerate)


def has_hold_taint(taints: Iterable[Mapping[str, Any]]) -> bool:
    return any(t.get("key") == TAINT_KEY and t.get("effect") == "NoSchedule" for t in taints)


def taints_with(taints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``taints`` with :data:`TAINT` appended (unchanged when present)."""
    out = [dict(t) for t in taints]
    return out if has_hold_taint(out) else [*out, dict(TAINT)]


def taints_without(taints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``taints`` without :data:`TAINT` (every other taint kept, in order)."""
    return [dict(t) for t in taints if not (t.get("key") == TAINT_KEY and t.get("effect") == "NoSchedule")]


def _tolerates(toleration: Mapping[str, Any]) -> bool:
    key, operator, effect = toleration.get("key") or "", toleration.get("operator") or "Equal", toleration.get("effect")
    if effect and effect != "NoSchedule":
        return False
    if not key:
        return operator == "Exists"
    return key == TAINT_KEY and (operator == "Exists" or not toleration.get("value"))


def tolerates_hold(tolerations: Iterable[Mapping[str, Any]]) -> bool:
    """Does a pod with ``tolerations`` (API form) tolerate :data:`TAINT`? (kube-scheduler's matching:
    an empty key with ``Exists`` tolerates every taint; ``Equal`` with an empty value matches ours.)"""
    return any(_tolerates(t) for t in tolerations)


def tolerations_with(tolerations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``tolerations`` with :data:`TOLERATION` appended (an addition, which a pod update allows)."""
    out = [dict(t) for t in tolerations]
    return out if tolerates_hold(out) else [*out, dict(TOLERATION)]


def taints_node(res: ReservationInfo) -> bool:
    """Is ``res`` a tainting Reservation (holding aside)?"""
    return LABEL_STARVING_JOB in res.labels or res.annotations.get(ANNOTATION_TAINT_NODE) == "true"


def hold_plan(
    nodes: Sequence[NodeInfo],
    pods: Sequence[PodInfo],
    reservations: Sequence[ReservationInfo],
    tolerations: Mapping[str, Sequence[Mapping[str, Any]]],
    now: float,
    *,
    enabled: bool,
) -> HoldPlan:
    """The taints and tolerations to write so that exactly the nodes holding a tainting Reservation carry
    :data:`TAINT` and their pending owner pods tolerate it.

    ``reservations`` are as they stand after the round's own writes; ``tolerations`` maps a pod uid to
    its ``spec.tolerations`` (API form). ``enabled`` False: nothing is held this way, every node still
    tainted is untainted.
    """
    by_node: dict[str, list[ReservationInfo]] = {}
    if enabled:
        for res in reservations:
            if res.node_name and taints_node(res):
                by_node.setdefault(res.node_name, []).append(res)
    pods_on: dict[str, list[PodInfo]] = {}
    for pod in pods:
        if pod.node_name in by_node:
            pods_on.setdefault(pod.node_name, []).append(pod)
    held: dict[str, tuple[str, ...]] = {}
    holding: list[ReservationInfo] = []
    for node, placed in by_node.items():
        names = []
        for h in holdings_on_node(placed, pods_on.get(node, []), now):
            if not h.consumed:
                names.append(h.reservation.name)
                holding.append(h.reservation)
        if names:
            held[node] = tuple(sorted(names))
    known = {n.name for n in nodes}
    tainted = {n.name for n in nodes if has_hold_taint(n.taints)}
    tolerate = tuple(
        pod
        for pod in pods
        if not pod.node_name
        and not pod.terminated
        and pod.deletion_time is None
        and any(is_owner(res, pod) for res in holding)
        and not tolerates_hold(tolerations.get(pod.uid, ()))
    )
    return HoldPlan(
        taint=tuple(sorted(n for n in held if n in known and n not in tainted)),
        untaint=tuple(sorted(tainted - set(held))),
        tolerate=tolerate,
        held=held,
    )
