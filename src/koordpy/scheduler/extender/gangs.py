"""The extender's gang bind barrier: runs the pure ``GangCache`` (``koordpy.scheduler.plugins.gang``).

Events in: the pod watch (``on_pod``: membership, ``PodScheduled=False/Unschedulable`` → Strict
release, unless the condition is a quorum refusal, which any extender process recognises), the PodGroup
watches of the four APIs (``podgroup_handler``), the pods of ``/filter`` requests (``admit``: membership is
read from the request's pod, a refused member is parked) and the ``/bind`` requests of gang members
(``hold``). Decisions out, executed here:

* ``hold`` parks the bind request (an ``asyncio.Future`` per hold) until the model hands the hold out in
  a ``BindBatch`` (then every member of the batch is bound concurrently, each binding retried a bounded
  number of times, and each parked request answered) or in a ``Release`` (answered with that reason as
  the protocol's ``Error``: kube-scheduler un-assumes the pod and retries it);
* the client going away (``gone`` set by the HTTP layer on ``http.disconnect``, or the handler being
  cancelled) is ``abandon``: that request is never bound; ``is_current`` is checked right before each
  binding is created;
* a timer wakes at ``next_deadline`` (capped at ``tick`` seconds) for expiries and answer deadlines, and
  every ``deadlock_interval`` seconds runs NonStrict deadlock resolution on the cluster's free resources,
  posting an Event on the released pods;
* parked members whose group now passes (``take_wakeups``) go to the ``Requeuer`` (``requeue.py``),
  which updates the extender's requeue signal object so kube-scheduler retries them (paced by
  ``gang.requeueQPS``; nothing is written on the pods).

A batch that ends partially bound (some bindings created, some failed after the retries) is logged as
an error, counted in ``koordpy_extender_gang_partial_binds`` and reported with a Warning Event on every
member of the batch.

A gang whose held members are released for a reason of its own (its wait time ran out, a Strict failure,
deadlock resolution, a held member deleted) gets, on its PodGroup (both APIs), the ``GangScheduled=False``
condition saying why and when (``koordpy.scheduler.plugins.gang.outcome``) and a Warning Event
(``GangTimedOut`` or ``GangReleased``); when it binds later, ``GangScheduled=True`` (``Bound``). These are
the only status fields the extender writes on a PodGroup (the manager writes phase and counters); a native
``scheduling.k8s.io`` PodGroup gets the Events only (its status is kube-scheduler's). A
PodGroup that cannot be read is reported by ``on_rejected`` (counted and an Event, by the PodGroup's
reflector) and its gang keeps its last readable parameters.

Not guaranteed: holds survive a restart (they do not: kube-scheduler's requests fail with the
connection and the pods are retried; nothing was bound); thread safety (one event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, get_args

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from koordpy.config.gang import CoschedulingArgs
from koordpy.kube.errors import ApiError
from koordpy.kube.resources import PODGROUPS, PODGROUPS_X_K8S
from koordpy.model.clock import Clock
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import PodInfo
from koordpy.model.resources import ResourceList
from koordpy.scheduler.extender.requeue import PodPatcher, RequeueMetrics, Requeuer
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.plugins.gang import (
    API_NATIVE,
    API_SIGS,
    API_VERSIONS,
    API_VOLCANO,
    API_X_K8S,
    Admission,
    BindBatch,
    GangCache,
    GangOutcome,
    Hold,
    PodGroupError,
    bound_outcome,
    gang_condition,
    ignored_gang_keys,
    outcomes,
    podgroup_from_dict,
)
from koordpy.scheduler.plugins.gang.decisions import ReleaseCause

__all__ = ["EventPoster", "GangBarrier", "GangBinder", "GangMetrics", "free_resources", "unschedulable_message"]

WAIT_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 3600)


class GangBinder(Protocol):
    async def create_binding(
        self, namespace: str, name: str, uid: str, node: str, *, annotations: Mapping[str, str] | None = None
    ) -> Any: ...


class EventPoster(Protocol):
    async def create_event(
        self, involved_object: Mapping[str, Any], *, reason: str, message: str, event_type: Any, component: str
    ) -> Any: ...


class StatusPatcher(Protocol):
    async def patch_status(self, resource: Any, name: str, patch: Any, *, namespace: str | None = None) -> Any: ...


PODGROUP_RESOURCES = {API_SIGS: PODGROUPS, API_X_K8S: PODGROUPS_X_K8S}
OUTCOME_EVENT_INTERVAL = 60.0
"""The same outcome (reason and text) of a gang is posted as an Event at most once per this many seconds."""


class GangMetrics:
    """Held binds (gauge at scrape), gang wait time (histogram), releases by cause, partial batches."""

    def __init__(self, registry: CollectorRegistry, barrier: Callable[[], GangBarrier | None]) -> None:
        self.wait = Histogram(
            "koordpy_extender_gang_wait_seconds",
            "Time from a gang member's first held bind to its binding (allowed) or its release.",
            ["outcome"],
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.releases = Counter(
            "koordpy_extender_gang_releases",
            "Held gang binds answered with an error, by cause (expired, answer-deadline, strict, ...).",
            ["cause"],
            registry=registry,
        )
        self.partial = Counter(
            "koordpy_extender_gang_partial_binds",
            "Gang bind batches that ended partially bound after the binding retries.",
            registry=registry,
        )
        self.binding_retries = Counter(
            "koordpy_extender_gang_binding_retries", "pods/binding calls retried for a gang batch.", registry=registry
        )
        registry.register(_HeldCollector(barrier))
        self.requeue = RequeueMetrics(registry, lambda: b.requeuer if (b := barrier()) is not None else None)
        # Every outcome and cause as a zero series from the start, so the first one counts in increase() and
        # rate() (a series born at 1 would not) and the dashboard's panels exist before the first gang.
        for cause in (*get_args(ReleaseCause), "abandoned"):
            self.releases.labels(cause)
        for outcome in (*get_args(ReleaseCause), "abandoned", "bound", "bind-failed"):
            self.wait.labels(outcome)


class _HeldCollector(Collector):
    def __init__(self, barrier: Callable[[], GangBarrier | None]) -> None:
        self.barrier = barrier

    def collect(self) -> Any:
        gauge = GaugeMetricFamily("koordpy_extender_gang_held_binds", "Gang members' bind requests held open now.")
        barrier = self.barrier()
        gauge.add_metric([], len(barrier.waiters) if barrier is not None else 0)
        yield gauge


def free_resources(state: ClusterState) -> dict[str, ResourceList]:
    """Each node's allocatable minus the requests of its assigned (and assumed), non-terminated pods, with
    one pod slot per pod when the node lists ``pods``. Not guaranteed: anything but resource requests."""
    free: dict[str, ResourceList] = {name: dict(node.allocatable) for name, node in state.nodes.items()}
    for pod in state.assigned.values():
        left = free.get(pod.node_name)
        if left is None or pod.terminated:
            continue
        for resource, amount in pod.requests.items():
            left[resource] = left.get(resource, 0) - amount
        if "pods" in left:
            left["pods"] -= 1
    return free


def unschedulable_message(raw: Mapping[str, Any]) -> str | None:
    """The message of a pending pod's ``PodScheduled=False`` condition with reason ``Unschedulable``."""
    status = raw.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return None
    for cond in conditions:
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            message = cond.get("message")
            stamp = cond.get("lastTransitionTime")
            return f"{message if isinstance(message, str) else ''}\x00{stamp if isinstance(stamp, str) else ''}"
    return None


