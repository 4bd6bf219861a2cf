"""Read-only views of the Kubernetes objects koordpy decides on, built from raw JSON dicts.

Conversion is the only place raw API JSON is interpreted; everything downstream uses these
views. A malformed object raises :class:`ObjectError` naming the field path, never a bare
``KeyError``.

Not guaranteed: the views keep only the fields koordpy reads; they cannot be turned back into
the full object.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, NamedTuple, TypeVar, dataclass_transform

from koordpy.model.durations import MAX_DURATION_SECONDS, DurationError, parse_duration, parse_rfc3339
from koordpy.model.priority import KubeQoS, PriorityClass, kube_qos_of, priority_class
from koordpy.model.quantity import QuantityError
from koordpy.model.resources import QUANTITY_MEMO, ResourceList, aggregate, parse_containers, parse_resource_list

__all__ = [
    "ANNOTATION_RAW_ALLOCATABLE",
    "AggregatedUsage",
    "ControllerRef",
    "NodeInfo",
    "NodeMetricInfo",
    "ObjectError",
    "PodInfo",
    "PodMetricInfo",
    "field_mapping",
    "field_resources",
    "field_str_map",
    "field_time",
    "node_from_dict",
    "nodemetric_from_dict",
    "pod_from_dict",
]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
"""Koordinator's node annotation: the allocatable before amplification, a JSON resource list."""


class ObjectError(ValueError):
    """An API object that cannot be read; the message names the field path."""


def field_mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if type(obj) is dict:  # the common case, without the ABC instance check
        return obj
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{path}: expected an object, got {type(obj).__name__}")
    return obj


def field_str_map(obj: Any, path: str) -> dict[str, str]:
    raw = field_mapping(obj, path)
    copied = dict(raw)
    for key, value in copied.items():  # the usual case (all strings) needs no str() of each
        if type(key) is not str or type(value) is not str:
            break
    else:
        return copied
    try:
        return {str(k): str(v) for k, v in raw.items()}
    except ValueError:  # str() of an integer beyond Python's 4,300-digit conversion limit
        raise ObjectError(f"{path}: a value too long to read") from None


def field_resources(obj: Any, path: str) -> ResourceList:
    """A resource list whose values are non-negative quantities (as the API server validates them)."""
    try:
        parsed = parse_resource_list(field_mapping(obj, path))
    except QuantityError as exc:
        raise ObjectError(f"{path}.{exc}") from None
    for name, amount in parsed.items():
        if amount < 0:
            raise ObjectError(f"{path}.{name}: negative quantity")
    return parsed


def _pod_resources_error(spec: Mapping[str, Any], exc: Exception) -> ObjectError:
    """The field path of a malformed container resource list (only called once conversion failed)."""
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        if containers is None:
            continue
        if not isinstance(containers, list):
            return ObjectError(f"spec.{field}: expected a list")
        for i, container in enumerate(containers):
            path = f"spec.{field}[{i}]"
            if not isinstance(container, Mapping):
                return ObjectError(f"{path}: expected an object, got {type(container).__name__}")
            resources = container.get("resources")
            if resources is None:
                continue
            if not isinstance(resources, Mapping):
                return ObjectError(f"{path}.resources: expected an object")
            for kind in ("requests", "limits"):
                try:
                    field_resources(resources.get(kind), f"{path}.resources.{kind}")
                except ObjectError as found:
                    return found
    try:
        field_resources(spec.get("overhead"), "spec.overhead")
    except ObjectError as found:
        return found
    return ObjectError(f"spec.containers[].resources: {exc}")


def field_time(obj: Any, path: str) -> float | None:
    if obj in (None, ""):
        return None
    if not isinstance(obj, str):
        raise ObjectError(f"{path}: expected an RFC 3339 string")
    try:
        return parse_rfc3339(obj)
    except DurationError as exc:
        raise ObjectError(f"{path}: {exc}") from None


class ControllerRef(NamedTuple):
    """A pod's controlling owner reference (``metadata.ownerReferences[]`` with ``controller: true``)."""

    kind: str
    name: str
    uid: str
    api_version: str


def _owners(owners: list[Any]) -> tuple[tuple[str, ...], ControllerRef | None]:
    """The kinds of ``metadata.ownerReferences`` in order and the first one with ``controller: true``
    (None when there is none), in one pass."""
    kinds: list[str] = []
    controller = None
    for i, owner in enumerate(owners):
        ref = owner if type(owner) is dict else field_mapping(owner, f"metadata.ownerReferences[{i}]")
        kind = ref.get("kind", "")
        kinds.append(kind if type(kind) is str else str(kind))
        if controller is None and ref.get("controller") is True:
            fields = (
                str(kind or ""),
                str(ref.get("name") or ""),
                str(ref.get("uid") or ""),
                str(ref.get("apiVersion") or ""),
            )
            controller = _new_tuple(ControllerRef, fields)
    return tuple(kinds), controller


_View = TypeVar("_View")


@dataclass_transform(frozen_default=True)
def _read_only_view(cls: type[_View]) -> type[_View]:
    """A slotted dataclass that type checkers treat as frozen (mypy reports any assignment to a field) but
    that is not frozen at run time: a frozen dataclass sets each field through ``object.__setattr__`` and
    costs ~2.5 µs more to build at twenty fields (2-core development machine), once per pod event. Not
    guaranteed: that untyped code cannot assign a field; everything else (equality, ``dataclasses.replace``,
    ``fields``) is as frozen."""
    return dataclass(slots=True)(cls)


@_read_only_view
class PodInfo:
    """A pod as koordpy reads it. Read-only by type (see :func:`_read_only_view`): never assign a field,
    build a changed copy with ``dataclasses.replace``."""

    uid: str
    namespace: str
    name: str
    node_name: str
    scheduler_name: str
    phase: str
    priority: int | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    requests: ResourceList
    limits: ResourceList
    qos: KubeQoS
    priority_class: PriorityClass
    owner_kinds: tuple[str, ...]
    creation_time: float | None
    deletion_time: float | None
    scheduled_time: float | None  # PodScheduled=True lastTransitionTime
    initialized_time: float | None  # Initialized=True lastTransitionTime
    termination_grace_seconds: int | None = None
    """``spec.terminationGracePeriodSeconds``; None when unset (Kubernetes then uses 30)."""
    controller: ControllerRef | None = None
    """The owner reference with ``controller: true``; None when there is none."""
    scheduling_group: str = ""
    """``spec.schedulingGroup.podGroupName``: the ``scheduling.k8s.io`` PodGroup the pod joins ("" for none;
    the API server drops the field while its ``GenericWorkload`` feature gate is off)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminated(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def is_daemonset_pod(self) -> bool:
        return "DaemonSet" in self.owner_kinds


_POD_RESOURCES: dict[tuple[Any, ...], tuple[ResourceList, ResourceList, KubeQoS]] = {}
"""A pod's resources shape (:func:`_resources_shape`) -> its requests, limits and QoS class: the pods of one
workload share it, so most pod events find theirs here. Filled up to ``_POD_RESOURCES_MAX`` entries, then
only read (no eviction)."""
_POD_RESOURCES_MAX = 4096


def _resources_shape(spec: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """Everything requests, limits and the QoS class are computed from (per app and init container:
    ``resources.requests``, ``resources.limits`` and whether ``restartPolicy`` is ``Always``; then
    ``spec.overhead``) as a hashable key, for the usual shape only: plain dicts and lists, string names and
    string quantities. None for anything else (a number, where ``1`` and ``True`` would be one key), which
    then takes the full, checked conversion. This is what ``_POD_RESOURCES`` stores."""
    key = _resources_key(spec)
    if key is None:
        return None
    *lists, overhead = key  # per list: None (absent), or its containers then the list's name; overhead last
    for entry in lists:
        if type(entry) is tuple and not (_strings_only(entry[0]) and _strings_only(entry[1])):
            return None  # a container's (requests, limits, restartPolicy is Always)
    return key if _strings_only(overhead) else None


def _strings_only(pairs: tuple[tuple[Any, Any], ...] | None) -> bool:
    return pairs is None or all(type(name) is str and type(quantity) is str for name, quantity in pairs)


def _resources_key(spec: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The resources shape without checking that names and quantities are strings, to look a pod up in
    ``_POD_RESOURCES``: every key there passed :func:`_resources_shape`'s check, so holds only strings, and
    a key with anything else in it equals none of them (``1 != "1"``; an unhashable value raises
    ``TypeError`` on lookup). None where the containers, resources or lists are not plain lists and dicts."""
    shape: list[Any] = []
    append = shape.append
    for field in ("containers", "initContainers"):
        listed = spec.get(field)
        if listed is None:
            append(None)
            continue
        if type(listed) is not list:
            return None
        for container in listed:
            if type(container) is not dict:
                return None
            resources = container.get("resources")
            if resources is None:
                append((None, None, container.get("restartPolicy") == "Always"))
                continue
            if type(resources) is not dict:
                return None
            requests = resources.get("requests")
            if requests is not None:
                if type(requests) is not dict:
                    return None
                requests = tuple(requests.items())
            limits = resources.get("limits")
            if limits is not None:
                if type(limits) is not dict:
                    return None
                limits = tuple(limits.items())
            append((requests, limits, container.get("restartPolicy") == "Always"))
        append(field)
    overhead = spec.get("overhead")
    if overhead is not None:
        if type(overhead) is not dict:
            return None
        overhead = tuple(overhead.items())
    append(overhead)
    return tuple(shape)


