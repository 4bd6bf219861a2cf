"""Carries out :func:`koordpy.scheduler.plugins.reservation.controller.decide` in the manager: one round per
``reservation.intervalSeconds`` reads the cluster through a :class:`ReservationApi` (in the manager: the
watch caches of :mod:`koordpy.manager.cache`, no list), asks ``decide`` and executes its decision (create
Reservations and write their status, write the status of existing ones, delete the ones to delete, post
Events). A round runs only when :meth:`ReservationController.due`: with ``reservation.enabled: false`` and
no Reservation, never.

A Reservation that cannot be used (a field koordpy cannot read, a negative request) is failed once:
phase ``Failed``, condition ``Ready`` False with reason ``Invalid`` naming the field, one Warning Event;
it is then left alone (neither placed nor deleted: its author fixes or deletes it).

Restart-safe by construction: nothing that matters lives in memory. Every round starts from the caches,
and ``decide`` recognises the starving-job Reservations a previous process created (deterministic names and
the ``koordpy.io/starving-job`` label), so a restarted manager adopts them instead of creating duplicates.
A lost race is not an error: 409 on create (someone created the name since our list) and 404 on a status
write or delete (deleted since our list) are counted and the next round decides again from what exists.

Not guaranteed: Events are throttled in memory per object and reason (the same message is not posted
again; a new one at most once per ``EVENT_INTERVAL_SECONDS``, a held-back one is dropped), forgotten for
objects no longer listed, and start fresh after a restart; ordering between the calls of one round; a
round that fails half-way (an API error other than 409/404) leaves the other half to the next round.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client import Counter as PromCounter

from koordpy.config.reservation import ReservationSettings
from koordpy.manager.gang_status import EventThrottle
from koordpy.manager.reservation_hold import NodeHoldApi, apply_hold, reservations_after
from koordpy.manager.rounds import RoundLoop
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import (
    NodeInfo,
    NodeMetricInfo,
    ObjectError,
    PodInfo,
    node_from_dict,
    nodemetric_from_dict,
    pod_from_dict,
)
from koordpy.model.placement import PodPlacement, placement_from_dict
from koordpy.scheduler.plugins.gang import API_SIGS, PodGroupError, PodGroupInfo, podgroup_from_dict
from koordpy.scheduler.plugins.reservation.controller import (
    EventDecision,
    Regarding,
    ReservationDecision,
    ReservationInputs,
    decide,
)
from koordpy.scheduler.plugins.reservation.hold import has_hold_taint
from koordpy.scheduler.plugins.reservation.spec import PHASES, ReservationInfo, reservation_from_dict

__all__ = [
    "EVENT_INTERVAL_SECONDS",
    "REASON_INVALID",
    "ClusterSnapshot",
    "ConversionCache",
    "Decide",
    "ReservationApi",
    "ReservationController",
    "ReservationMetrics",
    "RoundResult",
    "Source",
    "WriteRefusedError",
    "inputs_from_snapshot",
    "reservation_loop",
    "unusable_reason",
]

REASON_INVALID = "Invalid"
"""Reason of the Ready condition (phase Failed) and of the Event on a Reservation that cannot be used."""

EVENT_INTERVAL_SECONDS = 60.0
"""At most one new Event message per object and reason in this many seconds (the same one is never repeated)."""

Raw = dict[str, Any]
Decide = Callable[[ReservationInputs, ReservationSettings, float], ReservationDecision]
"""The pure decision (``decide`` with the settings and time as arguments); injectable for tests."""


class WriteRefusedError(Exception):
    """A write lost a race: ``outcome`` is ``exists`` (409 on create), ``conflict`` (409 otherwise) or
    ``gone`` (404); or was not allowed: ``forbidden`` (403 on a taint or toleration, whose verbs the chart
    grants only with ``reservation.taintNodes``)."""

    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(f"{outcome}: {detail}")
        self.outcome = outcome


@dataclass(frozen=True)
class ClusterSnapshot:
    """Raw API objects of one round. ``podgroups`` holds the PodGroups of each API the manager watches, each
    item with its ``apiVersion`` filled in; ``nodemetrics`` feed the load-aware filter of placement
    (``reservation.loadAware``)."""

    nodes: Sequence[Raw]
    pods: Sequence[Raw]
    podgroups: Sequence[Raw]
    reservations: Sequence[Raw]
    nodemetrics: Sequence[Raw] = ()


class NodeSource(Protocol):
    def values(self) -> Iterable[Mapping[str, Any]]: ...


class Source(Protocol):
    """Where the snapshot comes from (the manager's cache): whether it is complete, the Reservations and
    the nodes (for a hold taint left behind)."""

    @property
    def reservations(self) -> Sized: ...

    @property
    def nodes(self) -> NodeSource: ...

    def not_ready(self) -> str | None: ...


class ReservationApi(Protocol):
    """The calls a round makes. Writes raise :class:`WriteRefusedError` for 409/404; other errors propagate."""

    async def snapshot(self) -> ClusterSnapshot: ...

    async def create_reservation(self, body: Mapping[str, Any]) -> Raw: ...

    async def patch_reservation_status(self, name: str, status: Mapping[str, Any]) -> Raw: ...

    async def delete_reservation(self, name: str, uid: str | None) -> None: ...

    async def post_event(self, involved: Mapping[str, Any], event: EventDecision) -> None: ...


class ReservationMetrics:
    """Prometheus metrics of the reservation rounds, on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reservations = Gauge(
            "koordpy_reservations",
            "Reservations by status.phase after the last round (Pending includes an empty phase).",
            ["phase"],
            registry=registry,
        )
        self.starving_jobs = Gauge(
            "koordpy_reservation_starving_jobs",
            "Jobs the last round found starving (waiting past starvingJobTimeThreshold, not Ready).",
            registry=registry,
        )
        self.actions = PromCounter(
            "koordpy_reservation_actions",
            "Reservation writes by action (create, status, delete, event; tolerate, taint, untaint with "
            "reservation.taintNodes) and outcome "
            "(done, exists, conflict, gone, error).",
            ["action", "outcome"],
            registry=registry,
        )
        self.rounds = PromCounter(
            "koordpy_reservation_rounds", "Reservation rounds by outcome (done, error).", ["outcome"], registry=registry
        )
        # zero series from the start (the first error counts in increase(); the dashboard has every phase)
        for outcome in ("done", "error"):
            self.rounds.labels(outcome=outcome)
        for action in ("create", "status", "delete", "event"):
            for outcome in ("done", "error"):
                self.actions.labels(action=action, outcome=outcome)
        self.observe({}, 0)

    def observe(self, phases: Mapping[str, int], starving: int) -> None:
        for phase in {*(p or "Pending" for p in PHASES), *phases}:
            self.reservations.labels(phase=phase).set(phases.get(phase, 0))
        self.starving_jobs.set(starving)


@dataclass
class RoundResult:
    """What one round did: the decision and each write's outcome by ``(action, outcome)``."""

    decision: ReservationDecision
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    phases: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    """Objects that could not be read, ``kind namespace/name: problem``."""


def _name(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class ConversionCache:
    """Read objects by ``(kind, uid)``, reused while their ``resourceVersion`` is unchanged (the API server
    gives every change a new one). Objects without a uid or resourceVersion are read every time; entries
    of objects a round did not list are dropped by :meth:`prune`. Not thread-safe: one round at a time."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[str, Any]] = {}
        self._seen: set[tuple[str, str]] = set()

    def read(self, kind: str, raw: Raw, read: Callable[[Raw], Any]) -> Any:
        meta = raw.get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        if not uid or not version:
            return read(raw)
        key = (kind, str(uid))
        self._seen.add(key)
        hit = self._entries.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = read(raw)
        self._entries[key] = (str(version), value)
        return value

    def prune(self) -> None:
        self._entries = {k: v for k, v in self._entries.items() if k in self._seen}
        self._seen = set()

    def __len__(self) -> int:
        return len(self._entries)


def _read_pod(raw: Raw) -> tuple[PodInfo, PodPlacement]:
    return pod_from_dict(raw), placement_from_dict(raw)


def _convert(
    raw: Sequence[Raw], kind: str, read: Callable[[Raw], Any], skipped: list[str], cache: ConversionCache
) -> list[Any]:
    out = []
    for item in raw:
        try:
            out.append(cache.read(kind, item, read))
        except (ObjectError, PodGroupError, ValueError, TypeError, KeyError) as exc:
            skipped.append(f"{kind} {_name(item)}: {exc}")
    return out


def unusable_reason(res: ReservationInfo) -> str | None:
    """Why a Reservation that reads fine still cannot hold anything (a negative request, which the API
    server refuses on a pod but not in a Reservation's template), or None."""
    negative = sorted(name for name, amount in res.requests.items() if amount < 0)
    if negative:
        return f"spec.template.spec.containers[].resources.requests: {', '.join(negative)} is negative"
    return None


def _read_reservations(
    raw: Sequence[Raw], cache: ConversionCache, unusable: list[tuple[Raw, str]]
) -> list[ReservationInfo]:
    out = []
    for item in raw:
        try:
            info: ReservationInfo = cache.read("Reservation", item, reservation_from_dict)
        except (ObjectError, ValueError, TypeError, KeyError) as exc:
            unusable.append((item, str(exc)))
            continue
        problem = unusable_reason(info)
        if problem is not None:
            unusable.append((item, problem))
            continue
        out.append(info)
    return out


def inputs_from_snapshot(
    snapshot: ClusterSnapshot,
    skipped: list[str],
    cache: ConversionCache | None = None,
    unusable: list[tuple[Raw, str]] | None = None,
) -> ReservationInputs:
    """The decision's inputs; an object that cannot be read is left out and named in ``skipped``. A
    Reservation that cannot be read or holds nothing usable (:func:`unusable_reason`) is left out too and
    put into ``unusable`` with the problem (the round fails it), else named in ``skipped``. With
    ``cache``, objects unchanged since the last call are not read again (and the cache is pruned to this
    snapshot)."""
    cache = cache if cache is not None else ConversionCache()
    nodes: list[NodeInfo] = _convert(snapshot.nodes, "Node", node_from_dict, skipped, cache)
    read_pods: list[tuple[PodInfo, PodPlacement]] = _convert(snapshot.pods, "Pod", _read_pod, skipped, cache)
    podgroups: list[PodGroupInfo] = _convert(snapshot.podgroups, "PodGroup", podgroup_from_dict, skipped, cache)
    found: list[tuple[Raw, str]] = []
    reservations = _read_reservations(snapshot.reservations, cache, found)
    if unusable is not None:
        unusable.extend(found)
    else:
        skipped.extend(f"Reservation {_name(item)}: {problem}" for item, problem in found)
    metrics: list[NodeMetricInfo] = _convert(snapshot.nodemetrics, "NodeMetric", nodemetric_from_dict, skipped, cache)
    cache.prune()
    return ReservationInputs(
        nodes=nodes,
        pods=[pod for pod, _ in read_pods],
        podgroups=podgroups,
        reservations=reservations,
        metrics={metric.name: metric for metric in metrics},
        placements={pod.uid: placement for pod, placement in read_pods},
    )


def _decide(inputs: ReservationInputs, settings: ReservationSettings, now: float) -> ReservationDecision:
    return decide(inputs, settings, now, loadaware=settings.load_aware)


class ReservationController:
    """Runs reservation rounds against ``api``; ``clock`` returns epoch seconds."""

    def __init__(
        self,
        api: ReservationApi,
        settings: ReservationSettings,
        *,
        decide: Decide = _decide,
        clock: Callable[[], float] = time.time,
        metrics: ReservationMetrics | None = None,
        logger: logging.Logger | None = None,
        event_interval: float = EVENT_INTERVAL_SECONDS,
        hold_api: NodeHoldApi | None = None,
        source: Source | None = None,
    ) -> None:
        self.api = api
        self.hold_api = hold_api if hold_api is not None else api if isinstance(api, NodeHoldApi) else None
        """Where ``reservation.taintNodes`` writes taints and tolerations (:mod:`.reservation_hold`); the
        Reservation API itself when it has those writes. None: no hold is written."""
        self.source = source
        self._warned: set[str] = set()
        self.settings = settings
        self.decide = decide
        self.clock = clock
        self.metrics = metrics
        self.throttle = EventThrottle(event_interval)
        self._event_keys: set[str] = set()
        """Objects the throttle remembers; forgotten once a round no longer lists them (bounded memory)."""
        self._logger = logger or logging.getLogger("koordpy.manager")
        self.last: RoundResult | None = None
        self.cache = ConversionCache()

    def due(self) -> bool:
        """Whether a round has anything to do: never before the ``source`` caches hold their first lists (a
        round on a half-listed cluster would place Reservations on nodes that look empty); then with
        ``reservation.enabled`` (starving jobs are found over time) or ``reservation.taintNodes``, while a
        node still carries the hold taint (it is taken off), or while any Reservation exists (to place, to
        expire, to release). Without a ``source`` always."""
        source = self.source
        if source is None:
            return True
        if source.not_ready() is not None:
            return False
        if self.settings.enabled or self.settings.taint_nodes or len(source.reservations) > 0:
            return True
        return any(has_hold_taint((node.get("spec") or {}).get("taints") or ()) for node in source.nodes.values())

    async def run_round(self) -> RoundResult:
        """Read the snapshot, decide, execute. Returns what was done (also kept in :attr:`last`)."""
        snapshot = await self.api.snapshot()
        skipped: list[str] = []
        unusable: list[tuple[Raw, str]] = []
        now = self.clock()
        # why: reading thousands of objects and deciding is CPU work; in a worker thread the operator's
        # event loop keeps serving its watches meanwhile (the GIL is shared, the loop is not blocked).
        inputs, decision = await asyncio.to_thread(self._decide_on, snapshot, skipped, now, unusable)
        for problem in skipped:
            if problem not in self._warned:
                self._logger.warning("reservation round: skipped %s", problem)
        self._warned = set(skipped)  # each problem is logged once while it lasts
        result = RoundResult(decision, skipped=skipped)
        await self._fail_unusable(unusable, now, result)
        objects = _index(snapshot)
        phases: dict[str, str] = {r.name: (r.phase or "Pending") for r in inputs.reservations}
        made: dict[str, Raw] = {}

        for new in decision.creates:
            outcome, created = await self._write("create", new.name, self.api.create_reservation(new.manifest), result)
            if outcome != "done":
                continue
            made[new.name] = created
            objects[("Reservation", "", new.name)] = {**_RESERVATION_TYPE, **created}
            self._logger.info("reservation %s created for %s on node %s", new.name, new.job, new.node)
            phases[new.name] = "Pending"
            if new.status:
                outcome, _ = await self._write(
                    "status", new.name, self.api.patch_reservation_status(new.name, new.status), result
                )
                if outcome == "done":
                    phases[new.name] = str(new.status.get("phase") or "Pending")
        for update in decision.statuses:
            outcome, _ = await self._write(
                "status", update.name, self.api.patch_reservation_status(update.name, update.status), result
            )
            if outcome == "done":
                phases[update.name] = str(update.status.get("phase") or "Pending")
                self._logger.info("reservation %s status: phase %s", update.name, update.status.get("phase"))
        for deletion in decision.deletes:
            known = objects.get(("Reservation", "", deletion.name))
            uid = str(((known or {}).get("metadata") or {}).get("uid") or "") or None
            call = self.api.delete_reservation(deletion.name, uid)
            outcome, _ = await self._write("delete", deletion.name, call, result)
            if outcome in ("done", "gone"):
                phases.pop(deletion.name, None)
            if outcome == "done":
                self._logger.info("reservation %s deleted (%s): %s", deletion.name, deletion.job, deletion.reason)
        if self.hold_api is not None:
            await self._hold(snapshot, inputs, decision, made=made, now=now, result=result)
        await self._post_events(decision.events, objects, now, result)
        listed = {f"{kind}/{namespace}/{name}" for kind, namespace, name in objects}
        gone = {key for key in self._event_keys if key.rpartition("#")[0] not in listed}
        self.throttle.forget(sorted(gone))
        self._event_keys -= gone
        self.throttle.pending.clear()  # held-back messages are not re-sent later: each round decides anew

        result.phases = dict(Counter(phases.values()))
        if self.metrics is not None:
            self.metrics.observe(result.phases, len(decision.starving))
            for (action, outcome), count in result.outcomes.items():
                self.metrics.actions.labels(action=action, outcome=outcome).inc(count)
        self.last = result
        return result

    async def _hold(
        self,
        snapshot: ClusterSnapshot,
        inputs: ReservationInputs,
        decision: ReservationDecision,
        *,
        made: Mapping[str, Raw],
        now: float,
        result: RoundResult,
    ) -> None:
        """Taints and tolerations so that starving-job Reservations hold against every scheduler."""
        assert self.hold_api is not None
        listed = {str((r.get("metadata") or {}).get("name")): r for r in snapshot.reservations}
        pods = {str((p.get("metadata") or {}).get("uid")): p for p in snapshot.pods}
        nodes = {str((n.get("metadata") or {}).get("name")): n for n in snapshot.nodes}

        async def write(action: str, name: str, call: Awaitable[Raw]) -> tuple[str, Raw]:
            return await self._write(action, name, call, result)

        await apply_hold(
            self.hold_api,
            inputs,
            reservations_after(listed, decision, made),
            nodes_raw=nodes,
            pods_raw=pods,
            now=now,
            enabled=self.settings.taint_nodes,
            write=write,
            logger=self._logger,
        )

    def _decide_on(
        self, snapshot: ClusterSnapshot, skipped: list[str], now: float, unusable: list[tuple[Raw, str]]
    ) -> tuple[ReservationInputs, ReservationDecision]:
        inputs = inputs_from_snapshot(snapshot, skipped, self.cache, unusable)
        return inputs, self.decide(inputs, self.settings, now)

    async def _fail_unusable(self, unusable: Sequence[tuple[Raw, str]], now: float, result: RoundResult) -> None:
        """Phase Failed (condition Ready False, reason ``Invalid``) and one Warning Event for each Reservation
        that cannot be read or holds nothing usable; one already failed so is left alone."""
        for raw, problem in unusable:
            name = str((raw.get("metadata") or {}).get("name") or "")
            raw_status = raw.get("status")
            status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
            ready = next(
                (c for c in status.get("conditions") or () if isinstance(c, Mapping) and c.get("type") == "Ready"),
                None,
            )
            if status.get("phase") == "Failed" and (ready or {}).get("reason") == REASON_INVALID:
                continue
            stamp = format_rfc3339(now)
            message = f"cannot be used: {problem}"[:1000]
            condition = {
                "type": "Ready",
                "status": "False",
                "reason": REASON_INVALID,
                "message": message,
                "lastProbeTime": stamp,
                "lastTransitionTime": stamp,
            }
            outcome, _ = await self._write(
                "status",
                name,
                self.api.patch_reservation_status(name, {"phase": "Failed", "conditions": [condition]}),
                result,
            )
            if outcome != "done":
                continue
            self._logger.warning("reservation %s failed: %s", name, message)
            event = EventDecision(Regarding("Reservation", "", name), "Warning", REASON_INVALID, message)
            involved = {**_RESERVATION_TYPE, **raw}
            try:
                await self.api.post_event(involved, event)
            except Exception as exc:  # why: an Event is advice, never state
                result.outcomes[("event", "error")] += 1
                self._logger.warning("Event %s on Reservation %s not posted: %s", REASON_INVALID, name, exc)
                continue
            result.outcomes[("event", "done")] += 1

    async def _write(self, action: str, name: str, call: Awaitable[Raw | None], result: RoundResult) -> tuple[str, Raw]:
        """Await one write and count its outcome: ``done`` with the server's answer, else the refusal."""
        try:
            answer = await call
        except WriteRefusedError as refused:
            result.outcomes[(action, refused.outcome)] += 1
            self._logger.info("reservation %s: %s refused (%s); the next round decides again", name, action, refused)
            return refused.outcome, {}
        result.outcomes[(action, "done")] += 1
        return "done", dict(answer or {})

    async def _post_events(
        self,
        events: Sequence[EventDecision],
        objects: Mapping[tuple[str, str, str], Raw],
        now: float,
        result: RoundResult,
    ) -> None:
        for event in events:
            kind, namespace, name = event.regarding.kind, event.regarding.namespace, event.regarding.name
            key = f"{kind}/{namespace}/{name}"
            # per object and reason: a transition (Reserved, Available, Released, ...) is never held back by
            # another reason's Event; a reason that repeats every round is posted once per new message
            throttled = f"{key}#{event.reason}"
            if not self.throttle.allow(throttled, throttled, event.message, now):
                continue
            self._event_keys.add(throttled)
            involved = objects.get((kind, namespace, name)) or _placeholder(kind, namespace, name)
            try:
                await self.api.post_event(involved, event)
            except Exception as exc:  # why: an Event is advice, never state; it must not fail the round
                result.outcomes[("event", "error")] += 1
                self._logger.warning("Event %s on %s not posted: %s", event.reason, key, exc)
                continue
            result.outcomes[("event", "done")] += 1


_RESERVATION_TYPE = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation"}
_API_VERSIONS = {"Reservation": "scheduling.koordinator.sh/v1alpha1", "Pod": "v1", "Node": "v1"}


def _placeholder(kind: str, namespace: str, name: str) -> Raw:
    """An Event's involved object when the round did not list it (uid unknown)."""
    meta: Raw = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": _API_VERSIONS.get(kind, f"{API_SIGS}/v1alpha1"), "kind": kind, "metadata": meta}


def _index(snapshot: ClusterSnapshot) -> dict[tuple[str, str, str], Raw]:
    """Listed objects by ``(kind, namespace, name)``, with ``apiVersion`` and ``kind`` filled in (list items of
    built-in kinds come without them). A PodGroup of the sigs API wins over the x-k8s one of the same name."""
    out: dict[tuple[str, str, str], Raw] = {}
    groups: list[tuple[str, str, Sequence[Raw]]] = [
        ("v1", "Node", snapshot.nodes),
        ("v1", "Pod", snapshot.pods),
        ("scheduling.koordinator.sh/v1alpha1", "Reservation", snapshot.reservations),
    ]
    for api_version, kind, items in groups:
        for item in items:
            meta = item.get("metadata") or {}
            key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            out[key] = {"apiVersion": api_version, "kind": kind, **item}
    for item in sorted(snapshot.podgroups, key=lambda pg: str(pg.get("apiVersion")) == f"{API_SIGS}/v1alpha1"):
        meta = item.get("metadata") or {}
        out[("PodGroup", str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = {"kind": "PodGroup", **item}
    return out


def reservation_loop(controller: ReservationController, interval: float) -> RoundLoop:
    """The loop of reservation rounds: one per ``interval`` when :meth:`ReservationController.due`, counted
    in ``koordpy_reservation_rounds_total{outcome}`` when the controller has metrics."""
    metrics = controller.metrics

    def outcome(name: str) -> None:
        if metrics is not None:
            metrics.rounds.labels(outcome=name).inc()

    return RoundLoop("reservation", controller.run_round, interval, due=controller.due, outcome=outcome)
