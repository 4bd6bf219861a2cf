"""The default estimator: what a pod will use, and what a node can give.

Per resource ``r`` of the scaling-factor map (batch pods read ``kubernetes.io/batch-*``, mid
pods ``kubernetes.io/mid-*``; the result is stored under plain ``cpu``/``memory``)::

    q   = limit if limit > request else request
    est = 250m cpu / 200 MiB memory          if q == 0 (0 for other resources)
          min(round(q * factor / 100), limit) otherwise (the cap only when a limit is set)

``round`` is Go's ``math.Round`` (half away from zero) on float64, as upstream computes it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.objects import NodeInfo, PodInfo
from koordpy.model.priority import PriorityClass
from koordpy.model.quantity import QuantityError
from koordpy.model.resources import ResourceList, parse_resource_list

__all__ = [
    "ANNOTATION_ESTIMATED_SCALING_FACTORS",
    "ANNOTATION_ESTIMATED_SECONDS_AFTER_INITIALIZED",
    "ANNOTATION_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED",
    "ANNOTATION_RAW_ALLOCATABLE",
    "DEFAULT_CPU_MILLIS",
    "DEFAULT_MEMORY_BYTES",
    "custom_seconds",
    "estimate_node",
    "estimate_pod",
    "go_round",
]

ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
ANNOTATION_ESTIMATED_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
)
ANNOTATION_ESTIMATED_SECONDS_AFTER_INITIALIZED = "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"

DEFAULT_CPU_MILLIS = 250
DEFAULT_MEMORY_BYTES = 200 * 1024 * 1024

_TRANSLATE = {
    PriorityClass.BATCH: {"cpu": "kubernetes.io/batch-cpu", "memory": "kubernetes.io/batch-memory"},
    PriorityClass.MID: {"cpu": "kubernetes.io/mid-cpu", "memory": "kubernetes.io/mid-memory"},
}
_DEFAULTS = {
    "cpu": DEFAULT_CPU_MILLIS,
    "kubernetes.io/batch-cpu": DEFAULT_CPU_MILLIS,
    "memory": DEFAULT_MEMORY_BYTES,
    "kubernetes.io/batch-memory": DEFAULT_MEMORY_BYTES,
}


def go_round(x: float) -> int:
    """Go's ``math.Round``: half away from zero (exact, no ``x + 0.5`` precision trap)."""
    truncated = math.trunc(x)
    if abs(x - truncated) >= 0.5:
        truncated += 1 if x > 0 else -1
    return int(truncated)


def _custom_factors(pod: PodInfo) -> dict[str, int]:
    raw = pod.annotations.get(ANNOTATION_ESTIMATED_SCALING_FACTORS)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(k): int(v) for k, v in parsed.items() if isinstance(v, int) and not isinstance(v, bool)}


def custom_seconds(pod: PodInfo, annotation: str) -> int:
    """A per-pod estimation window in seconds, or -1 when absent or invalid."""
    raw = pod.annotations.get(annotation)
    if raw is None:
        return -1
    try:
        return int(raw)
    except ValueError:
        return -1


def estimate_pod(pod: PodInfo, args: LoadAwareSchedulingArgs) -> ResourceList:
    """Estimated usage of ``pod`` per scaling-factor resource (cpu in millicores)."""
    factors: Mapping[str, int] = args.estimated_scaling_factors
    if args.allow_customize_estimation:
        custom = _custom_factors(pod)
        if custom:
            factors = {**factors, **custom}
    translate = _TRANSLATE.get(pod.priority_class, {})
    out: ResourceList = {}
    for name, factor in factors.items():
        real = translate.get(name, name)
        request = pod.requests.get(real, 0)
        limit = pod.limits.get(real, 0)
        quantity = limit if limit > request else request
        if quantity == 0:
            out[name] = _DEFAULTS.get(real, 0)
            continue
        estimated = go_round(float(quantity) * float(factor) / 100)
        if limit > 0 and estimated > limit:
            estimated = limit
        out[name] = estimated
    return out


def estimate_node(node: NodeInfo) -> ResourceList:
    """Allocatable, with keys overridden by the ``node.koordinator.sh/raw-allocatable`` annotation.

    An unparseable annotation is ignored (upstream does the same).
    """
    raw = node.annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if not raw:
        return node.allocatable
    try:
        parsed = json.loads(raw)
        override = parse_resource_list(parsed) if isinstance(parsed, dict) else {}
    except (ValueError, QuantityError):
        return node.allocatable
    if not override:
        return node.allocatable
    return {**node.allocatable, **override}
