"""kube-scheduler's scheduling queue, reduced to what the extender can observe.

Three parts, as upstream: ``activeQ`` (priority desc, then enqueue time), ``backoffQ`` (pods
waiting out ``initial × 2^(attempts−1)`` capped at ``max``) and ``unschedulablePods`` (moved
back by a cluster event, or flushed after ``max_in_unschedulable`` seconds). A pod that fails as
unschedulable while a move request happened during its cycle goes to backoffQ instead
(``moveRequestCycle``).

Not guaranteed: QueueingHints (every event moves every unschedulable pod, which is what
upstream does for pods an extender rejected), gated pods and nominated pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["QueuedPod", "SchedulingQueue"]


@dataclass(slots=True)
class QueuedPod:
    uid: str
    priority: int
    attempts: int = 0
    timestamp: float = 0.0
    """Enqueue time, then the time of the last failed attempt (backoff starts from it)."""
    cycle: int = 0
    """The scheduling cycle of the last attempt."""


class SchedulingQueue:
    def __init__(
        self,
        clock: Callable[[], float],
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
    ) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.pods: dict[str, QueuedPod] = {}
        self._active: list[tuple[int, int, str]] = []
        self._in_active: set[str] = set()
        self.backoff: dict[str, float] = {}
        self.unschedulable: dict[str, float] = {}
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self.scheduling_cycle = 0
        self.move_request_cycle = -1

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
        """A new pending pod (informer add)."""
        if uid in self.pods:
            return
        self.pods[uid] = QueuedPod(uid, priority, timestamp=self.clock())
        self._push(uid)

    def delete(self, uid: str) -> None:
        """The pod was assigned or deleted: it leaves every sub-queue."""
        self.pods.pop(uid, None)
        self._in_active.discard(uid)
        self.backoff.pop(uid, None)
        self.unschedulable.pop(uid, None)

    def _push(self, uid: str) -> None:
        pod = self.pods[uid]
        self.backoff.pop(uid, None)
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
                    pod = self.pods[uid]
                    pod.attempts += 1
                    self.scheduling_cycle += 1
                    pod.cycle = self.scheduling_cycle
                    return pod
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=0.05)

    def flush(self) -> None:
        """Move backoff pods whose backoff expired, and unschedulable pods waiting too long."""
        now = self.clock()
        for uid, ready in list(self.backoff.items()):
            if ready <= now:
                self._push(uid)
        for uid, since in list(self.unschedulable.items()):
            if now - since >= self.max_in_unschedulable:
                self._to_backoff_or_active(uid)

    def _to_backoff_or_active(self, uid: str) -> None:
        pod = self.pods[uid]
        ready = pod.timestamp + self.backoff_duration(pod.attempts)
        self.unschedulable.pop(uid, None)
        if ready > self.clock():
            self.backoff[uid] = ready
        else:
            self._push(uid)

    def failed(self, uid: str, *, unschedulable: bool) -> None:
        """The attempt failed: unschedulable → unschedulablePods, error → backoffQ."""
        pod = self.pods.get(uid)
        if pod is None:
            return
        pod.timestamp = self.clock()
        if unschedulable and self.move_request_cycle < pod.cycle:
            self.unschedulable[uid] = pod.timestamp
        else:
            self.backoff[uid] = pod.timestamp + self.backoff_duration(pod.attempts)

    def requeue_after_bind_failure(self, uid: str, priority: int) -> None:
        """Bind failed and the pod is still unassigned: back to backoffQ."""
        pod = self.pods.get(uid)
        if pod is None:
            pod = self.pods[uid] = QueuedPod(uid, priority, attempts=1)
        pod.timestamp = self.clock()
        self.backoff[uid] = pod.timestamp + self.backoff_duration(pod.attempts)

    def move(self, uids: set[str]) -> None:
        """A cluster event that only some unschedulable pods are worth retrying for (``uids``)."""
        self.move_request_cycle = self.scheduling_cycle
        for uid in list(self.unschedulable):
            if uid in uids:
                self._to_backoff_or_active(uid)

    def move_all(self) -> None:
        """``MoveAllToActiveOrBackoffQueue``: a cluster event happened."""
        self.move_request_cycle = self.scheduling_cycle
        for uid in list(self.unschedulable):
            self._to_backoff_or_active(uid)
