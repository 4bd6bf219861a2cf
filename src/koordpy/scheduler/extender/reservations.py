"""The extender's Reservations: per-node accounts kept incrementally, applied after the plugins.

:class:`ReservationTracker` is a cluster listener (register it in the ``ClusterState`` plugin list,
like ``HostFragments``; it neither filters nor scores there). It keeps:

* the readable Reservations (from the watch, through ``ClusterCache.on_reservation``), and per node
  the names of those *placed* there (phase Available or Waiting, ``status.nodeName`` set, not being
  deleted);
* the assigned pods per node (every node: a reservation may arrive later), from the state's
  assign/unassign calls, which include the extender's own binds (``ClusterState.assume``): a bind of
  an owner allocates from its reservation before the next ``/filter``;
* one cached account per node holding placed reservations
  (:func:`koordpy.scheduler.plugins.reservation.enforcement.node_reservations`). A reservation event
  drops the accounts of the node(s) it was and is placed on, a pod event the account of its node, and
  nothing else; an account is recomputed on first use, and again once ``now`` reaches the earliest
  expiry among its holdings. The verdicts on an account are cached by (pod requests, ownership of each
  holding) until the account or the node's allocatable changes.

``annotations_for_bind`` (at ``/bind``) names the Reservation an owner pod allocates on the chosen node
(the ledger's ``to_allocate``), as the annotation the binding writes on the pod; only pods bound that
way allocate a Reservation.

``refine`` (after the plugins' ``/filter``) fails, among the nodes that passed, those with holdings
where the ledger's ``reserved_verdict`` blocks the pod: reason ``node(s) resource was(were) reserved``
(the detail with the numbers is in the status, as for load-aware failures; ``failedNodes`` carries the
reason). ``prefer`` (after ``/prioritize``) gives an owner pod the maximum extender priority on the
nodes holding an Available, not consumed reservation it owns; other nodes keep their scores.

With no placed reservation both return their input after one dict truthiness check.

Not guaranteed: thread safety (event loop only); a pod bound by another scheduler counts only once
the watch reports it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo
from koordpy.scheduler.framework.cluster import ClusterState, FilterOutcome
from koordpy.scheduler.framework.status import Status
from koordpy.scheduler.plugins.reservation.enforcement import (
    OWNER_SCORE,
    NodeReservations,
    node_reservations,
    node_verdict,
    owner_prefers,
)
from koordpy.scheduler.plugins.reservation.ledger import to_allocate
from koordpy.scheduler.plugins.reservation.preemption import owned_nodes, preemption_verdict
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, allocated_annotations, is_owner

__all__ = ["VERDICTS_PER_NODE", "ReservationTracker"]

VERDICTS_PER_NODE = 256
"""Distinct (requests, ownership) verdicts kept per node before that node's verdict cache is cleared."""


def _placed(res: ReservationInfo | None) -> str | None:
    """The node a reservation is placed on (and may hold on, expiry aside), else None."""
    if res is None or not res.is_active or res.deletion_time is not None:
        return None
    return res.node_name


