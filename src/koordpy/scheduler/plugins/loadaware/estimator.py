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
import re
from collections.abc import Mapping

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.objects import ANNOTATION_RAW_ALLOCATABLE, NodeInfo, PodInfo
from koordpy.model.priority import PriorityClass
from koordpy.model.resources import ResourceList

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


_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_GO_INT = re.compile(r"[+-]?[0-9]{1,19}", re.ASCII)
"""What Go's ``strconv.ParseInt(s, 10, 64)`` reads (ASCII digits; the range is checked after)."""


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
    factors = {str(k): v for k, v in parsed.items() if isinstance(v, int) and not isinstance(v, bool)}
    if any(not _INT64_MIN <= v <= _INT64_MAX for v in factors.values()):
        return {}  # Go's json.Unmarshal into int64 fails: the whole annotation is ignored
    return factors


def custom_seconds(pod: PodInfo, annotation: str) -> int:
    """A per-pod estimation window in seconds, or -1 when absent or invalid."""
    raw = pod.annotations.get(annotation)
    if raw is None or _GO_INT.fullmatch(raw) is None:
        return -1
    seconds = int(raw)
    return seconds if _INT64_MIN <= seconds <= _INT64_MAX else -1


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
        # A negative factor (a pod's own annotation) would make the node look emptier: never below 0.
        out[name] = max(estimated, 0)
    return out


def estimate_node(node: NodeInfo) -> ResourceList:
    """Allocatable, with keys overridden by the ``node.koordinator.sh/raw-allocatable`` annotation.

    The annotation is parsed with the node (``NodeInfo.raw_allocatable``); an unreadable one makes
    the node itself unreadable (upstream ignores it, which would use the amplified allocatable).
    """
    override = node.raw_allocatable
    if not override:
        return node.allocatable
    return {**node.allocatable, **override}
