"""The reservation controller's decision: one pass over a snapshot, returned as values.

``decide`` is what the manager runs every ``intervalSeconds`` (and ``koordpy scheduler reservations``
prints). In order:

1. **Starving-job reservations to delete** (label ``koordpy.io/starving-job``, job from the annotation
   of the same name): the job is Ready, the job is gone, the reservation was created
   ``maxHoldSeconds`` ago or more, it expired, it ended (Succeeded/Failed), or its pod is bound
   elsewhere or gone.
2. **Status of placed reservations** (Available/Waiting), oldest first: expired → Failed (Ready False,
   reason Expired); node gone → Failed (reason Unschedulable); ``allocateOnce`` taken by an owner
   (:class:`.ledger.Holding` ``consumed``) → Succeeded with ``currentOwners``/``allocated``; Waiting
   whose node's free resources now cover it → Available; otherwise ``currentOwners``/``allocated``
   kept up to date.
3. **Placement of Pending reservations**, oldest first, each seeing the ones placed before it
   (:mod:`.placement`). Unplaceable: phase Pending, Scheduled False reason Unschedulable, message the
   per-node summary (written once, when the phase was not Pending yet).
4. **Starving jobs** (:mod:`.starving`): always reported; with ``enabled`` the first one gets
   ``preAllocation`` reservations for the members it still needs (``minMember − bound − reserved``),
   one per member, on the nodes the cap allows, unless a pending job of higher priority is placeable.

Not guaranteed: status writes compare phase, node, owners and allocation only (a reservation whose
Pending message would change is not rewritten); an expired user reservation is marked Failed, never
deleted (garbage collection is the user's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.config.reservation import ReservationSettings
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo
from koordpy.model.placement import NodeSelectorTerm, PodPlacement
from koordpy.model.quantity import format_bytes, format_cpu_millis
from koordpy.model.resources import ResourceList
from koordpy.scheduler.plugins.gang.spec import PodGroupInfo
from koordpy.scheduler.plugins.reservation.ledger import Holding, holdings_on_node
from koordpy.scheduler.plugins.reservation.placement import (
    LoadFilter,
    NodeTables,
    NodeUse,
    load_aware_filter,
    node_uses,
    place,
    reserved_by_others,
    template_fits,
)
from koordpy.scheduler.plugins.reservation.spec import (
    ReservationInfo,
    expiry,
    is_expired,
    is_owner,
    reservation_from_dict,
)
from koordpy.scheduler.plugins.reservation.starving import (
    ANNOTATION_STARVING_JOB,
    LABEL_MANAGED_BY,
    LABEL_STARVING_JOB,
    Job,
    StarvingJob,
    allowed_node_count,
    jobs_of,
    label_value,
    placeable,
    reservation_name,
    starving_jobs,
)

__all__ = [
    "API_VERSION",
    "Action",
    "Deletion",
    "EventDecision",
    "NewReservation",
    "Regarding",
    "ReservationDecision",
    "ReservationInputs",
    "ReservationView",
    "StarvingJob",
    "StatusUpdate",
    "apply_decision",
    "decide",
    "format_quantity",
]

API_VERSION = "scheduling.koordinator.sh/v1alpha1"
BYTE_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")


@dataclass(frozen=True)
class ReservationInputs:
    nodes: Sequence[NodeInfo]
    pods: Sequence[PodInfo]
    """Every pod seen, pending and assigned."""
    podgroups: Sequence[PodGroupInfo]
    reservations: Sequence[ReservationInfo]
    metrics: Mapping[str, NodeMetricInfo] = field(default_factory=dict)
    """Node name -> NodeMetric, for the load-aware filter in placement (may be empty)."""
    placements: Mapping[str, PodPlacement] = field(default_factory=dict)
    """Pod uid -> its placement constraints (``koordpy.model.placement.placement_from_dict``), copied
    into a starving member's reservation template and used by the placeability check; a pod missing
    here has none."""


@dataclass(frozen=True, slots=True)
class NewReservation:
    name: str
    job: str
    node: str
    manifest: dict[str, Any]
    """The whole Reservation to create (apiVersion, kind, metadata, spec)."""
    status: dict[str, Any]
    """The status to PATCH (subresource) right after the create."""


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    name: str
    status: dict[str, Any]
    """The whole status: phase, nodeName, allocatable, allocated, currentOwners, conditions."""


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    job: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Regarding:
    kind: str
    namespace: str
    """"" for cluster-scoped objects (Reservation)."""
    name: str


@dataclass(frozen=True, slots=True)
class EventDecision:
    regarding: Regarding
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ReservationView:
    """One row of the report's ``reservations`` list (the state after this decision)."""

    name: str
    job: str | None
    node: str | None
    phase: str
    requests: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Action:
    """One row of the report's ``actions`` list."""

    action: Literal["create", "place", "delete"]
    reservation: str
    node: str | None
    reason: str


@dataclass(frozen=True)
class ReservationDecision:
    starving: tuple[StarvingJob, ...]
    creates: tuple[NewReservation, ...]
    statuses: tuple[StatusUpdate, ...]
    deletes: tuple[Deletion, ...]
    events: tuple[EventDecision, ...]
    reservations: tuple[ReservationView, ...] = ()
    actions: tuple[Action, ...] = ()

    def report(self) -> dict[str, Any]:
        """The decision as JSON: ``{"starving": [...], "reservations": [...], "actions": [...]}``."""
        return {
            "starving": [
                {
                    "job": s.job,
                    "priority": s.priority,
                    "waitingSeconds": s.waiting_seconds,
                    "minMember": s.min_member,
                    "ready": s.ready,
                    "reserved": s.reserved,
                }
                for s in self.starving
            ],
            "reservations": [
                {"name": r.name, "job": r.job, "node": r.node, "phase": r.phase, "requests": dict(r.requests)}
                for r in self.reservations
            ],
            "actions": [
                {"action": a.action, "reservation": a.reservation, "node": a.node, "reason": a.reason}
                for a in self.actions
            ],
        }


def format_quantity(resource: str, amount: int) -> str:
    """Canonical integer -> quantity text: cpu as cores/millicores, byte resources binary-suffixed."""
    if resource == "cpu":
        return format_cpu_millis(amount)
    if resource.startswith(BYTE_RESOURCES):
        return format_bytes(amount)
    return str(amount)


def _quantities(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in sorted(resources.items())}


def _job_of(res: ReservationInfo) -> str | None:
    if LABEL_STARVING_JOB not in res.labels:
        return None
    return res.annotations.get(ANNOTATION_STARVING_JOB) or res.labels[LABEL_STARVING_JOB]


def _order(res: ReservationInfo) -> tuple[float, str]:
    return (res.creation_time if res.creation_time is not None else float("inf"), res.name)


class _Pass:
    """The mutable bookkeeping of one ``decide`` call."""

    def __init__(self, inputs: ReservationInputs, settings: ReservationSettings, now: float) -> None:
        self.inputs = inputs
        self.settings = settings
        self.now = now
        self.stamp = format_rfc3339(now)
        self.nodes = list(inputs.nodes)
        self.node_names = {n.name for n in self.nodes}
        self.uses: dict[str, NodeUse] = node_uses(self.nodes, inputs.pods)
        columns = {r for p in inputs.pods for r in p.requests} | {r for x in inputs.reservations for r in x.requests}
        self.tables = NodeTables(self.nodes, self.uses, columns)
        self.pods_by_key = {p.key: p for p in inputs.pods}
        self.work: dict[str, ReservationInfo] = {}
        self.existing: dict[str, ReservationInfo] = {r.name: r for r in inputs.reservations}
        self.creates: list[NewReservation] = []
        self.statuses: dict[str, StatusUpdate] = {}
        self.deletes: list[Deletion] = []
        self.events: list[EventDecision] = []
        self.actions: list[Action] = []
        self.holdings: dict[str, list[Holding]] = {}

    # ---- bookkeeping ----

    def refresh_holdings(self, node: str | None = None) -> None:
        """Recompute the holdings of ``node`` (None: every node); nodes holding nothing are left out."""
        placed: dict[str, list[ReservationInfo]] = {}
        for res in self.work.values():
            if res.node_name in self.node_names and (node is None or res.node_name == node):
                placed.setdefault(res.node_name, []).append(res)
        if node is None:
            self.holdings.clear()
        for name in [node] if node is not None else sorted(placed):
            use = self.uses.get(name)
            held = holdings_on_node(placed.get(name, []), use.pods if use else (), self.now)
            if held:
                self.holdings[name] = held
            else:
                self.holdings.pop(name, None)

    def holding(self, res: ReservationInfo) -> Holding | None:
        return next((h for h in self.holdings.get(res.node_name, ()) if h.reservation.name == res.name), None)

    def event(self, res: str, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(EventDecision(Regarding("Reservation", "", res), type_, reason, message))

    def status(
        self,
        res: ReservationInfo,
        phase: str,
        node: str,
        conditions: list[dict[str, Any]],
        holding: Holding | None = None,
    ) -> dict[str, Any]:
        owners: list[dict[str, Any]] = []
        allocated: ResourceList = {}
        if holding is not None:
            allocated = dict(holding.allocated)
            for key in holding.owners:
                pod = self.pods_by_key.get(key)
                namespace, _, name = key.partition("/")
                owners.append({"kind": "Pod", "namespace": namespace, "name": name, "uid": pod.uid if pod else ""})
        out: dict[str, Any] = {"phase": phase, "conditions": conditions}
        if node:
            out["nodeName"] = node
            out["allocatable"] = _quantities(res.requests)
        if holding is not None:
            out["allocated"] = _quantities(allocated)
            out["currentOwners"] = owners
        return out

    def condition(self, type_: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
        out = {
            "type": type_,
            "status": status,
            "reason": reason,
            "lastProbeTime": self.stamp,
            "lastTransitionTime": self.stamp,
        }
        if message:
            out["message"] = message
        return out

    def write(self, res: ReservationInfo, status: dict[str, Any], reason: str) -> None:
        phase = status["phase"]
        node = status.get("nodeName") or ""
        self.statuses[res.name] = StatusUpdate(res.name, status)
        self.work[res.name] = dataclasses.replace(res, phase=phase, node_name=node)
        self.actions.append(Action("place", res.name, node or None, f"{phase}: {reason}"))

    # ---- steps ----

    def delete_starving(self, jobs: Mapping[str, Job]) -> None:
        for res in sorted(self.existing.values(), key=_order):
            if res.deletion_time is not None:
                continue
            job_id = _job_of(res)
            reason = self._release_reason(res, job_id, jobs) if job_id is not None else None
            if reason is None:
                self.work[res.name] = res
                continue
            self.deletes.append(Deletion(res.name, job_id, reason))
            self.actions.append(Action("delete", res.name, res.node_name or None, reason))
            where = f" on {res.node_name}" if res.node_name else ""
            self.event(res.name, "Normal", "StarvingJobReleased", f"job {job_id} releases {res.name}{where}: {reason}")

    def _release_reason(self, res: ReservationInfo, job_id: str, jobs: Mapping[str, Job]) -> str | None:
        job = jobs.get(job_id)
        if job is None:
            return f"job {job_id} is gone (deleted or finished)"
        if job.ready:
            return f"job {job_id} is Ready ({len(job.bound)}/{job.min_member} members bound)"
        held = None if res.creation_time is None else self.now - res.creation_time
        if held is not None and held >= self.settings.max_hold_seconds:
            return f"held {int(held)}s, maxHoldSeconds is {self.settings.max_hold_seconds}"
        if is_expired(res, self.now):
            return "expired"
        if res.is_terminal:
            return f"phase {res.phase}"
        owners = [p for p in job.members if is_owner(res, p)]
        if not any(not p.node_name or p.node_name == res.node_name for p in owners):
            return "its pod is bound to another node or gone"
        return None

    def lifecycle(self) -> None:
        self.refresh_holdings()
        for res in sorted(self.work.values(), key=_order):
            if res.is_terminal:
                continue
            if is_expired(res, self.now):
                deadline = expiry(res)
                msg = "expired" if deadline is None else f"expired at {format_rfc3339(deadline)}"
                placed = self.condition("Scheduled", "True", "Scheduled") if res.node_name else None
                conds = [c for c in (placed,) if c] + [self.condition("Ready", "False", "Expired", msg)]
                self.write(res, self.status(res, "Failed", res.node_name, conds), msg)
                self.event(res.name, "Normal", "Expired", f"{res.name} {msg}")
                continue
            if not res.is_active:
                continue
            if res.node_name not in self.node_names:
                msg = f"node {res.node_name} no longer exists"
                conds = [self.condition("Ready", "False", "Unschedulable", msg)]
                self.write(res, self.status(res, "Failed", res.node_name, conds), msg)
                self.event(res.name, "Warning", "Unschedulable", msg)
                continue
            holding = self.holding(res)
            if holding is None:
                continue
            scheduled = self.condition("Scheduled", "True", "Scheduled")
            if holding.consumed:
                msg = f"allocated by {', '.join(holding.owners)}"
                conds = [scheduled, self.condition("Ready", "False", "Succeeded", msg)]
                self.write(res, self.status(res, "Succeeded", res.node_name, conds, holding), msg)
                self.event(res.name, "Normal", "Succeeded", f"{res.name} on {res.node_name} {msg}")
                continue
            phase = res.phase
            why = ""
            if phase == "Waiting" and self._covered(res):
                phase, why = "Available", f"free resources on {res.node_name} now cover the template"
            owners_now = {o for o in holding.owners}
            owners_before = {f"{o.namespace}/{o.name}" for o in res.current_owners}
            if phase == res.phase and owners_now == owners_before and dict(holding.allocated) == dict(res.allocated):
                continue
            conds = [scheduled]
            if phase == "Available":
                conds.append(self.condition("Ready", "True", "Available"))
            self.write(res, self.status(res, phase, res.node_name, conds, holding), why or "owners allocated")
            if why:
                self.event(res.name, "Normal", "Available", f"{res.name}: {why}")
        self.refresh_holdings()

    def _covered(self, res: ReservationInfo) -> bool:
        """Do the node's free resources (after its pods and the other holdings) cover the template?"""
        use = self.uses[res.node_name]
        others = reserved_by_others(res.name, self.holdings.get(res.node_name, ()))
        taken = dict(use.requested)
        for name, amount in others.items():
            taken[name] = taken.get(name, 0) + amount
        return template_fits(PodPlacement(), use.node, taken, res.requests).is_success

    def starving_nodes(self) -> set[str]:
        return {r.node_name for r in self.work.values() if r.is_active and _job_of(r) is not None}

    def cap(self, allowed: int) -> frozenset[str] | None:
        held = self.starving_nodes()
        return frozenset(held) if len(held) >= allowed else None

    def place_pending(self, load_filter: LoadFilter | None) -> None:
        allowed = allowed_node_count(self.nodes, self.settings.reserved_node_percent)
        for res in sorted(self.work.values(), key=_order):
            if res.phase not in ("", "Pending"):
                continue
            only = self.cap(allowed) if _job_of(res) is not None else None
            result = place(
                res, self.nodes, self.uses, self.holdings, load_filter=load_filter, only_nodes=only, tables=self.tables
            )
            if result.node is None:
                if res.phase == "Pending":
                    continue
                conds = [self.condition("Scheduled", "False", "Unschedulable", result.message)]
                self.write(res, self.status(res, "Pending", "", conds), result.message)
                self.event(res.name, "Warning", "Unschedulable", result.message)
                continue
            conds = [self.condition("Scheduled", "True", "Scheduled")]
            if result.phase == "Available":
                conds.append(self.condition("Ready", "True", "Available"))
            self.write(res, self.status(res, result.phase, result.node, conds), result.message)
            self.refresh_holdings(result.node)
            self.event(res.name, "Normal", "Scheduled", f"{res.name}: {result.message}")

    def holding_owner_uids(self) -> frozenset[str]:
        active = [r for r in self.work.values() if r.is_active]
        return frozenset(p.uid for p in self.inputs.pods if not p.node_name and any(is_owner(r, p) for r in active))

    def reserve(self, target: StarvingJob, job: Job, jobs: Sequence[Job], load_filter: LoadFilter | None) -> None:
        higher = [
            j
            for j in jobs
            if j.priority > target.priority
            and any(a > 0 for p in j.unbound for a in p.requests.values())
            and not j.ready
            and placeable(j, self.nodes, self.uses, self.holdings, self.inputs.placements, tables=self.tables)
        ]
        if higher:
            self.events.extend(
                EventDecision(
                    Regarding("Pod", p.namespace, p.name),
                    "Normal",
                    "ReservationDeferred",
                    f"starving job {job.id} waits: job {higher[0].id} "
                    f"(priority {higher[0].priority}) can be placed now",
                )
                for p in target.members[:1]
            )
            return
        allowed = allowed_node_count(self.nodes, self.settings.reserved_node_percent)
        if allowed == 0:
            return
        need = target.min_member - target.ready - target.reserved
        index_of = {p.uid: i for i, p in enumerate(job.members)}
        for pod in target.members:
            if need <= 0:
                break
            name = reservation_name(job.id, index_of[pod.uid])
            if name in self.existing or any(c.name == name for c in self.creates):
                continue  # adopted or being deleted: never a duplicate
            manifest = self._manifest(name, job, pod)
            draft = reservation_from_dict(
                {**manifest, "metadata": {**manifest["metadata"], "creationTimestamp": self.stamp}}
            )
            only = self.cap(allowed)
            result = place(draft, self.nodes, self.uses, self.holdings, only_nodes=only, tables=self.tables)
            if result.node is None:
                self.events.append(
                    EventDecision(
                        Regarding("Pod", pod.namespace, pod.name),
                        "Warning",
                        "ReservationUnschedulable",
                        f"no node can be reserved for starving job {job.id}: {result.message}",
                    )
                )
                continue
            conds = [self.condition("Scheduled", "True", "Scheduled")]
            if result.phase == "Available":
                conds.append(self.condition("Ready", "True", "Available"))
            status = self.status(draft, result.phase, result.node, conds)
            self.creates.append(NewReservation(name, job.id, result.node, manifest, status))
            self.work[name] = dataclasses.replace(draft, phase=result.phase, node_name=result.node)
            self.refresh_holdings(result.node)
            why = (
                f"starving job {job.id} (priority {job.priority}, waiting {target.waiting_seconds}s): {result.message}"
            )
            self.actions.append(Action("create", name, result.node, why))
            self.event(name, "Normal", "StarvingJobReserved", f"node {result.node} held for {pod.key}: {why}")
            self.events.append(
                EventDecision(
                    Regarding("Pod", pod.namespace, pod.name),
                    "Normal",
                    "Reserved",
                    f"node {result.node} is reserved for this pod by {name}: {why}",
                )
            )
            need -= 1

    def _manifest(self, name: str, job: Job, pod: PodInfo) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "containers": [{"name": "reserved", "resources": {"requests": _quantities(pod.requests)}}],
        }
        spec.update(_placement_fields(self.inputs.placements.get(pod.uid, PodPlacement())))
        if pod.priority is not None:
            spec["priority"] = pod.priority
        return {
            "apiVersion": API_VERSION,
            "kind": "Reservation",
            "metadata": {
                "name": name,
                "labels": {LABEL_STARVING_JOB: label_value(job.id), LABEL_MANAGED_BY: "koordpy"},
                "annotations": {ANNOTATION_STARVING_JOB: job.id},
            },
            "spec": {
                "template": {"spec": spec},
                "owners": [{"object": {"kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid}}],
                "ttl": f"{self.settings.max_hold_seconds}s",
                "preAllocation": True,
                "allocateOnce": True,
            },
        }

    def views(self) -> tuple[ReservationView, ...]:
        deleted = {d.name for d in self.deletes}
        rows = [
            ReservationView(r.name, _job_of(r), r.node_name or None, r.phase or "Pending", _quantities(r.requests))
            for r in self.work.values()
            if r.name not in deleted
        ]
        return tuple(sorted(rows, key=lambda v: v.name))


def _placement_fields(placement: PodPlacement) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if placement.node_selector:
        out["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        out["tolerations"] = [
            {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect)) if v}
            for t in placement.tolerations
        ]
    if placement.required_terms is not None:
        out["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [_term(t) for t in placement.required_terms]
                }
            }
        }
    return out


def _term(term: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.match_expressions:
        out["matchExpressions"] = [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in term.match_expressions
        ]
    if term.match_fields:
        out["matchFields"] = [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in term.match_fields
        ]
    return out


def decide(
    inputs: ReservationInputs,
    settings: ReservationSettings,
    now: float,
    *,
    loadaware: LoadAwareSchedulingArgs | None = None,
) -> ReservationDecision:
    """One decision pass (module docstring). ``loadaware`` None: no load-aware filter in placement."""
    run = _Pass(inputs, settings, now)
    jobs = jobs_of(inputs.pods, inputs.podgroups)
    by_id = {j.id: j for j in jobs}
    load_filter = (
        load_aware_filter(loadaware, run.nodes, inputs.pods, inputs.metrics, now) if loadaware is not None else None
    )
    run.delete_starving(by_id)
    run.lifecycle()
    run.place_pending(load_filter)
    starving = starving_jobs(jobs, run.holding_owner_uids(), settings, now)
    if settings.enabled and starving:
        run.reserve(starving[0], by_id[starving[0].job], jobs, load_filter)
    return ReservationDecision(
        starving=tuple(starving),
        creates=tuple(run.creates),
        statuses=tuple(run.statuses.values()),
        deletes=tuple(run.deletes),
        events=tuple(run.events),
        reservations=run.views(),
        actions=tuple(run.actions),
    )


def apply_decision(
    reservations: Mapping[str, Mapping[str, Any]], decision: ReservationDecision, now: float
) -> dict[str, dict[str, Any]]:
    """What the API would hold after the decision is carried out at ``now``: ``reservations`` (name ->
    Reservation object) with the creates added (``creationTimestamp`` ``now``, ``uid`` the name, status
    patched), the status writes applied and the deletes removed. For the simulator and tests; the
    manager talks to the API server instead.

    Not guaranteed: finalizers and graceful deletion are not modelled (a delete removes at once).
    """
    out = {name: dict(obj) for name, obj in reservations.items()}
    stamp = format_rfc3339(now)
    for create in decision.creates:
        meta = {**create.manifest["metadata"], "creationTimestamp": stamp, "uid": create.name}
        out[create.name] = {**create.manifest, "metadata": meta, "status": create.status}
    for update in decision.statuses:
        if update.name in out:
            out[update.name] = {**out[update.name], "status": update.status}
    for deletion in decision.deletes:
        out.pop(deletion.name, None)
    return out