def _object_parts(raw: Any, kind: str) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], str]:
    """``metadata``, ``spec`` and ``status`` of an API object (absent: empty) and its required name.

    ``x if type(x) is dict else field_mapping(x, ...)``: the usual case without a call (and without building a
    field path that is only read in an error)."""
    raw = raw if type(raw) is dict else field_mapping(raw, kind)
    meta = raw.get("metadata")
    meta = meta if type(meta) is dict else field_mapping(meta, "metadata")
    spec = raw.get("spec")
    spec = spec if type(spec) is dict else field_mapping(spec, "spec")
    status = raw.get("status")
    status = status if type(status) is dict else field_mapping(status, "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name: required")
    return meta, spec, status, name


def pod_from_dict(raw: Mapping[str, Any]) -> PodInfo:
    meta, spec, status, name = _object_parts(raw, "pod")
    labels = field_str_map(meta.get("labels"), "metadata.labels")
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ObjectError("spec.priority: expected an integer")
    key = _resources_key(spec)
    try:
        known = _POD_RESOURCES.get(key) if key is not None else None
    except TypeError:  # an unhashable quantity: no memoised shape has one
        known = None
    if known is not None:
        requests, limits, qos = dict(known[0]), dict(known[1]), known[2]
    else:
        try:
            app, init = parse_containers(spec)
            requests = aggregate(spec, app, init, "requests")
            limits = aggregate(spec, app, init, "limits")
            qos = kube_qos_of(app + init)
        except (QuantityError, AttributeError, TypeError) as exc:
            raise _pod_resources_error(spec, exc) from None
        if key is not None and len(_POD_RESOURCES) < _POD_RESOURCES_MAX:
            shape = _resources_shape(spec)  # the checked key: strings only
            if shape is not None:
                _POD_RESOURCES[shape] = (dict(requests), dict(limits), qos)
    scheduled = initialized = None
    conditions = status.get("conditions") or []
    if not isinstance(conditions, list):
        raise ObjectError("status.conditions: expected a list")
    for i, cond in enumerate(conditions):
        if type(cond) is not dict:
            cond = field_mapping(cond, f"status.conditions[{i}]")
        if cond.get("status") != "True":
            continue
        kind = cond.get("type")
        if kind == "PodScheduled":
            scheduled = _condition_time(cond.get("lastTransitionTime"), i)
        elif kind == "Initialized":
            initialized = _condition_time(cond.get("lastTransitionTime"), i)
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list):
        raise ObjectError("metadata.ownerReferences: expected a list")
    owner_kinds, controller = _owners(owners) if owners else ((), None)
    namespace = str(meta.get("namespace") or "default")
    shared = _NAMESPACES.get(namespace)
    if shared is not None:
        namespace = shared
    elif len(_NAMESPACES) < _NAMESPACES_MAX and len(namespace) <= 63:  # a valid one is a DNS label
        _NAMESPACES[namespace] = namespace
    # Positional (in field order, each named in the comment): a keyword call of twenty fields costs more.
    return PodInfo(
        str(meta.get("uid") or f"{namespace}/{name}"),  # uid
        namespace,  # namespace
        name,  # name
        str(spec.get("nodeName") or ""),  # node_name
        str(spec.get("schedulerName") or "default-scheduler"),  # scheduler_name
        str(status.get("phase") or "Pending"),  # phase
        priority,  # priority
        labels,  # labels
        field_str_map(meta.get("annotations"), "metadata.annotations"),  # annotations
        requests,  # requests
        limits,  # limits
        qos,  # qos
        priority_class(labels, priority, qos),  # priority_class
        owner_kinds,  # owner_kinds
        field_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),  # creation_time
        field_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),  # deletion_time
        scheduled,  # scheduled_time
        initialized,  # initialized_time
        _grace(spec.get("terminationGracePeriodSeconds")),  # termination_grace_seconds
        controller,  # controller
        _scheduling_group(spec.get("schedulingGroup")),  # scheduling_group
    )


