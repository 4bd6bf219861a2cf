"""Gang test helpers: member pods and PodGroups as the API would hold them (for the gang tables and adapters)."""

from __future__ import annotations

from typing import Any

__all__ = ["T0", "member", "podgroup"]

from koordpy.model.objects import PodInfo, pod_from_dict
from koordpy.scheduler.plugins.gang import PodGroupInfo, podgroup_from_dict
from koordpy.testing.builders import PodBuilder

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
) -> PodInfo:
    builder = PodBuilder(name, namespace).requests(cpu=cpu, memory="1Gi")
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
    return pod_from_dict(builder.build())


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
            "apiVersion": f"{api}/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": spec,
            "status": {"phase": phase} if phase else {},
        }
    )
