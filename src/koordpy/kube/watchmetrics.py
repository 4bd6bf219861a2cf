"""Scrape-time Prometheus view of a process's reflectors: skipped objects, failed attempts, health.

Read from the reflectors' own counters when scraped, so nothing is counted twice and the reflector
stays free of Prometheus. Families (``<prefix>`` is e.g. ``koordpy_extender``):

- ``<prefix>_watch_bad_objects_total{resource,reason}``: objects skipped as malformed, or rejected by a
  handler (``handler_error``, or a reason the handler reported, such as ``conversion_error``);
- ``<prefix>_watch_errors_total{resource}``: failed list/watch attempts (410 Gone included);
- ``<prefix>_watch_failing{resource}``: 1 while the reflector is in a failure loop (see ``Reflector.failing``).

The ``resource`` label is the plural (``nodes``, ``podgroups``), or ``plural.group`` for resources of
the same plural in two API groups (``podgroups.scheduling.sigs.k8s.io``, ``podgroups.scheduling.x-k8s.io``).

Not guaranteed: a reason appears only once it happened (no zero series per reason).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from koordpy.kube.reflector import Reflector

__all__ = ["ReflectorCollector", "register_reflector_metrics"]


class ReflectorCollector(Collector):
    def __init__(self, prefix: str, reflectors: Callable[[], Sequence[Reflector]]) -> None:
        self.prefix = prefix
        self.reflectors = reflectors

    def collect(self) -> Iterable[Metric]:
        bad = CounterMetricFamily(
            f"{self.prefix}_watch_bad_objects",
            "Watched objects skipped as malformed or rejected by a handler, by resource and reason.",
            labels=["resource", "reason"],
        )
        errors = CounterMetricFamily(
            f"{self.prefix}_watch_errors", "Failed list/watch attempts (410 Gone included).", labels=["resource"]
        )
        failing = GaugeMetricFamily(
            f"{self.prefix}_watch_failing", "1 while the watch of a resource is in a failure loop.", labels=["resource"]
        )
        reflectors = list(self.reflectors())
        plurals = Counter(r.resource.plural for r in reflectors)
        for reflector in reflectors:
            ref = reflector.resource
            # Two APIs with the same plural (the PodGroups of two groups) are told apart by their group.
            resource = ref.plural if plurals[ref.plural] == 1 else f"{ref.plural}.{ref.group}"
            for reason, count in sorted(reflector.bad_objects.items()):
                bad.add_metric([resource, reason], count)
            errors.add_metric([resource], reflector.errors)
            failing.add_metric([resource], 1.0 if reflector.failing() else 0.0)
        yield bad
        yield errors
        yield failing


def register_reflector_metrics(
    registry: CollectorRegistry, prefix: str, reflectors: Callable[[], Sequence[Reflector]]
) -> None:
    """Register the collector for the reflectors ``reflectors()`` returns at each scrape."""
    registry.register(ReflectorCollector(prefix, reflectors))
