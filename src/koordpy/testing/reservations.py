"""Raw Reservation JSON (``scheduling.koordinator.sh/v1alpha1``) for tests, as the manager writes it.

Example::

    raw = reservation("hold-big", node="n1", cpu="4", owners=[owner_pod("default", "big")], phase="Available")
"""

from __future__ import annotations

import uuid
from typing import Any

from koordpy.model.durations import format_rfc3339

__all__ = ["owner_labels", "owner_pod", "reservation"]

Raw = dict[str, Any]


def owner_pod(namespace: str, name: str) -> Raw:
    """An ``owners[]`` entry naming one pod."""
    return {"object": {"kind": "Pod", "namespace": namespace, "name": name}}


def owner_labels(**labels: str) -> Raw:
    """An ``owners[]`` entry selecting pods by labels."""
    return {"labelSelector": {"matchLabels": dict(labels)}}


def reservation(
    name: str,
    *,
    node: str = "",
    owners: list[Raw] | None = None,
    phase: str = "Available",
    created: float | None = None,
    ttl: str | None = None,
    expires: float | None = None,
    allocate_once: bool | None = None,
    **requests: str,
) -> Raw:
    """A Reservation whose template requests ``requests`` (``cpu="4"``), placed on ``node`` in ``phase``
    (``status.nodeName`` set when ``node`` is)."""
    metadata: Raw = {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"reservation/{name}"))}
    if created is not None:
        metadata["creationTimestamp"] = format_rfc3339(created)
    spec: Raw = {
        "template": {
            "spec": {"containers": [{"name": "main", "image": "app", "resources": {"requests": dict(requests)}}]}
        },
        "owners": owners if owners is not None else [],
    }
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = format_rfc3339(expires)
    if allocate_once is not None:
        spec["allocateOnce"] = allocate_once
    status: Raw = {"phase": phase}
    if node:
        status["nodeName"] = node
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }
