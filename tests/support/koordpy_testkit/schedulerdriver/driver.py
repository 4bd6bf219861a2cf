"""A kube-scheduler stand-in that drives one extender exactly as kube-scheduler does.

Per pod (one serial scheduling cycle at a time)::

    pop from the queue → in-tree filter over nodes (requests incl. assumed pods)
      → POST {urlPrefix}/filter  (serial, httpTimeout)      error/timeout → backoffQ
      → no feasible node                                    → unschedulablePods, PodScheduled=False
        (moved back only by the events kube-scheduler v1.37 registers: an assigned pod or a node
        changing, a failed bind, an update of the pod itself when the extender rejected it, the
        5-minute flush; never by another pending pod's creation: see ``queue.py``)
      → exactly one feasible node: use it (no prioritize)
      → else POST prioritize (errors ignored); total = LeastAllocated + Score × weight × 10
      → pick the best (ties: seeded reservoir sampling) → assume
      → binding task: POST {urlPrefix}/bind (concurrent, not awaited by the cycle)
           ok → stays assumed until the watch shows spec.nodeName
           error/timeout → forget; requeue unless the watch already shows spec.nodeName;
                           PodScheduled=False (SchedulerError); move the unschedulable pods

The cluster comes from a list+watch of pods and nodes (resumed from the last resourceVersion,
relisted on 410). Everything is counted in :class:`DriverStats` and every cycle is recorded as a
:class:`Decision` for assertions.

The ``PodScheduled=False`` condition is written as kube-scheduler writes it (only when its reason or
message changes; ``0/N nodes are available: <count> <reason>, ...`` for an unschedulable pod), so the
extender sees what it sees on a real cluster, and the pod's own update moves it once, as there.

Not guaranteed: preemption, nominated nodes, permit/reserve plugins, ``ignorable: true``
fallback to the default binder, ``nodeCacheCapable: false``, Events. See ``docs/testing.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson

from koordpy.model.objects import NodeInfo, ObjectError, node_from_dict
from koordpy.model.resources import ResourceList, pod_requests
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.schedulerdriver.intree import (
    InTreeFilter,
    NodeUsage,
    least_allocated_score,
    num_feasible_nodes_to_find,
)
from koordpy_testkit.schedulerdriver.protocol import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    ExtenderConfig,
    ExtenderError,
    bind_args,
    extender_args,
    is_interested,
    parse_bind_result,
    parse_filter_result,
    parse_prioritize_result,
)
from koordpy_testkit.schedulerdriver.queue import EXTENDER, IN_TREE, SchedulingQueue

__all__ = ["Decision", "DriverStats", "SchedulerDriver"]

Raw = dict[str, Any]
_T = TypeVar("_T")
TERMINAL = ("Succeeded", "Failed")


@dataclass(slots=True)
class Decision:
    """One scheduling cycle as the driver saw it. Times are ``time.monotonic()``."""

    pod: str
    uid: str
    cycle: int
    attempt: int
    started: float
    candidates: list[str] = field(default_factory=list)
    """Nodes sent to the extender's filter (passed the in-tree filters)."""
    filter_sent: float | None = None
    filter_done: float | None = None
    prioritize_sent: float | None = None
    prioritize_done: float | None = None
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    extender_scores: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    node: str | None = None
    outcome: str = ""
    """``assumed``, ``unschedulable``, ``filter-error`` or ``skipped``."""
    bind_sent: float | None = None
    bind_done: float | None = None
    bind_outcome: str = ""
    """``ok``, ``error`` (requeued) or ``error-already-bound`` (not requeued)."""
    error: str = ""


@dataclass(slots=True)
class DriverStats:
    attempts: int = 0
    assumed: int = 0
    unschedulable: int = 0
    prioritize_skipped: int = 0
    binds_ok: int = 0
    binds_failed: int = 0
    bind_failed_already_bound: int = 0
    requeued_after_bind_failure: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    timeouts: Counter[str] = field(default_factory=Counter)
    extender_scores_out_of_range: int = 0
    noncanonical_keys: list[str] = field(default_factory=list)
    relists: Counter[str] = field(default_factory=Counter)
    condition_writes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "assumed": self.assumed,
            "unschedulable": self.unschedulable,
            "prioritizeSkipped": self.prioritize_skipped,
            "bindsOk": self.binds_ok,
            "bindsFailed": self.binds_failed,
            "bindFailedAlreadyBound": self.bind_failed_already_bound,
            "requeuedAfterBindFailure": self.requeued_after_bind_failure,
            "calls": dict(self.calls),
            "errors": dict(self.errors),
            "timeouts": dict(self.timeouts),
            "extenderScoresOutOfRange": self.extender_scores_out_of_range,
            "noncanonicalKeys": list(self.noncanonical_keys),
            "relists": dict(self.relists),
            "conditionWrites": self.condition_writes,
        }


