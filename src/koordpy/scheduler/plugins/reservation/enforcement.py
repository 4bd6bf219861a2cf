"""What the extender and ``koordpy scheduler explain`` enforce for Reservations on one node (pure).

Built on :mod:`koordpy.scheduler.plugins.reservation.ledger` (the one reserved-resources rule); this
module only adds what both callers need around it:

* :func:`node_reservations`: one node's account at ``now``: its holdings, the summed requests of the
  pods assigned to it (the ``requested`` of ``reserved_verdict``) and the instant until which the
  account stays right without a new event (the earliest expiry among its holdings).
* :func:`node_verdict`: the ledger's verdict for a pod on that node.
* :func:`owner_prefers`: does the pod own an *Available* reservation on the node that is not yet
  consumed? Such a node is scored :data:`OWNER_SCORE` (the extender's maximum priority) for it,
  replacing the load-aware score there; every other node keeps its score. A Waiting reservation is
  not preferred (its room is not free yet).

Worked example (``node_verdict``): allocatable cpu 8, assigned pods requesting 2, an Available
reservation holding 4 for ``big``. A 3-cpu pod that is not ``big``: free = 8 − 2 − 4 = 2 < 3 →
``node(s) resource was(were) reserved``; a 2-cpu one passes (2 ≤ 2). ``big`` itself is never
blocked by its own reservation.

Not guaranteed: the account is only as fresh as the pods given (the extender passes its cache,
including the pods it just bound); ``valid_until`` covers expiry only, never pod or object changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from koordpy.model.objects import PodInfo
from koordpy.model.resources import ResourceList, add_into
from koordpy.scheduler.framework.status import Status
from koordpy.scheduler.plugins.reservation.ledger import Holding, holdings_on_node, reserved_verdict
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, expiry, is_owner

__all__ = ["OWNER_SCORE", "NodeReservations", "node_reservations", "node_verdict", "owner_prefers", "requested_by"]

OWNER_SCORE = 10
"""The extender's maximum priority (``MaxExtenderPriority``), given to a node holding a reservation
the pod owns and may still take."""


@dataclass(frozen=True, slots=True)
class NodeReservations:
    """One node's reservation account at the instant it was computed."""

    node: str
    holdings: tuple[Holding, ...]
    requested: ResourceList
    """Σ requests of the non-terminated pods assigned to the node."""
    valid_until: float
    """The earliest expiry among ``holdings`` (``inf`` when none expires): recompute at or after it."""


def requested_by(pods: Iterable[PodInfo]) -> ResourceList:
    """Σ requests of the pods that are not terminated."""
    total: ResourceList = {}
    for pod in pods:
        if not pod.terminated:
            add_into(total, pod.requests)
    return total


def node_reservations(
    node: str, reservations: Iterable[ReservationInfo], pods: Sequence[PodInfo], now: float
) -> NodeReservations:
    """The account of ``node``: ``reservations`` placed on it, ``pods`` assigned to it."""
    on_node = [r for r in reservations if r.node_name == node]
    holdings = tuple(holdings_on_node(on_node, pods, now))
    deadlines = [d for h in holdings if (d := expiry(h.reservation)) is not None]
    return NodeReservations(node, holdings, requested_by(pods), min(deadlines, default=math.inf))


def node_verdict(pod: PodInfo, allocatable: Mapping[str, int], account: NodeReservations) -> Status:
    """``reserved_verdict`` of the ledger for ``pod`` on the account's node."""
    return reserved_verdict(pod, allocatable, account.requested, account.holdings)


def owner_prefers(pod: PodInfo, holdings: Iterable[Holding]) -> bool:
    """Does ``pod`` own an Available, not consumed reservation among ``holdings``?"""
    return any(h.reservation.phase == "Available" and not h.consumed and is_owner(h.reservation, pod) for h in holdings)
