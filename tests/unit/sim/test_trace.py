"""The trace: deterministic per seed, shaped as the scenario says, pods converted like real ones."""

from __future__ import annotations

import numpy as np

from koordpy.config.scenario import Scenario
from koordpy.model.priority import KubeQoS, PriorityClass
from koordpy.sim.trace import build_trace


def test_same_seed_same_trace_other_seed_differs(small: Scenario) -> None:
    a, b, c = build_trace(small, 3), build_trace(small, 3), build_trace(small, 4)
    assert np.array_equal(a.arrival, b.arrival) and np.array_equal(a.cpu_mean, b.cpu_mean)
    assert not np.array_equal(a.arrival, c.arrival)


def test_counts_windows_and_lifetimes(small: Scenario) -> None:
    trace = build_trace(small, 3)
    assert len(trace) == 12 + 30
    assert np.all(np.diff(trace.arrival) >= 0)
    svc = trace.workload == 0
    assert np.all(trace.arrival[svc] < 60) and np.all(np.isinf(trace.lifetime[svc]))
    job = trace.workload == 1
    assert np.all((trace.lifetime[job] >= 300) & (trace.lifetime[job] <= 1200))
    assert np.all(trace.arrival[job] < 3600)
    # spread 0.5 on the service: per-pod means differ but average near 2500m
    assert trace.cpu_mean[svc].std() > 0
    assert np.all(trace.cpu_mean[job] == 1000)  # spread 0: every job alike


def test_pods_are_converted_like_real_objects(small: Scenario) -> None:
    trace = build_trace(small, 3)
    first_job = int(np.flatnonzero(trace.workload == 1)[0])
    pod = trace.pod(first_job)
    assert pod.name.startswith("job-") and pod.uid == f"default/{pod.name}"
    assert pod.requests == {"cpu": 1000, "memory": 1024**3}
    assert pod.qos is KubeQoS.BURSTABLE
    assert pod.priority_class is PriorityClass.BATCH  # 5500: Koordinator's batch band
    recreated = trace.pod(first_job, attempt=2)
    assert recreated.name == pod.name + "-r2" and recreated.uid != pod.uid
    names = {trace.pod(i).name for i in range(len(trace))}
    assert len(names) == len(trace)
