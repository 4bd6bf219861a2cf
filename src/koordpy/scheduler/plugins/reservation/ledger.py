"""What the placed Reservations on one node hold, and the verdict for a pod that is not their owner.

The one rule for reserved resources, used by the extender's ``/filter`` and ``/bind``, ``koordpy
scheduler explain``, the manager's placement and status, the ReservationFirst migration and the
simulator:

* A reservation *holds* on its node while it is active (phase Available or Waiting, ``nodeName``
  set), not expired at ``now`` and not being deleted.
* Only a pod **bound through** a reservation allocates from it: a pod assigned to that node (not
  terminated) whose ``scheduling.koordinator.sh/reservation-allocated`` annotation names it (by uid,
  else by name; the binder writes it, see :func:`to_allocate`). Being an owner and running on the
  node is not enough: a sibling of the same workload that was there before allocates nothing. The
  pods listed in ``status.currentOwners`` come first, then the others in creation order. With
  ``allocateOnce`` the first such pod takes the whole reservation (nothing remains); otherwise each
  resource's allocation is their summed requests, capped at the template's.
* ``remaining`` = template requests − allocated (per resource, never below 0).
* A pod that does not own a holding is blocked on the node when one of its requests (> 0) exceeds
  ``allocatable − requested − Σ remaining of the holdings it does not own``, with the reason
  ``node(s) resource was(were) reserved``. BestEffort pods (no requests) are never blocked.
* At bind, :func:`to_allocate` picks the reservation an owner pod allocates on the chosen node: the
  oldest holding it owns that is not consumed and still has something left.

Worked example: allocatable cpu 3, requested 1 (one running pod), one Waiting reservation holding 3
for ``big`` (preAllocation: placed while only 2 were free). For a 1-cpu pod that is not ``big``:
free = 3 − 1 − 3 = −1 < 1 → blocked. For ``big`` itself: the reservation is its own, so only
kube-scheduler's NodeResourcesFit applies (3 − 1 = 2 < 3: it waits until the node drains).

Not guaranteed: the pod slot (``pods``) is not held; ``allocatePolicy`` is not enforced; a pod bound
by a binder that does not write the annotation allocates nothing (its reservation keeps holding until
it expires or is deleted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from koordpy.model.objects import PodInfo
from koordpy.model.resources import ResourceList
from koordpy.scheduler.framework.fit import format_amount
from koordpy.scheduler.framework.status import Code, Status
from koordpy.scheduler.plugins.reservation.spec import (
    ReservationInfo,
    is_expired,
    is_owner,
    reservation_allocated,
)

__all__ = [
    "PLUGIN",
    "REASON_RESERVED",
    "Holding",
    "bound_through",
    "holdings_on_node",
    "holds",
    "reserved_against",
    "reserved_verdict",
    "to_allocate",
]

PLUGIN = "Reservation"
REASON_RESERVED = "node(s) resource was(were) reserved"


@dataclass(frozen=True, slots=True)
class Holding:
    """One reservation's account on its node."""

    reservation: ReservationInfo
    owners: tuple[str, ...]
    """Keys (``namespace/name``) of the owner pods that allocated from it, in allocation order."""
    allocated: ResourceList
    remaining: ResourceList

    @property
    def consumed(self) -> bool:
        """allocateOnce and taken by an owner: it holds nothing more (phase becomes Succeeded)."""
        return self.reservation.allocate_once and bool(self.owners)


def holds(res: ReservationInfo, now: float) -> bool:
    """Active, placed, not expired at ``now`` and not being deleted."""
    return res.is_active and res.deletion_time is None and not is_expired(res, now)


def bound_through(res: ReservationInfo, pod: PodInfo) -> bool:
    """Was ``pod`` bound through ``res``: assigned to its node, not terminated, and its
    reservation-allocated annotation names it?"""
    if pod.node_name != res.node_name or not res.node_name or pod.terminated:
        return False
    record = reservation_allocated(pod.annotations)
    return record is not None and record.names(res)


