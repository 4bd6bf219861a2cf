"""CPU-cap arithmetic for one throttle or restore step (cores in, cores out).

Down: ``base = min(cap, usage)`` (usage when uncapped), ``new = max(base x (1 - step/100), floor)``
with ``floor = max(request, limit x minCPURatio / 100, MIN_CAP)``. A step that would not lower the
pod below its current usage is no step at all (it would release nothing).

Up: ``new = cap x (1 + step/100)``; once ``new`` reaches the original cap (or, for a pod that was
uncapped, its ceiling: the CPU limit, else the node's cores) the original is written back exactly.

Not guaranteed: the kernel enforces the cap over its CFS period; usage right after a step can
still exceed it for up to one period.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordpy.model.objects import PodInfo

__all__ = ["MIN_CAP", "RestoreStep", "cpu_ceiling", "cpu_floor", "step_down", "step_up"]

MIN_CAP = 0.01
"""1 ms per 100 ms period: the smallest CFS quota the kernel accepts (1000 us)."""
_EPS = 1e-9


def cpu_floor(pod: PodInfo, min_cpu_ratio: int) -> float:
    """``max(request, limit x minCPURatio / 100, MIN_CAP)`` in cores (Crane scaled the limit 100x too high)."""
    request = pod.requests.get("cpu", 0) / 1000
    limit = pod.limits.get("cpu", 0) / 1000
    return max(request, limit * min_cpu_ratio / 100, MIN_CAP)


def cpu_ceiling(pod: PodInfo, node_cores: float | None) -> float | None:
    """Where a restore of an originally uncapped pod ends: its CPU limit, else the node's cores."""
    limit = pod.limits.get("cpu", 0) / 1000
    if limit > 0:
        return limit
    return node_cores


def step_down(usage: float, cap: float | None, floor: float, step_cpu_ratio: int) -> float | None:
    """The new cap, or ``None`` when a step would release nothing (floor reached, step 0)."""
    base = usage if cap is None else min(cap, usage)
    new = max(base * (1 - step_cpu_ratio / 100), floor)
    if new >= usage - _EPS:
        return None
    if cap is not None and new >= cap - _EPS:
        return None
    return new


@dataclass(frozen=True, slots=True)
class RestoreStep:
    cap: float | None  # the new cap; ``None`` together with ``original`` True = back to uncapped
    original: bool  # write back the remembered original exactly
    handed_back: float  # cores the pod may use more than before (ceiling - cap for uncapped originals)


def step_up(cap: float, original: float | None, ceiling: float | None, step_cpu_ratio: int) -> RestoreStep:
    """One restore step from ``cap``; see the module docstring."""
    target = original if original is not None else ceiling
    if target is None:
        # Uncapped original and no known ceiling: go straight back; the hand-back is unknowable.
        return RestoreStep(cap=None, original=True, handed_back=0.0)
    new = cap * (1 + step_cpu_ratio / 100)
    if step_cpu_ratio == 0 or new >= target - _EPS:
        return RestoreStep(cap=original, original=True, handed_back=max(0.0, target - cap))
    return RestoreStep(cap=new, original=False, handed_back=new - cap)