class _GoneError(Exception):
    """The watch's resourceVersion is too old (410): relist."""


class SchedulerDriver:
    """Run with ``async with SchedulerDriver(...) as driver:``; it schedules until closed."""

    def __init__(
        self,
        api_url: str,
        token: str,
        extender: ExtenderConfig,
        *,
        scheduler_name: str = "koordpy-scheduler",
        seed: int = 0,
        percentage_of_nodes_to_score: int = 100,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        flush_interval: float = 30.0,
        watch_timeout_seconds: int = 60,
    ) -> None:
        extender.validate()
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.extender = extender
        self.scheduler_name = scheduler_name
        self.random = random.Random(seed)
        self.percentage = percentage_of_nodes_to_score
        self.watch_timeout_seconds = watch_timeout_seconds
        self.queue = SchedulingQueue(
            time.monotonic, initial_backoff, max_backoff, max_in_unschedulable, flush_interval=flush_interval
        )
        self.stats = DriverStats()
        self.decisions: list[Decision] = []
        self.pods: dict[str, Raw] = {}
        """Informer cache: uid → latest pod JSON."""
        self.nodes: dict[str, NodeInfo] = {}
        self.assumed: dict[str, str] = {}
        """uid → node of pods assumed by a cycle and not yet seen bound by the watch."""
        self._requests: dict[str, ResourceList] = {}
        self._next_start = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._bind_tasks: set[asyncio.Task[None]] = set()
        self._writes: set[asyncio.Task[None]] = set()
        self._synced = {"pods": asyncio.Event(), "nodes": asyncio.Event()}
        self._api: aiohttp.ClientSession | None = None
        self._http: aiohttp.ClientSession | None = None
        self._changed = asyncio.Event()

    # ---- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> SchedulerDriver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, sync_timeout: float = HANG_BACKSTOP) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        self._api = aiohttp.ClientSession(headers=headers, connector=aiohttp.TCPConnector(limit=0))
        # Like Go's transport: keep-alive, no limit on connections (bind calls may block).
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self._spawn(self._informer("/api/v1/nodes", "nodes", self._on_node))
        self._spawn(self._informer("/api/v1/pods", "pods", self._on_pod))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._synced.values())), sync_timeout)
        self._spawn(self._schedule_loop())

    async def close(self) -> None:
        for task in [*self._tasks, *self._bind_tasks, *self._writes]:
            task.cancel()
        for task in [*self._tasks, *self._bind_tasks, *self._writes]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for session in (self._api, self._http):
            if session is not None:
                await session.close()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

    def _spawn_write(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._writes.add(task)  # short-lived: cancelled on close, dropped when done
        task.add_done_callback(self._writes.discard)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until ``predicate()`` holds; raise ``TimeoutError`` naming ``what`` and the stats."""
        deadline = time.monotonic() + timeout
        while not predicate():
            for task in self._tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise RuntimeError(f"driver task failed: {task.exception()!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what}: not reached in {timeout}s; driver stats {self.stats.as_dict()}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))

    # ---- views -------------------------------------------------------------------------

    def bound(self) -> dict[str, str]:
        """uid → node for every pod of our scheduler the watch shows assigned."""
        return {
            uid: pod["spec"]["nodeName"]
            for uid, pod in self.pods.items()
            if pod.get("spec", {}).get("nodeName") and pod["spec"].get("schedulerName") == self.scheduler_name
        }

    def binds_in_flight(self) -> int:
        """Binding tasks that have not finished (their pods are still assumed)."""
        return len(self._bind_tasks)

    def pending(self) -> list[str]:
        return [uid for uid, pod in self.pods.items() if self._is_pending(pod)]

    def _is_pending(self, pod: Mapping[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        return (
            spec.get("schedulerName") == self.scheduler_name
            and not spec.get("nodeName")
            and (pod.get("status") or {}).get("phase") not in TERMINAL
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        )

    # ---- informers ---------------------------------------------------------------------

    async def _informer(self, path: str, kind: str, handler: Callable[[str, Raw], None]) -> None:
        assert self._api is not None
        known: dict[str, Raw] = {}
        while True:
            try:
                async with self._api.get(self.api_url + path) as resp:
                    resp.raise_for_status()
                    listing = orjson.loads(await resp.read())
                version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
                fresh: dict[str, Raw] = {}
                for item in listing.get("items") or []:
                    fresh[_key(item)] = item
                    handler("ADDED", item)
                for key, obj in known.items():
                    if key not in fresh:
                        handler("DELETED", obj)
                known = fresh
                self._synced[kind].set()
                self.stats.relists[kind] += 1
                await self._watch(path, version, known, handler)
            except asyncio.CancelledError:
                raise
            except (_GoneError, aiohttp.ClientError, TimeoutError, ValueError):
                await asyncio.sleep(0.2)

    async def _watch(self, path: str, version: str, known: dict[str, Raw], handler: Callable[[str, Raw], None]) -> None:
        """Watch from ``version``, resuming from the last seen resourceVersion; 410 → relist."""
        assert self._api is not None
        while True:
            params = {
                "watch": "true",
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(self.watch_timeout_seconds),
            }
            async with self._api.get(
                self.api_url + path, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
            ) as resp:
                if resp.status == 410:
                    raise _GoneError()
                resp.raise_for_status()
                async for line in resp.content:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    kind = event.get("type")
                    obj = event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            raise _GoneError()
                        raise ValueError(f"watch error: {obj}")
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        version = str(rv)
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        known.pop(_key(obj), None)
                    else:
                        known[_key(obj)] = obj
                    handler(str(kind), obj)

    def _on_node(self, kind: str, obj: Raw) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        if kind == "DELETED":
            self.nodes.pop(name, None)
        else:
            try:
                self.nodes[name] = node_from_dict(obj)
            except ObjectError:
                return
        self.queue.cluster_event("NodeChange")
        self._changed.set()

    def _on_pod(self, kind: str, obj: Raw) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or _key(obj))
        if kind == "DELETED":
            old = self.pods.pop(uid, None)
            self._requests.pop(uid, None)
            self.assumed.pop(uid, None)
            self.queue.delete(uid)
            if old is not None and (old.get("spec") or {}).get("nodeName"):
                self.queue.cluster_event("AssignedPodDelete")
            self._changed.set()
            return
        created = uid not in self.pods
        self.pods[uid] = obj
        spec = obj.get("spec") or {}
        try:
            self._requests[uid] = pod_requests(spec)
        except ValueError:
            self._requests[uid] = {}
        if spec.get("nodeName"):
            # An assigned pod: into the cache (confirming an assumed one), out of the queue.
            self.assumed.pop(uid, None)
            self.queue.delete(uid)
            self.queue.cluster_event("AssignedPodAdd" if created else "AssignedPodUpdate")
        elif self._is_pending(obj):
            if uid not in self.assumed:
                if created or uid not in self.queue:
                    self.queue.add(uid, int(spec.get("priority") or 0))
                else:
                    self.queue.pod_updated(uid)  # its own update (its condition too) may move it
        else:
            self.queue.delete(uid)
        self._changed.set()

    # ---- scheduling --------------------------------------------------------------------

    def _usage(self) -> dict[str, NodeUsage]:
        usage: dict[str, NodeUsage] = {name: NodeUsage({}) for name in self.nodes}
        for uid, pod in self.pods.items():
            node = self.assumed.get(uid) or (pod.get("spec") or {}).get("nodeName")
            if not node or node not in usage or (pod.get("status") or {}).get("phase") in TERMINAL:
                continue
            usage[node].add(self._requests.get(uid, {}))
        for uid, node in self.assumed.items():
            if uid not in self.pods and node in usage:
                usage[node].add(self._requests.get(uid, {}))
        return usage

    async def _schedule_loop(self) -> None:
        while True:
            queued = await self.queue.pop()
            pod = self.pods.get(queued.uid)
            if pod is None or not self._is_pending(pod):
                self.queue.delete(queued.uid)
                continue
            await self._schedule_one(pod, queued.uid, queued.attempts)
            self._changed.set()
            # The binding goroutine starts now; let it send before the next cycle begins.
            await asyncio.sleep(0)

    async def _schedule_one(self, pod: Raw, uid: str, attempt: int) -> None:
        self.stats.attempts += 1
        meta = pod["metadata"]
        decision = Decision(
            pod=f"{meta.get('namespace', 'default')}/{meta['name']}",
            uid=uid,
            cycle=self.queue.scheduling_cycle,
            attempt=attempt,
            started=time.monotonic(),
        )
        self.decisions.append(decision)
        requests = self._requests.get(uid, {})
        usage = self._usage()
        names = list(self.nodes)
        wanted = num_feasible_nodes_to_find(len(names), self.percentage)
        feasible: list[str] = []
        start = self._next_start % len(names) if names else 0
        processed = 0
        in_tree = InTreeFilter(pod, requests, self.nodes, usage)
        in_tree_failures: dict[str, str] = {}
        for offset in range(len(names)):
            name = names[(start + offset) % len(names)]
            processed += 1
            status = in_tree.status(name)
            if status.is_success:
                feasible.append(name)
                if len(feasible) >= wanted:
                    break
            else:
                in_tree_failures[name] = status.reason
        self._next_start = (start + processed) % len(names) if names else 0
        decision.candidates = list(feasible)
        interested = is_interested(pod, self.extender.managed_resources)
        if feasible and interested and self.extender.filter_verb:
            decision.filter_sent = time.monotonic()
            try:
                result = await self._call(
                    self.extender.filter_verb,
                    extender_args(pod, feasible),
                    lambda status, body: parse_filter_result(status, body, feasible),
                )
            except ExtenderError as exc:
                decision.filter_done = time.monotonic()
                return self._attempt_error(decision, uid, exc)
            decision.filter_done = time.monotonic()
            self.stats.noncanonical_keys.extend(result.noncanonical_keys)
            decision.passed = result.passed
            decision.failed = result.failed
            decision.unresolvable = result.unresolvable
            feasible = result.passed
        if not feasible:
            decision.outcome = "unschedulable"
            self.stats.unschedulable += 1
            rejectors = set()
            if in_tree_failures:
                rejectors.add(IN_TREE)
            if len(decision.candidates) != len(decision.passed):
                rejectors.add(EXTENDER)
            self.queue.failed(uid, unschedulable=True, rejectors=rejectors)
            reasons = [*in_tree_failures.values(), *decision.failed.values(), *decision.unresolvable.values()]
            self._write_condition(uid, "Unschedulable", fit_error_message(len(names), reasons))
            return None
        if len(feasible) == 1:
            self.stats.prioritize_skipped += 1
            host = feasible[0]
        else:
            host = await self._prioritize(
                pod=pod, requests=requests, feasible=feasible, usage=usage, decision=decision, interested=interested
            )
        decision.node = host
        decision.outcome = "assumed"
        self.stats.assumed += 1
        self.assumed[uid] = host
        self.queue.delete(uid)
        task = asyncio.ensure_future(self._bind(pod, uid, host, decision))
        self._bind_tasks.add(task)
        task.add_done_callback(self._bind_tasks.discard)
        return None

    async def _prioritize(
        self,
        *,
        pod: Raw,
        requests: ResourceList,
        feasible: list[str],
        usage: dict[str, NodeUsage],
        decision: Decision,
        interested: bool,
    ) -> str:
        totals = {name: least_allocated_score(requests, self.nodes[name], usage[name]) for name in feasible}
        if interested and self.extender.prioritize_verb:
            decision.prioritize_sent = time.monotonic()
            try:
                result = await self._call(
                    self.extender.prioritize_verb, extender_args(pod, feasible), parse_prioritize_result
                )
            except ExtenderError:
                decision.prioritize_done = time.monotonic()  # prioritize errors are always ignored
            else:
                decision.prioritize_done = time.monotonic()
                self.stats.noncanonical_keys.extend(result.noncanonical_keys)
                factor = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
                for host, score in result.scores:
                    if not 0 <= score <= MAX_EXTENDER_PRIORITY:
                        self.stats.extender_scores_out_of_range += 1
                    decision.extender_scores[host] = decision.extender_scores.get(host, 0) + score
                    if host in totals:  # hosts not in the input are dropped
                        totals[host] += score * self.extender.weight * factor
        decision.totals = totals
        return self._select_host(feasible, totals)

    def _select_host(self, feasible: list[str], totals: Mapping[str, int]) -> str:
        """``selectHost``: the highest total; ties by reservoir sampling (seeded)."""
        best = feasible[0]
        best_score = totals[best]
        ties = 1
        for name in feasible[1:]:
            score = totals[name]
            if score > best_score:
                best, best_score, ties = name, score, 1
            elif score == best_score:
                ties += 1
                if self.random.randrange(ties) == 0:
                    best = name
        return best

    def _attempt_error(self, decision: Decision, uid: str, exc: ExtenderError) -> None:
        decision.outcome = f"{exc.verb}-error"
        decision.error = str(exc)
        self.queue.failed(uid, unschedulable=False)
        self._write_condition(uid, "SchedulerError", str(exc))

    def _write_condition(self, uid: str, reason: str, message: str) -> None:
        """``PodScheduled=False`` as kube-scheduler's ``updatePod`` writes it: only when it changes."""
        pod = self.pods.get(uid)
        if pod is None:
            return
        conditions = list((pod.get("status") or {}).get("conditions") or [])
        old = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == ("False", reason, message):
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if old is not None and old.get("status") == "False":
            stamp = str(old.get("lastTransitionTime") or stamp)
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
        patch = {"status": {"conditions": [*(c for c in conditions if c.get("type") != "PodScheduled"), condition]}}
        meta = pod.get("metadata") or {}
        path = f"/api/v1/namespaces/{meta.get('namespace', 'default')}/pods/{meta.get('name')}/status"
        self.stats.condition_writes += 1
        self._spawn_write(self._patch(path, patch))

    async def _patch(self, path: str, body: Mapping[str, Any]) -> None:
        assert self._api is not None
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with self._api.patch(
                self.api_url + path,
                data=orjson.dumps(body),
                headers={"Content-Type": "application/merge-patch+json"},
                timeout=aiohttp.ClientTimeout(total=30),
            ) as resp:
                await resp.read()

    async def _bind(self, pod: Raw, uid: str, host: str, decision: Decision) -> None:
        meta = pod["metadata"]
        decision.bind_sent = time.monotonic()
        try:
            body = bind_args(meta["name"], meta.get("namespace", "default"), uid, host)
            self.stats.noncanonical_keys.extend(await self._call(self.extender.bind_verb, body, parse_bind_result))
        except ExtenderError as exc:
            decision.bind_done = time.monotonic()
            decision.error = str(exc)
            self.stats.binds_failed += 1
            self.assumed.pop(uid, None)  # ForgetPod
            cached = self.pods.get(uid)
            if cached is not None and (cached.get("spec") or {}).get("nodeName"):
                decision.bind_outcome = "error-already-bound"
                self.stats.bind_failed_already_bound += 1
            elif cached is not None and self._is_pending(cached):
                decision.bind_outcome = "error"
                self.stats.requeued_after_bind_failure += 1
                self.queue.requeue_after_bind_failure(uid, int((cached.get("spec") or {}).get("priority") or 0))
                self._write_condition(uid, "SchedulerError", str(exc))
            else:
                decision.bind_outcome = "error"
            self.queue.cluster_event("BindFailure")
        else:
            decision.bind_done = time.monotonic()
            decision.bind_outcome = "ok"
            self.stats.binds_ok += 1
        self._changed.set()

    async def _call(self, verb: str, body: bytes, parse: Callable[[int, bytes], _T]) -> _T:
        """POST one verb with ``httpTimeout``; every failure is counted and raised as ExtenderError."""
        assert self._http is not None
        self.stats.calls[verb] += 1
        try:
            async with self._http.post(
                self.extender.url(verb),
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=self.extender.timeout(verb)),
            ) as resp:
                status, reply = resp.status, await resp.read()
            return parse(status, reply)
        except TimeoutError:
            self.stats.errors[verb] += 1
            self.stats.timeouts[verb] += 1
            raise ExtenderError(verb, f"timeout after {self.extender.timeout(verb)}s", timed_out=True) from None
        except aiohttp.ClientError as exc:
            self.stats.errors[verb] += 1
            raise ExtenderError(verb, f"{type(exc).__name__}: {exc}") from None
        except ExtenderError:
            self.stats.errors[verb] += 1
            raise


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def fit_error_message(nodes: int, reasons: list[str]) -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <count> <reason>, ... .`` (reasons counted
    and sorted as strings), then its preemption part for a pod nothing can be preempted for."""
    counted = Counter(reasons)
    histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in counted.items()))
    message = f"0/{nodes} nodes are available: {histogram}." if histogram else f"0/{nodes} nodes are available:"
    return f"{message} preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
