"""Candidate order: first in the order is acted on first (restore walks it backwards).

Per the seed: QoS class (BestEffort, Burstable, Guaranteed), then priority (unset = 0), then the
metric's own usage (higher first), then extended-resource usage (``gocrane.io/<res>``; higher
first), then running time (shorter first; unknown start first), then ``namespace/name`` so the
order is total and the same on every run.

Not guaranteed: pods whose usage is unknown sort after every pod with a known usage of the same
class and priority; the executor skips them anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from koordpy.agent.policy.types import PodSample
from koordpy.model.priority import KubeQoS

__all__ = ["SortKey", "class_and_priority", "cpu_usage_key", "general_key", "memory_usage_key", "running_time"]

SortKey = Callable[[PodSample], tuple[object, ...]]

_QOS_RANK = {KubeQoS.BEST_EFFORT: 0, KubeQoS.BURSTABLE: 1, KubeQoS.GUARANTEED: 2}
EXT_CPU = "gocrane.io/cpu"
EXT_MEMORY = "gocrane.io/memory"


def class_and_priority(sample: PodSample) -> tuple[int, int]:
    return (_QOS_RANK[sample.pod.qos], sample.pod.priority or 0)


def running_time(sample: PodSample) -> float:
    """Sorts later starts (shorter running time) first; unknown start counts as newest."""
    start = sample.start_time
    return -math.inf if start is None else -start


def _uses(sample: PodSample, resource: str) -> bool:
    pod = sample.pod
    return resource in pod.limits or resource in pod.requests


def _desc(value: float | None) -> float:
    return math.inf if value is None else -value


def cpu_usage_key(sample: PodSample) -> tuple[object, ...]:
    ext = sample.cpu if sample.cpu is not None and _uses(sample, EXT_CPU) else 0.0
    return (*class_and_priority(sample), _desc(sample.cpu), -ext, running_time(sample), sample.key)


def memory_usage_key(sample: PodSample) -> tuple[object, ...]:
    mem = None if sample.memory is None else float(sample.memory)
    ext = mem if mem is not None and _uses(sample, EXT_MEMORY) else 0.0
    return (*class_and_priority(sample), _desc(mem), -ext, running_time(sample), sample.key)


def general_key(sample: PodSample) -> tuple[object, ...]:
    """For metrics without a sort function: class and priority, running time, name."""
    return (*class_and_priority(sample), running_time(sample), sample.key)
