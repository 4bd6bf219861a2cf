"""Asking kube-scheduler to retry gang members it parked after a quorum refusal, without writing to them.

kube-scheduler keeps a pod the extender refused on every node in its unschedulable pool until a cluster
event it cares about, or its 5-minute flush; the creation of the member that completes the gang is no
such event (kube-scheduler v1.30 to v1.37, without the alpha ``GenericWorkload``/``GangScheduling``
gates). A pod refused by an extender is recorded as rejected by the pseudo-plugin ``Extender``, which
kube-scheduler registers for *every* event of every resource it watches, without a queueing hint
(``pkg/scheduler/schedule_one.go`` and ``framework/runtime/framework.go``, v1.37.2): any Pod, Node,
PersistentVolume(Claim), StorageClass, CSINode, CSIDriver, CSIStorageCapacity, ResourceClaim or
DeviceClass event moves it back to the active (or backoff) queue. The extender therefore owns one such
object, a CSIStorageCapacity named by ``gang.requeueSignal`` that the chart installs in its own namespace
(storage class ``<release>-gang-requeue``, which no PersistentVolumeClaim uses; no node topology, so it
reports capacity on no node), and updates it: one JSON merge patch of the annotation
:data:`REQUEUE_ANNOTATION` (a new timestamp each time, so the patch is never a no-op). The chart's role
allows ``patch`` on that one object and nothing on pods.

One write asks for every member waiting at that moment (and moves every other pod kube-scheduler holds
only for the extender's refusals, as any node or volume event does). Paced and bounded: a token bucket
(``gang.requeueQPS``, ``gang.requeueBurst``) and one write in flight; members woken while a write is in
flight go with the next one; an entry is dropped when the pod is retried, held, bound or deleted before
its turn. A write that fails on the server's side (5xx, 429, a dropped connection) is tried ``attempts``
times; 404 (the object is missing: ``helm upgrade`` makes it again) and 401/403/422 are not retried.

Not guaranteed: that kube-scheduler retries the pod at once (a pod still in its backoff queue waits out
its backoff, at most ``podMaxBackoffSeconds``, 10 s by default); ordering across gangs beyond first come,
first served; that another scheduler than kube-scheduler v1.30+ treats the update the same way.
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
from koordpy.kube.resources import CSISTORAGECAPACITIES
from koordpy.scheduler.plugins.gang import Wakeup

__all__ = ["REQUEUE_ANNOTATION", "PodPatcher", "RequeueMetrics", "Requeuer", "TokenBucket"]

REQUEUE_ANNOTATION = "gang.scheduling.koordpy.io/requeued-at"
"""Written by the extender on its requeue signal (``gang.requeueSignal``) when gang members it refused at
quorum may now pass: the time of the request, so kube-scheduler sees an update it retries them on."""


class PodPatcher(Protocol):
    """The client call the requeuer writes with: a merge patch of one namespaced object (the signal)."""

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
            "Retry requests for gang members refused at quorum, by outcome (patched: asked for by a write of "
            "gang.requeueSignal; forbidden, failed: that write was refused or failed; dropped: retried, held, "
            "bound or deleted before its turn; off: gang.requeueQPS is 0 or gang.requeueSignal unset).",
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
    """Sends the retry requests. ``add`` and ``discard`` from the event loop; ``close`` on shutdown.

    ``signal``: (namespace, name) of the CSIStorageCapacity to update; None: requests are off."""

    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        patcher: Callable[[], PodPatcher | None],
        log: Any,
        metrics: RequeueMetrics,
        signal: tuple[str, str] | None,
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
        self.signal = signal
        self.attempts = attempts
        self.retry_delay = retry_delay
        self.timeout = timeout
        self.monotonic = monotonic
        self.wall = wall
        self.bucket = TokenBucket(qps, burst, monotonic()) if qps > 0 and signal is not None else None
        self.pending: OrderedDict[str, Wakeup] = OrderedDict()
        self.writes = 0
        """Writes of the signal object sent (each asked for every member pending when it went out)."""
        self.in_flight = 0
        self.peak_in_flight = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._forbidden_logged = False
        if qps > 0 and signal is None:
            log.warning(
                "gang.requeue_off",
                hint="gang.requeueSignal is unset: gang members refused at quorum wait for kube-scheduler's own "
                "retry (up to 5 minutes); the chart sets it",
            )

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
            self.bucket.take()
            batch = list(self.pending.values())
            self.pending.clear()
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                outcome = await self._write(batch)
            finally:
                self.in_flight -= 1
            self.metrics.outcomes.labels(outcome).inc(len(batch))

    async def _write(self, batch: list[Wakeup]) -> str:
        assert self.signal is not None
        namespace, name = self.signal
        error = "no API client configured"
        for attempt in range(self.attempts):
            patcher = self.patcher()
            if patcher is None:
                break
            stamp = self.wall().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            body = {"metadata": {"annotations": {REQUEUE_ANNOTATION: stamp}}}
            try:
                async with asyncio.timeout(self.timeout):
                    await patcher.patch(CSISTORAGECAPACITIES, name, body, namespace=namespace)
            except ApiError as exc:
                if exc.status in (401, 403, 404, 422):
                    if not self._forbidden_logged:
                        self._forbidden_logged = True
                        self.log.error(
                            "gang.requeue_refused",
                            signal=f"{namespace}/{name}",
                            error=f"{type(exc).__name__}: {exc}",
                            hint="the extender updates the CSIStorageCapacity gang.requeueSignal names (the chart "
                            "installs it and grants patch on it); without it refused gang members wait for "
                            "kube-scheduler's own retry (up to 5 minutes)",
                        )
                    return "failed" if exc.status == 404 else "forbidden"
                error = f"{type(exc).__name__}: {exc}"
            except (TimeoutError, OSError, RuntimeError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                self.writes += 1
                gangs = sorted({wakeup.gang_id for wakeup in batch})
                self.log.debug("gang.requeued", members=len(batch), gangs=gangs[:10], more_gangs=len(gangs[10:]))
                return "patched"
            if attempt + 1 < self.attempts:
                await asyncio.sleep(self.retry_delay * (attempt + 1))
        self.log.warning("gang.requeue_failed", signal=f"{namespace}/{name}", members=len(batch), error=error)
        return "failed"

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