def _allocation_order(res: ReservationInfo, pods: Iterable[PodInfo]) -> list[PodInfo]:
    listed = {(o.namespace, o.name) for o in res.current_owners} | {o.uid for o in res.current_owners if o.uid}
    owners = [p for p in pods if bound_through(res, p)]
    owners.sort(
        key=lambda p: (
            not ((p.namespace, p.name) in listed or p.uid in listed),
            p.creation_time if p.creation_time is not None else float("inf"),
            p.key,
        )
    )
    return owners


def _account(res: ReservationInfo, pods: Sequence[PodInfo], taken: set[str]) -> Holding:
    owners: list[str] = []
    allocated: ResourceList = {}
    for pod in _allocation_order(res, pods):
        if pod.uid in taken:
            continue  # a pod allocates from one reservation only
        owners.append(pod.key)
        taken.add(pod.uid)
        for name, amount in pod.requests.items():
            if name in res.requests:
                allocated[name] = min(res.requests[name], allocated.get(name, 0) + amount)
        if res.allocate_once:
            break
    if res.allocate_once and owners:
        remaining: ResourceList = {}
    else:
        remaining = {n: a - allocated.get(n, 0) for n, a in res.requests.items() if a - allocated.get(n, 0) > 0}
    return Holding(res, tuple(owners), allocated, remaining)


def holdings_on_node(reservations: Iterable[ReservationInfo], pods: Sequence[PodInfo], now: float) -> list[Holding]:
    """The holdings of the reservations placed on one node, given the pods assigned to it.

    Reservations are accounted oldest first (creation time, then name), so an owner of two takes
    the older one.
    """
    active = sorted(
        (r for r in reservations if holds(r, now)),
        key=lambda r: (r.creation_time if r.creation_time is not None else float("inf"), r.name),
    )
    taken: set[str] = set()
    return [_account(r, pods, taken) for r in active]


def reserved_against(pod: PodInfo, holdings: Iterable[Holding]) -> ResourceList:
    """Σ remaining of the holdings ``pod`` does not own: what it may not use on the node."""
    out: ResourceList = {}
    for holding in holdings:
        if is_owner(holding.reservation, pod):
            continue
        for name, amount in holding.remaining.items():
            out[name] = out.get(name, 0) + amount
    return out


def reserved_verdict(
    pod: PodInfo, allocatable: Mapping[str, int], requested: Mapping[str, int], holdings: Iterable[Holding]
) -> Status:
    """Unschedulable with :data:`REASON_RESERVED` when the pod's requests do not fit what the node's
    holdings leave free; success otherwise (and always for a pod without requests)."""
    wanted = {n: a for n, a in pod.requests.items() if a > 0}
    if not wanted:
        return Status(plugin=PLUGIN)
    reserved = reserved_against(pod, holdings)
    if not reserved:
        return Status(plugin=PLUGIN)
    short = []
    for name in sorted(wanted):
        if name not in reserved:
            continue
        free = allocatable.get(name, 0) - requested.get(name, 0) - reserved[name]
        if wanted[name] > free:
            short.append(
                f"{name}: requested {format_amount(name, wanted[name])}, "
                f"free {format_amount(name, max(free, 0))} after {format_amount(name, reserved[name])} reserved"
            )
    if not short:
        return Status(plugin=PLUGIN)
    return Status(Code.UNSCHEDULABLE, REASON_RESERVED, PLUGIN, "; ".join(short))


def to_allocate(pod: PodInfo, holdings: Iterable[Holding]) -> ReservationInfo | None:
    """The reservation ``pod`` allocates when it is bound to the node of ``holdings`` (oldest first, as
    :func:`holdings_on_node` returns them): the first one it owns that is not consumed and, without
    ``allocateOnce``, has something left of a resource the pod requests (or anything left, for a pod
    without requests). None: the pod binds outside every reservation."""
    for holding in holdings:
        if holding.consumed or not is_owner(holding.reservation, pod):
            continue
        if holding.reservation.allocate_once:
            return holding.reservation
        wanted = [n for n, a in pod.requests.items() if a > 0]
        left = holding.remaining
        if any(left.get(n, 0) > 0 for n in wanted) if wanted else bool(left):
            return holding.reservation
    return None