def _condition_time(raw: Any, i: int) -> float | None:
    """``field_time`` of ``status.conditions[i].lastTransitionTime``, with the field path built only for
    an error."""
    if type(raw) is str and raw:
        try:
            return parse_rfc3339(raw)
        except DurationError:
            pass  # field_time names the field
    return field_time(raw, f"status.conditions[{i}].lastTransitionTime")


def _scheduling_group(raw: Any) -> str:
    if raw is None:
        return ""
    if type(raw) is not dict:
        raw = field_mapping(raw, "spec.schedulingGroup")
    name = raw.get("podGroupName")
    if name is None:
        return ""
    if not isinstance(name, str):
        raise ObjectError("spec.schedulingGroup.podGroupName: expected a string")
    return name


def _grace(raw: Any) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ObjectError("spec.terminationGracePeriodSeconds: expected a non-negative integer")
    return raw


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    allocatable: ResourceList
    capacity: ResourceList
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    unschedulable: bool
    taints: tuple[Mapping[str, Any], ...]
    raw_allocatable: ResourceList | None = None
    """The ``node.koordinator.sh/raw-allocatable`` annotation, parsed; None when absent."""


def _raw_allocatable(annotations: Mapping[str, str]) -> ResourceList | None:
    """Parse the annotation; unreadable content is an error (ignoring it would use the amplified
    allocatable and make the node look emptier than it is)."""
    raw = annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if not raw:
        return None
    path = f"metadata.annotations[{ANNOTATION_RAW_ALLOCATABLE}]"
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        raise ObjectError(f"{path}: not a JSON object") from None
    if not isinstance(parsed, dict):
        raise ObjectError(f"{path}: expected a JSON object of quantities")
    return field_resources(parsed, path)


def node_from_dict(raw: Mapping[str, Any]) -> NodeInfo:
    raw = field_mapping(raw, "node")
    meta = field_mapping(raw.get("metadata"), "metadata")
    spec = field_mapping(raw.get("spec"), "spec")
    status = field_mapping(raw.get("status"), "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name: required")
    taints = spec.get("taints") or []
    if not isinstance(taints, list):
        raise ObjectError("spec.taints: expected a list")
    annotations = field_str_map(meta.get("annotations"), "metadata.annotations")
    return NodeInfo(
        name=name,
        allocatable=field_resources(status.get("allocatable"), "status.allocatable"),
        capacity=field_resources(status.get("capacity"), "status.capacity"),
        labels=field_str_map(meta.get("labels"), "metadata.labels"),
        annotations=annotations,
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=tuple(field_mapping(t, "spec.taints[]") for t in taints),
        raw_allocatable=_raw_allocatable(annotations),
    )


