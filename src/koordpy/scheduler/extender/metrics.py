"""The extender's Prometheus metrics, on a registry it is given (one per app instance).

Cache sizes, watch counters and conversion errors are read at scrape time from the objects that
own them (a custom collector), so the hot path pays nothing for them.

Not guaranteed: watch restart/relist counts when the reflector does not expose them (reported as 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from koordpy.runtime.metrics import LATENCY_BUCKETS
from koordpy.scheduler.extender.cache import ClusterCache

__all__ = ["ExtenderMetrics", "WatchStats"]

WatchStats = Callable[[], Mapping[str, Mapping[str, int]]]
"""resource -> {"restarts": n, "relists": n}."""


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.latency = Histogram(
            "koordpy_extender_request_duration_seconds",
            "Time to answer one extender request, by verb (body read to response built).",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.requests = Counter(
            "koordpy_extender_requests",
            "Extender requests by verb and outcome (ok, bad_request, not_ready, error, bind_failed).",
            ["verb", "outcome"],
            registry=registry,
        )
        self.foreign_pods = Counter(
            "koordpy_extender_foreign_pods",
            "Requests about pods whose spec.schedulerName is not the configured one (answered anyway).",
            ["verb"],
            registry=registry,
        )
        self.bind_failures = Counter(
            "koordpy_extender_bind_failures",
            "pods/binding calls that failed, by reason (Conflict, NotFound, Timeout, ...).",
            ["reason"],
            registry=registry,
        )
        self.binds_unassumed = Counter(
            "koordpy_extender_binds_without_cached_pod",
            "Binds of pods the extender had not seen; their estimate waits for the watch.",
            registry=registry,
        )
        self.binds_unreadable = Counter(
            "koordpy_extender_binds_unreadable",
            "Binds refused because the pod could not be read (read_failed) or converted (unconvertible): it may "
            "be a gang member, so it is never bound as a plain pod (kube-scheduler retries it).",
            ["reason"],
            registry=registry,
        )
        for reason in ("unconvertible", "read_failed"):
            self.binds_unreadable.labels(reason)  # both series from the start (0)
        self.binds_refused = Counter(
            "koordpy_extender_binds_refused",
            "Binds refused because a placement recorded after the pod's filter answer left its node without room "
            "(kube-scheduler retries the pod).",
            registry=registry,
        )
        self.preemption_refused = Counter(
            "koordpy_extender_preemption_nodes_refused",
            "Candidate nodes the preempt verb removed, by reason: backoff (the pod preempted there and lost the "
            "node to another scheduler), reserved (its room stays reserved with the victims gone), "
            "not_reserved_node (the pod owns a Reservation elsewhere), gang (the victims would take a running gang "
            "below its minimum).",
            ["reason"],
            registry=registry,
        )
        self.fast_path = Gauge(
            "koordpy_extender_fast_path",
            "1 while the verbs are answered inside the HTTP protocol (the fast path), 0 when the start-up check "
            "of uvicorn's internals failed and they go through the ASGI app (the log says why).",
            registry=registry,
        )
        # Pre-create the label sets scraped most often so they appear as 0 from the start.
        for reason in ("backoff", "reserved", "not_reserved_node", "gang"):
            self.preemption_refused.labels(reason)
        for verb in ("filter", "prioritize", "bind", "preempt"):
            self.latency.labels(verb)
            self.requests.labels(verb, "ok")
            self.foreign_pods.labels(verb)

    def watch_collector(self, cache: ClusterCache, watch_stats: WatchStats | None) -> None:
        """Register the scrape-time collector for cache sizes and watch counters."""
        self.registry.register(_StateCollector(cache, watch_stats))

    def scheduling_collector(self, pending: PendingSummary, expired_metrics: Callable[[], int]) -> None:
        """Register the scrape-time collector for the profile's refused pods and the expired NodeMetrics."""
        self.registry.register(_SchedulingCollector(pending, expired_metrics))


PendingSummary = Callable[[], Mapping[str, tuple[int, float]]]
"""reason -> (pods of the profile the filter leaves without a node, seconds the oldest has been)."""


class _SchedulingCollector(Collector):
    def __init__(self, pending: PendingSummary, expired_metrics: Callable[[], int]) -> None:
        self.pending = pending
        self.expired_metrics = expired_metrics

    def collect(self) -> Iterable[Metric]:
        pods = GaugeMetricFamily(
            "koordpy_extender_pending_pods",
            "Pending pods of the profile whose last filter answer left them no node, by reason (gang: the gang "
            "is short of members; load: load-aware scheduling refused every node; other).",
            labels=["reason"],
        )
        oldest = GaugeMetricFamily(
            "koordpy_extender_pending_oldest_seconds",
            "Seconds since the oldest of those pods was first refused (without a node since), by reason; 0 when none.",
            labels=["reason"],
        )
        for reason, (count, seconds) in sorted(self.pending().items()):
            pods.add_metric([reason], count)
            oldest.add_metric([reason], seconds)
        yield pods
        yield oldest
        expired = GaugeMetricFamily(
            "koordpy_extender_nodemetrics_expired",
            "Nodes whose NodeMetric is expired (no updateTime, or older than nodeMetricExpirationSeconds): "
            "their agent does not report.",
        )
        expired.add_metric([], self.expired_metrics())
        yield expired


class _StateCollector(Collector):
    def __init__(self, cache: ClusterCache, watch_stats: WatchStats | None) -> None:
        self.cache = cache
        self.watch_stats = watch_stats

    def collect(self) -> Iterable[Metric]:
        sizes = GaugeMetricFamily("koordpy_extender_cache_objects", "Objects in the extender's cache.", labels=["kind"])
        for kind, size in self.cache.sizes().items():
            sizes.add_metric([kind], size)
        yield sizes
        errors = CounterMetricFamily(
            "koordpy_extender_watch_conversion_errors",
            "Watched objects skipped because they could not be converted.",
            labels=["resource"],
        )
        events = CounterMetricFamily(
            "koordpy_extender_watch_events", "Watch events applied to the cache.", labels=["resource", "type"]
        )
        for resource in ("nodes", "pods", "nodemetrics", "reservations"):
            errors.add_metric([resource], self.cache.conversion_errors[resource])
        for (resource, kind), count in sorted(self.cache.events.items()):
            events.add_metric([resource, kind], count)
        yield errors
        yield events
        invalid = GaugeMetricFamily(
            "koordpy_extender_invalid_nodes",
            "Nodes filtered because their current Node or NodeMetric object cannot be read, by resource.",
            labels=["resource"],
        )
        for resource, names in sorted(self.cache.invalid.items()):
            invalid.add_metric([resource], len(names))
        yield invalid
        restarts = CounterMetricFamily(
            "koordpy_extender_watch_restarts", "Watch requests re-opened, per resource.", labels=["resource"]
        )
        relists = CounterMetricFamily(
            "koordpy_extender_watch_relists",
            "Lists after the first (410 Gone, errors), per resource.",
            labels=["resource"],
        )
        stats = self.watch_stats() if self.watch_stats is not None else {}
        for resource in ("nodes", "pods", "nodemetrics", "reservations"):
            row = stats.get(resource, {})
            restarts.add_metric([resource], row.get("restarts", 0))
            relists.add_metric([resource], row.get("relists", 0))
        yield restarts
        yield relists