class GangBarrier:
    """Holds gang members' binds and binds whole GangGroups. See the module docstring."""

    def __init__(
        self,
        args: CoschedulingArgs,
        *,
        clock: Clock,
        log: Any,
        metrics: GangMetrics,
        binder: Callable[[], GangBinder | None],
        events: EventPoster | None = None,
        patcher: Callable[[], PodPatcher | None] | None = None,
        status_patcher: Callable[[], StatusPatcher | None] | None = None,
        state: ClusterState | None = None,
        bind_timeout: float = 30.0,
        bind_attempts: int = 3,
        retry_delay: float = 0.2,
        tick: float = 1.0,
        deadlock_interval: float = 10.0,
    ) -> None:
        self.args = args
        self.cache = GangCache(args)
        self.clock = clock
        self.log = log
        self.metrics = metrics
        self.binder = binder
        """Looked up per binding (the service's binder; tests swap it)."""
        self.events = events
        self.state = state
        self.bind_timeout = bind_timeout
        self.bind_attempts = bind_attempts
        self.retry_delay = retry_delay
        self.tick = tick
        self.deadlock_interval = deadlock_interval
        self.waiters: dict[int, asyncio.Future[str]] = {}
        """hold id → the parked request's answer ("" bound, else the ``Error`` text)."""
        self.held: dict[str, tuple[int, str]] = {}
        """pod key → (hold id, node) of its open bind request."""
        self.annotations: dict[int, dict[str, str]] = {}
        """hold id → the annotations its binding carries (the Reservation it allocates), when any."""
        self.requeuer = Requeuer(
            qps=args.requeue_qps,
            burst=args.requeue_burst,
            patcher=patcher or (lambda: None),
            log=log,
            metrics=metrics.requeue,
            signal=args.requeue_signal_ref,
        )
        self.status_patcher = status_patcher or (lambda: None)
        self.native_absent: Callable[[], bool] = lambda: False
        """Whether ``scheduling.k8s.io/v1beta1`` PodGroups are not served (the server sets it from that
        watch); read at each hold (``GangCache.native_unserved``)."""
        self._outcomes: dict[str, GangOutcome] = {}
        """Gang id → the outcome its PodGroup must still be told about (the latest one wins)."""
        self._outcome_task: asyncio.Task[None] | None = None
        self._posted: dict[str, tuple[str, str, float]] = {}
        """Gang id → (reason, message, time) of the last outcome Event."""
        self._failures: dict[str, str] = {}
        """pod key → the Unschedulable condition already reported (message and time)."""
        self._ignored: dict[str, tuple[str, ...]] = {}
        """PodGroup id → the fields not honoured that were last warned about (one warning per change)."""
        self._ignored_keys: dict[str, tuple[str, ...]] = {}
        """Native gang id → the other gang keys its members carry that were last warned about."""
        self._timer: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._last_deadlock_check = time.monotonic()
        self.partial_batches = 0

    # ---- watch events --------------------------------------------------------------------

    def on_pod(self, event_type: str, pod: PodInfo, raw: Mapping[str, Any] | None) -> None:
        if event_type == "DELETED":
            self.cache.delete_pod(pod.namespace, pod.name)
            self._failures.pop(pod.key, None)
            self.requeuer.discard(pod.key)
        else:
            self.cache.upsert_pod(pod)
            if pod.scheduling_group:
                self._warn_ignored_keys(pod)
            if pod.node_name or pod.terminated:
                self.requeuer.discard(pod.key)
            elif raw is not None and self.cache.gang_of(pod.key) is not None:
                self._check_failure(pod.key, raw)
        self.pump()

    def _warn_ignored_keys(self, pod: PodInfo) -> None:
        """A native member that also carries another gang's labels or annotations: logged once per gang and
        set of keys (kube-scheduler gates the pod by its ``spec.schedulingGroup``; the keys are not read)."""
        found = ignored_gang_keys(pod)
        gang_id = f"{pod.namespace}/{pod.scheduling_group}"
        if found and self._ignored_keys.get(gang_id) != found:
            self._ignored_keys[gang_id] = found
            self.log.warning("gang.pod_keys_ignored", pod=pod.key, gang=gang_id, keys=list(found))

    def _check_failure(self, key: str, raw: Mapping[str, Any]) -> None:
        seen = unschedulable_message(raw)
        if seen is None or self._failures.get(key) == seen:
            return
        self._failures[key] = seen
        message = seen.partition("\x00")[0]
        self.cache.scheduling_failed(key, message or "Unschedulable")  # a quorum refusal is recognised there

    def podgroup_handler(
        self, api: str, on_rejected: Callable[[str, Mapping[str, Any], str], None] | None = None
    ) -> Callable[[str, Mapping[str, Any]], None]:
        """The PodGroup watch handler of ``api``. A PodGroup that cannot be read is logged and handed to
        ``on_rejected(event type, object, error)`` (the server counts it and posts an Event on it)."""

        def handle(event_type: str, raw: Mapping[str, Any]) -> None:
            if event_type not in ("ADDED", "MODIFIED", "DELETED"):
                return
            meta = raw.get("metadata")
            if event_type == "DELETED" and isinstance(meta, Mapping):
                namespace, name = meta.get("namespace"), meta.get("name")
                if isinstance(namespace, str) and isinstance(name, str):
                    self.cache.delete_podgroup(api, namespace, name)
                    self._ignored.pop(f"{namespace}/{name}", None)
                    self.pump()
                return
            if not raw.get("apiVersion"):  # list items may omit it; the watch knows the API
                raw = {**raw, "apiVersion": API_VERSIONS[api]}
            try:
                pg = podgroup_from_dict(raw)
            except PodGroupError as exc:
                self.log.warning("gang.podgroup_skipped", api=api, error=str(exc))
                if on_rejected is not None:
                    on_rejected(event_type, raw, f"{type(exc).__name__}: {exc}")
                return
            if pg.ignored and self._ignored.get(pg.id) != pg.ignored:
                self._ignored[pg.id] = pg.ignored
                self.log.warning("gang.podgroup_fields_ignored", podgroup=pg.id, api=api, fields=list(pg.ignored))
            self.cache.upsert_podgroup(pg)
            self.pump()

        return handle

    # ---- filter ----------------------------------------------------------------------------

    def admit(self, pod: PodInfo) -> Admission | None:
        """Quorum (PreEnqueue) of a ``/filter`` request's pod (None: in no gang); membership is read from that
        pod. A refused member is parked (woken when its group passes); one that passes needs no wake-up."""
        admission = self.cache.admit_request(pod)
        if admission is None:
            return None
        if admission.ok:
            self.requeuer.discard(pod.key)
        else:
            self.pump()  # the pod may be a member the watch has not shown: its arrival can wake others
        return admission

    def observe(self, pod: PodInfo) -> None:
        """A pod seen in a ``/bind`` request: membership from the pod itself (the watch may lag)."""
        self.cache.observe(pod)

    def held_node(self, pod_key: str) -> str | None:
        entry = self.held.get(pod_key)
        return entry[1] if entry is not None else None

    def is_member(self, pod_key: str) -> bool:
        return self.cache.gang_of(pod_key) is not None

    # ---- the barrier -----------------------------------------------------------------------

    async def hold(
        self,
        pod_key: str,
        uid: str,
        node: str,
        gone: asyncio.Event | None = None,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> str:
        """Park a member's bind until its GangGroup binds or it is released; "" when bound, else the error.
        ``annotations`` go on the pod with its binding (the Reservation it allocates)."""
        self._ensure_timer()
        loop = asyncio.get_running_loop()
        self.cache.native_unserved = self.native_absent()
        hold, permit = self.cache.hold(pod_key, uid, node, self.clock.now())
        self.requeuer.discard(pod_key)
        if hold is None:
            return f"pod {pod_key} is in no gang"
        answer: asyncio.Future[str] = loop.create_future()
        self.waiters[hold.hold_id] = answer
        if annotations:
            self.annotations[hold.hold_id] = dict(annotations)
        self.held[pod_key] = (hold.hold_id, node)
        self.log.info("gang.hold", pod=pod_key, node=node, gang=hold.gang_id, verdict=permit.verdict)
        self.pump()
        watcher = asyncio.ensure_future(gone.wait()) if gone is not None else None
        try:
            if watcher is not None:
                either: set[asyncio.Future[Any]] = {answer, watcher}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.shield(answer)
            if answer.done():
                return answer.result()
            self._abandon(hold)
            return f"bind request for {pod_key} was abandoned by the client"
        except asyncio.CancelledError:
            self._abandon(hold)
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
            self.waiters.pop(hold.hold_id, None)
            self.annotations.pop(hold.hold_id, None)
            if self.held.get(pod_key, (0, ""))[0] == hold.hold_id:
                del self.held[pod_key]

    def _abandon(self, hold: Hold) -> None:
        self.cache.abandon(hold.pod, hold.hold_id)
        self.metrics.releases.labels("abandoned").inc()
        self.log.warning("gang.abandoned", pod=hold.pod, node=hold.node, gang=hold.gang_id)
        self.pump()

    def _answer(self, hold: Hold, error: str, outcome: str) -> None:
        answer = self.waiters.get(hold.hold_id)
        if answer is not None and not answer.done():
            answer.set_result(error)
        self.metrics.wait.labels(outcome).observe(max(0.0, self.clock.now() - hold.wait_started_at))

    def pump(self) -> None:
        """Execute what the model decided: bind allowed batches, answer released holds."""
        now = self.clock.now()
        for batch in self.cache.take_ready(now):
            self._spawn(self._bind_batch(batch))
        releases = self.cache.take_releases(now)
        for release in releases:
            self.metrics.releases.labels(release.cause).inc()
            self.log.info("gang.release", pod=release.hold.pod, cause=release.cause, reason=release.reason)
            self._answer(release.hold, release.reason, release.cause)
        if releases:
            self.report(outcomes(releases))
        wakeups = self.cache.take_wakeups()
        if wakeups:
            self.log.info("gang.quorum", gangs=sorted({w.gang_id for w in wakeups}), parked=len(wakeups))
            self.requeuer.add(wakeups)
        if self._wake is not None:
            self._wake.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _bind_batch(self, batch: BindBatch) -> None:
        self.log.info("gang.allowed", group=batch.group_id, members=len(batch.holds), reason=batch.reason)
        results = await asyncio.gather(*(self._bind_one(hold) for hold in batch.holds))
        created = [h.pod for h, ok in zip(batch.holds, results, strict=True) if ok is True]
        failed = [h.pod for h, ok in zip(batch.holds, results, strict=True) if ok is False]
        if created and not failed:
            per_gang: dict[str, int] = {}
            for hold in batch.holds:
                per_gang[hold.gang_id] = per_gang.get(hold.gang_id, 0) + 1
            self.report([bound_outcome(gang, count) for gang, count in sorted(per_gang.items())])
        if created and failed:
            self.partial_batches += 1
            self.metrics.partial.inc()
            message = (
                f"gang group {batch.group_id} is partially bound: {len(created)} bound ({', '.join(created)}), "
                f"{len(failed)} failed after {self.bind_attempts} attempts ({', '.join(failed)})"
            )
            self.log.error("gang.partially_bound", group=batch.group_id, bound=created, failed=failed)
            for hold in batch.holds:
                self.post_event(hold.pod, "GangPartiallyBound", message, "Warning")
        self.pump()

    async def _bind_one(self, hold: Hold) -> bool | None:
        """True bound, False failed, None not attempted (the request is no longer current)."""
        namespace, _, name = hold.pod.partition("/")
        error = "no API client configured"
        for attempt in range(self.bind_attempts):
            if not self.cache.is_current(hold):
                self._answer(hold, f"bind request for {hold.pod} is no longer current", "abandoned")
                return None
            binder = self.binder()
            if binder is None:
                break
            try:
                async with asyncio.timeout(self.bind_timeout):
                    await binder.create_binding(
                        namespace, name, hold.uid, hold.node, annotations=self.annotations.get(hold.hold_id)
                    )
            except (ApiError, TimeoutError, OSError, RuntimeError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, ApiError) and exc.status in (404, 409, 422):
                    break  # deleted, recreated or already bound: retrying cannot help
                if attempt + 1 < self.bind_attempts:
                    self.metrics.binding_retries.inc()
                    await asyncio.sleep(self.retry_delay * (attempt + 1))
                continue
            self.cache.bound(hold.pod, hold.node)
            self._answer(hold, "", "bound")
            self.log.info("gang.bound", pod=hold.pod, node=hold.node, gang=hold.gang_id)
            return True
        message = f"binding {hold.pod} to {hold.node} failed: {error}"
        self.cache.bind_failed(hold.pod, error)
        self._answer(hold, message, "bind-failed")
        return False

    # ---- timer and deadlock ------------------------------------------------------------------

    def _ensure_timer(self) -> None:
        if self._timer is None or self._timer.done():
            self._wake = asyncio.Event()
            self._timer = asyncio.ensure_future(self._run_timer())

    async def _run_timer(self) -> None:
        assert self._wake is not None
        while True:
            deadline = self.cache.next_deadline()
            wait = self.tick if deadline is None else min(self.tick, max(0.0, deadline - self.clock.now()))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):  # not wait_for: on 3.11 it can swallow a cancellation
                    await self._wake.wait()
            self._wake.clear()
            try:
                if time.monotonic() - self._last_deadlock_check >= self.deadlock_interval:
                    self._last_deadlock_check = time.monotonic()
                    self.resolve_deadlock()
                self.pump()
            except Exception as exc:  # the timer must survive any one bad round
                self.log.exception("gang.timer_failed", error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0)

    def resolve_deadlock(self) -> None:
        if self.state is None or not self.waiters:
            return
        found = self.cache.resolve_deadlock(free_resources(self.state), self.clock.now())
        if found is None:
            return
        self.log.warning("gang.deadlock", groups=found.groups, victim=found.victim, reason=found.reason)
        for hold in found.released:
            self.post_event(hold.pod, "GangDeadlockReleased", found.reason, "Warning")
        self.pump()

    # ---- PodGroup outcomes --------------------------------------------------------------------

    def report(self, found: list[GangOutcome]) -> None:
        """Tell the gangs' PodGroups (condition and Event) about these outcomes, off the caller's path."""
        for outcome in found:
            self._outcomes[outcome.gang_id] = outcome
        if self._outcomes and (self._outcome_task is None or self._outcome_task.done()):
            self._outcome_task = asyncio.ensure_future(self._write_outcomes())
            self._tasks.add(self._outcome_task)
            self._outcome_task.add_done_callback(self._tasks.discard)

    async def _write_outcomes(self) -> None:
        while self._outcomes:
            gang_id = next(iter(self._outcomes))
            outcome = self._outcomes.pop(gang_id)
            try:
                await self._write_outcome(outcome)
            except Exception as exc:  # advice about a gang: never worth stopping the barrier for
                self.log.info("gang.outcome_not_written", gang=gang_id, error=f"{type(exc).__name__}: {exc}")

    async def _write_outcome(self, outcome: GangOutcome) -> None:
        pg = self.cache.podgroup(outcome.gang_id)
        if pg is None:
            return  # an annotation-way gang: kube-scheduler's FailedScheduling Events on the pods say it
        now = self.clock.now()
        conditions = gang_condition(outcome, pg.conditions, format_rfc3339(now))
        patcher = self.status_patcher()
        if pg.api in (API_VOLCANO, API_NATIVE):
            # Volcano's CRD has no status subresource: the extender writes no PodGroup object; a native
            # PodGroup's status is kube-scheduler's (its PodGroupInitiallyScheduled condition): Events only.
            conditions = None
        if conditions is not None and patcher is not None:
            try:
                await patcher.patch_status(
                    PODGROUP_RESOURCES[pg.api], pg.name, {"status": {"conditions": conditions}}, namespace=pg.namespace
                )
            except ApiError as exc:
                self.log.info("gang.condition_not_written", gang=outcome.gang_id, error=f"{type(exc).__name__}: {exc}")
            else:
                self.log.info("gang.condition", gang=outcome.gang_id, reason=outcome.reason, message=outcome.message)
        if outcome.scheduled and conditions is None:
            return  # bound at the first attempt: nothing worth an Event
        last = self._posted.get(outcome.gang_id)
        if (
            last is not None
            and last[:2] == (outcome.reason, outcome.message)
            and now - last[2] < OUTCOME_EVENT_INTERVAL
        ):
            return
        self._posted[outcome.gang_id] = (outcome.reason, outcome.message, now)
        if len(self._posted) > 4096:
            self._posted.pop(next(iter(self._posted)))
        message = outcome.message
        if not outcome.scheduled:
            message = f"{outcome.members} held member(s) released: {message}"
        involved = {
            "apiVersion": API_VERSIONS[pg.api],
            "kind": "PodGroup",
            "metadata": {"namespace": pg.namespace, "name": pg.name, **({"uid": pg.uid} if pg.uid else {})},
        }
        self._post(involved, outcome.event_reason, message, "Normal" if outcome.scheduled else "Warning")

    def post_event(self, pod_key: str, reason: str, message: str, event_type: str) -> None:
        if self.events is None:
            return
        namespace, _, name = pod_key.partition("/")
        involved = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name}}
        self._post(involved, reason, message, event_type)

    def _post(self, involved: Mapping[str, Any], reason: str, message: str, event_type: str) -> None:
        if self.events is None:
            return
        events = self.events
        label = f"{involved['metadata']['namespace']}/{involved['metadata']['name']}"

        async def post() -> None:
            try:
                await events.create_event(
                    involved, reason=reason, message=message[:1000], event_type=event_type, component="koordpy-extender"
                )
            except Exception as exc:
                self.log.info("gang.event_not_posted", object=label, error=f"{type(exc).__name__}: {exc}")

        self._spawn(post())

    async def close(self) -> None:
        await self.requeuer.close()
        tasks = [t for t in (self._timer, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ---- views -----------------------------------------------------------------------------

    def describe(self, gang_id: str | None = None) -> list[dict[str, Any]]:
        """``/debug/gangs``: every gang (or one), its members, held pods and nodes, verdict, time left."""
        now = self.clock.now()
        views = self.cache.views() if gang_id is None else [v for v in [self.cache.view(gang_id)] if v is not None]
        out: list[dict[str, Any]] = []
        yielding = self.cache.yielding()
        for view in views:
            spec = view.spec
            permit = self.cache.permit(spec.id, now)
            out.append(
                {
                    "id": spec.id,
                    "groupId": spec.group_id,
                    "mode": spec.mode,
                    "matchPolicy": spec.match_policy,
                    "minMember": spec.min_member,
                    "waitSeconds": spec.wait_seconds,
                    "children": list(view.children),
                    "bound": list(view.bound),
                    "failed": list(view.failed),
                    "onceSatisfied": view.once_satisfied,
                    "leftOutOfGroup": list(spec.left_out),
                    "parked": self.cache.parked(spec.id),
                    "requeuePending": [p for p in view.children if p in self.requeuer.pending],
                    "yieldingTo": list(yielding.get(spec.group_id, ())),
                    "held": [
                        {
                            "pod": h.pod,
                            "node": h.node,
                            "heldSeconds": round(now - h.held_at, 3),
                            "waitLeftSeconds": round(h.wait_deadline - now, 3),
                            "answerLeftSeconds": round(h.answer_deadline - now, 3),
                        }
                        for h in view.holds
                    ],
                    "permit": {"verdict": permit.verdict, "reason": permit.reason},
                }
            )
        return out


PODGROUP_APIS = (API_SIGS, API_X_K8S, API_VOLCANO, API_NATIVE)