class PodMetricInfo(NamedTuple):
    """One ``podsMetric[]`` entry. A named tuple: a NodeMetric carries one per pod, and a tuple is
    several times cheaper to build than a frozen dataclass."""

    namespace: str
    name: str
    usage: ResourceList
    priority: str
    qos: str


@_read_only_view
class AggregatedUsage:
    """One ``aggregatedNodeUsages[]`` entry: usage per aggregation type over ``duration`` s. Read-only by type
    (see :func:`_read_only_view`)."""

    duration: float
    usage: Mapping[str, ResourceList]  # "avg" | "p50" | "p90" | "p95" | "p99" -> resources


@_read_only_view
class NodeMetricInfo:
    """``slo.koordinator.sh/v1alpha1`` NodeMetric as the scheduler reads it. Read-only by type (see
    :func:`_read_only_view`): one is built on every NodeMetric event.

    ``node_usage`` is ``None`` when ``status.nodeMetric`` is absent (Koordinator treats that
    node as passing the filter and scoring 0).
    """

    name: str
    update_time: float | None
    report_interval: float | None
    aggregate_duration: float | None
    node_usage: ResourceList | None
    system_usage: ResourceList
    aggregated: tuple[AggregatedUsage, ...]
    pods: tuple[PodMetricInfo, ...]
    error: str | None = None
    """Why the object could not be read (see :meth:`unreadable`); None for a converted one."""
    pods_by_name: Mapping[str, PodMetricInfo] | None = dataclass_field(
        default=None, init=False, compare=False, repr=False
    )
    """``pods`` by name (the last entry of a repeated name), set by the conversion for the scheduler's lookups;
    None when this was built otherwise (``dataclasses.replace`` does not carry it over: not an ``__init__``
    field). Not guaranteed: that names are unique (compare the lengths)."""

    @staticmethod
    def unreadable(name: str, error: str) -> NodeMetricInfo:
        """A NodeMetric that exists but could not be converted: its usage is unknown, not zero."""
        return NodeMetricInfo(name, None, None, None, None, {}, (), (), error)


def _resource_map(obj: Any, path: str) -> ResourceList:
    """A Koordinator ``ResourceMap``: ``{"resources": {...}, "devices": [...]}``."""
    if obj is None:
        return {}
    if type(obj) is dict:  # the usual shape without building the field path
        resources = obj.get("resources")
        if type(resources) is dict:
            parsed = _non_negative(resources)
            if parsed is not None:
                return parsed
    return field_resources(field_mapping(obj, path).get("resources"), f"{path}.resources")


def _seconds(obj: Any, path: str) -> float | None:
    if obj is None:
        return None
    kind = type(obj)
    if kind is not int and kind is not float and (isinstance(obj, bool) or not isinstance(obj, int | float)):
        raise ObjectError(f"{path}: expected a number of seconds")
    if not 0 <= obj <= MAX_DURATION_SECONDS:  # NaN fails the comparison too
        raise ObjectError(f"{path}: out of range (0 to {MAX_DURATION_SECONDS:.4g} seconds)")
    return float(obj)


def _pod_metric(entry: Any, path: str) -> PodMetricInfo:
    entry = field_mapping(entry, path)
    return PodMetricInfo(
        namespace=str(entry.get("namespace") or ""),
        name=str(entry.get("name") or ""),
        usage=_resource_map(entry.get("podUsage"), f"{path}.podUsage"),
        priority=str(entry.get("priority") or ""),
        qos=str(entry.get("qos") or ""),
    )


def _non_negative(resources: Mapping[str, Any]) -> ResourceList | None:
    """``parse_resource_list``; None when it fails or an amount is negative (the checked path names why)."""
    try:
        usage = parse_resource_list(resources)
    except QuantityError:
        return None
    return None if usage and min(usage.values()) < 0 else usage


