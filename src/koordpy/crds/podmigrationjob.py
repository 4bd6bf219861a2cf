"""PodMigrationJob (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, short name ``pmj``).

Field names follow Koordinator's ``apis/scheduling/v1alpha1/pod_migration_job_types.go``. There is no
priority field: ordering comes from the referenced pod. The reservation template and delete options
belong to other APIs and are kept verbatim.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from koordpy.crds.schema import FreeForm, PrinterColumn, Resource, Time, WireModel
from koordpy.model.durations import DURATION_PATTERN
from koordpy.model.names import (
    DNS1123_LABEL_MAX,
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_MAX,
    DNS1123_SUBDOMAIN_PATTERN,
)

__all__ = [
    "POD_MIGRATION_JOB",
    "NamedObjectReference",
    "ObjectReference",
    "PodMigrationJobCondition",
    "PodMigrationJobSpec",
    "PodMigrationJobStatus",
]

MigrationMode = Literal["ReservationFirst", "EvictDirectly"]
MigrationPhase = Literal["", "Pending", "Running", "Succeeded", "Failed", "Aborted"]


class ObjectReference(WireModel):
    """core/v1 ObjectReference."""

    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_version: str | None = Field(None, alias="apiVersion")
    resource_version: str | None = Field(None, alias="resourceVersion")
    field_path: str | None = Field(None, alias="fieldPath")


class NamedObjectReference(ObjectReference):
    """A reference the manager puts into request paths (``spec.podRef``, ``reservationRef``): the API server
    refuses a name or namespace it would refuse on the object itself, and bounds every other field."""

    kind: str | None = Field(None, max_length=253)
    namespace: str | None = Field(None, max_length=DNS1123_LABEL_MAX, pattern=DNS1123_LABEL_PATTERN)
    """A DNS-1123 label, as every namespace."""
    name: str | None = Field(None, max_length=DNS1123_SUBDOMAIN_MAX, pattern=DNS1123_SUBDOMAIN_PATTERN)
    """A DNS-1123 subdomain, as every pod and Reservation name."""
    uid: str | None = Field(None, max_length=128)
    api_version: str | None = Field(None, alias="apiVersion", max_length=317)
    resource_version: str | None = Field(None, alias="resourceVersion", max_length=128)
    field_path: str | None = Field(None, alias="fieldPath", max_length=1024)


class PodMigrateReservationOptions(WireModel):
    reservation_ref: NamedObjectReference | None = Field(None, alias="reservationRef")
    """An existing Reservation to use instead of creating one."""
    template: FreeForm | None = None
    """ReservationTemplateSpec for the Reservation the migration creates."""
    preemption_options: FreeForm | None = Field(None, alias="preemptionOptions")
    """Reserved upstream; kept verbatim."""


class PodMigrationJobSpec(WireModel):
    paused: bool | None = None
    """A paused job is not processed until unpaused."""
    ttl: str | None = Field(None, max_length=64, pattern=DURATION_PATTERN)
    """Deadline of the whole migration (a Go duration such as ``5m``); the job fails with reason Timeout after it."""
    mode: MigrationMode | None = None
    """``ReservationFirst`` (default) reserves room elsewhere before evicting; ``EvictDirectly`` does not."""
    pod_ref: NamedObjectReference = Field(alias="podRef")
    """The pod to migrate."""
    reservation_options: PodMigrateReservationOptions | None = Field(None, alias="reservationOptions")
    delete_options: FreeForm | None = Field(None, alias="deleteOptions")
    """metav1.DeleteOptions used when evicting the pod."""


class PodMigrationJobCondition(WireModel):
    type: str
    """ReservationCreated, ReservationScheduled, Preemption, Eviction, PodScheduled, ..."""
    status: Literal["True", "False", "Unknown"]
    last_probe_time: Time | None = Field(None, alias="lastProbeTime")
    last_transition_time: Time | None = Field(None, alias="lastTransitionTime")
    reason: str | None = None
    message: str | None = None


class PodMigrationJobPreemptedReservation(WireModel):
    namespace: str | None = None
    name: str | None = None
    node_name: str | None = Field(None, alias="nodeName")
    phase: str | None = None
    preempted_pod_ref: ObjectReference | None = Field(None, alias="preemptedPodRef")
    pods_ref: list[ObjectReference] | None = Field(None, alias="podsRef")


class PodMigrationJobStatus(WireModel):
    phase: MigrationPhase | None = None
    """Empty means Pending."""
    status: str | None = None
    """The condition type last updated, or ``Complete``."""
    reason: str | None = None
    message: str | None = None
    conditions: list[PodMigrationJobCondition] | None = None
    node_name: str | None = Field(None, alias="nodeName")
    """Node of the reservation (the pod's destination)."""
    pod_ref: ObjectReference | None = Field(None, alias="podRef")
    """The new pod, once created."""
    preempted_pods_ref: list[ObjectReference] | None = Field(None, alias="preemptedPodsRef")
    preempted_pods_reservation: list[PodMigrationJobPreemptedReservation] | None = Field(
        None, alias="preemptedPodsReservation"
    )


POD_MIGRATION_JOB = Resource(
    group="scheduling.koordinator.sh",
    version="v1alpha1",
    kind="PodMigrationJob",
    plural="podmigrationjobs",
    namespaced=False,
    spec=PodMigrationJobSpec,
    status=PodMigrationJobStatus,
    description="Moves one pod elsewhere: reserve room (optionally), evict, watch the replacement.",
    short_names=("pmj",),
    categories=("koordpy",),
    spec_required=True,
    columns=(
        PrinterColumn("Phase", "string", ".status.phase", "The phase of the migration."),
        PrinterColumn("Status", "string", ".status.status", "The last updated condition or Complete."),
        PrinterColumn("Node", "string", ".status.nodeName", "Destination node."),
        PrinterColumn("Reservation", "string", ".spec.reservationOptions.reservationRef.name", priority=1),
        PrinterColumn("PodNamespace", "string", ".spec.podRef.namespace"),
        PrinterColumn("Pod", "string", ".spec.podRef.name"),
        PrinterColumn("NewPod", "string", ".status.podRef.name", priority=1),
        PrinterColumn("TTL", "string", ".spec.ttl", priority=1),
    ),
)
