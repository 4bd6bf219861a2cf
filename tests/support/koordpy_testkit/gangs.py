"""Gang test helpers: member pods and PodGroups as the API would hold them (for the gang tables and adapters)."""

from __future__ import annotations

from typing import Any

from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import PodInfo, pod_from_dict
from koordpy.scheduler.plugins.gang import API_VERSIONS, PodGroupInfo, podgroup_from_dict
from koordpy_testkit.builders import PodBuilder

__all__ = ["T0", "annotated", "member", "native_podgroup", "native_podgroup_object", "podgroup"]

T0 = 1_800_000_000.0
"""An arbitrary instant the tables count from."""


def member(
    name: str,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node: str | None = None,
    phase: str | None = None,
    cpu: str = "1",
    priority: int | None = None,
    created: float | None = None,
    group: str | None = None,
) -> PodInfo:
    """``group``: the ``scheduling.k8s.io`` PodGroup the pod joins (``spec.schedulingGroup``)."""
    builder = PodBuilder(name, namespace).requests(cpu=cpu, memory="1Gi")
    if group is not None:
        builder.scheduling_group(group)
    for key, value in (labels or {}).items():
        builder.label(key, value)
    for key, value in (annotations or {}).items():
        builder.annotation(key, value)
    if node:
        builder.node(node)
    if phase:
        builder.phase(phase)
    if priority is not None:
        builder.priority(priority)
    raw = builder.build()
    if created is not None:
        raw["metadata"]["creationTimestamp"] = format_rfc3339(created)
    return pod_from_dict(raw)


def podgroup(
    name: str,
    min_member: int | None,
    *,
    namespace: str = "default",
    api: str = "scheduling.sigs.k8s.io",
    timeout: int | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "",
) -> PodGroupInfo:
    spec: dict[str, Any] = {}
    if min_member is not None:
        spec["minMember"] = min_member
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return podgroup_from_dict(
        {
            "apiVersion": API_VERSIONS[api],
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": spec,
            "status": {"phase": phase} if phase else {},
        }
    )


def annotated(
    gang: str,
    min_available: int | str,
    *,
    mode: str | None = None,
    policy: str | None = None,
    wait: str | None = None,
    groups: list[str] | None = None,
) -> dict[str, str]:
    """Koordinator annotations of an annotation-way gang member."""
    prefix = "gang.scheduling.koordinator.sh/"
    out = {prefix + "name": gang, prefix + "min-available": str(min_available)}
    if mode is not None:
        out[prefix + "mode"] = mode
    if policy is not None:
        out[prefix + "match-policy"] = policy
    if wait is not None:
        out[prefix + "waiting-time"] = wait
    if groups is not None:
        out[prefix + "groups"] = "[" + ", ".join(f'"{g}"' for g in groups) + "]"
    return out


def native_podgroup_object(
    name: str,
    min_count: int | None,
    *,
    namespace: str = "default",
    disruption: str | None = None,
    scheduled: str | None = None,
) -> dict[str, Any]:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup as the API server stores it: ``min_count`` None is the
    ``basic`` policy; ``disruption`` ``all``/``single`` (None: unset); ``scheduled`` the status of
    kube-scheduler's ``PodGroupInitiallyScheduled`` condition (``True``, or a reason for False)."""
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if disruption is not None:
        spec["disruptionMode"] = {disruption: {}}
    status: dict[str, Any] = {}
    if scheduled is not None:
        condition = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}
        if scheduled != "True":
            condition = {**condition, "status": "False", "reason": scheduled}
        status["conditions"] = [{**condition, "message": "", "lastTransitionTime": format_rfc3339(T0)}]
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": format_rfc3339(T0)},
        "spec": spec,
        "status": status,
    }


def native_podgroup(name: str, min_count: int | None, **kwargs: Any) -> PodGroupInfo:
    """:func:`native_podgroup_object`, read."""
    return podgroup_from_dict(native_podgroup_object(name, min_count, **kwargs))
