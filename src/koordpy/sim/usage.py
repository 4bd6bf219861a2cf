"""Per-pod demand curves, evaluated for every pod of the trace at once (numpy).

Demand is what a pod would use if nothing limited it; the engine cuts CPU at the pod's limit
and at any throttle. Sample ``k`` draws its noise from a generator seeded by ``(seed, k)``, so a
pod's demand at a given instant is the same whatever the policy or placement.

Not guaranteed: smoothness between samples (noise is independent per sample).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from koordpy.config.scenario import Scenario
from koordpy.sim.trace import Trace

__all__ = ["UsageModel"]

F64 = npt.NDArray[np.float64]
_PATTERNS = {"steady": 0, "diurnal": 1, "bursty": 2}


class UsageModel:
    def __init__(self, scenario: Scenario, trace: Trace, seed: int) -> None:
        self._seed = seed
        self._start = scenario.start
        w = trace.workload
        curves = [wl.usage for wl in scenario.workloads]

        def per_pod(values: list[float]) -> F64:
            table = np.asarray(values, dtype=np.float64)
            out: F64 = table[w] if w.size else np.zeros(0)
            return out

        self._pattern = per_pod([_PATTERNS[c.pattern] for c in curves]).astype(np.int8)
        self._amplitude = per_pod([c.amplitude for c in curves])
        self._peak = per_pod([c.peak_hour for c in curves])
        self._every = per_pod([c.burst_every for c in curves])
        self._length = per_pod([c.burst_length for c in curves])
        self._burst = per_pod([c.burst_factor for c in curves])
        self._cpu_noise = per_pod([c.cpu.noise for c in curves])
        self._memory_noise = per_pod([c.memory.noise for c in curves])
        self._cpu_mean = trace.cpu_mean
        self._memory_mean = trace.memory_mean
        self._phase = trace.burst_phase
        self._diurnal = self._pattern == 1
        self._bursty = self._pattern == 2
        self._any_cpu_noise = bool(self._cpu_noise.any())
        self._any_memory_noise = bool(self._memory_noise.any())

    def demand(self, offset: float, sample: int) -> tuple[F64, F64]:
        """CPU (millicores) and memory (bytes) demand of every trace pod at ``offset`` seconds."""
        factor = np.ones(self._cpu_mean.size)
        if self._diurnal.any():
            hour = ((self._start + offset) / 3600.0) % 24.0
            wave = 1.0 + self._amplitude * np.cos(2.0 * np.pi * (hour - self._peak) / 24.0)
            factor = np.where(self._diurnal, wave, factor)
        if self._bursty.any():
            in_burst = np.mod(offset + self._phase, self._every) < self._length
            factor = np.where(self._bursty & in_burst, self._burst, factor)
        cpu = self._cpu_mean * factor
        memory = self._memory_mean
        if self._any_cpu_noise or self._any_memory_noise:
            rng = np.random.default_rng([self._seed, 1, sample])
            if self._any_cpu_noise:
                sigma = self._cpu_noise
                cpu = cpu * np.exp(sigma * rng.standard_normal(sigma.size) - sigma * sigma / 2)
            if self._any_memory_noise:
                sigma = self._memory_noise
                memory = memory * np.exp(sigma * rng.standard_normal(sigma.size) - sigma * sigma / 2)
        return cpu, memory