def _pod_metrics(pods_raw: list[Any]) -> tuple[tuple[PodMetricInfo, ...], dict[str, PodMetricInfo]]:
    """:func:`_pod_metric` of each entry, and the entries by name (the last of a repeated name). The common shape
    (plain dicts with every field, string fields, quantities already in the memo of :func:`parse_resource_list`,
    none negative) is read inline without building field paths; anything else goes down the checked path,
    which gives the same result or names the bad field."""
    memo_get = QUANTITY_MEMO.get
    new = _new_tuple
    out: list[PodMetricInfo] = []
    append = out.append
    by_name: dict[str, PodMetricInfo] = {}
    for entry in pods_raw:  # one item of ``out`` per entry: an entry's position is len(out)
        try:  # subscripts, not .get: a missing field or an entry that is not an object goes the checked path
            namespace = entry["namespace"]
            name = entry["name"]
            priority = entry["priority"]
            qos = entry["qos"]
            usage_raw = entry["podUsage"]  # always written by koordlet (a Go struct: omitempty does not drop it)
        except Exception:  # whatever it is, the checked path reads it or names it
            pass
        else:
            # null fields go the checked path too, which reads them as ""
            if type(entry) is dict and type(namespace) is type(name) is type(priority) is type(qos) is str:
                usage: ResourceList | None = {}
                if usage_raw is not None:
                    resources = usage_raw.get("resources") if type(usage_raw) is dict else None
                    if type(resources) is dict:
                        try:
                            for item in resources.items():  # (name, quantity): the memo's key, not built anew
                                # only non-negative amounts of string quantities are in the memo
                                amount = memo_get(item)
                                if amount is None:  # not memoised (or not a string, or negative): parsed in full
                                    usage = _non_negative(resources)
                                    break
                                usage[item[0]] = amount  # type: ignore[index]
                        except TypeError:  # an unhashable quantity
                            usage = None
                    elif resources or type(usage_raw) is not dict:
                        usage = None
                if usage is not None:
                    info = by_name[name] = new(PodMetricInfo, (namespace, name, usage, priority, qos))
                    append(info)
                    continue
        info = _pod_metric(entry, f"status.podsMetric[{len(out)}]")
        by_name[info[1]] = info
        append(info)
    return tuple(out), by_name


_NAMESPACES: dict[str, str] = {}
"""Namespace names -> one string object each: the pods of a namespace share it (less memory, and comparing two
of them does not read either). Filled up to ``_NAMESPACES_MAX`` entries, then only read."""
_NAMESPACES_MAX = 16384

_new_tuple = tuple.__new__
"""Builds a named tuple without its Python-level ``__new__`` (the same object, several times cheaper)."""


_DURATIONS: dict[str, float] = {}
"""Readable ``aggregatedNodeUsages[].duration`` strings -> seconds: the same few recur on every NodeMetric.
Filled up to ``_DURATIONS_MAX`` entries, then only read."""
_DURATIONS_MAX = 256
_UPDATE_TIMES: dict[str, float] = {}
"""Readable ``status.updateTime`` strings -> epoch seconds: koordlet writes whole seconds, so the NodeMetrics of
a large cluster arriving within one second share one. Emptied when full (times only move on)."""
_UPDATE_TIMES_MAX = 64


