"""Reservation (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, short name ``rsv``).

Field names, enums and printer columns follow Koordinator's ``apis/scheduling/v1alpha1/reservation_types.go``:
``spec.template`` is a PodTemplateSpec kept schemaless (unknown fields preserved, as upstream marks it),
``spec.owners`` needs at least one entry and each entry at least one field. Defaults upstream declares
(``ttl`` 24h, ``allocateOnce`` true) are not emitted into the schema (see ``koordpy.crds.schema``): the
readers in ``koordpy.scheduler.plugins.reservation.spec`` apply them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from koordpy.crds.podmigrationjob import ObjectReference
from koordpy.crds.schema import AGE, Duration, FreeForm, PrinterColumn, Resource, ResourceList, Time, WireModel

__all__ = [
    "RESERVATION",
    "ReservationCondition",
    "ReservationOwner",
    "ReservationSpec",
    "ReservationStatus",
]

ReservationPhase = Literal["Pending", "Available", "Waiting", "Succeeded", "Failed"]


class LabelSelectorRequirement(WireModel):
    key: str
    operator: str
    """In, NotIn, Exists or DoesNotExist."""
    values: list[str] | None = None


class LabelSelector(WireModel):
    """metav1.LabelSelector."""

    match_labels: dict[str, str] | None = Field(None, alias="matchLabels")
    match_expressions: list[LabelSelectorRequirement] | None = Field(None, alias="matchExpressions")


class ReservationControllerReference(WireModel):
    """metav1.OwnerReference inlined, plus the controller's namespace."""

    api_version: str | None = Field(None, alias="apiVersion")
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = Field(None, alias="blockOwnerDeletion")
    namespace: str | None = None


class ReservationOwner(WireModel):
    """One owner; the fields set in one entry are ANDed, the entries ORed."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    object: ObjectReference | None = None
    """A pod by namespace/name (or uid)."""
    controller: ReservationControllerReference | None = None
    """Pods whose controller owner reference is this one."""
    label_selector: LabelSelector | None = Field(None, alias="labelSelector")
    """Pods whose labels match."""


class Taint(WireModel):
    key: str
    value: str | None = None
    effect: str
    time_added: Time | None = Field(None, alias="timeAdded")


class PreAllocationPolicy(WireModel):
    """Read and kept; koordpy pre-allocates for one owner only (upstream's ``enableMultiple: false``)."""

    enable_multiple: bool | None = Field(None, alias="enableMultiple")
    mode: Literal["Default", "Cluster"] | None = None


class ReservationSpec(WireModel):
    template: FreeForm
    """A PodTemplateSpec: its requests, node selector, affinity and tolerations are what is held and where."""
    owners: list[ReservationOwner] = Field(min_length=1)
    """Who may allocate the reserved resources (ORed)."""
    ttl: Duration | None = None
    """Lifetime after creation (default 24h; ``0s`` never expires). ``expires`` wins when both are set."""
    expires: Time | None = None
    """Absolute expiry."""
    pre_allocation: bool | None = Field(None, alias="preAllocation")
    """Place the reservation even when the node's free resources do not cover it yet (phase Waiting)."""
    pre_allocation_policy: PreAllocationPolicy | None = Field(None, alias="preAllocationPolicy")
    """Newer upstream field, accepted so upstream manifests apply unchanged; not enforced."""
    allocate_once: bool | None = Field(None, alias="allocateOnce")
    """Default true: the first owner takes the whole reservation and it becomes Succeeded."""
    unschedulable: bool | None = None
    """Owners may not allocate from it (new owners are refused)."""
    taints: list[Taint] | None = None
    """Taints owners must tolerate (read, not enforced by koordpy)."""
    allocate_policy: Literal["Aligned", "Restricted"] | None = Field(None, alias="allocatePolicy")
    """How owners combine reserved and node-free resources (read, not enforced by koordpy)."""


class ReservationCondition(WireModel):
    type: Literal["Scheduled", "Ready"] | None = None
    status: Literal["True", "False", "Unknown"] | None = None
    reason: str | None = None
    """Scheduled, Unschedulable, Available, Succeeded or Expired."""
    message: str | None = None
    last_probe_time: Time | None = Field(None, alias="lastProbeTime")
    last_transition_time: Time | None = Field(None, alias="lastTransitionTime")


class ReservationStatus(WireModel):
    phase: ReservationPhase | None = None
    """Empty means Pending."""
    conditions: list[ReservationCondition] | None = None
    current_owners: list[ObjectReference] | None = Field(None, alias="currentOwners")
    """The owner pods that allocated from it."""
    node_name: str | None = Field(None, alias="nodeName")
    """The node it was placed on."""
    allocatable: ResourceList | None = None
    """What it holds (the template's requests)."""
    allocated: ResourceList | None = None
    """What its owners took."""


RESERVATION = Resource(
    group="scheduling.koordinator.sh",
    version="v1alpha1",
    kind="Reservation",
    plural="reservations",
    namespaced=False,
    spec=ReservationSpec,
    status=ReservationStatus,
    description="Resources held on one node for the pods that own the reservation.",
    short_names=("rsv",),
    categories=("koordpy",),
    columns=(
        PrinterColumn("Phase", "string", ".status.phase", "The phase of reservation."),
        AGE,
        PrinterColumn("Node", "string", ".status.nodeName", "The node the reservation was placed on."),
        PrinterColumn("TTL", "string", ".spec.ttl", "The time to live of the reservation."),
        PrinterColumn("Expires", "string", ".spec.expires", "The expiry of the reservation."),
    ),
)
