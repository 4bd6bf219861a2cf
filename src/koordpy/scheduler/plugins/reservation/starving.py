"""Starving jobs (the Volcano reserve seed) and the rules for holding nodes for them.

* A **job** is a gang (resolved as gang scheduling resolves it: PodGroup label or gang annotations,
  :mod:`koordpy.scheduler.plugins.gang`; its ``minMember`` from there) or a single pod in no gang
  whose ``spec.priority`` is set (admission sets it from the pod's PriorityClass). Its priority is
  the highest member priority (unset counts as 0); its creation time is the PodGroup's, else the
  earliest member's.
* **Ready**: at least ``minMember`` members are bound (``spec.nodeName`` set, phase not Failed).
  **Condition Ready**: bound + *reserved* ≥ ``minMember``, where a reserved member is an unbound
  member that owns a reservation holding on a node (Available or Waiting).
* **Starving**: priority ≥ ``priorityThreshold``, created more than ``starvingJobTimeThreshold``
  seconds ago, neither Ready nor Condition Ready, and with at least one unbound member that
  requests resources (a BestEffort member is never short of resources) and, when ``schedulerNames`` is
  set, is scheduled by one of them (another scheduler's pod never binds through a Reservation).
* The job reserved for is the first starving job by (priority desc, waiting longest, id), and only
  when no *pending* job of strictly higher priority could be placed now (:func:`placeable`). Pending
  jobs that request nothing (BestEffort) do not count: a reservation never blocks them.
* **Cap**: at most ``floor(reservedNodePercent × schedulable nodes / 100)`` distinct nodes hold
  starving-job reservations (schedulable: not cordoned). A job may add reservations on nodes already
  held. When the cap is 0 (0 %, or e.g. 20 % of 4 nodes) no starving-job reservation is created.

Not guaranteed: a pod and a gang with the same ``namespace/name`` share a job id; gang groups
(several gangs admitted together) are treated gang by gang.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import inf
from typing import Literal

import numpy as np

from koordpy.config.gang import CoschedulingArgs
from koordpy.config.reservation import ReservationSettings
from koordpy.model.objects import NodeInfo, PodInfo
from koordpy.model.placement import PodPlacement
from koordpy.model.resources import ResourceList
from koordpy.scheduler.plugins.gang.spec import (
    GangRef,
    PodGroupInfo,
    gang_ref,
    spec_from_pod,
    spec_from_podgroup,
)
from koordpy.scheduler.plugins.reservation.ledger import Holding, reserved_against
from koordpy.scheduler.plugins.reservation.placement import NodeTables, NodeUse, template_vector

__all__ = [
    "ANNOTATION_STARVING_JOB",
    "LABEL_MANAGED_BY",
    "LABEL_STARVING_JOB",
    "Job",
    "StarvingJob",
    "allowed_node_count",
    "jobs_of",
    "label_value",
    "placeable",
    "reservation_name",
    "starving_jobs",
]

LABEL_STARVING_JOB = "koordpy.io/starving-job"
ANNOTATION_STARVING_JOB = "koordpy.io/starving-job"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MAX_NAME = 63


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    """``namespace/name`` of the gang, or of the pod for a single-pod job."""
    kind: Literal["gang", "pod"]
    priority: int
    created: float | None
    min_member: int
    members: tuple[PodInfo, ...]
    """Non-terminated members, sorted by name (a member's index is its position here)."""

    @property
    def bound(self) -> tuple[PodInfo, ...]:
        return tuple(p for p in self.members if p.node_name and p.phase != "Failed")

    @property
    def unbound(self) -> tuple[PodInfo, ...]:
        return tuple(p for p in self.members if not p.node_name and p.deletion_time is None)

    @property
    def ready(self) -> bool:
        return len(self.bound) >= self.min_member


@dataclass(frozen=True, slots=True)
class StarvingJob:
    """One row of the report's ``starving`` list."""

    job: str
    priority: int
    waiting_seconds: int
    min_member: int
    ready: int
    """Members bound."""
    reserved: int
    """Unbound members owning a reservation that holds."""
    members: tuple[PodInfo, ...] = field(default=(), compare=False, repr=False)
    """The job's unbound members that request resources (what would be reserved for)."""


def jobs_of(
    pods: Iterable[PodInfo], podgroups: Iterable[PodGroupInfo], args: CoschedulingArgs | None = None
) -> list[Job]:
    """Every job with at least one non-terminated member, sorted by id."""
    args = args if args is not None else CoschedulingArgs.model_validate({})
    groups: dict[tuple[str, str, str], PodGroupInfo] = {(pg.api, pg.namespace, pg.name): pg for pg in podgroups}
    gangs: dict[str, tuple[GangRef, list[PodInfo]]] = {}
    singles: list[PodInfo] = []
    for pod in pods:
        if pod.terminated and pod.phase != "Succeeded":
            continue
        ref = gang_ref(pod)
        if ref is not None:
            gangs.setdefault(ref.id, (ref, []))[1].append(pod)
        elif not pod.terminated and pod.priority is not None:
            singles.append(pod)
    out: list[Job] = []
    for gang_id, (ref, members) in gangs.items():
        members.sort(key=lambda p: p.name)
        pg = groups.get((ref.source, ref.namespace, ref.name))
        if ref.source == "annotations":  # first writer wins, as in the gang cache: the oldest member
            oldest = min(members, key=lambda p: (p.creation_time if p.creation_time is not None else inf, p.name))
            spec = spec_from_pod(ref, oldest, args)
        elif pg is not None:
            spec = spec_from_podgroup(ref, pg, args)
        else:
            continue  # the PodGroup the label names does not exist: the gang is not initialised
        if not spec.initialised:
            continue
        live = tuple(p for p in members if not p.terminated or p.phase == "Succeeded")
        created = pg.creation_time if pg is not None and pg.creation_time is not None else _earliest(live)
        out.append(Job(gang_id, "gang", _priority(live), created, max(spec.min_member, 1), live))
    for pod in singles:
        out.append(Job(pod.key, "pod", pod.priority or 0, pod.creation_time, 1, (pod,)))
    out.sort(key=lambda j: j.id)
    return out


def _earliest(pods: Iterable[PodInfo]) -> float | None:
    times = [p.creation_time for p in pods if p.creation_time is not None]
    return min(times) if times else None


def _priority(pods: Iterable[PodInfo]) -> int:
    return max((p.priority or 0 for p in pods), default=0)


def reserved_members(job: Job, holding_owner_uids: frozenset[str]) -> tuple[PodInfo, ...]:
    return tuple(p for p in job.unbound if p.uid in holding_owner_uids)


def starving_jobs(
    jobs: Iterable[Job], holding_owner_uids: frozenset[str], settings: ReservationSettings, now: float
) -> list[StarvingJob]:
    """The starving jobs in pick order: priority desc, waiting longest, id.

    ``holding_owner_uids``: uids of the pods that own a reservation holding on a node."""
    out: list[StarvingJob] = []
    for job in jobs:
        if job.priority < settings.priority_threshold or job.created is None or job.ready:
            continue
        waited = now - job.created
        if waited <= settings.starving_job_time_threshold:
            continue
        reserved = reserved_members(job, holding_owner_uids)
        if len(job.bound) + len(reserved) >= job.min_member:
            continue  # Condition Ready
        names = settings.scheduler_names
        wanting = tuple(
            p
            for p in job.unbound
            if p.uid not in holding_owner_uids
            and any(a > 0 for a in p.requests.values())
            and (not names or p.scheduler_name in names)
        )
        if not wanting:
            continue
        out.append(
            StarvingJob(job.id, job.priority, int(waited), job.min_member, len(job.bound), len(reserved), wanting)
        )
    out.sort(key=lambda s: (-s.priority, -s.waiting_seconds, s.job))
    return out


def placeable(
    job: Job,
    nodes: Sequence[NodeInfo],
    uses: Mapping[str, NodeUse],
    holdings: Mapping[str, Sequence[Holding]],
    placements: Mapping[str, PodPlacement],
    *,
    tables: NodeTables | None = None,
) -> bool:
    """Could the job's missing members (``minMember − bound``, unbound members by name) all be placed
    now, one after the other on the free resources (after pods and the reservations they do not own)?
    ``tables``: built over the same ``nodes`` and ``uses`` (None or not covering a member: built here)."""
    need = job.min_member - len(job.bound)
    if need <= 0:
        return False
    named = {r for p in job.unbound for r in p.requests} | {
        r for held in holdings.values() for h in held for r in h.remaining
    }
    own = tables if tables is not None and tables.covers(named) else NodeTables(nodes, uses, named)
    assumed: dict[str, ResourceList] = {}
    placed = 0
    for pod in job.unbound:
        if placed >= need:
            break
        used: dict[str, ResourceList] = {}
        for name in set(assumed) | {n for n, held in holdings.items() if held}:
            taken: ResourceList = {}
            for extra in (assumed.get(name, {}), reserved_against(pod, holdings.get(name, ()))):
                for resource, amount in extra.items():
                    taken[resource] = taken.get(resource, 0) + amount
            used[name] = taken
        table = own.with_used(used, pods=True)
        vec = template_vector(table, pod.requests)
        _, passing = own.verdicts(placements.get(pod.uid, PodPlacement()))
        rows = np.flatnonzero(table.feasible(vec) & passing)
        if not rows.size:
            return False
        extra = assumed.setdefault(own.names[int(rows[0])], {})
        for resource, amount in pod.requests.items():
            extra[resource] = extra.get(resource, 0) + amount
        placed += 1
    return placed >= need


def allowed_node_count(nodes: Iterable[NodeInfo], percent: int) -> int:
    """``floor(percent × schedulable nodes / 100)``; schedulable = not cordoned."""
    schedulable = sum(1 for n in nodes if not n.unschedulable)
    return schedulable * percent // 100


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def reservation_name(job_id: str, index: int) -> str:
    """``starving-<namespace>-<name>-<index>`` (DNS-1123 label); hashed when longer than 63."""
    base = "starving-" + "".join(c if c.isalnum() else "-" for c in job_id.lower().replace("/", "-"))
    suffix = f"-{index}"
    name = base + suffix
    if len(name) <= MAX_NAME:
        return name
    keep = MAX_NAME - len(suffix) - 11
    return f"{base[:keep].rstrip('-')}-{_digest(job_id)}{suffix}"


def label_value(job_id: str) -> str:
    """The job id with ``/`` replaced by ``.``; hashed when longer than 63."""
    value = job_id.replace("/", ".")
    if len(value) <= MAX_NAME:
        return value
    return f"{value[:52].rstrip('.-_')}.{_digest(job_id)}"
