"""A Koordinator Reservation (``scheduling.koordinator.sh/v1alpha1``) as the read-only view koordpy decides on.

Field names and phases are Koordinator's (``apis/scheduling/v1alpha1/reservation_types.go``):
``spec.template`` (a PodTemplateSpec: its requests and placement constraints are what is held),
``spec.owners`` (ORed; the fields of one owner ANDed), ``spec.ttl`` (default 24h, ``0`` never
expires) / ``spec.expires`` (wins when both are set), ``spec.preAllocation``, ``spec.allocateOnce``
(default true), ``spec.unschedulable``; ``status.phase`` / ``nodeName`` / ``allocatable`` /
``allocated`` / ``currentOwners``.

Requests of the template follow the pod rule (max of each init container against the sum of the
containers, plus overhead), through the same :func:`koordpy.model.resources.pod_requests`.

Which reservation a pod allocated is recorded on the pod, as Koordinator's scheduler records it at
bind (``apis/extension/reservation.go``, v1.6): annotation
``scheduling.koordinator.sh/reservation-allocated`` with the JSON ``{"name":"<reservation>","uid":"<uid>"}``
(:data:`ANNOTATION_RESERVATION_ALLOCATED`, :func:`reservation_allocated`, :func:`allocated_annotations`).

Not guaranteed: ``allocatePolicy`` and ``taints`` are read but not enforced; an owner's
``controller`` matches the pod's own controller reference only (not the controller's controller).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from koordpy.model.durations import DurationError, parse_duration
from koordpy.model.objects import (
    ObjectError,
    PodInfo,
    field_mapping,
    field_resources,
    field_str_map,
    field_time,
)
from koordpy.model.placement import PodPlacement, placement_from_dict
from koordpy.model.quantity import QuantityError
from koordpy.model.resources import ResourceList, pod_requests
from koordpy.model.selectors import label_selector_matches

__all__ = [
    "ACTIVE_PHASES",
    "ANNOTATION_RESERVATION_ALLOCATED",
    "DEFAULT_TTL_SECONDS",
    "LABEL_SELECTOR_OPERATORS",
    "PHASES",
    "LabelRequirement",
    "OwnerMatcher",
    "OwnerReference",
    "Phase",
    "ReservationAllocated",
    "ReservationInfo",
    "allocated_annotations",
    "expiry",
    "is_expired",
    "is_owner",
    "reservation_allocated",
    "reservation_from_dict",
]

Phase = Literal["", "Pending", "Available", "Waiting", "Succeeded", "Failed"]
PHASES: tuple[Phase, ...] = ("", "Pending", "Available", "Waiting", "Succeeded", "Failed")
ACTIVE_PHASES = frozenset({"Available", "Waiting"})
"""Phases in which a placed reservation holds resources on its node."""
DEFAULT_TTL_SECONDS = 24 * 3600.0
LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
ANNOTATION_RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
"""On a pod: the Reservation it allocated when it was bound (Koordinator's key and JSON value)."""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """``status.currentOwners[]`` / an owner's ``object``: empty strings are unset fields."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OwnerMatcher:
    """One ``spec.owners[]`` entry; every field that is set must match (ANDed).

    ``controller`` is compared with the pod's controller owner reference (uid when the owner names
    one, else kind and name), in ``controller.namespace`` when set.
    """

    object: OwnerReference | None = None
    controller: OwnerReference | None = None
    match_labels: Mapping[str, str] | None = None
    match_expressions: tuple[LabelRequirement, ...] | None = None

    @property
    def has_selector(self) -> bool:
        return self.match_labels is not None or self.match_expressions is not None


@dataclass(frozen=True, slots=True)
class ReservationInfo:
    name: str
    uid: str
    creation_time: float | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    requests: ResourceList
    """What the template holds (pod rule: max(init) vs sum(containers) + overhead)."""
    placement: PodPlacement
    """The template's nodeName, nodeSelector, required node affinity and tolerations."""
    template_priority: int | None
    owners: tuple[OwnerMatcher, ...]
    ttl_seconds: float | None
    """``spec.ttl`` in seconds; None when unset (the 24h default applies), 0 disables expiry."""
    expires: float | None
    pre_allocation: bool
    allocate_once: bool
    unschedulable: bool
    deletion_time: float | None
    phase: Phase
    node_name: str
    allocatable: ResourceList
    allocated: ResourceList
    current_owners: tuple[OwnerReference, ...]
    resource_version: str = ""

    @property
    def is_active(self) -> bool:
        """Placed and holding resources on ``node_name`` (Available or Waiting)."""
        return self.phase in ACTIVE_PHASES and bool(self.node_name)

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class ReservationAllocated:
    """The value of :data:`ANNOTATION_RESERVATION_ALLOCATED`: empty strings are unset fields."""

    name: str
    uid: str

    def names(self, res: ReservationInfo) -> bool:
        """Does this record name ``res``? By uid when the record has one (a Reservation deleted and
        created again under the same name is another one), else by name."""
        return self.uid == res.uid if self.uid else bool(self.name) and self.name == res.name


def reservation_allocated(annotations: Mapping[str, str]) -> ReservationAllocated | None:
    """The record of the Reservation a pod allocated; None when there is none or it cannot be read
    (not a JSON object, or ``name``/``uid`` not strings: such a pod allocates nothing)."""
    raw = annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    name, uid = value.get("name", ""), value.get("uid", "")
    if not isinstance(name, str) or not isinstance(uid, str) or not (name or uid):
        return None
    return ReservationAllocated(name, uid)


def allocated_annotations(res: ReservationInfo) -> dict[str, str]:
    """The annotation a pod bound through ``res`` carries, byte for byte as Koordinator writes it
    (Go's ``json.Marshal`` of ``{Name, UID}`` with ``omitempty``: no spaces, ``name`` first)."""
    record = {"name": res.name}
    if res.uid:
        record["uid"] = res.uid
    return {ANNOTATION_RESERVATION_ALLOCATED: json.dumps(record, separators=(",", ":"), ensure_ascii=False)}


def expiry(res: ReservationInfo) -> float | None:
    """The instant the reservation expires: ``expires`` when set, else creation + ttl (24h when
    unset); None when ``ttl`` is 0 or the creation time is unknown."""
    if res.expires is not None:
        return res.expires
    ttl = DEFAULT_TTL_SECONDS if res.ttl_seconds is None else res.ttl_seconds
    if ttl <= 0 or res.creation_time is None:
        return None
    return res.creation_time + ttl


def is_expired(res: ReservationInfo, now: float) -> bool:
    deadline = expiry(res)
    return deadline is not None and now >= deadline


def _selector_matches(owner: OwnerMatcher, labels: Mapping[str, str]) -> bool:
    return label_selector_matches(owner.match_labels, owner.match_expressions, labels)


def _ref_matches(want: OwnerReference, kind: str, namespace: str, name: str, uid: str) -> bool:
    if want.uid:
        return want.uid == uid
    if want.kind and want.kind != kind:
        return False
    if want.namespace and want.namespace != namespace:
        return False
    return not want.name or want.name == name


def _owner_matches(owner: OwnerMatcher, pod: PodInfo) -> bool:
    if owner.object is not None and not _ref_matches(owner.object, "Pod", pod.namespace, pod.name, pod.uid):
        return False
    if owner.controller is not None:
        ctrl = pod.controller
        if ctrl is None:
            return False
        want = owner.controller
        if want.namespace and want.namespace != pod.namespace:
            return False
        if not _ref_matches(OwnerReference(want.kind, "", want.name, want.uid), ctrl.kind, "", ctrl.name, ctrl.uid):
            return False
    if owner.has_selector and not _selector_matches(owner, pod.labels):
        return False
    return owner.object is not None or owner.controller is not None or owner.has_selector


def is_owner(res: ReservationInfo, pod: PodInfo) -> bool:
    """Does any ``spec.owners[]`` entry match the pod? An entry with no field set matches nothing."""
    return any(_owner_matches(owner, pod) for owner in res.owners)


# ---- conversion --------------------------------------------------------------------------------


def _list(obj: Any, path: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ObjectError(f"{path}: expected a list")
    return obj


def _str(obj: Any, path: str) -> str:
    if obj is None:
        return ""
    if not isinstance(obj, str):
        raise ObjectError(f"{path}: expected a string")
    return obj


def _bool(obj: Any, path: str, default: bool) -> bool:
    if obj is None:
        return default
    if not isinstance(obj, bool):
        raise ObjectError(f"{path}: expected true or false")
    return obj


def _ref(obj: Any, path: str) -> OwnerReference:
    raw = field_mapping(obj, path)
    return OwnerReference(
        kind=_str(raw.get("kind"), f"{path}.kind"),
        namespace=_str(raw.get("namespace"), f"{path}.namespace"),
        name=_str(raw.get("name"), f"{path}.name"),
        uid=_str(raw.get("uid"), f"{path}.uid"),
    )


def _owner(obj: Any, path: str) -> OwnerMatcher:
    raw = field_mapping(obj, path)
    selector = raw.get("labelSelector")
    labels: Mapping[str, str] | None = None
    expressions: tuple[LabelRequirement, ...] | None = None
    if selector is not None:
        where = f"{path}.labelSelector"
        sel = field_mapping(selector, where)
        labels = field_str_map(sel.get("matchLabels"), f"{where}.matchLabels")
        reqs = []
        for i, req in enumerate(_list(sel.get("matchExpressions"), f"{where}.matchExpressions")):
            at = f"{where}.matchExpressions[{i}]"
            req = field_mapping(req, at)
            operator = _str(req.get("operator"), f"{at}.operator")
            if operator not in LABEL_SELECTOR_OPERATORS:
                raise ObjectError(f"{at}.operator: {operator!r} is not one of In, NotIn, Exists, DoesNotExist")
            values = tuple(_str(v, f"{at}.values[]") for v in _list(req.get("values"), f"{at}.values"))
            reqs.append(LabelRequirement(_str(req.get("key"), f"{at}.key"), operator, values))
        expressions = tuple(reqs)
    return OwnerMatcher(
        object=_ref(raw["object"], f"{path}.object") if raw.get("object") is not None else None,
        controller=_ref(raw["controller"], f"{path}.controller") if raw.get("controller") is not None else None,
        match_labels=labels,
        match_expressions=expressions,
    )


def reservation_from_dict(raw: Mapping[str, Any]) -> ReservationInfo:
    """Convert an API object; a malformed field raises :class:`ObjectError` naming its path."""
    raw = field_mapping(raw, "reservation")
    meta = field_mapping(raw.get("metadata"), "metadata")
    spec = field_mapping(raw.get("spec"), "spec")
    status = field_mapping(raw.get("status"), "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name: required")
    template = field_mapping(spec.get("template"), "spec.template")
    pod_spec = field_mapping(template.get("spec"), "spec.template.spec")
    try:
        requests = pod_requests(pod_spec)
    except (QuantityError, AttributeError, TypeError, ValueError) as exc:
        raise ObjectError(f"spec.template.spec.containers[].resources: {exc}") from None
    try:
        placement = placement_from_dict({"spec": pod_spec})
    except ObjectError as exc:
        raise ObjectError(f"spec.template.{exc}") from None
    priority = pod_spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ObjectError("spec.template.spec.priority: expected an integer")
    owners = tuple(_owner(o, f"spec.owners[{i}]") for i, o in enumerate(_list(spec.get("owners"), "spec.owners")))
    ttl: float | None = None
    if spec.get("ttl") is not None:
        try:
            ttl = parse_duration(spec["ttl"])
        except DurationError as exc:
            raise ObjectError(f"spec.ttl: {exc}") from None
    phase = _str(status.get("phase"), "status.phase")
    if phase not in PHASES:
        raise ObjectError(f"status.phase: {phase!r} is not a Reservation phase")
    current = tuple(
        _ref(o, f"status.currentOwners[{i}]")
        for i, o in enumerate(_list(status.get("currentOwners"), "status.currentOwners"))
    )
    return ReservationInfo(
        name=name,
        uid=_str(meta.get("uid"), "metadata.uid") or name,
        creation_time=field_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        labels=field_str_map(meta.get("labels"), "metadata.labels"),
        annotations=field_str_map(meta.get("annotations"), "metadata.annotations"),
        requests=requests,
        placement=placement,
        template_priority=priority,
        owners=owners,
        ttl_seconds=ttl,
        expires=field_time(spec.get("expires"), "spec.expires"),
        pre_allocation=_bool(spec.get("preAllocation"), "spec.preAllocation", False),
        allocate_once=_bool(spec.get("allocateOnce"), "spec.allocateOnce", True),
        unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable", False),
        deletion_time=field_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        phase=phase,  # checked against PHASES above
        node_name=_str(status.get("nodeName"), "status.nodeName"),
        allocatable=field_resources(status.get("allocatable"), "status.allocatable"),
        allocated=field_resources(status.get("allocated"), "status.allocated"),
        current_owners=current,
        resource_version=_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
    )