def _aggregated(entry: Any, i: int) -> AggregatedUsage:
    path = f"status.nodeMetric.aggregatedNodeUsages[{i}]"
    entry = field_mapping(entry, path)
    raw_duration = entry.get("duration") or 0
    if not isinstance(raw_duration, str | int | float):
        raise ObjectError(f"{path}.duration: expected a duration string")
    known = _DURATIONS.get(raw_duration) if type(raw_duration) is str else None
    if known is not None:
        duration = known
    else:
        try:
            duration = parse_duration(raw_duration)
        except (DurationError, OverflowError) as exc:
            raise ObjectError(f"{path}.duration: {exc}") from None
        if not math.isfinite(duration) or duration < 0:
            raise ObjectError(f"{path}.duration: expected a finite, non-negative duration")
        if type(raw_duration) is str and len(_DURATIONS) < _DURATIONS_MAX:
            _DURATIONS[raw_duration] = duration
    usage_raw = field_mapping(entry.get("usage"), f"{path}.usage")
    usage = {str(k): _resource_map(v, f"{path}.usage.{k}") for k, v in usage_raw.items()}
    return AggregatedUsage(duration=duration, usage=usage)


def _aggregated_fast(entry: Any) -> AggregatedUsage | None:
    """:func:`_aggregated` for the common shape (plain dicts, a duration read before, string types, readable
    non-negative quantities) without building field paths; None sends anything else down the checked path."""
    if type(entry) is not dict:
        return None
    raw_duration = entry.get("duration")
    duration = _DURATIONS.get(raw_duration) if type(raw_duration) is str else None
    usage_raw = entry.get("usage")
    if duration is None or type(usage_raw) is not dict:
        return None
    usage: dict[str, ResourceList] = {}
    for kind, resource_map in usage_raw.items():
        if type(kind) is not str or type(resource_map) is not dict:
            return None
        resources = resource_map.get("resources")
        if resources is None:
            usage[kind] = {}
            continue
        if type(resources) is not dict:
            return None
        parsed = _non_negative(resources)
        if parsed is None:
            return None
        usage[kind] = parsed
    return AggregatedUsage(duration, usage)


def nodemetric_from_dict(raw: Mapping[str, Any]) -> NodeMetricInfo:
    _meta, spec, status, name = _object_parts(raw, "nodemetric")
    policy = field_mapping(spec.get("metricCollectPolicy"), "spec.metricCollectPolicy")
    node_metric_raw = status.get("nodeMetric")
    node_usage: ResourceList | None = None
    system_usage: ResourceList = {}
    aggregated: list[AggregatedUsage] = []
    if node_metric_raw is not None:
        nm = node_metric_raw if type(node_metric_raw) is dict else field_mapping(node_metric_raw, "status.nodeMetric")
        node_usage = _resource_map(nm.get("nodeUsage"), "status.nodeMetric.nodeUsage")
        system_usage = _resource_map(nm.get("systemUsage"), "status.nodeMetric.systemUsage")
        entries = nm.get("aggregatedNodeUsages") or []
        if not isinstance(entries, list):
            raise ObjectError("status.nodeMetric.aggregatedNodeUsages: expected a list")
        for entry in entries:  # a loop, not a comprehension (a function call of its own before Python 3.12)
            aggregated.append(_aggregated_fast(entry) or _aggregated(entry, len(aggregated)))
    pods_raw = status.get("podsMetric") or []
    if not isinstance(pods_raw, list):
        raise ObjectError("status.podsMetric: expected a list")
    pods, pods_by_name = _pod_metrics(pods_raw)
    update_raw = status.get("updateTime")
    update_time = _UPDATE_TIMES.get(update_raw) if type(update_raw) is str else None
    if update_time is None:
        update_time = field_time(update_raw, "status.updateTime")
        if update_time is not None and type(update_raw) is str:
            if len(_UPDATE_TIMES) >= _UPDATE_TIMES_MAX:
                _UPDATE_TIMES.clear()
            _UPDATE_TIMES[update_raw] = update_time
    info = NodeMetricInfo(  # positional: the field order of NodeMetricInfo
        name,
        update_time,
        _seconds(policy.get("reportIntervalSeconds"), "spec.metricCollectPolicy.reportIntervalSeconds"),
        _seconds(policy.get("aggregateDurationSeconds"), "spec.metricCollectPolicy.aggregateDurationSeconds"),
        node_usage,
        system_usage,
        tuple(aggregated),
        pods,
    )
    info.pods_by_name = pods_by_name  # type: ignore[misc]  # derived from pods, set once here
    return info
