"""Reservation test helpers: nodes, pods and Reservations as the API would hold them, and one decision."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from koordpy.config.reservation import ReservationSettings
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import NodeInfo, PodInfo, node_from_dict, pod_from_dict
from koordpy.scheduler.plugins.gang import PodGroupInfo
from koordpy.scheduler.plugins.reservation.controller import ReservationDecision, ReservationInputs, decide
from koordpy.scheduler.plugins.reservation.spec import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ReservationInfo,
    reservation_from_dict,
)
from koordpy_testkit.builders import NodeBuilder, PodBuilder

__all__ = [
    "T0",
    "allocated",
    "decide_on",
    "node",
    "owner_labels",
    "owner_pod",
    "pod",
    "reservation",
    "reservation_dict",
    "reservation_manifest",
    "settings",
]

T0 = 1_800_000_000.0
"""An arbitrary instant the tables count from."""


def allocated(name: str, uid: str | None = None) -> dict[str, str]:
    """The annotations of a pod bound through Reservation ``name`` (uid ``uid-<name>`` as
    :func:`reservation_dict` makes it, unless given), as the extender writes them at bind."""
    record = json.dumps({"name": name, "uid": uid if uid is not None else f"uid-{name}"}, separators=(",", ":"))
    return {ANNOTATION_RESERVATION_ALLOCATED: record}


def node(name: str, cpu: str = "3", memory: str = "3Gi", *, cordoned: bool = False) -> NodeInfo:
    raw = NodeBuilder(name).allocatable(cpu=cpu, memory=memory, pods="110").build()
    if cordoned:
        raw["spec"] = {"unschedulable": True}
    return node_from_dict(raw)


def pod(
    name: str,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    *,
    node: str | None = None,
    priority: int | None = 0,
    created: float = T0,
    phase: str | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    group: str | None = None,
) -> PodInfo:
    """A pod; ``cpu=None, memory=None`` is BestEffort. ``priority`` None: no PriorityClass. ``group``: the
    ``scheduling.k8s.io`` PodGroup it joins (``spec.schedulingGroup``)."""
    builder = PodBuilder(name, namespace)
    if group is not None:
        builder.scheduling_group(group)
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if requests:
        builder.requests(**requests)
    if node:
        builder.node(node)
    if phase:
        builder.phase(phase)
    if priority is not None:
        builder.priority(priority)
    for key, value in (labels or {}).items():
        builder.label(key, value)
    for key, value in (annotations or {}).items():
        builder.annotation(key, value)
    raw = builder.build()
    raw["metadata"]["creationTimestamp"] = format_rfc3339(created)
    return pod_from_dict(raw)


def reservation_dict(
    name: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    owners: Sequence[dict[str, Any]] = ({"object": {"namespace": "default", "name": "owner"}},),
    created: float = T0,
    phase: str | None = None,
    node: str | None = None,
    pre_allocation: bool | None = None,
    allocate_once: bool | None = None,
    ttl: str | None = None,
    expires: float | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    spec: dict[str, Any] = {"template": {"spec": pod_spec}, "owners": list(owners)}
    for key, value in (("preAllocation", pre_allocation), ("allocateOnce", allocate_once), ("ttl", ttl)):
        if value is not None:
            spec[key] = value
    if expires is not None:
        spec["expires"] = format_rfc3339(expires)
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if node:
        status["nodeName"] = node
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": format_rfc3339(created),
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": status,
    }


def reservation(name: str, **kw: Any) -> ReservationInfo:
    return reservation_from_dict(reservation_dict(name, **kw))


def settings(**kw: Any) -> ReservationSettings:
    """Starving-job reservations on, threshold 60 s, 100 % of nodes, unless overridden (YAML names)."""
    raw: dict[str, Any] = {"enabled": True, "starvingJobTimeThreshold": 60, "reservedNodePercent": 100}
    raw.update(kw)
    return ReservationSettings.model_validate(raw)


def decide_on(
    nodes: Sequence[NodeInfo],
    pods: Sequence[PodInfo],
    now: float,
    *,
    reservations: Sequence[ReservationInfo] = (),
    podgroups: Sequence[PodGroupInfo] = (),
    config: ReservationSettings | None = None,
) -> ReservationDecision:
    inputs = ReservationInputs(nodes=nodes, pods=pods, podgroups=podgroups, reservations=reservations)
    return decide(inputs, config if config is not None else settings(), now)


# ---- raw Reservations with exactly the requests given (the extender and explain tests) ----------


def owner_pod(namespace: str, name: str) -> dict[str, Any]:
    """An ``owners[]`` entry naming one pod."""
    return {"object": {"kind": "Pod", "namespace": namespace, "name": name}}


def owner_labels(**labels: str) -> dict[str, Any]:
    """An ``owners[]`` entry selecting pods by labels."""
    return {"labelSelector": {"matchLabels": dict(labels)}}


def reservation_manifest(
    name: str,
    *,
    node: str = "",
    owners: list[dict[str, Any]] | None = None,
    phase: str = "Available",
    created: float | None = None,
    ttl: str | None = None,
    expires: float | None = None,
    allocate_once: bool | None = None,
    **requests: str,
) -> dict[str, Any]:
    """Raw Reservation JSON whose template requests exactly ``requests`` (``cpu="4"``), placed on ``node``
    in ``phase`` (``status.nodeName`` set when ``node`` is), as the manager writes it (the extender's tests)."""
    metadata: dict[str, Any] = {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"reservation/{name}"))}
    if created is not None:
        metadata["creationTimestamp"] = format_rfc3339(created)
    spec: dict[str, Any] = {
        "template": {
            "spec": {"containers": [{"name": "main", "image": "app", "resources": {"requests": dict(requests)}}]}
        },
        "owners": owners if owners is not None else [],
    }
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = format_rfc3339(expires)
    if allocate_once is not None:
        spec["allocateOnce"] = allocate_once
    status: dict[str, Any] = {"phase": phase}
    if node:
        status["nodeName"] = node
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }
