"""The extender's verbs on bytes in, bytes out: no HTTP framework in here.

``filter``, ``prioritize`` and ``preempt`` are synchronous (pure computation on the event loop); ``bind``
awaits the ``pods/binding`` call. Every verb answers; nothing raises to the caller:

* a malformed request -> ``Reply(4xx, {"Error": reason})``;
* not synced yet -> filter ``Error`` (kube-scheduler retries the pod), prioritize ``[]``;
* an unexpected exception -> logged, then the protocol's error shape with status 200 (filter and
  bind ``Error``; prioritize ``[]``, which kube-scheduler treats like an ignored prioritize error;
  preempt the candidates unchanged, so a fault of the extender never stops kube-scheduler's preemption).

``preempt`` removes from kube-scheduler's preemption candidates the nodes where preempting cannot help
or would loop: a pod owning a Reservation preempts only on its nodes; a node whose room stays reserved
with the victims gone is refused; a pod that preempted on a node and lost it to another scheduler does
not preempt for ``preemptionBackoffSeconds``
(:class:`koordpy.scheduler.framework.preemption.PreemptionBackoff`), except on a node held for it by
koordpy's taint (nobody else can refill that one); a node whose victims would take a running gang below its
minimum (a member of a gang of four with minimum 4; any member of a native ``disruptionMode: all`` gang
unless all of its running members are victims there) is refused
(:func:`koordpy.scheduler.plugins.gang.disruption.preemption_refusal`).

Not guaranteed: thread safety (one event loop); that a bind of a pod never seen by this process
counts its estimate before the watch reports it (it is counted, and logged, once the watch does).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import orjson

from koordpy.config.scheduler import ExtenderSettings
from koordpy.kube.errors import ApiError
from koordpy.kube.resources import PODS, ResourceRef
from koordpy.model.clock import Clock
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import PodInfo, pod_from_dict
from koordpy.scheduler.extender.cache import ClusterCache
from koordpy.scheduler.extender.gangs import GangBarrier
from koordpy.scheduler.extender.metrics import ExtenderMetrics
from koordpy.scheduler.extender.pending import PendingTracker, refusal_reason
from koordpy.scheduler.extender.protocol import (
    BindArgs,
    HostFragments,
    PreemptionArgs,
    ProtocolError,
    decode_args,
    decode_args_with_names,
    decode_bind_args,
    decode_preemption_args,
    encode_bind_result,
    encode_filter_error,
    encode_filter_result,
    encode_names_result,
    encode_preemption_result,
    encode_priorities,
    error_body,
    names_suffix,
    require_strings,
)
from koordpy.scheduler.framework.cluster import ClusterState, FilterOutcome
from koordpy.scheduler.framework.fit import REASON_INSUFFICIENT, REASON_TOO_MANY_PODS
from koordpy.scheduler.framework.preemption import PreemptionBackoff
from koordpy.scheduler.plugins.gang.disruption import gang_table, member_running, preemption_refusal
from koordpy.scheduler.plugins.loadaware.plugin import REASON_AGGREGATED_USAGE_EXCEED, REASON_USAGE_EXCEED
from koordpy.scheduler.plugins.reservation.hold import has_hold_taint
from koordpy.scheduler.plugins.reservation.ledger import REASON_RESERVED
from koordpy.scheduler.plugins.reservation.preemption import REASON_NOT_RESERVED_NODE, REASON_STILL_RESERVED
from koordpy.scheduler.plugins.reservation.spec import reservation_allocated

__all__ = ["UNREADABLE_POD_REASON", "BindStart", "Binder", "EventSink", "ExtenderService", "PodReader", "Reply"]

RECENT_PODS = 2048
"""Pods converted from filter/prioritize requests, kept (LRU) for reuse and for bind."""


class Binder(Protocol):
    """What bind needs from the API client (``koordpy.kube.client.ApiClient`` has it)."""

    async def create_binding(
        self, namespace: str, name: str, uid: str, node: str, *, annotations: Mapping[str, str] | None = None
    ) -> Any: ...


@runtime_checkable
class PodReader(Protocol):
    """Reads one pod by name (a list with a field selector: the extender's role has list, not get)."""

    async def list_page(
        self, resource: ResourceRef, *, namespace: str | None = None, field_selector: str | None = None
    ) -> dict[str, Any]: ...


class EventSink(Protocol):
    """What posting an Event needs from the API client (``koordpy.kube.client.ApiClient`` has it)."""

    async def create_event(
        self, involved_object: Any, *, reason: str, message: str, event_type: Any = ..., component: str = ...
    ) -> Any: ...


UNREADABLE_POD_REASON = "KoordpyUnreadablePod"
"""Event ``reason`` on a pod whose bind the extender refused because it could not read the pod."""
_UNREADABLE_EVENT_MEMORY = 1024
"""Pod versions remembered as told (one Event per version, however often kube-scheduler retries)."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes


@dataclass(slots=True)
class BindStart:
    """A ``/bind`` request read and started (:meth:`ExtenderService.start_bind`), not answered yet."""

    args: BindArgs
    where: str
    """``namespace/name`` of the pod."""
    started: float
    look_up: bool = False
    """The pod was not known: it is read from the API (and placed) before the bind goes on."""
    placed: PodInfo | None = None
    """The placement recorded for the pod (None: none was, the watch shows it)."""
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)
    """What the binding writes on the pod (a Reservation's allocation)."""
    failed: Exception | None = None
    """What went wrong while starting (answered as an internal error)."""


def _always_ready() -> str | None:
    return None


class ExtenderService:
    def __init__(
        self,
        *,
        cache: ClusterCache,
        fragments: HostFragments,
        settings: ExtenderSettings,
        metrics: ExtenderMetrics,
        binder: Binder | None,
        clock: Clock,
        log: Any,
        not_ready: Callable[[], str | None] = _always_ready,
        gangs: GangBarrier | None = None,
        reader: PodReader | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.cache = cache
        self.state: ClusterState = cache.state
        self.fragments = fragments
        self.settings = settings
        self.metrics = metrics
        self.binder = binder
        self.clock = clock
        self.log = log
        self.not_ready = not_ready
        self.gangs = gangs
        """The gang bind barrier (quorum in filter, held binds); None: gangs are not enforced."""
        self.pending = PendingTracker()
        """Pods the filter left without a node, since when and why (``koordpy_extender_pending_*``)."""
        self.reader = reader if reader is not None else (binder if isinstance(binder, PodReader) else None)
        """Reads a pod this process has not seen before its bind (the API client; the binder when it is one)."""
        self.events = events
        """Posts the Event on a pod whose bind is refused because it cannot be read (None: no Event)."""
        self._unreadable_told: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._event_tasks: set[asyncio.Task[None]] = set()
        self._recent: OrderedDict[str, tuple[str, PodInfo]] = OrderedDict()
        self._last_passed: list[str] | None = None
        self._last_passed_indices: npt.NDArray[np.int64] | None = None
        self._last_suffix: bytes | None = None
        self._last_removals = 0
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        """The latency and request-counter children of each (verb, outcome) seen."""
        self.backoff = PreemptionBackoff(settings.preemption_backoff_seconds)
        """Pods that preempted on a node and lost it: no preemption for them for a while."""
        self._placements = 0
        """How many placements binds have recorded (a sequence number)."""
        self._placed_on: dict[str, int] = {}
        """Node → the sequence number of the last placement a bind recorded on it."""
        self._filtered_at: OrderedDict[str, int] = OrderedDict()
        """Pod uid → the placements recorded when its last filter answer was computed (LRU)."""

    # ---- objects gone ------------------------------------------------------------------

    def forget_pod(self, uid: str) -> None:
        """A pod was deleted: drop what this service keeps about it (its converted request, the placements
        its last filter answer saw, its preemption back-off). Called from the pod watch."""
        self._recent.pop(uid, None)
        self._filtered_at.pop(uid, None)
        self.backoff.forget(uid)

    def forget_node(self, name: str) -> None:
        """A node was deleted: drop the sequence number of the last placement recorded on it. Called from the
        node watch (a node of the same name added later starts afresh)."""
        self._placed_on.pop(name, None)

    # ---- helpers -----------------------------------------------------------------------

    def _pod(self, raw: Mapping[str, Any], verb: str) -> PodInfo:
        """Convert the request's pod once; a pod with the same uid and resourceVersion is reused."""
        meta = raw.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if isinstance(uid, str) and uid and isinstance(version, str) and version:
            hit = self._recent.get(uid)
            if hit is not None and hit[0] == version:
                self._recent.move_to_end(uid)
                pod = hit[1]
                self._note_foreign(pod, verb)
                return pod
            if self.cache.pending_versions.get(uid) == version:  # the watch converted this very version
                pod = self.cache.pending[uid]
                self._remember(uid, version, pod)
                self._note_foreign(pod, verb)
                return pod
        try:
            pod = pod_from_dict(raw)
        except Exception as exc:
            raise ProtocolError(400, f"Pod: {exc}") from None
        self._remember(pod.uid, version if isinstance(version, str) else "", pod)
        self._note_foreign(pod, verb)
        return pod

    def _remember(self, uid: str, version: str, pod: PodInfo) -> None:
        self._recent[uid] = (version, pod)
        self._recent.move_to_end(uid)
        if len(self._recent) > RECENT_PODS:
            self._recent.popitem(last=False)

    def _note_filtered(self, uid: str) -> None:
        filtered = self._filtered_at
        filtered[uid] = self._placements
        filtered.move_to_end(uid)
        if len(filtered) > RECENT_PODS:
            filtered.popitem(last=False)

    def _note_foreign(self, pod: PodInfo, verb: str) -> None:
        if pod.scheduler_name != self.settings.scheduler_name:
            self.metrics.foreign_pods.labels(verb).inc()

    def _forget_stale_indices(self) -> None:
        """Drop the last filter's index cache when a node was removed since (its index may be reused)."""
        if self._last_removals != self.fragments.removals:
            self._last_passed = self._last_passed_indices = self._last_suffix = None

    def _indices(self, names: list[Any]) -> npt.NDArray[np.int64]:
        """Node indices (-1 unknown); reuses the last filter's answer when prioritize sends it back."""
        last = self._last_passed
        if last is not None and len(last) == len(names) and last == names:
            assert self._last_passed_indices is not None
            return self._last_passed_indices
        try:
            indices = self.state.index.lookup(names)
        except TypeError:  # an unhashable element
            require_strings(names, range(len(names)))
            raise
        unknown = indices < 0
        if unknown.any():
            require_strings(names, np.flatnonzero(unknown).tolist())
        return indices

    def _finish(self, verb: str, outcome: str, started: float) -> None:
        children = self._children.get((verb, outcome))
        if children is None:  # labels() costs more than the observation: look each pair up once
            children = self._children[verb, outcome] = (
                self.metrics.latency.labels(verb),
                self.metrics.requests.labels(verb, outcome),
            )
        children[0].observe(time.perf_counter() - started)
        children[1].inc()

    def reject(self, verb: str, exc: ProtocolError, started: float) -> Reply:
        """Answer a request that could not even be read (size, content type, transport)."""
        return self._bad_request(verb, exc, started)

    def _bad_request(self, verb: str, exc: ProtocolError, started: float) -> Reply:
        self._finish(verb, "bad_request", started)
        self.log.warning("request.rejected", verb=verb, status=exc.status, reason=exc.reason)
        return Reply(exc.status, error_body(exc.reason))

    # ---- verbs -------------------------------------------------------------------------

    def filter(self, body: bytes, started: float | None = None) -> Reply:
        started = time.perf_counter() if started is None else started
        try:
            args = decode_args(body)
            pod = self._pod(args.pod, "filter")
            reason = self.not_ready()
            if reason is not None:
                self._finish("filter", "not_ready", started)
                return Reply(200, encode_filter_error(f"koordpy extender not ready: {reason}"))
            if self.gangs is not None and (refused := self._gang_quorum(pod, args)) is not None:
                self.pending.refuse(pod.uid, "gang", self.clock.now())
                self._finish("filter", "ok", started)
                return Reply(200, refused)
            self._forget_stale_indices()
            indices = self._indices(args.names)
            now = self.clock.now()
            outcome = self._fits(pod, args.names, now, indices)
            if outcome.passed:
                self.pending.admit(pod.uid)
            else:
                reason = refusal_reason(itertools.chain(outcome.failed.values(), outcome.unresolvable.values()))
                self.pending.refuse(pod.uid, reason, now)
            shortlist = self.settings.shortlist_nodes
            if shortlist and len(outcome.passed) > shortlist:
                self._shortlist(pod, outcome, shortlist, now)
            if args.items is None:
                names_json = orjson.dumps(outcome.passed)
                reply = encode_names_result(names_json, outcome.failed, outcome.unresolvable)
                self._last_suffix = names_suffix(names_json)
            else:
                reply = encode_filter_result(
                    outcome.passed, outcome.failed, outcome.unresolvable, args.items, args.names
                )
                self._last_suffix = None
            self._last_passed = outcome.passed
            self._last_passed_indices = outcome.passed_indices
            self._note_filtered(pod.uid)
            self._last_removals = self.fragments.removals
        except ProtocolError as exc:
            return self._bad_request("filter", exc, started)
        except Exception as exc:
            self._finish("filter", "error", started)
            self.log.exception("request.failed", verb="filter", error=f"{type(exc).__name__}: {exc}")
            return Reply(200, encode_filter_error(f"koordpy extender internal error: {type(exc).__name__}"))
        self._finish("filter", "ok", started)
        return Reply(200, reply)

    def _fits(
        self, pod: PodInfo, names: list[str], now: float, indices: npt.NDArray[np.int64] | None = None
    ) -> FilterOutcome:
        """The filter plugins' outcome on ``names``, with the nodes Reservations block moved to failed."""
        outcome = self.state.filter(pod, names, now, indices=indices)
        if self.cache.reservations is not None:
            outcome = self.cache.reservations.refine(pod, outcome, now)
        return outcome

    def _shortlist(self, pod: PodInfo, outcome: FilterOutcome, size: int, now: float) -> None:
        """Keep the ``size`` passing nodes koordpy scores highest (a node the pod's Reservation makes
        preferred first; ties in request order), in request order."""
        indices = outcome.passed_indices
        scored = self.state.score(pod, outcome.passed, now, indices=indices)
        key = scored.total.astype(np.int64)
        if self.cache.reservations is not None:
            preferred = self.cache.reservations.prefer(pod, indices, scored.extender, now)
            key = key + (np.asarray(preferred, dtype=np.int64) - scored.extender) * (1 << 40)
        keep = np.sort(np.argsort(-key, kind="stable")[:size])
        outcome.passed = [outcome.passed[i] for i in keep.tolist()]
        outcome.passed_indices = indices[keep]

    def _gang_quorum(self, pod: PodInfo, args: Any) -> bytes | None:
        """A gang member whose gang (or GangGroup) is short of members fails every node, unresolvable
        (Koordinator's PreEnqueue). Membership is read from the request's pod: kube-scheduler often
        filters a new pod before the watch has shown it to this process."""
        assert self.gangs is not None
        admission = self.gangs.admit(pod)
        if admission is None or admission.ok:
            return None
        names = args.names
        require_strings(names, range(len(names)))
        unresolvable = dict.fromkeys(names, admission.reason)
        self._last_passed = self._last_passed_indices = self._last_suffix = None
        return encode_filter_result([], {}, unresolvable, args.items, names)

    def prioritize(self, body: bytes, started: float | None = None) -> Reply:
        started = time.perf_counter() if started is None else started
        try:
            self._forget_stale_indices()
            raw_pod = decode_args_with_names(body, self._last_suffix) if self._last_suffix is not None else None
            if raw_pod is not None and self._last_passed is not None and self._last_passed_indices is not None:
                names, indices = self._last_passed, self._last_passed_indices  # exactly the last filter's answer
                pod = self._pod(raw_pod, "prioritize")
            else:
                args = decode_args(body)
                pod = self._pod(args.pod, "prioritize")
                names, indices = args.names, None
            if self.not_ready() is not None:
                self._finish("prioritize", "not_ready", started)
                return Reply(200, b"[]")
            if indices is None:
                indices = self._indices(names)
            now = self.clock.now()
            outcome = self.state.score(pod, names, now, indices=indices)
            scores = outcome.extender
            if self.cache.reservations is not None:
                scores = self.cache.reservations.prefer(pod, indices, scores, now)
            reply = encode_priorities(self.fragments, indices, scores)
        except ProtocolError as exc:
            return self._bad_request("prioritize", exc, started)
        except Exception as exc:
            self._finish("prioritize", "error", started)
            self.log.exception("request.failed", verb="prioritize", error=f"{type(exc).__name__}: {exc}")
            return Reply(200, b"[]")
        self._finish("prioritize", "ok", started)
        return Reply(200, reply)

    def preempt(self, body: bytes, started: float | None = None) -> Reply:
        """``ProcessPreemption``: the candidate nodes (and their victims, unchanged) where preempting may
        help; see the module docstring."""
        started = time.perf_counter() if started is None else started
        try:
            args = decode_preemption_args(body)
        except ProtocolError as exc:
            return self._bad_request("preempt", exc, started)
        if self.not_ready() is not None:  # nothing known to judge by: kube-scheduler decides alone
            self._finish("preempt", "not_ready", started)
            return Reply(200, encode_preemption_result(args.victims))
        try:
            pod = self._pod(args.pod, "preempt")
            kept = self._review_preemption(pod, args)
        except Exception as exc:
            self._finish("preempt", "error", started)
            self.log.exception("request.failed", verb="preempt", error=f"{type(exc).__name__}: {exc}")
            return Reply(200, encode_preemption_result(args.victims))
        self._finish("preempt", "ok", started)
        return Reply(200, encode_preemption_result(kept))

    def _review_preemption(self, pod: PodInfo, args: PreemptionArgs) -> dict[str, tuple[tuple[str, ...], int]]:
        now = self.clock.now()
        status = args.pod.get("status")
        nominated = str((status.get("nominatedNodeName") if isinstance(status, dict) else None) or "")
        lost = self.backoff.observe(pod.uid, nominated, now)
        if lost is not None:
            self.log.info("preempt.lost", pod=pod.key, node=lost, until=format_rfc3339(now + self.backoff.seconds))
        backoff = self.backoff.blocked(pod.uid, now)
        tracker = self.cache.reservations
        own = tracker.owned_nodes(pod, now) if tracker is not None and tracker.by_node else set()
        refused: dict[str, tuple[str, str]] = {}
        for node, (victims, _) in args.victims.items():
            if own and node not in own:
                refused[node] = ("not_reserved_node", REASON_NOT_RESERVED_NODE)
                continue
            info = self.state.nodes.get(node)
            held_for_it = node in own and info is not None and has_hold_taint(info.taints)
            if backoff is not None and not held_for_it:
                until, lost_node = backoff
                why = f"lost {lost_node} to another scheduler after preempting there"
                refused[node] = ("backoff", f"{why}: back-off until {format_rfc3339(until)}")
                continue
            if tracker is not None and node in tracker.by_node and node not in own:
                verdict = tracker.preemption_verdict(pod, node, victims, now)
                if not verdict.is_success:
                    refused[node] = ("reserved", f"{REASON_STILL_RESERVED}: {verdict.detail}")
                    continue
            breaks = self._breaks_a_gang(victims)
            if breaks is not None:
                refused[node] = ("gang", breaks)
        kept = {node: victims for node, victims in args.victims.items() if node not in refused}
        self.backoff.offered(pod.uid, kept)
        for kind, _ in refused.values():
            self.metrics.preemption_refused.labels(kind).inc()
        if refused:
            self.log.info(
                "preempt.refused",
                pod=pod.key,
                kept=sorted(kept),
                refused={node: why for node, (_, why) in sorted(refused.items())},
            )
        return kept

    def _breaks_a_gang(self, victims: tuple[str, ...]) -> str | None:
        """Why preempting ``victims`` (uids) would take a running gang below its minimum, or None."""
        if self.gangs is None:
            return None
        cache = self.gangs.cache
        assigned = self.state.assigned
        keys = [found.key for uid in victims if (found := assigned.get(uid)) is not None]
        if not any(cache.gang_of(key) is not None for key in keys):
            return None

        def runs(key: str) -> bool:
            member = cache.member(key)
            return member is not None and member_running(
                member.phase, member.node_name, member.deletion_time is not None
            )

        return preemption_refusal(keys, gang_table(cache, keys, runs))

    async def bind(self, body: bytes, started: float | None = None, gone: asyncio.Event | None = None) -> Reply:
        """``gone`` is set by the HTTP layer when the client closed the connection (a held gang bind is
        then abandoned: never bound from this request). Same as :meth:`start_bind` then :meth:`finish_bind`."""
        return await self.finish_bind(self.start_bind(body, started), gone)

    def start_bind(self, body: bytes, started: float | None = None) -> BindStart | Reply:
        """The synchronous first part of ``/bind``: decode the request and record the placement, so that a
        request read after this one (kube-scheduler's next ``/filter``, on another connection) counts the
        pod on its node. The HTTP layer calls it as soon as the request is read, before any later one;
        the answer (a Reply for a bad request) comes from :meth:`finish_bind`. Never raises.

        Not recorded here: a gang pod this process has not seen yet (it is read from the API first)."""
        started = time.perf_counter() if started is None else started
        try:
            args = decode_bind_args(body)
        except ProtocolError as exc:
            return self._bad_request("bind", exc, started)
        bind = BindStart(args, f"{args.pod_namespace}/{args.pod_name}", started)
        try:
            pod = self._known_pod(args.pod_namespace, args.pod_name, args.pod_uid) if args.pod_uid else None
            if pod is None and self.gangs is not None:
                bind.look_up = True  # placed once read (finish_bind): never bind a gang member blind
            elif (refused := self._no_longer_fits(bind, pod)) is not None:
                return self._refuse(bind, refused)
            else:
                self._place(bind, pod)
        except Exception as exc:
            bind.failed = exc
        return bind

    async def finish_bind(self, bind: BindStart | Reply, gone: asyncio.Event | None = None) -> Reply:
        """Bind what :meth:`start_bind` started and answer it. Never raises (cancellation aside)."""
        if isinstance(bind, Reply):
            return bind
        try:
            if bind.failed is not None:
                raise bind.failed
            return await self._bind(bind, gone)
        except Exception as exc:
            self._finish("bind", "error", bind.started)
            node = bind.args.node
            self.log.exception("bind.failed", pod=bind.where, node=node, error=f"{type(exc).__name__}: {exc}")
            return Reply(200, encode_bind_result(f"koordpy extender internal error: {type(exc).__name__}"))

    def _known_pod(self, namespace: str, name: str, uid: str) -> PodInfo | None:
        pod = self.cache.pending.get(uid)
        if pod is None:
            hit = self._recent.get(uid)
            pod = hit[1] if hit is not None else None
        if pod is None or pod.namespace != namespace or pod.name != name:
            return None
        return pod

    def _no_longer_fits(self, bind: BindStart, pod: PodInfo | None) -> str | None:
        """Why ``pod`` must not bind to its node after all, or None.

        kube-scheduler's next scheduling cycle starts while the last pod's bind is still on its way, so
        a ``/filter`` can be answered before the bind of a pod placed just before it arrives; both pods
        may then take the last room on a node. When a bind recorded a placement on the node after the
        pod's last filter answer, the filter is run again for that node with every placement known now,
        as kube-scheduler's in-tree plugins would have seen it; a node that now fails for want of room
        (a usage threshold, room a Reservation keeps) refuses the bind, and kube-scheduler retries the pod.

        Not guaranteed: a bind that arrives after the next pod's bind (the binding goroutines run
        concurrently) is not seen by that pod's check; a pod this process answered no filter for (it
        restarted in between) is not checked; a node failing for another reason (an expired
        NodeMetric) and changes no bind recorded (a newer NodeMetric, a pod bound by another scheduler)
        are left to the next filter."""
        if pod is None or pod.uid in self.state.assigned:
            return None
        node = bind.args.node
        last = self._placed_on.get(node)
        if last is None:
            return None
        seen = self._filtered_at.get(pod.uid)
        if seen is None or last <= seen:
            return None
        outcome = self._fits(pod, [node], self.clock.now())
        if outcome.passed:
            return None
        reason = outcome.failed.get(node) or outcome.unresolvable.get(node) or ""
        if not _for_want_of_room(reason):
            return None
        return (
            f"koordpy extender: {bind.where} no longer fits node {node}: {reason} "
            "(another pod's bind recorded there after this pod's filter answer); kube-scheduler retries it"
        )

    def _refuse(self, bind: BindStart, reason: str) -> Reply:
        self.metrics.binds_refused.inc()
        self._finish("bind", "no_longer_fits", bind.started)
        self.log.info("bind.refused", pod=bind.where, uid=bind.args.pod_uid, node=bind.args.node, reason=reason)
        return Reply(200, encode_bind_result(reason))

    def _place(self, bind: BindStart, pod: PodInfo | None) -> None:
        """Record the placement of ``bind`` (unless the watch already shows the pod assigned)."""
        uid, node = bind.args.pod_uid, bind.args.node
        if pod is not None and self.gangs is not None:
            self.gangs.observe(pod)  # a gang member is held at the barrier even before the watch shows it
        if pod is None:
            self.metrics.binds_unassumed.inc()
            return
        self._note_foreign(pod, "bind")
        now = self.clock.now()
        if self.cache.reservations is not None:
            # the Reservation this bind allocates is recorded on the pod in the binding's own write
            bind.annotations = self.cache.reservations.annotations_for_bind(pod, node, now)
            if bind.annotations:
                pod = dataclasses.replace(pod, annotations={**pod.annotations, **bind.annotations})
        if uid not in self.state.assigned:  # already assigned: the watch knows better than we do
            bind.placed = self.state.assume(pod, node, now)
            self._placements += 1
            self._placed_on[node] = self._placements
            self._note_filtered(uid)  # its own placement never makes a retried bind of it look late

    async def _bind(self, bind: BindStart, gone: asyncio.Event | None = None) -> Reply:
        args, where, started = bind.args, bind.where, bind.started
        namespace, name, uid, node = args.pod_namespace, args.pod_name, args.pod_uid, args.node
        if bind.look_up:
            found = await self._look_up(namespace, name, uid)
            if isinstance(found, str):
                self._finish("bind", "bind_failed", started)
                self.log.warning("bind.unknown_pod", pod=where, uid=uid, node=node, error=found)
                return Reply(200, encode_bind_result(found))
            if (refused := self._no_longer_fits(bind, found)) is not None:
                return self._refuse(bind, refused)
            self._place(bind, found)
        placed, annotations = bind.placed, bind.annotations
        if self.gangs is not None and self.gangs.is_member(where):
            return await self._gang_bind(args, where, started, placed, gone, annotations=annotations)
        if self.binder is None:
            error: BaseException | None = RuntimeError("no API client configured")
        else:
            error = None
            try:
                async with asyncio.timeout(self.settings.bind_timeout_seconds):
                    await self.binder.create_binding(namespace, name, uid, node, annotations=annotations or None)
            except (ApiError, TimeoutError, OSError, RuntimeError) as exc:
                error = exc
        if error is None:
            self._finish("bind", "ok", started)
            self.backoff.forget(uid)
            self.log.debug(
                "bind", pod=where, uid=uid, node=node, assumed=placed is not None, reservation=_reservation(annotations)
            )
            return Reply(200, encode_bind_result(""))
        if placed is not None and self.state.assigned.get(uid) is placed:
            self.state.remove_pod(uid)  # un-assume; the watch corrects anything else later
        kind = _failure_kind(error)
        self.metrics.bind_failures.labels(kind).inc()
        self._finish("bind", "bind_failed", started)
        message = f"binding {where} to {node} failed: {kind}: {error}"
        self.log.warning("bind.failed", pod=where, uid=uid, node=node, reason=kind, error=str(error))
        return Reply(200, encode_bind_result(message))

    async def _gang_bind(
        self,
        args: BindArgs,
        where: str,
        started: float,
        placed: PodInfo | None,
        gone: asyncio.Event | None,
        *,
        annotations: Mapping[str, str],
    ) -> Reply:
        """Hold the request at the gang barrier; the placement stays recorded while it is held."""
        assert self.gangs is not None
        uid, node = args.pod_uid, args.node
        try:
            error = await self.gangs.hold(where, uid, node, gone, annotations=annotations)
        except asyncio.CancelledError:
            self._unassume_held(where, uid, placed)
            raise
        if not error:
            self._finish("bind", "ok", started)
            self.log.info("bind", pod=where, uid=uid, node=node, assumed=placed is not None, gang=True)
            return Reply(200, encode_bind_result(""))
        self._unassume_held(where, uid, placed)
        self._finish("bind", "gang_released", started)
        return Reply(200, encode_bind_result(error))

    async def _look_up(self, namespace: str, name: str, uid: str) -> PodInfo | str | None:
        """A pod neither a ``/filter`` request nor the watch showed to this process (it restarted between
        the two calls, the request cache evicted it, or the watch could not convert it): read it, so that a
        gang member is never bound without its gang. None when it does not exist with that uid; a string
        (the bind's error) when it cannot be read now or cannot be converted (kube-scheduler retries the
        pod). Fails closed: a pod that may be a gang member is never bound as a plain pod because it could
        not be read; each refusal is counted (``koordpy_extender_binds_unreadable_total``) and told in a
        Warning Event on the pod, once per pod version."""
        reader = self.reader
        where = f"{namespace}/{name}"
        if reader is None:
            return self._unreadable(where, uid, None, "read_failed", "the extender has no API client to read it")
        try:
            async with asyncio.timeout(self.settings.bind_timeout_seconds):
                page = await reader.list_page(PODS, namespace=namespace, field_selector=f"metadata.name={name}")
        except (ApiError, TimeoutError, OSError, RuntimeError) as exc:
            return self._unreadable(where, uid, None, "read_failed", f"it cannot be read now: {exc}")
        for item in page.get("items") or ():
            meta = item.get("metadata") if isinstance(item, Mapping) else None
            item_uid = meta.get("uid") if isinstance(meta, Mapping) else None
            if uid and isinstance(item_uid, str) and item_uid != uid:
                continue  # another pod of that name (deleted and created again)
            try:
                pod = pod_from_dict(item)
            except Exception as exc:
                return self._unreadable(where, uid, item, "unconvertible", f"{type(exc).__name__}: {exc}")
            if not uid or pod.uid == uid:
                return pod
        return None

    def _unreadable(self, where: str, uid: str, raw: Any, kind: str, detail: str) -> str:
        """Refuse the bind of a pod that could not be read: count it, tell it in an Event; the bind error
        (logged by the caller as ``bind.unknown_pod``)."""
        self.metrics.binds_unreadable.labels(kind).inc()
        why = f"it cannot be converted: {detail}" if kind == "unconvertible" else detail
        message = (
            f"koordpy extender: pod {where} was not bound: {why}; it may be a gang member, so it is never "
            "bound as a plain pod (kube-scheduler retries it)"
        )
        if self.events is not None:
            meta = raw.get("metadata") if isinstance(raw, Mapping) else None
            version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
            key = (uid or where, str(version or kind))
            if key not in self._unreadable_told:
                self._unreadable_told[key] = None
                while len(self._unreadable_told) > _UNREADABLE_EVENT_MEMORY:
                    self._unreadable_told.popitem(last=False)
                self._post_unreadable(where, uid, message)
        return message

    def _post_unreadable(self, where: str, uid: str, message: str) -> None:
        events = self.events
        assert events is not None
        namespace, _, name = where.partition("/")
        involved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
        }

        async def post() -> None:
            try:
                await events.create_event(
                    involved,
                    reason=UNREADABLE_POD_REASON,
                    message=message,
                    event_type="Warning",
                    component="koordpy-extender",
                )
            except Exception as exc:  # best effort: the bind's error, the metric and the log say it too
                self.log.info("event.failed", pod=where, reason=UNREADABLE_POD_REASON, error=str(exc))

        task = asyncio.get_running_loop().create_task(post())
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    def _unassume_held(self, where: str, uid: str, placed: PodInfo | None) -> None:
        """Take back the placement of a held member whose bind was not made. The watch re-records a held
        member's placement on each event it shows for the pod (``ExtenderCache``), so the placement may no
        longer be the very object this request recorded: an unconfirmed placement on the same node that no
        newer hold of the pod owns is taken back too. Left behind, it would fill the node for good (a pod
        that once showed a node is never taken off it by a later event without one)."""
        if placed is None:
            return
        current = self.state.assigned.get(uid)
        if current is None:
            return
        if current is placed or (
            self.state.is_assumed(uid)
            and current.node_name == placed.node_name
            and (self.gangs is None or self.gangs.held_node(where) is None)
        ):
            self.state.remove_pod(uid)  # the watch corrects anything else later


_ROOM_SUFFIXES = (REASON_USAGE_EXCEED.split("{}")[-1], REASON_AGGREGATED_USAGE_EXCEED.split("{}")[-1])
_ROOM_PREFIX = REASON_INSUFFICIENT.split("{}")[0]


def _for_want_of_room(reason: str) -> bool:
    """Whether a filter reason is one that more pods on the node can cause (a usage threshold, room a
    Reservation keeps, requests), as opposed to the node's own state (an expired NodeMetric, a taint)."""
    return (
        reason.endswith(_ROOM_SUFFIXES)
        or reason.startswith(_ROOM_PREFIX)
        or reason in (REASON_RESERVED, REASON_TOO_MANY_PODS)
    )


def _reservation(annotations: Mapping[str, str]) -> str | None:
    record = reservation_allocated(annotations)
    return record.name if record is not None else None


def _failure_kind(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "Timeout"
    if isinstance(error, ApiError):
        return type(error).__name__ if type(error) is not ApiError else f"HTTP{error.status}"
    return type(error).__name__
