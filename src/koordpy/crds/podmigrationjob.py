"""PodMigrationJob (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, short name ``pmj``).

Field names follow Koordinator's ``apis/scheduling/v1alpha1/pod_migration_job_types.go``. There is no
priority field: ordering comes from the referenced pod. The delete options belong to another API and are
kept verbatim.

``spec.reservationOptions.template`` (a Reservation template) is what the manager creates a Reservation
from, with its own identity; whoever may create a job (koordpy's ``migrate`` role) may not use it to
create a Reservation an admin alone may create. The schema therefore declares its fields and refuses, at
admission (CEL ``x-kubernetes-validations``), those of :data:`TEMPLATE_SPEC_REFUSED` and a ttl that is not
positive or outlives the job's ``spec.ttl``. Fields it does not declare are pruned (the manager reads none
of them). What the schema cannot see (the job's UID, which a template's name must equal; the manager's
``defaultJobTTL`` for a job without ``spec.ttl``), the manager checks:
:func:`koordpy.descheduler.reservation_first.template_problem`, which also applies these rules where the
CRD is Koordinator's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import ConfigDict, Field, JsonValue

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
    "TEMPLATE_SPEC_REFUSED",
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


TEMPLATE_SPEC_REFUSED: Mapping[str, str] = {
    "owners": "the Reservation's owners are the migrated pod's controller (or its labels); a Reservation "
    "for other owners is an admin's to create, and a job may name it in reservationRef",
    "expires": "an absolute expiry can outlive the job; set ttl, at most the job's",
    "preAllocation": "a migration reserves free room only",
    "preAllocationPolicy": "a migration reserves free room only",
    "unschedulable": "the replacement must be able to take the Reservation",
    "taints": "the replacement must be able to take the Reservation",
    "allocatePolicy": "the replacement takes the whole Reservation (allocateOnce)",
}
"""Fields of ``spec.reservationOptions.template.spec`` a PodMigrationJob may not set, and why: refused at
admission by the CRD schema, and by the manager (a job that has one fails ``InvalidSpec``)."""


def _refusals() -> list[JsonValue]:
    return [
        {
            "rule": f"!has(self.{key})",
            "message": f"may not be set: {why}",
            "fieldPath": f".{key}",
            "reason": "FieldValueForbidden",
        }
        for key, why in TEMPLATE_SPEC_REFUSED.items()
    ]


class ReservationTemplateMeta(WireModel):
    """The Reservation's metadata a template may give: labels and annotations (koordpy's own keys win)."""

    name: str | None = Field(None, max_length=DNS1123_SUBDOMAIN_MAX, pattern=DNS1123_SUBDOMAIN_PATTERN)
    """Only the job's UID is accepted (what Koordinator's controller writes back): the manager names the
    Reservation itself."""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ReservationTemplateBody(WireModel):
    """The Reservation's spec a template may give: the pod template and a ttl within the job's."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _refusals()})

    template: FreeForm | None = None
    """A PodTemplateSpec: the replacement's requests and placement (replaces the one built from the pod)."""
    ttl: str | None = Field(None, max_length=64, pattern=DURATION_PATTERN)
    """Positive, at most the job's ttl; the job's ttl when unset."""
    allocate_once: bool | None = Field(None, alias="allocateOnce")
    """Forced true, as upstream."""
    owners: list[FreeForm] | None = None
    expires: str | None = None
    pre_allocation: bool | None = Field(None, alias="preAllocation")
    pre_allocation_policy: FreeForm | None = Field(None, alias="preAllocationPolicy")
    unschedulable: bool | None = None
    taints: list[FreeForm] | None = None
    allocate_policy: str | None = Field(None, alias="allocatePolicy")


class ReservationTemplate(WireModel):
    """ReservationTemplateSpec for the Reservation the migration creates."""

    metadata: ReservationTemplateMeta | None = None
    spec: ReservationTemplateBody | None = None


class PodMigrateReservationOptions(WireModel):
    reservation_ref: NamedObjectReference | None = Field(None, alias="reservationRef")
    """An existing Reservation to use instead of creating one."""
    template: ReservationTemplate | None = None
    """ReservationTemplateSpec for the Reservation the migration creates: its pod template (requests and
    placement), a ttl within the job's, labels and annotations; not its name, owners or expiry."""
    preemption_options: FreeForm | None = Field(None, alias="preemptionOptions")
    """Reserved upstream; kept verbatim."""


_TEMPLATE_TTL = "self.reservationOptions.template.spec.ttl"
_TTL_WITHIN_THE_JOBS: JsonValue = {
    "rule": (
        "!has(self.reservationOptions) || !has(self.reservationOptions.template) || "
        "!has(self.reservationOptions.template.spec) || !has(self.reservationOptions.template.spec.ttl) || "
        f"({_TEMPLATE_TTL} != '' && {_TEMPLATE_TTL} != '0' && duration({_TEMPLATE_TTL}) > duration('0s') && "
        "(!has(self.ttl) || self.ttl == '' || self.ttl == '0' || duration(self.ttl) == duration('0s') || "
        f"duration({_TEMPLATE_TTL}) <= duration(self.ttl)))"
    ),
    "message": "must be a positive duration, at most the job's spec.ttl: a migration's Reservation ends with its job",
    "fieldPath": ".reservationOptions.template.spec.ttl",
    "reason": "FieldValueInvalid",
}


class PodMigrationJobSpec(WireModel):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_TTL_WITHIN_THE_JOBS]})

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
