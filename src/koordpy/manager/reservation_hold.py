"""Carries out :func:`koordpy.scheduler.plugins.reservation.hold.hold_plan` at the end of a reservation round:
tolerations on pending owner pods first, then the taint on held nodes, then the taint removed from nodes
that hold nothing any more (``reservation.taintNodes``).

Every write is a merge patch carrying the ``resourceVersion`` the round listed, so a node or pod changed
since (kwok's heartbeats, the node lifecycle controller's own taints, a kubelet's status) is never
overwritten: the API server answers 409 and the next round plans again from a fresh list. 404 (gone since
the list) is counted the same way. Nothing lives in memory: the plan is recomputed from the cluster each
round, so a restart, a lost write or a switched-off setting converge.

Not guaranteed: a node that keeps changing between a round's list and its write (every few seconds) is
tainted a round later than the others.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from koordpy.model.objects import ObjectError
from koordpy.scheduler.plugins.reservation.controller import ReservationDecision, ReservationInputs
from koordpy.scheduler.plugins.reservation.hold import (
    HoldPlan,
    hold_plan,
    taints_with,
    taints_without,
    tolerations_with,
)
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, reservation_from_dict

__all__ = ["NodeHoldApi", "Write", "apply_hold", "reservations_after"]

Raw = dict[str, Any]
Write = Callable[[str, str, Awaitable[Raw]], Awaitable[tuple[str, Raw]]]
"""The round's counted write: ``(action, name, call)`` -> ``(outcome, answer)``."""


@runtime_checkable
class NodeHoldApi(Protocol):
    """The writes of the hold. Both raise :class:`koordpy.manager.reservations.WriteRefusedError` for
    409 and 404; other errors propagate."""

    async def patch_node_taints(self, name: str, resource_version: str, taints: Sequence[Mapping[str, Any]]) -> Raw: ...

    async def patch_pod_tolerations(
        self, namespace: str, name: str, resource_version: str, tolerations: Sequence[Mapping[str, Any]]
    ) -> Raw: ...


def reservations_after(
    listed: Mapping[str, Raw], decision: ReservationDecision, created: Mapping[str, Raw]
) -> list[ReservationInfo]:
    """The Reservations as the round leaves them: the listed ones with their new status, the ones created
    (``created``: name -> the server's answer) with theirs, the deleted ones gone. An object that cannot
    be read is left out (it holds nothing)."""
    raws: dict[str, Raw] = {name: dict(raw) for name, raw in listed.items()}
    for new in decision.creates:
        if new.name in created:
            raws[new.name] = {**created[new.name], "status": dict(new.status or {})}
    for update in decision.statuses:
        if update.name in raws:
            raws[update.name] = {**raws[update.name], "status": dict(update.status)}
    for deletion in decision.deletes:
        raws.pop(deletion.name, None)
    out = []
    for raw in raws.values():
        try:
            out.append(reservation_from_dict(raw))
        except ObjectError:
            continue
    return out


def _taints(raw: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list(((raw or {}).get("spec") or {}).get("taints") or ())


def _rv(raw: Mapping[str, Any] | None) -> str:
    return str(((raw or {}).get("metadata") or {}).get("resourceVersion") or "")


async def apply_hold(
    api: NodeHoldApi,
    inputs: ReservationInputs,
    reservations: Sequence[ReservationInfo],
    *,
    nodes_raw: Mapping[str, Raw],
    pods_raw: Mapping[str, Raw],
    now: float,
    enabled: bool,
    write: Write,
    logger: logging.Logger,
) -> HoldPlan:
    """Plan and write. ``nodes_raw`` by node name and ``pods_raw`` by pod uid are the round's list;
    ``write(action, name, awaitable)`` is the round's counted write (returns ``(outcome, answer)``)."""
    tolerations = {uid: list((raw.get("spec") or {}).get("tolerations") or ()) for uid, raw in pods_raw.items()}
    plan = hold_plan(inputs.nodes, inputs.pods, reservations, tolerations, now, enabled=enabled)
    for pod in plan.tolerate:
        raw = pods_raw.get(pod.uid)
        new = tolerations_with(tolerations.get(pod.uid, ()))
        call = api.patch_pod_tolerations(pod.namespace, pod.name, _rv(raw), new)
        outcome, _ = await write("tolerate", pod.key, call)
        if outcome == "done":
            logger.info("pod %s tolerates koordpy.io/reserved: it owns a Reservation held by a taint", pod.key)
    for node in plan.taint:
        raw = nodes_raw.get(node)
        call = api.patch_node_taints(node, _rv(raw), taints_with(_taints(raw)))
        outcome, _ = await write("taint", node, call)
        if outcome == "done":
            held = ", ".join((plan.held or {}).get(node, ()))
            logger.info("node %s tainted koordpy.io/reserved:NoSchedule: held for %s", node, held)
    for node in plan.untaint:
        raw = nodes_raw.get(node)
        call = api.patch_node_taints(
            node, _rv(raw), taints_without(((raw or {}).get("spec") or {}).get("taints") or ())
        )
        outcome, _ = await write("untaint", node, call)
        if outcome == "done":
            logger.info("node %s untainted: it holds no Reservation that taints", node)
    return plan
