"""Jobs that passed arbitration together (a gang that moves as one, :mod:`koordpy.descheduler.arbitration`):
the annotation ``koordpy.io/gang-migration`` naming the gang and its jobs, and the barrier that lets a
``ReservationFirst`` job of such a unit evict only once every job of the unit has its Reservation Available
or has evicted already.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from koordpy.descheduler.job_status import CONDITION_EVICTION, PENDING, RUNNING, SUCCEEDED, condition
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.descheduler.reservation_first import foreign, read_reservation, reservation_name

__all__ = [
    "ANNOTATION_GANG_MIGRATION",
    "GangEvictionBarrier",
    "GangMigration",
    "gang_eviction_barrier",
    "gang_migration",
    "gang_migration_value",
]

ANNOTATION_GANG_MIGRATION = "koordpy.io/gang-migration"
"""On jobs that passed arbitration together: JSON ``{"gang": <gang or GangGroup>, "jobs": [<job names>]}``."""


@dataclass(frozen=True)
class GangMigration:
    """A job's ``koordpy.io/gang-migration`` annotation: the jobs it passed arbitration with."""

    gang: str
    """The gang or GangGroup, as arbitration names it (``gang ns/name``, ``GangGroup [a,b]``)."""
    jobs: tuple[str, ...]
    """Every job of the unit, this one included."""


def gang_migration_value(gang: str, jobs: Sequence[str]) -> str:
    """The annotation's value for the jobs of one unit."""
    return json.dumps({"gang": gang, "jobs": sorted(jobs)}, sort_keys=True, separators=(",", ":"))


def gang_migration(job: Mapping[str, Any]) -> GangMigration | None:
    """The job's unit, None without the annotation (or with one that does not parse: the job then moves
    as any other)."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_GANG_MIGRATION)
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, Mapping):
        return None
    gang, jobs = value.get("gang"), value.get("jobs")
    if not isinstance(gang, str) or not isinstance(jobs, list) or not all(isinstance(j, str) for j in jobs):
        return None
    return GangMigration(gang, tuple(jobs))


@dataclass(frozen=True)
class GangEvictionBarrier:
    """Whether a ``ReservationFirst`` job of a gang unit may evict now (:func:`gang_eviction_barrier`)."""

    state: Literal["go", "wait", "broken"]
    message: str = ""


def gang_eviction_barrier(
    job: Mapping[str, Any],
    unit: GangMigration,
    jobs: Mapping[str, Mapping[str, Any] | None],
    reservations: Mapping[str, Mapping[str, Any]],
    *,
    now: float,
    settings: LifecycleSettings,
) -> GangEvictionBarrier:
    """``go`` when every other job of ``unit`` has evicted (condition ``Eviction`` present), finished
    Succeeded, runs ``EvictDirectly``, or has its Reservation Available; ``broken`` when one is gone, or
    Failed or Aborted before its eviction; else ``wait``. ``jobs``: the unit's jobs by name as read now
    (None: not found); ``reservations``: by name."""
    own = str((job.get("metadata") or {}).get("name") or "")
    waiting: list[str] = []
    for name in unit.jobs:
        if name == own:
            continue
        other = jobs.get(name)
        if other is None:
            return GangEvictionBarrier("broken", f"{unit.gang} moves as one, and its job {name} is gone")
        status = other.get("status") or {}
        phase = status.get("phase") or PENDING
        if condition(status, CONDITION_EVICTION) is not None or phase == SUCCEEDED:
            continue
        if phase not in (PENDING, RUNNING):
            why = status.get("reason") or phase
            return GangEvictionBarrier(
                "broken", f"{unit.gang} moves as one, and its job {name} ended {why} before its eviction"
            )
        mode = (other.get("spec") or {}).get("mode") or settings.default_job_mode
        if phase == RUNNING and mode == "EvictDirectly":
            continue
        found = reservations.get(reservation_name(other)) if phase == RUNNING else None
        if found is not None and not foreign(other, found):
            state = read_reservation(found, now)
            if state.placed and state.phase == "Available":
                continue
        waiting.append(name)
    if not waiting:
        return GangEvictionBarrier("go")
    return GangEvictionBarrier(
        "wait",
        f"{unit.gang} moves as one: its member is evicted once the Reservations of jobs "
        f"{', '.join(waiting)} are Available",
    )