class ReservationTracker:
    """Reservations and per-node accounts; see the module docstring."""

    name = "koordpy.extender.Reservations"

    def __init__(self) -> None:
        self.state: ClusterState | None = None
        """Set by :meth:`attach` (node index and allocatable)."""
        self.reservations: dict[str, ReservationInfo] = {}
        """name -> the last readable version."""
        self.unreadable: dict[str, str] = {}
        """name -> why its current object could not be read (it holds nothing here)."""
        self.by_node: dict[str, set[str]] = {}
        """node -> names of the reservations placed on it."""
        self.pods: dict[str, dict[str, PodInfo]] = {}
        """node -> uid -> assigned pod."""
        self._accounts: dict[str, NodeReservations] = {}
        self._verdicts: dict[str, dict[tuple[object, ...], Status]] = {}
        """node -> (pod requests, ownership per holding) -> verdict, for the cached account and allocatable:
        a stream of pods with the same requests pays the ledger's verdict once per node."""
        self.recomputed: Counter[str] = Counter()
        """node -> accounts computed (tests and debugging: which events invalidated what)."""

    def attach(self, state: ClusterState) -> None:
        self.state = state

    # ---- reservation events ------------------------------------------------------------

    def upsert(self, res: ReservationInfo) -> None:
        self.unreadable.pop(res.name, None)
        old = self.reservations.get(res.name)
        self.reservations[res.name] = res
        self._move(res.name, _placed(old), _placed(res))

    def remove(self, name: str, unreadable: str | None = None) -> None:
        """Forget ``name``; with ``unreadable``, remember why its current object was refused."""
        old = self.reservations.pop(name, None)
        if unreadable is not None:
            self.unreadable[name] = unreadable
        else:
            self.unreadable.pop(name, None)
        self._move(name, _placed(old), None)

    def _move(self, name: str, before: str | None, after: str | None) -> None:
        if before is not None:
            names = self.by_node.get(before)
            if names is not None:
                names.discard(name)
                if not names:
                    del self.by_node[before]
            self._drop(before)
        if after is not None:
            self.by_node.setdefault(after, set()).add(name)
            self._drop(after)

    def _drop(self, node: str) -> None:
        self._accounts.pop(node, None)
        self._verdicts.pop(node, None)

    # ---- cluster listener (ClusterState plugin list) ------------------------------------

    def on_capacity(self, capacity: int) -> None:
        pass

    def on_node(self, index: int, node: NodeInfo) -> None:
        self._verdicts.pop(node.name, None)  # allocatable may have changed

    def on_node_removed(self, index: int, name: str) -> None:
        self._drop(name)  # its Reservations (if any still name it) are recomputed on use
        self.recomputed.pop(name, None)

    def on_metric(self, name: str, metric: NodeMetricInfo | None) -> None:
        pass

    def on_pod_assigned(self, index: int | None, node_name: str, pod: PodInfo, now: float) -> None:
        on_node = self.pods.get(node_name)
        if on_node is None:
            on_node = self.pods[node_name] = {}
        on_node[pod.uid] = pod
        if node_name in self.by_node:
            self._drop(node_name)

    def on_pod_unassigned(self, index: int | None, node_name: str, pod: PodInfo) -> None:
        on_node = self.pods.get(node_name)
        if on_node is not None:
            on_node.pop(pod.uid, None)
            if not on_node:
                del self.pods[node_name]
        if node_name in self.by_node:
            self._drop(node_name)

    # ---- accounts ----------------------------------------------------------------------

    def cached(self, node: str) -> NodeReservations | None:
        """The account of ``node`` as cached now (None: none, or dropped by an event)."""
        return self._accounts.get(node)

    def account(self, node: str, now: float) -> NodeReservations:
        """The account of ``node`` at ``now`` (cached until an event or an expiry changes it)."""
        account = self._accounts.get(node)
        if account is None or now >= account.valid_until:
            names = self.by_node.get(node, ())
            placed = [self.reservations[name] for name in names]
            account = node_reservations(node, placed, list(self.pods.get(node, {}).values()), now)
            self._accounts[node] = account
            self._verdicts.pop(node, None)
            self.recomputed[node] += 1
        return account

    def verdict(self, pod: PodInfo, node: str, now: float) -> Status:
        """The reserved verdict for ``pod`` on ``node`` (success for a node without reservations)."""
        assert self.state is not None, "ReservationTracker.attach(state) first"
        account = self.account(node, now)
        key = (tuple(sorted(pod.requests.items())), *(is_owner(h.reservation, pod) for h in account.holdings))
        cached = self._verdicts.setdefault(node, {})
        status = cached.get(key)
        if status is None:
            if len(cached) >= VERDICTS_PER_NODE:
                cached.clear()
            info = self.state.nodes.get(node)
            allocatable: Mapping[str, int] = info.allocatable if info is not None else {}
            status = cached[key] = node_verdict(pod, allocatable, account)
        return status

    # ---- verbs -------------------------------------------------------------------------

    def owned_nodes(self, pod: PodInfo, now: float) -> set[str]:
        """Nodes holding a Reservation ``pod`` owns that is not consumed (where it preempts, if anywhere)."""
        return owned_nodes(pod, {node: self.account(node, now).holdings for node in self.by_node})

    def preemption_verdict(self, pod: PodInfo, node: str, victims: tuple[str, ...], now: float) -> Status:
        """The reserved verdict for ``pod`` on ``node`` once ``victims`` (uids) are gone."""
        assert self.state is not None, "ReservationTracker.attach(state) first"
        placed = [self.reservations[name] for name in self.by_node.get(node, ())]
        info = self.state.nodes.get(node)
        allocatable: Mapping[str, int] = info.allocatable if info is not None else {}
        pods = list(self.pods.get(node, {}).values())
        return preemption_verdict(pod, allocatable, placed, pods, victims=victims, now=now)

    def annotations_for_bind(self, pod: PodInfo, node: str, now: float) -> dict[str, str]:
        """The reservation-allocated annotation ``pod`` gets when bound to ``node``: {} when it binds
        outside every Reservation there."""
        if node not in self.by_node:
            return {}
        chosen = to_allocate(pod, self.account(node, now).holdings)
        return allocated_annotations(chosen) if chosen is not None else {}

    def _held_positions(self, indices: npt.NDArray[np.int64]) -> list[tuple[int, str]]:
        """(position in ``indices``, node name) of the nodes with placed reservations: one gather."""
        assert self.state is not None, "ReservationTracker.attach(state) first"
        index = self.state.index
        held = [i for node in self.by_node if (i := index.get(node)) is not None]
        if not held or indices.size == 0:
            return []
        top = max(held)
        mask = np.zeros(top + 1, bool)
        mask[held] = True
        hits = np.flatnonzero((indices >= 0) & (indices <= top) & mask[np.clip(indices, 0, top)])
        return [(pos, index.name(int(indices[pos]))) for pos in hits.tolist()]

    def refine(self, pod: PodInfo, outcome: FilterOutcome, now: float) -> FilterOutcome:
        """``outcome`` with the passing nodes the reservations block moved to ``failed``."""
        if not self.by_node or not any(amount > 0 for amount in pod.requests.values()):
            return outcome  # no reservation anywhere, or BestEffort (never blocked)
        blocked: list[tuple[int, str, Status]] = []
        for pos, node in self._held_positions(outcome.passed_indices):
            status = self.verdict(pod, node, now)
            if not status.is_success:
                blocked.append((pos, node, status))
        if not blocked:
            return outcome
        drop = sorted(pos for pos, _, _ in blocked)
        keep = np.ones(len(outcome.passed), bool)
        keep[drop] = False
        passed = list(outcome.passed)
        for pos in reversed(drop):
            del passed[pos]
        failed = dict(outcome.failed)
        groups: list[tuple[list[str], Status]] = [([name], status) for name, status in outcome.statuses.items()]
        for _, node, status in sorted(blocked):
            failed[node] = status.reason
            groups.append(([node], status))
        return FilterOutcome(passed, failed, dict(outcome.unresolvable), groups, outcome.passed_indices[keep])

    def prefer(
        self, pod: PodInfo, indices: npt.NDArray[np.int64], scores: npt.NDArray[np.int64], now: float
    ) -> npt.NDArray[np.int64]:
        """``scores`` (0..10 per index) with :data:`OWNER_SCORE` where ``pod`` owns an Available,
        not consumed reservation; a copy when anything changes."""
        if not self.by_node:
            return scores
        out = scores
        for pos, node in self._held_positions(indices):
            if owner_prefers(pod, self.account(node, now).holdings):
                if out is scores:
                    out = scores.copy()
                out[pos] = OWNER_SCORE
        return out
