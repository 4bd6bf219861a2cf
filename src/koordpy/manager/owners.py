"""A pod's owning workload for the migration limits: the controller owner reference as a fallback
(:func:`owner_workload`), and the owners (ReplicaSets, Deployments, ...) read through the API by UID and
reused for :data:`OWNER_TTL_SECONDS` (:class:`OwnerCache`).

Not guaranteed: the entries live in memory and start empty after a restart; an owner's replica count is
read again at most every :data:`OWNER_TTL_SECONDS`.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.descheduler.objects import MigrationObjectError, Workload, workload_from_dict
from koordpy.kube import errors as kube_errors
from koordpy.manager.migration_api import MigrationApi

__all__ = [
    "MAX_OWNER_DEPTH",
    "OWNER_TTL_SECONDS",
    "OwnerCache",
    "WorkloadLimit",
    "controller_ref",
    "owner_workload",
]

OWNER_TTL_SECONDS = 30.0
"""How long an owner read through the API is reused (its replica count) before it is read again."""
Raw = dict[str, Any]


@dataclass(frozen=True)
class WorkloadLimit:
    """The pod's owning workload (a UID), how many of its pods may migrate at once, and its display name."""

    uid: str
    max_migrating: int
    name: str = ""


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
            return ref
    return None


def owner_workload(pod: Mapping[str, Any]) -> WorkloadLimit | None:
    """Fallback workload of a pod: its controller owner reference, one migration at a time."""
    ref = controller_ref(pod)
    if ref is None:
        return None
    meta = pod.get("metadata") or {}
    return WorkloadLimit(str(ref["uid"]), 1, f"{ref.get('kind')} {meta.get('namespace')}/{ref.get('name')}")


@dataclass
class _OwnerEntry:
    expires: float
    workload: Workload | None
    parent: Mapping[str, Any] | None
    """The owner's own controller reference (to follow the chain), None at the top."""


MAX_OWNER_DEPTH = 3
"""Controller chain followed per pod (Pod -> ReplicaSet -> Deployment is 2)."""


class OwnerCache:
    """Owners (ReplicaSets, Deployments, ...) read through the API by UID, reused for
    :data:`OWNER_TTL_SECONDS`. An owner that is gone, forbidden or of a kind the API does not serve is
    remembered as unknown (its per-workload filters pass, as the arbitration documents)."""

    def __init__(self, api: MigrationApi, clock: Callable[[], float], logger: logging.Logger) -> None:
        self.api = api
        self.clock = clock
        self._logger = logger
        self._entries: dict[str, _OwnerEntry] = {}
        self._expiry: collections.deque[tuple[float, str]] = collections.deque()
        """(expiry, uid) in the order the entries were read: their expiries ascend (one TTL for all)."""

    async def _read(self, namespace: str, ref: Mapping[str, Any], now: float) -> _OwnerEntry:
        owner = await self.api.get_owner(namespace, ref)
        workload = None
        parent = None
        if owner is not None:
            try:
                workload = workload_from_dict(owner)
                parent = controller_ref(owner)
            except MigrationObjectError as exc:
                self._logger.debug("owner %s/%s read as unknown: %s", ref.get("kind"), ref.get("name"), exc)
        entry = _OwnerEntry(now + OWNER_TTL_SECONDS, workload, parent)
        self._remember(str(ref.get("uid")), entry)
        return entry

    def _remember(self, uid: str, entry: _OwnerEntry) -> None:
        self._entries[uid] = entry
        self._expiry.append((entry.expires, uid))

    async def chain(
        self, pod: Mapping[str, Any], workloads: dict[str, Workload], budget: list[int], now: float
    ) -> bool:
        """Put the pod's controller chain into ``workloads`` (by UID); False when a read is still missing
        (``budget`` ran out, or a read failed: tried again next round)."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        ref = controller_ref(pod)
        for _ in range(MAX_OWNER_DEPTH):
            if ref is None:
                return True
            uid = str(ref.get("uid"))
            entry = self._entries.get(uid)
            if entry is None or entry.expires <= now:
                if budget[0] <= 0:
                    return False
                budget[0] -= 1
                try:
                    entry = await self._read(namespace, ref, now)
                except (kube_errors.ApiError, ValueError) as exc:
                    if isinstance(exc, ValueError) or not kube_errors.is_temporary(exc):
                        # a reference the API cannot address: unknown for good (until it expires)
                        self._logger.debug("owner %s/%s read as unknown: %s", ref.get("kind"), ref.get("name"), exc)
                        entry = _OwnerEntry(now + OWNER_TTL_SECONDS, None, None)
                        self._remember(uid, entry)
                    else:
                        raise
            if entry.workload is None:
                return True
            workloads[uid] = entry.workload
            ref = entry.parent
        return True

    def prune(self, now: float) -> None:
        """Drop the entries that expired (an owner deleted is never read again, so its entry would stay):
        amortised O(1) per entry read."""
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            expires, uid = expiry.popleft()
            entry = self._entries.get(uid)
            if entry is not None and entry.expires == expires:  # not read again since
                del self._entries[uid]
