"""What arbitration reads of PodMigrationJobs, pods and workloads, as plain values.

The adapter (or the offline tool) builds these from API objects once; arbitration never touches the
API. The pod's rank for Koordinator's pod sorter is precomputed in :attr:`MigrationPod.sort_key`.

Not guaranteed: that an owner chain is complete; a missing ReplicaSet or Deployment in ``workloads``
stops the chain where it is (see :func:`resolve_workload`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.descheduler.limits import MAX_INT32
from koordpy.model.durations import DurationError, parse_duration, parse_rfc3339
from koordpy.model.priority import LABEL_KOORD_QOS, KubeQoS, PriorityClass, kube_qos, priority_class

__all__ = [
    "ANNOTATION_DELETION_COST",
    "ANNOTATION_EVICT",
    "ANNOTATION_EVICTION_COST",
    "ANNOTATION_PASSED_ARBITRATION",
    "HAZARD_BITS",
    "REPLICA_KINDS",
    "MigrationJob",
    "MigrationObjectError",
    "MigrationPod",
    "OwnerRef",
    "Workload",
    "job_from_dict",
    "pack_sort_key",
    "pod_from_dict",
    "pod_sort_key",
    "resolve_workload",
    "workload_from_dict",
]

ANNOTATION_PASSED_ARBITRATION = "descheduler.koordinator.sh/passed-arbitration"
ANNOTATION_EVICT = "descheduler.alpha.kubernetes.io/evict"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})

HAZARD_EVICTION_COST = 1
HAZARD_BARE = 2
HAZARD_DAEMONSET = 4
HAZARD_MIRROR = 8
HAZARD_CRITICAL = 16
HAZARD_LOCAL_STORAGE = 32
HAZARD_PVC = 64
HAZARD_BITS = (
    HAZARD_EVICTION_COST
    | HAZARD_BARE
    | HAZARD_DAEMONSET
    | HAZARD_MIRROR
    | HAZARD_CRITICAL
    | HAZARD_LOCAL_STORAGE
    | HAZARD_PVC
)
"""Pod facts that can make a non-retryable filter fail (the filter still decides, with its options)."""

REPLICA_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"})
"""Kinds whose ``spec.replicas`` is the expected replica count; other controllers have none."""

# Koordinator's pod sorter ranks, lowest (migrated first) to highest.
_PRIORITY_CLASS_RANK = {
    PriorityClass.FREE: 0,
    PriorityClass.BATCH: 1,
    PriorityClass.MID: 2,
    PriorityClass.PROD: 3,
    PriorityClass.NONE: 4,
}
_KUBE_QOS_RANK = {KubeQoS.BEST_EFFORT: 0, KubeQoS.BURSTABLE: 1, KubeQoS.GUARANTEED: 2}
_KOORD_QOS_RANK = {"BE": 0, "LS": 1, "LSR": 2, "LSE": 3, "SYSTEM": 3}
_KOORD_QOS_NONE = 4


class MigrationObjectError(ValueError):
    """An object arbitration cannot read; the message names the field path."""


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class MigrationPod:
    """One pod as arbitration sees it."""

    uid: str
    namespace: str
    name: str
    node_name: str
    labels: Mapping[str, str]
    controller: OwnerRef | None
    """The ownerReference with ``controller: true``."""
    owner_kinds: tuple[str, ...]
    priority: int | None
    priority_class_name: str
    phase: str
    available: bool
    """Active (not terminal, not being deleted) and Ready."""
    evict_annotation: bool
    """``descheduler.alpha.kubernetes.io/evict`` is set: the filters are bypassed."""
    eviction_cost: int
    mirror: bool
    local_storage: bool
    """Has an emptyDir or hostPath volume."""
    pvc: bool
    sort_key: tuple[int | float, ...]
    """Rank by Koordinator's pod sorter: lower migrates first (see :func:`pod_sort_key`)."""
    rank: int = field(init=False, repr=False, compare=False)
    """:attr:`sort_key` packed into one non-negative int with the same order (computed once)."""
    key: str = field(init=False, repr=False, compare=False)
    """``namespace/name``, interned (as :attr:`MigrationJob.pod_key`), so lookups compare by identity."""
    hazards: int = field(init=False, repr=False, compare=False)
    """Bits of :data:`HAZARD_BITS` this pod has, whatever the configuration: a pod with none passes every
    non-retryable filter that only reads the pod (computed once; arbitration skips those filters then)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rank", pack_sort_key(self.sort_key))
        object.__setattr__(self, "key", sys.intern(f"{self.namespace}/{self.name}"))
        bits = 0
        if self.eviction_cost == MAX_INT32:
            bits |= HAZARD_EVICTION_COST
        if not self.owner_kinds:
            bits |= HAZARD_BARE
        if "DaemonSet" in self.owner_kinds:
            bits |= HAZARD_DAEMONSET
        if self.mirror:
            bits |= HAZARD_MIRROR
        if (self.priority or 0) >= SYSTEM_CRITICAL_PRIORITY or self.priority_class_name in SYSTEM_CRITICAL_CLASSES:
            bits |= HAZARD_CRITICAL
        if self.local_storage:
            bits |= HAZARD_LOCAL_STORAGE
        if self.pvc:
            bits |= HAZARD_PVC
        object.__setattr__(self, "hazards", bits)

    @property
    def job_owner_uid(self) -> str | None:
        """UID of the controlling owner of kind ``Job`` (any API group), the sorter's "job"."""
        owner = self.controller
        return owner.uid if owner is not None and owner.kind == "Job" else None


@dataclass(frozen=True, slots=True)
class Workload:
    """A controller of pods: ReplicaSet, Deployment, StatefulSet, Job, ..."""

    kind: str
    namespace: str
    name: str
    uid: str
    replicas: int | None
    """Expected replicas (``spec.replicas``, default 1) for :data:`REPLICA_KINDS`; None for other kinds."""
    controller: OwnerRef | None = None

    @property
    def key(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class MigrationJob:
    """One PodMigrationJob as koordpy reads it (:func:`job_from_dict`): the one typed view that arbitration, the
    balance loop, the offline tools and the simulator share (the manager converts each stored version once)."""

    name: str
    uid: str
    creation_time: float
    """``metadata.creationTimestamp`` in whole seconds; 0.0 when absent."""
    pod_namespace: str
    pod_name: str
    phase: str
    """``status.phase``; empty means Pending."""
    passed_arbitration: bool
    ttl_seconds: float | None = None
    deleting: bool = False
    pod_uid: str = ""
    """``spec.podRef.uid`` (set when the job starts; empty before)."""
    node_name: str = ""
    """``status.nodeName``: where the pod's replacement runs (a ReservationFirst job records it)."""
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    annotations: Mapping[str, str] = field(default_factory=dict, compare=False)
    pod_key: str = field(init=False, repr=False, compare=False)
    """``namespace/name`` of the pod (computed once)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "pod_key", sys.intern(f"{self.pod_namespace}/{self.pod_name}"))

    @property
    def waiting(self) -> bool:
        """Pending, not yet passed arbitration and not being deleted: arbitration decides on it."""
        return self.phase in ("", "Pending") and not self.passed_arbitration and not self.deleting

    @property
    def active(self) -> bool:
        """Counts against limits: Running, or Pending once it passed arbitration (how Koordinator ended a
        deadlock between Pending jobs)."""
        if self.phase == "Running":
            return True
        return self.phase in ("", "Pending") and self.passed_arbitration


def _int_annotation(annotations: Mapping[str, str], name: str) -> int:
    raw = annotations.get(name)
    if raw is None:
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        return 0
    return value if -(2**31) <= value <= MAX_INT32 else 0


_SLOT_BITS = 64
_SLOT_OFFSET = 1 << 62


def pack_sort_key(key: tuple[int | float, ...]) -> int:
    """One int ordered as the tuple ``key`` is: each field in a 64-bit slot, offset so negatives sort first.

    Floats (the creation time) are kept to the microsecond. Not guaranteed beyond |field| < 2**62.
    """
    packed = 0
    for value in key:
        number = round(value * 1_000_000) if isinstance(value, float) else value
        packed = (packed << _SLOT_BITS) | (number + _SLOT_OFFSET)
    return packed


def pod_sort_key(
    *,
    klass: PriorityClass,
    priority: int | None,
    qos: KubeQoS,
    koord_qos: str | None,
    deletion_cost: int,
    eviction_cost: int,
    creation_time: float | None,
) -> tuple[int | float, ...]:
    """Koordinator's PodSorter as one ascending key: priority class (Free < Batch < Mid < Prod < None),
    ``spec.priority`` (unset 0), Kubernetes QoS (BE < Burstable < Guaranteed), Koordinator QoS
    (BE < LS < LSR < LSE = SYSTEM < none), pod-deletion-cost, eviction-cost, newer pod first."""
    return (
        _PRIORITY_CLASS_RANK[klass],
        priority or 0,
        _KUBE_QOS_RANK[qos],
        _KOORD_QOS_RANK.get(koord_qos or "", _KOORD_QOS_NONE),
        deletion_cost,
        eviction_cost,
        -(creation_time or 0.0),
    )


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise MigrationObjectError(f"{path}: expected a mapping")
    return obj


def _str_map(obj: Any, path: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(obj, path).items()}


def _time(obj: Any, path: str) -> float | None:
    if obj in (None, ""):
        return None
    if not isinstance(obj, str):
        raise MigrationObjectError(f"{path}: expected an RFC 3339 string")
    try:
        return parse_rfc3339(obj)
    except DurationError as exc:
        raise MigrationObjectError(f"{path}: {exc}") from None


def _controller(meta: Mapping[str, Any]) -> tuple[OwnerRef | None, tuple[str, ...]]:
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list):
        raise MigrationObjectError("metadata.ownerReferences: expected a list")
    controller = None
    kinds = []
    for i, raw in enumerate(owners):
        owner = _mapping(raw, f"metadata.ownerReferences[{i}]")
        kinds.append(str(owner.get("kind") or ""))
        if owner.get("controller") is True and controller is None:
            controller = OwnerRef(
                str(owner.get("kind") or ""), str(owner.get("name") or ""), str(owner.get("uid") or "")
            )
    return controller, tuple(kinds)


def _name(meta: Mapping[str, Any]) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise MigrationObjectError("metadata.name: required")
    return name


def pod_from_dict(raw: Mapping[str, Any]) -> MigrationPod:
    """Read a core/v1 Pod; errors name the field path."""
    raw = _mapping(raw, "pod")
    meta = _mapping(raw.get("metadata"), "metadata")
    spec = _mapping(raw.get("spec"), "spec")
    status = _mapping(raw.get("status"), "status")
    name = _name(meta)
    namespace = str(meta.get("namespace") or "default")
    labels = _str_map(meta.get("labels"), "metadata.labels")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise MigrationObjectError("spec.priority: expected an integer")
    try:
        qos = kube_qos(spec)
    except (ValueError, AttributeError, TypeError) as exc:
        raise MigrationObjectError(f"spec.containers[].resources: {exc}") from None
    controller, kinds = _controller(meta)
    phase = str(status.get("phase") or "Pending")
    deleting = bool(meta.get("deletionTimestamp"))
    ready = False
    conditions = status.get("conditions") or []
    if not isinstance(conditions, list):
        raise MigrationObjectError("status.conditions: expected a list")
    for i, cond in enumerate(conditions):
        cond = _mapping(cond, f"status.conditions[{i}]")
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    volumes = spec.get("volumes") or []
    if not isinstance(volumes, list):
        raise MigrationObjectError("spec.volumes: expected a list")
    local = pvc = False
    for i, volume in enumerate(volumes):
        volume = _mapping(volume, f"spec.volumes[{i}]")
        local = local or "emptyDir" in volume or "hostPath" in volume
        pvc = pvc or "persistentVolumeClaim" in volume
    eviction_cost = _int_annotation(annotations, ANNOTATION_EVICTION_COST)
    created = _time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    return MigrationPod(
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        namespace=namespace,
        name=name,
        node_name=str(spec.get("nodeName") or ""),
        labels=labels,
        controller=controller,
        owner_kinds=kinds,
        priority=priority,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        phase=phase,
        available=ready and not deleting and phase not in ("Succeeded", "Failed"),
        evict_annotation=ANNOTATION_EVICT in annotations,
        eviction_cost=eviction_cost,
        mirror=ANNOTATION_MIRROR in annotations,
        local_storage=local,
        pvc=pvc,
        sort_key=pod_sort_key(
            klass=priority_class(labels, priority, qos),
            priority=priority,
            qos=qos,
            koord_qos=labels.get(LABEL_KOORD_QOS),
            deletion_cost=_int_annotation(annotations, ANNOTATION_DELETION_COST),
            eviction_cost=eviction_cost,
            creation_time=created,
        ),
    )


def workload_from_dict(raw: Mapping[str, Any]) -> Workload:
    """Read a Deployment, ReplicaSet, StatefulSet, ReplicationController, Job or other controller."""
    raw = _mapping(raw, "workload")
    meta = _mapping(raw.get("metadata"), "metadata")
    spec = _mapping(raw.get("spec"), "spec")
    kind = str(raw.get("kind") or "")
    name = _name(meta)
    namespace = str(meta.get("namespace") or "default")
    replicas: int | None = None
    if kind in REPLICA_KINDS:
        value = spec.get("replicas", 1)
        if value is None:
            value = 1
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise MigrationObjectError("spec.replicas: expected a non-negative integer")
        replicas = value
    controller, _ = _controller(meta)
    return Workload(kind, namespace, name, str(meta.get("uid") or f"{kind}/{namespace}/{name}"), replicas, controller)


def job_from_dict(raw: Mapping[str, Any]) -> MigrationJob:
    """Read a PodMigrationJob; ``spec.podRef`` with a name is required."""
    raw = _mapping(raw, "podmigrationjob")
    meta = _mapping(raw.get("metadata"), "metadata")
    spec = _mapping(raw.get("spec"), "spec")
    status = _mapping(raw.get("status"), "status")
    name = _name(meta)
    ref = _mapping(spec.get("podRef"), "spec.podRef")
    pod_name = ref.get("name")
    if not isinstance(pod_name, str) or not pod_name:
        raise MigrationObjectError("spec.podRef.name: required")
    ttl = spec.get("ttl")
    ttl_seconds = None
    if ttl not in (None, ""):
        try:
            ttl_seconds = parse_duration(ttl)
        except DurationError as exc:
            raise MigrationObjectError(f"spec.ttl: {exc}") from None
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    created = _time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    return MigrationJob(
        name=name,
        uid=str(meta.get("uid") or name),
        creation_time=float(int(created)) if created is not None else 0.0,
        pod_namespace=str(ref.get("namespace") or "default"),
        pod_name=pod_name,
        phase=str(status.get("phase") or ""),
        passed_arbitration=annotations.get(ANNOTATION_PASSED_ARBITRATION) == "true",
        ttl_seconds=ttl_seconds or None,
        deleting=bool(meta.get("deletionTimestamp")),
        pod_uid=str(ref.get("uid") or ""),
        node_name=str(status.get("nodeName") or ""),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=annotations,
    )


def resolve_workload(pod: MigrationPod, workloads: Mapping[str, Workload]) -> Workload | None:
    """The pod's workload: its controller, followed up the controller chain (ReplicaSet -> Deployment)
    while the next owner is in ``workloads`` (by UID); None for a pod without a known controller."""
    owner = pod.controller
    if owner is None:
        return None
    found = workloads.get(owner.uid)
    for _ in range(8):  # bounded: owner chains are short, cycles are possible in bad dumps
        if found is None or found.controller is None:
            break
        parent = workloads.get(found.controller.uid)
        if parent is None:
            break
        found = parent
    return found
