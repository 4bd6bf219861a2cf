"""PodGroup, in both API groups koordpy reads gangs from.

* ``POD_GROUP`` (``scheduling.sigs.k8s.io/v1alpha1``): the gang definition Koordinator vendors, the
  *old* scheduler-plugins API. Pods join with the label ``pod-group.scheduling.sigs.k8s.io: <name>``
  in the same namespace.
* ``POD_GROUP_X_K8S`` (``scheduling.x-k8s.io/v1alpha1``): the scheduler-plugins API since its 2023
  move. Pods join with the label ``scheduling.x-k8s.io/pod-group: <name>``. ``minMember`` minimum 1,
  its own phase set (no PreScheduling/Scheduled) and **no** ``status.scheduled``.

* ``POD_GROUP_VOLCANO`` (``scheduling.volcano.sh/v1beta1``): Volcano's PodGroup. Pods join with the
  annotation ``scheduling.k8s.io/group-name: <name>``. Its own phases (Pending, Inqueue, Running, Unknown,
  Completed), conditions of Volcano's shape, and **no status subresource** (status is written on the
  object). koordpy's model of Volcano's CRD, for tests and for clusters without Volcano; Volcano installs
  its own.

Users write the spec; the manager writes the status, except ``status.conditions``, where the extender
keeps ``GangScheduled`` (why and when the gang's held members were last released, or that they bound;
``koordpy.scheduler.plugins.gang.outcome``). ``conditions`` is koordpy's addition to both APIs: a CRD
without it in its schema (scheduler-plugins' and Koordinator's own) drops it, and the Events remain.
``POD_GROUP_X_K8S`` is not in ``koordpy.crds.RESOURCES`` (the chart does not install it yet): clusters
running scheduler-plugins already have it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from koordpy.crds.schema import PrinterColumn, Resource, ResourceList, Time, WireModel

__all__ = [
    "POD_GROUP",
    "POD_GROUP_VOLCANO",
    "POD_GROUP_X_K8S",
    "PodGroupCondition",
    "PodGroupPhase",
    "PodGroupSpec",
    "PodGroupStatus",
    "VolcanoPodGroupSpec",
    "VolcanoPodGroupStatus",
    "XK8sPodGroupPhase",
    "XK8sPodGroupSpec",
    "XK8sPodGroupStatus",
]

PodGroupPhase = Literal[
    "", "Pending", "PreScheduling", "Scheduling", "Scheduled", "Running", "Unknown", "Finished", "Failed"
]


class PodGroupSpec(WireModel):
    min_member: int | None = Field(None, alias="minMember", ge=0)
    """Members that must be schedulable together before any of them is bound."""
    min_resources: ResourceList | None = Field(None, alias="minResources")
    """Resources the whole gang needs (informational; Koordinator's scheduler does not read it)."""
    schedule_timeout_seconds: int | None = Field(None, alias="scheduleTimeoutSeconds", ge=0)
    """How long members wait for the gang before the attempt fails."""


class PodGroupCondition(WireModel):
    type: str | None = None
    """``GangScheduled`` (koordpy's extender)."""
    status: Literal["True", "False", "Unknown"] | None = None
    reason: str | None = None
    """``Bound``, ``WaitTimeout``, ``StrictRelease``, ``DeadlockResolution`` or ``MemberDeleted``."""
    message: str | None = None
    last_transition_time: Time | None = Field(None, alias="lastTransitionTime")


class PodGroupStatus(WireModel):
    phase: PodGroupPhase | None = None
    occupied_by: str | None = Field(None, alias="occupiedBy")
    """Sorted ``namespace/ownerName`` list of the workloads using this group, comma-joined."""
    scheduled: int | None = None
    running: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    schedule_start_time: Time | None = Field(None, alias="scheduleStartTime")
    conditions: list[PodGroupCondition] | None = None
    """koordpy: ``GangScheduled``, written by the extender."""


POD_GROUP = Resource(
    group="scheduling.sigs.k8s.io",
    version="v1alpha1",
    kind="PodGroup",
    plural="podgroups",
    namespaced=True,
    spec=PodGroupSpec,
    status=PodGroupStatus,
    description="A gang of pods that are bound all together or not at all.",
    # scheduler-plugins' own CRD carries this approval; kube-apiserver refuses a *.k8s.io CRD without it.
    annotations={"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"},
    short_names=("pg", "pgs"),
    categories=("koordpy",),
    columns=(
        PrinterColumn("Phase", "string", ".status.phase"),
        PrinterColumn("MinMember", "integer", ".spec.minMember"),
        PrinterColumn("Scheduled", "integer", ".status.scheduled"),
        PrinterColumn("Running", "integer", ".status.running"),
        PrinterColumn("Succeeded", "integer", ".status.succeeded", priority=1),
        PrinterColumn("Failed", "integer", ".status.failed", priority=1),
    ),
)


XK8sPodGroupPhase = Literal["", "Pending", "Scheduling", "Running", "Unknown", "Finished", "Failed"]


class XK8sPodGroupSpec(WireModel):
    min_member: int | None = Field(None, alias="minMember", ge=1)
    """Members that must be schedulable together before any of them is bound."""
    min_resources: ResourceList | None = Field(None, alias="minResources")
    """Resources the whole gang needs (koordpy does not read it)."""
    schedule_timeout_seconds: int | None = Field(None, alias="scheduleTimeoutSeconds", ge=0)
    """How long members wait for the gang before the attempt fails."""


class XK8sPodGroupStatus(WireModel):
    phase: XK8sPodGroupPhase | None = None
    occupied_by: str | None = Field(None, alias="occupiedBy")
    running: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    schedule_start_time: Time | None = Field(None, alias="scheduleStartTime")
    conditions: list[PodGroupCondition] | None = None
    """koordpy: ``GangScheduled``, written by the extender."""


POD_GROUP_X_K8S = Resource(
    group="scheduling.x-k8s.io",
    version="v1alpha1",
    kind="PodGroup",
    plural="podgroups",
    namespaced=True,
    spec=XK8sPodGroupSpec,
    status=XK8sPodGroupStatus,
    description="A gang of pods that are bound all together or not at all (scheduler-plugins API).",
    short_names=("pg", "pgs"),
    categories=("koordpy",),
    columns=(
        PrinterColumn("Phase", "string", ".status.phase"),
        PrinterColumn("MinMember", "integer", ".spec.minMember"),
        PrinterColumn("Running", "integer", ".status.running"),
        PrinterColumn("Succeeded", "integer", ".status.succeeded", priority=1),
        PrinterColumn("Failed", "integer", ".status.failed", priority=1),
    ),
)


VolcanoPodGroupPhase = Literal["", "Pending", "Inqueue", "Running", "Unknown", "Completed"]


class VolcanoNetworkTopology(WireModel):
    mode: Literal["hard", "soft"] | None = None
    highest_tier_allowed: int | None = Field(None, alias="highestTierAllowed")


class VolcanoPodGroupSpec(WireModel):
    min_member: int | None = Field(None, alias="minMember")
    """Members that must be schedulable together before any of them is bound."""
    min_task_member: dict[str, int] | None = Field(None, alias="minTaskMember")
    """Per task, the members that must run (not honoured by koordpy)."""
    queue: str | None = None
    """Volcano's queue (not honoured by koordpy: it has no queues)."""
    priority_class_name: str | None = Field(None, alias="priorityClassName")
    min_resources: ResourceList | None = Field(None, alias="minResources")
    """Resources the whole gang needs (koordpy does not read it)."""
    network_topology: VolcanoNetworkTopology | None = Field(None, alias="networkTopology")
    preemptable: bool | None = None


class VolcanoPodGroupCondition(WireModel):
    type: str | None = None
    status: str | None = None
    transition_id: str | None = Field(None, alias="transitionID")
    last_transition_time: Time | None = Field(None, alias="lastTransitionTime")
    reason: str | None = None
    message: str | None = None


class VolcanoPodGroupStatus(WireModel):
    phase: VolcanoPodGroupPhase | None = None
    conditions: list[VolcanoPodGroupCondition] | None = None
    running: int | None = None
    succeeded: int | None = None
    failed: int | None = None


POD_GROUP_VOLCANO = Resource(
    group="scheduling.volcano.sh",
    version="v1beta1",
    kind="PodGroup",
    plural="podgroups",
    namespaced=True,
    spec=VolcanoPodGroupSpec,
    status=VolcanoPodGroupStatus,
    description="A gang of pods (Volcano's API): bound all together or not at all.",
    short_names=("pg", "podgroup-v1beta1"),
    status_subresource=False,
    columns=(
        PrinterColumn("Status", "string", ".status.phase"),
        PrinterColumn("MinMember", "integer", ".spec.minMember"),
        PrinterColumn("Runnings", "integer", ".status.running"),
        PrinterColumn("Queue", "string", ".spec.queue", priority=1),
    ),
)
