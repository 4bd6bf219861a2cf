"""kube-scheduler's scheduling queue (v1.37 defaults), reduced to what the extender can observe.

Three parts, as upstream: ``activeQ`` (priority desc, then enqueue time), ``backoffQ`` (pods waiting out
``initial × 2^(attempts−1)`` capped at ``max``) and ``unschedulablePods``. A pod that failed as
unschedulable remembers its *rejectors*: ``Extender`` when the extender's filter removed nodes (v1.30+
records it as a plugin), ``InTree`` when an in-tree filter (NodeResourcesFit, TaintToleration, ...) did.
It leaves ``unschedulablePods`` only through the events kube-scheduler v1.37 registers for them
(``pkg/scheduler/backend/queue/scheduling_queue.go``, ``framework/runtime/framework.go``):

* an assigned pod added, updated or deleted, a node added, updated or deleted, a bind that failed
  (kube-scheduler treats it as an assigned pod's deletion): every such pod is moved;
* an update of the pod itself (any field, its status too: the extender's enqueue extension registers
  ``TargetPod/All`` and its queueing hint is ``Queue``): that pod is moved when ``Extender`` rejected it;
* the flush: every ``flush_interval`` (30 s) the pods unschedulable for longer than
  ``max_in_unschedulable`` (5 minutes) are moved.

A new pending pod moves nobody (only with the ``GenericWorkload`` gate, off by default in v1.37). Moved
means: to backoffQ while the pod's backoff is not served, else to activeQ; and with ``SchedulerPopFromBackoffQ``
(on since v1.33) a pod backing off after an unschedulable attempt (not after an error) is popped when
activeQ is empty. An event of interest during a pod's own cycle sends it to backoffQ when that cycle
fails (the queueing hints replayed for in-flight pods).

Not guaranteed: the exact in-tree queueing hints (any assigned pod or node event moves an in-tree
rejected pod), gated pods and nominated pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["EXTENDER", "IN_TREE", "QueuedPod", "SchedulingQueue"]

EXTENDER = "Extender"
IN_TREE = "InTree"


@dataclass(slots=True)
class QueuedPod:
    uid: str
    priority: int
    attempts: int = 0
    timestamp: float = 0.0
    """Enqueue time, then the time of the last failed attempt (backoff starts from it)."""
    cycle: int = 0
    """The scheduling cycle of the last attempt."""
    rejectors: frozenset[str] = field(default_factory=frozenset)
    """Who rejected the last attempt (``EXTENDER``, ``IN_TREE``); empty after an error."""
    unschedulable_since: float = 0.0


class SchedulingQueue:
    def __init__(
        self,
        clock: Callable[[], float],
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        flush_interval: float = 30.0,
        pop_from_backoff: bool = True,
    ) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.flush_interval = flush_interval
        self.pop_from_backoff = pop_from_backoff
        self.pods: dict[str, QueuedPod] = {}
        self._active: list[tuple[int, int, str]] = []
        self._in_active: set[str] = set()
        self.backoff: dict[str, float] = {}
        self._error_backoff: set[str] = set()
        """Pods in ``backoff`` after an error (or a failed bind): never popped before their backoff ends."""
        self.unschedulable: dict[str, float] = {}
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        self._in_flight: set[str] = set()
        self._updated_in_flight: set[str] = set()
        self._next_flush = clock() + flush_interval
        self.moves: list[tuple[str, str]] = []
        """(uid, why) of every move out of unschedulablePods, for tests to read."""

    def __contains__(self, uid: str) -> bool:
        return uid in self.pods

    def backoff_duration(self, attempts: int) -> float:
        duration = self.initial_backoff
        for _ in range(1, attempts):
            duration *= 2
            if duration > self.max_backoff:
                return self.max_backoff
        return duration

    def add(self, uid: str, priority: int) -> None:
        """A new pending pod (informer add). It moves no other pod."""
        if uid in self.pods:
            return
        self.pods[uid] = QueuedPod(uid, priority, timestamp=self.clock())
        self._push(uid)

    def delete(self, uid: str) -> None:
        """The pod was assigned or deleted: it leaves every sub-queue."""
        self.pods.pop(uid, None)
        self._in_active.discard(uid)
        self.backoff.pop(uid, None)
        self._error_backoff.discard(uid)
        self.unschedulable.pop(uid, None)
        self._in_flight.discard(uid)
        self._updated_in_flight.discard(uid)

    def _push(self, uid: str) -> None:
        pod = self.pods[uid]
        self.backoff.pop(uid, None)
        self._error_backoff.discard(uid)
        self.unschedulable.pop(uid, None)
        if uid not in self._in_active:
            self._in_active.add(uid)
            heapq.heappush(self._active, (-pod.priority, next(self._seq), uid))
            self._wake.set()

    async def pop(self) -> QueuedPod:
        """Wait for the next active pod; counts an attempt and starts a scheduling cycle."""
        while True:
            self.flush()
            while self._active:
                _, _, uid = heapq.heappop(self._active)
                if uid in self._in_active:
                    self._in_active.discard(uid)
                    return self._start(uid)
            poppable = [u for u in self.backoff if u not in self._error_backoff] if self.pop_from_backoff else []
            if poppable:
                uid = min(poppable, key=lambda u: (self.backoff[u], u))
                del self.backoff[uid]
                return self._start(uid)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=0.05)

    def _start(self, uid: str) -> QueuedPod:
        pod = self.pods[uid]
        pod.attempts += 1
        self.scheduling_cycle += 1
        pod.cycle = self.scheduling_cycle
        self._in_flight.add(uid)
        return pod

    def flush(self) -> None:
        """Move backoff pods whose backoff expired; every ``flush_interval``, unschedulable pods waiting
        longer than ``max_in_unschedulable``."""
        now = self.clock()
        for uid, ready in list(self.backoff.items()):
            if ready <= now:
                self._push(uid)
        if now < self._next_flush:
            return
        self._next_flush = now + self.flush_interval
        for uid, since in list(self.unschedulable.items()):
            if now - since > self.max_in_unschedulable:
                self._move(uid, "UnschedulableTimeout")

    def _move(self, uid: str, why: str) -> None:
        pod = self.pods[uid]
        ready = pod.timestamp + self.backoff_duration(pod.attempts)
        self.unschedulable.pop(uid, None)
        self.moves.append((uid, why))
        if ready > self.clock():
            self.backoff[uid] = ready
            self._wake.set()
        else:
            self._push(uid)

    def failed(self, uid: str, *, unschedulable: bool, rejectors: Iterable[str] = ()) -> None:
        """The attempt failed: unschedulable → unschedulablePods (backoffQ when an event that could help it
        came during its cycle, or when nobody rejected it), error → backoffQ."""
        self._in_flight.discard(uid)
        updated = uid in self._updated_in_flight
        self._updated_in_flight.discard(uid)
        pod = self.pods.get(uid)
        if pod is None:
            return
        pod.timestamp = self.clock()
        pod.rejectors = frozenset(rejectors) if unschedulable else frozenset()
        moved_meanwhile = self.move_request_cycle >= pod.cycle or (updated and EXTENDER in pod.rejectors)
        if unschedulable and pod.rejectors and not moved_meanwhile:
            pod.unschedulable_since = pod.timestamp
            self.unschedulable[uid] = pod.timestamp
            return
        self.backoff[uid] = pod.timestamp + self.backoff_duration(pod.attempts)
        if not pod.rejectors:
            self._error_backoff.add(uid)

    def requeue_after_bind_failure(self, uid: str, priority: int) -> None:
        """Bind failed and the pod is still unassigned: back to backoffQ."""
        pod = self.pods.get(uid)
        if pod is None:
            pod = self.pods[uid] = QueuedPod(uid, priority, attempts=1)
        pod.timestamp = self.clock()
        pod.rejectors = frozenset()
        self.backoff[uid] = pod.timestamp + self.backoff_duration(pod.attempts)
        self._error_backoff.add(uid)

    def cluster_event(self, why: str) -> None:
        """An assigned pod or a node was added, updated or deleted, or a bind failed: every pod some
        plugin rejected is worth another try (kube-scheduler's ``MoveAllToActiveOrBackoffQueue``)."""
        self.move_request_cycle = self.scheduling_cycle
        for uid in list(self.unschedulable):
            if self.pods[uid].rejectors & {EXTENDER, IN_TREE}:
                self._move(uid, why)

    def pod_updated(self, uid: str) -> None:
        """The pending pod itself was updated (any field): it is moved when the extender rejected it."""
        pod = self.pods.get(uid)
        if pod is None:
            return
        if uid in self._in_flight:
            self._updated_in_flight.add(uid)
        elif uid in self.unschedulable and EXTENDER in pod.rejectors:
            self._move(uid, "UnscheduledPodUpdate")
