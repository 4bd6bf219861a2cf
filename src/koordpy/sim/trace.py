"""The workload trace: every pod a scenario will ever submit, drawn once from the seed.

Both runs of ``--compare`` replay the same ``Trace``, so they see the same arrivals, lifetimes
and per-pod demand; only the policies differ. Pods are numbered in arrival order.

Not guaranteed: the trace of a seed is stable across koordpy versions (numpy's generators are,
but the recipe may change).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.config.scenario import Scenario, Workload
from koordpy.model.objects import PodInfo, pod_from_dict
from koordpy.model.quantity import format_cpu_millis

__all__ = ["Trace", "build_trace", "pod_template"]

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class Trace:
    arrival: F64
    """Seconds after the scenario start, non-decreasing."""
    lifetime: F64
    """Seconds of running time; ``inf`` = until the end."""
    workload: I32
    """Index into ``Scenario.workloads``."""
    ordinal: I32
    """Pod number within its workload (names are ``<workload>-<ordinal>``)."""
    cpu_mean: F64
    """Per-pod mean CPU demand, millicores (workload mean × the pod's own factor)."""
    memory_mean: F64
    burst_phase: F64
    """Seconds: where in its burst cycle each pod starts (bursty pattern only)."""
    templates: tuple[PodInfo, ...]
    """One pod view per workload; instances are copies with their own name and uid."""

    def __len__(self) -> int:
        return int(self.arrival.size)

    def pod(self, pod_id: int, attempt: int = 0) -> PodInfo:
        """The pod view of one trace entry (``attempt`` > 0 for a pod recreated after eviction)."""
        template = self.templates[int(self.workload[pod_id])]
        name = f"{template.name}-{int(self.ordinal[pod_id])}" + (f"-r{attempt}" if attempt else "")
        return dataclasses.replace(template, uid=f"{template.namespace}/{name}", name=name)


def _quantities(values: dict[str, int]) -> dict[str, str]:
    return {k: format_cpu_millis(v) if k == "cpu" else str(v) for k, v in values.items()}


def pod_template(workload: Workload) -> PodInfo:
    """The pod a workload submits, through the same raw-object conversion as real pods."""
    resources: dict[str, Any] = {}
    if workload.requests:
        resources["requests"] = _quantities(workload.requests)
    if workload.limits:
        resources["limits"] = _quantities(workload.limits)
    spec: dict[str, Any] = {
        "schedulerName": "koordpy-scheduler",
        "containers": [{"name": "main", "image": "sim", "resources": resources}],
    }
    if workload.priority is not None:
        spec["priority"] = workload.priority
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "labels": {"app": workload.name, **workload.labels},
            "annotations": dict(workload.annotations),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    return pod_from_dict(raw)


def _factor(rng: np.random.Generator, sigma: float, count: int) -> F64:
    """Log-normal factors with mean 1."""
    if sigma == 0:
        return np.ones(count)
    out: F64 = np.exp(sigma * rng.standard_normal(count) - sigma * sigma / 2)
    return out


def build_trace(scenario: Scenario, seed: int) -> Trace:
    rng = np.random.default_rng([seed, 0])
    parts: list[tuple[F64, F64, I32, I32, F64, F64, F64]] = []
    for index, workload in enumerate(scenario.workloads):
        count = workload.arrivals.count
        start = workload.arrivals.start
        end = workload.arrivals.end if workload.arrivals.end is not None else scenario.duration
        arrival = np.sort(start + rng.random(count) * (end - start))
        if workload.lifetime is None:
            lifetime = np.full(count, np.inf)
        else:
            low, high = np.log(workload.lifetime.min), np.log(workload.lifetime.max)
            lifetime = np.exp(low + rng.random(count) * (high - low))
        usage = workload.usage
        cpu = usage.cpu.mean * _factor(rng, usage.cpu.spread, count)
        memory = usage.memory.mean * _factor(rng, usage.memory.spread, count)
        phase = rng.random(count) * usage.burst_every
        parts.append(
            (arrival, lifetime, np.full(count, index, np.int32), np.arange(count, dtype=np.int32), cpu, memory, phase)
        )
    arrival = np.concatenate([p[0] for p in parts])
    order = np.argsort(arrival, kind="stable")

    def take(i: int) -> Any:
        return np.concatenate([p[i] for p in parts])[order]

    return Trace(
        arrival=arrival[order],
        lifetime=take(1),
        workload=take(2),
        ordinal=take(3),
        cpu_mean=take(4),
        memory_mean=take(5),
        burst_phase=take(6),
        templates=tuple(pod_template(w) for w in scenario.workloads),
    )
