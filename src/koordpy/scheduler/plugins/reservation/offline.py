"""``koordpy scheduler reservations``: the decision the manager would take on a dump.

Reads Nodes, Pods, PodGroups (both API groups), Reservations and NodeMetrics, converts them with the
same readers as the services, and runs :func:`.controller.decide` once at ``now``. The report is
:meth:`.controller.ReservationDecision.report`::

    {"starving": [{"job", "priority", "waitingSeconds", "minMember", "ready", "reserved"}],
     "reservations": [{"name", "job", "node", "phase", "requests": {resource: quantity}}],
     "actions": [{"action": "create"|"place"|"delete", "reservation", "node", "reason"}]}

``reservations`` is the state after the decision (deleted ones left out, created ones in), sorted by
name; ``actions`` are in decision order; ``place`` is every status write (its reason starts with the
phase written).

Not guaranteed: a dump has no watch history, so a pod's pod-slot and the manager's previous Events
are not known; placement runs the load-aware filter with the ``LoadAwareSchedulingArgs`` given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.config.reservation import ReservationSettings
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.model.placement import PodPlacement, placement_from_dict
from koordpy.scheduler.plugins.gang.spec import PodGroupError, podgroup_from_dict
from koordpy.scheduler.plugins.reservation.controller import ReservationDecision, ReservationInputs, decide
from koordpy.scheduler.plugins.reservation.spec import reservation_from_dict

__all__ = ["KINDS", "ReservationReportError", "reservation_report"]

KINDS = ("Node", "Pod", "PodGroup", "Reservation", "NodeMetric")
T = TypeVar("T")


class ReservationReportError(ValueError):
    """Bad input: the message names the file and the field."""


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "<unnamed>") if isinstance(meta, Mapping) else "<unnamed>"


def reservation_report(
    documents: Iterable[tuple[str, Any]],
    settings: ReservationSettings,
    now: float,
    loadaware: LoadAwareSchedulingArgs | None = None,
) -> tuple[ReservationDecision, dict[str, int]]:
    """The decision and the count of ignored objects by kind."""
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise ReservationReportError(str(exc)) from None

    def convert(kind: str, conv: Callable[[Mapping[str, Any]], T]) -> list[T]:
        out = []
        for where, obj in dump.of(kind):
            try:
                out.append(conv(obj))
            except (ObjectError, PodGroupError) as exc:
                raise ReservationReportError(f"{where}: {kind} {_name(obj)}: {exc}") from None
        return out

    pods = convert("Pod", pod_from_dict)
    placements: dict[str, PodPlacement] = {}
    for pod, (where, obj) in zip(pods, dump.of("Pod"), strict=True):
        try:
            placements[pod.uid] = placement_from_dict(obj)
        except ObjectError as exc:
            raise ReservationReportError(f"{where}: Pod {_name(obj)}: {exc}") from None
    inputs = ReservationInputs(
        nodes=convert("Node", node_from_dict),
        pods=pods,
        podgroups=convert("PodGroup", podgroup_from_dict),
        reservations=convert("Reservation", reservation_from_dict),
        metrics={m.name: m for m in convert("NodeMetric", nodemetric_from_dict)},
        placements=placements,
    )
    return decide(inputs, settings, now, loadaware=loadaware), dump.ignored
