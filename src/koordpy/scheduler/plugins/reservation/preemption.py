"""Preemption and Reservations: where a pod may not preempt because of a Reservation.

kube-scheduler's dry-run preemption runs only its in-tree filters: it does not know that the extender's
``/filter`` refused a node for its Reservations, so without the extender's preempt verb it evicts pods on a
node whose room stays reserved, and the pod is refused there again (a loop of its own). Two rules, on each
candidate node and its victims:

* **Reserved room** (:func:`preemption_verdict`): the pod is refused on a node when, with its victims gone,
  the ledger's ``reserved_verdict`` still blocks it (reason :data:`REASON_STILL_RESERVED`).
* **Owners preempt at home** (:func:`owned_nodes`): a pod that owns a Reservation holding somewhere (not
  consumed) preempts only on the nodes of those Reservations (reason :data:`REASON_NOT_RESERVED_NODE`):
  the Reservation is being drained for it; evicting pods elsewhere would lose that room to whoever comes
  first.

Worked example: node 8 cpu, pods x (2 cpu) and v (3 cpu, the victim), Reservation r holds 4 cpu for
someone else. A 3-cpu pod with v gone: free = 8 − 2 − 4 = 2 < 3 → still reserved; a 2-cpu pod: 2 ≥ 2 →
preemption may help.

Not guaranteed: victims the caller cannot resolve to pods it knows are not removed from the account
(the node is judged with them still there, which can only refuse more).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from koordpy.model.objects import PodInfo
from koordpy.scheduler.framework.status import Status
from koordpy.scheduler.plugins.reservation.enforcement import requested_by
from koordpy.scheduler.plugins.reservation.ledger import Holding, holdings_on_node, reserved_verdict
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, is_owner

__all__ = ["REASON_NOT_RESERVED_NODE", "REASON_STILL_RESERVED", "owned_nodes", "preemption_verdict"]

REASON_STILL_RESERVED = "reserved room stays reserved with the victims gone"
REASON_NOT_RESERVED_NODE = "the pod preempts only on the nodes of the Reservations it owns"


def preemption_verdict(
    pod: PodInfo,
    allocatable: Mapping[str, int],
    reservations: Iterable[ReservationInfo],
    pods: Sequence[PodInfo],
    *,
    victims: Iterable[str],
    now: float,
) -> Status:
    """The reserved verdict for ``pod`` on a node whose assigned ``pods`` lose ``victims`` (uids)."""
    gone = set(victims)
    rest = [p for p in pods if p.uid not in gone]
    holdings = holdings_on_node(reservations, rest, now)
    return reserved_verdict(pod, allocatable, requested_by(rest), holdings)


def owned_nodes(pod: PodInfo, holdings: Mapping[str, Sequence[Holding]]) -> set[str]:
    """Nodes (among ``holdings``, node -> its holdings) holding a Reservation ``pod`` owns, not consumed."""
    return {
        node for node, held in holdings.items() if any(not h.consumed and is_owner(h.reservation, pod) for h in held)
    }
