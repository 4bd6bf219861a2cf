"""What the lifecycle is given besides the job: the ``migrationController`` settings it reads and the view
of the job's pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from koordpy.descheduler.decisions import EvictorName

__all__ = [
    "LifecycleSettings",
    "PodView",
]


@dataclass(frozen=True)
class LifecycleSettings:
    """The ``migrationController`` fields the lifecycle reads (upstream defaults)."""

    default_job_mode: Literal["ReservationFirst", "EvictDirectly"] = "ReservationFirst"
    default_job_ttl_seconds: float = 300.0
    eviction_policy: EvictorName = "Eviction"
    default_delete_options: Mapping[str, Any] | None = None
    arbitration_enabled: bool = True


@dataclass(frozen=True)
class PodView:
    """What the lifecycle needs of the referenced pod (absent pod: ``None``)."""

    namespace: str
    name: str
    uid: str
    node_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    """``metadata.deletionTimestamp`` is set."""
    ready: bool = False
    """Condition Ready is True and the pod is not terminated."""
    obj: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The pod object as read (a ``ReservationFirst`` Reservation's template is built from it)."""

    @classmethod
    def from_object(cls, pod: Mapping[str, Any]) -> PodView:
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        ready = status.get("phase") not in ("Succeeded", "Failed") and any(
            isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            node_name=str((pod.get("spec") or {}).get("nodeName") or ""),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            deleting=meta.get("deletionTimestamp") is not None,
            ready=ready,
            obj=pod,
        )
