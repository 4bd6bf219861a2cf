"""The calls the migration controller (:mod:`koordpy.manager.migration`) makes to the API server, as a
protocol (:class:`koordpy.manager.api.KubeMigrationApi` implements it over the manager's client), and the
refusals its implementations raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from koordpy.descheduler.decisions import JobEvent

__all__ = [
    "EvictionRefusedError",
    "MigrationApi",
    "ReservationRefusedError",
]


class EvictionRefusedError(Exception):
    """The API server refused an eviction (``code`` 429: a PodDisruptionBudget allows none now)."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class ReservationRefusedError(Exception):
    """The API server refused to create a Reservation (``code`` 409: it exists already)."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


Raw = dict[str, Any]


class MigrationApi(Protocol):
    """The calls the controller makes. Writes return the object as the API server stored it (stored in the
    cache at once). Implementations raise :class:`EvictionRefusedError` for a refused eviction, delete or
    annotation of the pod, :class:`ReservationRefusedError` for a refused Reservation create;
    :meth:`delete_reservation` (only while the Reservation has ``uid``: 409 otherwise) and :meth:`delete_job`
    ignore a missing object; other API errors propagate (:mod:`koordpy.kube.errors`)."""

    async def annotate_job(self, job: str, key: str, value: str) -> Raw: ...

    async def get_owner(self, namespace: str, ref: Mapping[str, Any]) -> Raw | None: ...

    async def set_pod_uid(self, job: str, uid: str) -> Raw: ...

    async def write_status(self, job: str, status: dict[str, Any]) -> Raw: ...

    async def delete_job(self, job: str) -> None: ...

    async def evict_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None: ...

    async def delete_pod(
        self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None
    ) -> Raw | None: ...

    async def annotate_pod(self, namespace: str, name: str, key: str, value: str) -> Raw: ...

    async def post_event(self, job: Mapping[str, Any], event: JobEvent) -> None: ...

    async def create_reservation(self, body: Mapping[str, Any]) -> Raw: ...

    async def delete_reservation(self, name: str, uid: str) -> None: ...

    async def set_reservation_ref(self, job: str, ref: Mapping[str, Any]) -> Raw: ...
