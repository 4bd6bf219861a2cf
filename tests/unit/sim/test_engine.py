"""The event loop: binds, completions, limits, contention, metric lag, pending accounting, determinism."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.model.objects import PodInfo
from koordpy.sim import engine as engine_module
from koordpy.sim.engine import BASELINE, KOORDPY, Simulation
from koordpy.sim.kubescheduler import LoadAwarePlacement
from koordpy.sim.trace import build_trace


def _run(scenario: Scenario, policy: engine_module.Policy = KOORDPY, seed: int = 3) -> Simulation:
    sim = Simulation(scenario, build_trace(scenario, seed), policy, seed, None)
    sim.run()
    return sim


def _one_pod(raw: dict[str, Any], cpu_alloc: str, demand: str, limit: str | None, count: int = 1) -> Scenario:
    raw["nodePools"] = [{"name": "n", "count": 1, "allocatable": {"cpu": cpu_alloc, "memory": "64Gi"}}]
    workload: dict[str, Any] = {
        "name": "w",
        "arrivals": {"count": count, "end": 0},
        "requests": {"cpu": "1", "memory": "1Gi"},
        "usage": {"cpu": {"mean": demand}, "memory": {"mean": "1Gi"}},
    }
    if limit is not None:
        workload["limits"] = {"cpu": limit}
    raw["workloads"] = [workload]
    return validate(Scenario, raw)


def test_everything_binds_and_jobs_complete(small: Scenario) -> None:
    sim = _run(small)
    summary = sim.stats.summary(sim.still_pending())
    assert summary["binds"] == 42 and summary["pendingAtEnd"] == 0
    # every job whose lifetime ended before the end of the hour completed
    trace = sim.trace
    expected = int(np.count_nonzero(trace.arrival + trace.lifetime <= 3600))
    assert summary["completed"] == expected
    assert len(sim.stats.times) == 121  # samples at 0, 30, ..., 3600


def test_cpu_is_cut_at_the_limit(small_raw: dict[str, Any]) -> None:
    # one pod wanting 5 cores with a 2-core limit on a 16-core node: utilisation 2/16 = 0.125
    sim = _run(_one_pod(small_raw, "16", "5", "2"))
    assert sim.stats.mean[-1] == pytest.approx(0.125)


def test_overcommitted_node_is_shared_out_not_exceeded(small_raw: dict[str, Any]) -> None:
    # three pods wanting 3 cores each on a 4-core node: 9 > 4, each gets 4/9 of its demand, node at 100%
    sim = _run(_one_pod(small_raw, "4", "3", None, count=3))
    assert sim.stats.mean[-1] == pytest.approx(1.0)
    running = np.flatnonzero(sim.pod_state == engine_module.RUNNING)
    assert sim.cpu_used[running] == pytest.approx(np.full(3, 4000 / 3))


def test_a_pod_that_never_fits_is_counted_with_its_wait(small_raw: dict[str, Any]) -> None:
    small_raw["workloads"][0]["requests"]["cpu"] = "17"  # larger than any 16-core node
    small_raw["workloads"][0]["limits"]["cpu"] = "17"
    sim = _run(validate(Scenario, small_raw))
    still = sim.still_pending()
    assert len(still) == 12
    arrivals = sim.trace.arrival[sim.trace.workload == 0]
    assert sorted(still) == pytest.approx(sorted((3600 - arrivals).tolist()), abs=1e-3)
    summary = sim.stats.summary(still)
    assert summary["pendingAtEnd"] == 12 and summary["pendingMaxSeconds"] >= 3540


def test_scheduler_sees_metrics_only_after_the_lag(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[float, list[float]]] = []
    original = LoadAwarePlacement.choose

    def spy(self: LoadAwarePlacement, pod: PodInfo, candidates: Any, now: float) -> int | None:
        times = [m.update_time for m in self.state.metrics.values() if m.update_time is not None]
        seen.append((now, times))
        return original(self, pod, candidates, now)

    monkeypatch.setattr(LoadAwarePlacement, "choose", spy)
    _run(small)
    start, lag, interval = small.start, small.node_metric.lag, small.node_metric.report_interval
    checked = 0
    for now, times in seen:  # ``now`` is the scheduler's (epoch) clock
        for update in times:
            assert update <= now - lag  # never a report from the future of the lag
        if now >= start + lag and times:
            # and the freshest report that is due has been delivered
            assert max(times) > now - lag - interval
            checked += 1
    assert checked > 10


def test_same_seed_same_run_and_baseline_needs_no_metrics(small: Scenario) -> None:
    a, b = _run(small), _run(small)
    assert a.stats.summary([]) == b.stats.summary([])
    assert a.stats.spread == b.stats.spread
    base = _run(small, BASELINE)
    assert base.state is None and base.reports == []
    assert base.stats.summary([])["binds"] == 42


def test_aggregated_usage_is_reported_when_configured(small_raw: dict[str, Any]) -> None:
    small_raw["nodeMetric"] = {"reportInterval": "60s", "aggregatedDurations": ["2m", "5m"]}
    sim = _run(validate(Scenario, small_raw))
    assert sim.state is not None
    metric = sim.state.metrics["n-0"]
    assert [entry.duration for entry in metric.aggregated] == [120.0, 300.0]
    for entry in metric.aggregated:
        assert set(entry.usage) == {"avg", "p50", "p90", "p95", "p99"}
        assert entry.usage["p50"]["cpu"] <= entry.usage["p90"]["cpu"] <= entry.usage["p99"]["cpu"]
    assert metric.pods and all(p.usage["cpu"] >= 0 for p in metric.pods)
    assert metric.node_usage is not None and metric.node_usage["cpu"] >= sum(p.usage["cpu"] for p in metric.pods) * 0.5


def test_the_koordpy_profile_samples_as_configured_and_the_baseline_as_stock(small_raw: dict[str, Any]) -> None:
    small_raw["nodePools"] = [{"name": "n", "count": 1000, "allocatable": {"cpu": "32", "memory": "128Gi"}}]
    small_raw["kubeScheduler"] = {"percentageOfNodesToScore": 10}
    scenario = validate(Scenario, small_raw)
    seen: list[int] = []
    koordpy = Simulation(scenario, build_trace(scenario, 3), KOORDPY, 3, None)
    original = koordpy.placement.choose

    def choose(pod: PodInfo, candidates: Any, now: float) -> int | None:
        seen.append(candidates.size)
        return original(pod, candidates, now)

    koordpy.placement.choose = choose  # type: ignore[method-assign]
    koordpy.run()
    assert seen and set(seen) == {100}  # 10 % of 1,000 nodes, every one of them fits
    baseline = Simulation(scenario, build_trace(scenario, 3), BASELINE, 3, None)
    assert koordpy.sampler.percentage == 10 and baseline.sampler.percentage == 0  # 0: adaptive, 420 here
    assert validate(Scenario, {**small_raw, "kubeScheduler": {}}).kube_scheduler.percentage_of_nodes_to_score == 0
