"""Prometheus plumbing shared by the services: one registry per process (no multiprocess mode).

Each service builds its metrics on a registry it is given, so tests can create several app
instances in one process without name clashes.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["LATENCY_BUCKETS", "new_registry", "render"]

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.005,
    0.0075,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)
"""Seconds. Sub-millisecond resolution: the extender's budget is a few milliseconds."""


def new_registry() -> CollectorRegistry:
    return CollectorRegistry(auto_describe=True)


def render(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The text exposition of ``registry`` and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST
