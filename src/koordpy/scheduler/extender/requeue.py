"""Asking kube-scheduler to retry gang members it parked after a quorum refusal.

kube-scheduler keeps a pod the extender refused on every node in its unschedulable pool until a cluster
event it cares about (an assigned pod or a node changes, a bind fails) or its 5-minute flush; the creation
of the member that completes the gang is no such event (kube-scheduler v1.30 to v1.37, without the alpha
``GenericWorkload``/``GangScheduling`` gates). An update of the pod itself is: kube-scheduler moves an
unschedulable pod whose object changed back to its active (or backoff) queue in every version from v1.29
on. So each member the gang model hands out in a :class:`~koordpy.scheduler.plugins.gang.Wakeup` gets one
JSON merge patch of the annotation :data:`REQUEUE_ANNOTATION` (a new timestamp each time, so the patch is
never a no-op).

Paced and bounded: a token bucket (``gang.requeueQPS``, ``gang.requeueBurst``) and at most
``concurrency`` patches in flight; one pending entry per pod (a second wake-up of a pod still queued is
merged); an entry is dropped when the pod is retried, held, bound or deleted before its turn. A patch that
fails on the server's side (5xx, 429, a dropped connection) is tried ``attempts`` times; 404 (the pod is
gone) and 403/422 (not allowed: the chart's role grants ``patch pods``) are not retried.

Not guaranteed: that kube-scheduler retries the pod at once (a pod still in its backoff queue waits out
its backoff, at most ``podMaxBackoffSeconds``, 10 s by default); ordering across gangs beyond first come,
first served.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from koordpy.kube.errors import ApiError
from koordpy.kube.resources import PODS
from koordpy.scheduler.plugins.gang import Wakeup

__all__ = ["REQUEUE_ANNOTATION", "PodPatcher", "RequeueMetrics", "Requeuer", "TokenBucket"]

REQUEUE_ANNOTATION = "gang.scheduling.koordpy.io/requeued-at"
"""Written by the extender on a gang member it refused at quorum, once its gang has enough members: the
time of the request, so kube-scheduler sees an update of the pod and retries it."""


class PodPatcher(Protocol):
    async def patch(
        self, resource: Any, name: str, patch: Any, *, namespace: str | None = None, timeout: float | None = None
    ) -> Any: ...


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved; ``delay`` says how long until one is there."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.last = now

    def delay(self, now: float) -> float:
        """Seconds to wait before a token is available (0: take it now with ``take``)."""
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self) -> None:
        self.tokens -= 1.0


class RequeueMetrics:
    def __init__(self, registry: CollectorRegistry, requeuer: Callable[[], Requeuer | None]) -> None:
        self.outcomes = Counter(
            "koordpy_extender_gang_requeues",
            "Retry requests for gang members refused at quorum, by outcome (patched, gone, forbidden, "
            "failed, dropped: retried, held, bound or deleted before its turn; off: gang.requeueQPS is 0).",
            ["outcome"],
            registry=registry,
        )
        registry.register(_PendingCollector(requeuer))


class _PendingCollector(Collector):
    def __init__(self, requeuer: Callable[[], Requeuer | None]) -> None:
        self.requeuer = requeuer

    def collect(self) -> Any:
        gauge = GaugeMetricFamily(
            "koordpy_extender_gang_requeue_pending", "Gang members waiting for their retry request to be sent."
        )
        requeuer = self.requeuer()
        gauge.add_metric([], len(requeuer.pending) if requeuer is not None else 0)
        yield gauge


class Requeuer:
    """Sends the retry requests. ``add`` and ``discard`` from the event loop; ``close`` on shutdown."""

    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        patcher: Callable[[], PodPatcher | None],
        log: Any,
        metrics: RequeueMetrics,
        concurrency: int = 8,
        attempts: int = 3,
        retry_delay: float = 0.5,
        timeout: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.qps = qps
        self.patcher = patcher
        self.log = log
        self.metrics = metrics
        self.attempts = attempts
        self.retry_delay = retry_delay
        self.timeout = timeout
        self.monotonic = monotonic
        self.wall = wall
        self.bucket = TokenBucket(qps, burst, monotonic()) if qps > 0 else None
        self.pending: OrderedDict[str, Wakeup] = OrderedDict()
        self.in_flight = 0
        self.peak_in_flight = 0
        self._slots = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._forbidden_logged = False

    def add(self, wakeups: Iterable[Wakeup]) -> None:
        added = False
        for wakeup in wakeups:
            if self.bucket is None:
                self.metrics.outcomes.labels("off").inc()
                continue
            if wakeup.pod not in self.pending:
                self.pending[wakeup.pod] = wakeup
                added = True
        if added:
            self._ensure_task()
            self._wake.set()

    def discard(self, pod_key: str) -> None:
        """The pod needs no retry request any more (retried, held, bound or deleted)."""
        if self.pending.pop(pod_key, None) is not None:
            self.metrics.outcomes.labels("dropped").inc()

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        assert self.bucket is not None
        while True:
            if not self.pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            delay = self.bucket.delay(self.monotonic())
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            await self._slots.acquire()
            if not self.pending:  # dropped while we waited for a slot
                self._slots.release()
                continue
            self.bucket.take()
            _, wakeup = self.pending.popitem(last=False)
            task = asyncio.ensure_future(self._send(wakeup))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, wakeup: Wakeup) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            self.metrics.outcomes.labels(await self._patch(wakeup)).inc()
        finally:
            self.in_flight -= 1
            self._slots.release()

    async def _patch(self, wakeup: Wakeup) -> str:
        namespace, _, name = wakeup.pod.partition("/")
        error = "no API client configured"
        for attempt in range(self.attempts):
            patcher = self.patcher()
            if patcher is None:
                break
            stamp = self.wall().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            body = {"metadata": {"annotations": {REQUEUE_ANNOTATION: stamp}}}
            try:
                async with asyncio.timeout(self.timeout):
                    await patcher.patch(PODS, name, body, namespace=namespace)
            except ApiError as exc:
                if exc.status == 404:
                    return "gone"
                if exc.status in (401, 403, 422):
                    if not self._forbidden_logged:
                        self._forbidden_logged = True
                        self.log.error(
                            "gang.requeue_forbidden",
                            pod=wakeup.pod,
                            error=f"{type(exc).__name__}: {exc}",
                            hint="the extender's role needs patch on pods (the chart grants it); "
                            "without it refused gang members wait for kube-scheduler's own retry (up to 5 minutes)",
                        )
                    return "forbidden"
                error = f"{type(exc).__name__}: {exc}"
            except (TimeoutError, OSError, RuntimeError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                self.log.debug("gang.requeued", pod=wakeup.pod, gang=wakeup.gang_id, reason=wakeup.reason)
                return "patched"
            if attempt + 1 < self.attempts:
                await asyncio.sleep(self.retry_delay * (attempt + 1))
        self.log.warning("gang.requeue_failed", pod=wakeup.pod, gang=wakeup.gang_id, error=error)
        return "failed"

    async def close(self) -> None:
        tasks = [t for t in (self._task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
