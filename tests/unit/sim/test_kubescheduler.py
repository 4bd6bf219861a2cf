"""The kube-scheduler model: requests fit, least-allocated arithmetic, load-aware placement via ClusterState."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.objects import node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.profile import build_plugins
from koordpy.sim.kubescheduler import (
    LeastAllocatedPlacement,
    LoadAwarePlacement,
    NodeSampler,
    RequestsFit,
    feasible_nodes_to_find,
)
from koordpy_testkit.builders import NodeMetricBuilder, make_node, make_pod
from koordpy_testkit.clock import DEFAULT_START

NOW = DEFAULT_START


def _fit() -> RequestsFit:
    nodes = [node_from_dict(make_node(f"n{i}", cpu="8", memory="16Gi")) for i in range(3)]
    return RequestsFit(nodes, ["cpu", "memory", "pods"])


def test_fit_counts_requests_and_pod_slots() -> None:
    fit = _fit()
    pod = pod_from_dict(make_pod("p", cpu="3", memory="4Gi"))
    vec = fit.vector(pod.requests)
    fit.bind(0, vec)
    fit.bind(0, vec)
    # n0 has 6 of 8 cpus requested: another 3 does not fit; n1, n2 are empty
    assert fit.feasible(vec).tolist() == [False, True, True]
    fit.unbind(0, vec)
    assert fit.feasible(vec).tolist() == [True, True, True]
    slots = np.zeros_like(vec)
    slots[0] = 110  # n1's 110 pod slots taken
    fit.bind(1, slots)
    assert fit.feasible(vec).tolist() == [True, False, True]


def test_least_allocated_worked_example() -> None:
    fit = _fit()
    fit.bind(0, fit.vector(pod_from_dict(make_pod("a", cpu="4", memory="8Gi")).requests))
    pod = pod_from_dict(make_pod("p", cpu="2", memory="4Gi"))
    scores = fit.least_allocated(pod, np.array([0, 1]))
    # n0: cpu (8-6)*100//8 = 25, mem (16-12)*100//16 = 25 -> 25; n1: cpu 75, mem 75 -> 75
    assert scores.tolist() == [25, 75]
    placement = LeastAllocatedPlacement(fit, np.random.default_rng(0))
    assert placement.choose(pod, np.array([0, 1, 2]), NOW) in (1, 2)


def test_load_aware_placement_avoids_the_hot_node_and_ties_are_seeded() -> None:
    fit = _fit()
    state = ClusterState(build_plugins(SchedulerConfiguration.model_validate({})))
    for name in fit.names:
        state.upsert_node(node_from_dict(make_node(name, cpu="8", memory="16Gi")))
    # n0 at 7 of 8 cpus (88% > 65%): filtered out; n1 and n2 idle and equal
    state.upsert_metric(nodemetric_from_dict(NodeMetricBuilder("n0").updated(NOW).usage(cpu="7", memory="1Gi").build()))
    for name in ("n1", "n2"):
        state.upsert_metric(
            nodemetric_from_dict(NodeMetricBuilder(name).updated(NOW).usage(cpu="1", memory="1Gi").build())
        )
    pod = pod_from_dict(make_pod("p", cpu="1", memory="1Gi"))
    picks = set()
    for seed in range(12):
        placement = LoadAwarePlacement(state, fit, np.random.default_rng(seed))
        picks.add(placement.choose(pod, np.array([0, 1, 2]), NOW + 10))
    assert picks == {1, 2}
    again = [LoadAwarePlacement(state, fit, np.random.default_rng(5)).choose(pod, np.array([0, 1, 2]), NOW + 10)]
    again.append(LoadAwarePlacement(state, fit, np.random.default_rng(5)).choose(pod, np.array([0, 1, 2]), NOW + 10))
    assert again[0] == again[1]
    # every node too hot: unschedulable
    state.upsert_metric(nodemetric_from_dict(NodeMetricBuilder("n1").updated(NOW).usage(cpu="7", memory="1Gi").build()))
    state.upsert_metric(nodemetric_from_dict(NodeMetricBuilder("n2").updated(NOW).usage(cpu="7", memory="1Gi").build()))
    assert LoadAwarePlacement(state, fit, np.random.default_rng(0)).choose(pod, np.array([0, 1, 2]), NOW) is None


@pytest.mark.parametrize(
    ("percentage", "nodes", "want"),
    [
        (0, 99, 99),  # under 100 nodes: every node
        (0, 100, 100),  # 50 - 100/125 = 50 % -> 50, raised to the floor of 100
        (0, 1000, 420),  # 50 - 1000/125 = 42 % -> 420
        (0, 5000, 500),  # 50 - 40 = 10 % -> 500
        (0, 10_000, 500),  # 50 - 80 < 5 -> 5 % -> 500
        (100, 5000, 5000),
        (10, 1000, 100),  # 10 % = 100
        (5, 1000, 100),  # 5 % = 50, raised to 100
        (50, 300, 150),
    ],
)
def test_feasible_nodes_to_find_is_kube_schedulers_rule(percentage: int, nodes: int, want: int) -> None:
    assert feasible_nodes_to_find(percentage, nodes) == want


def test_the_sample_walks_on_from_where_the_last_cycle_stopped() -> None:
    sampler = NodeSampler(10)  # 1,000 nodes: 100 per cycle
    fits = np.ones(1000, bool)
    fits[150:250] = False  # a stretch that does not fit
    first, every = sampler.sample(fits)
    assert not every and first.tolist() == list(range(100)) and sampler.next_start == 100
    second, _ = sampler.sample(fits)
    # 100..149 fit, 150..249 do not (examined, skipped), then 250..299
    assert second.tolist() == [*range(100, 150), *range(250, 300)] and sampler.next_start == 300
    sampler.next_start = 950
    third, _ = sampler.sample(fits)
    assert third.tolist() == [*range(950, 1000), *range(50)]  # wraps around
    few = np.zeros(1000, bool)
    few[[3, 700]] = True
    start = sampler.next_start
    found, every = sampler.sample(few)  # fewer fit than wanted: every node examined, the start stays
    assert every and sorted(found.tolist()) == [3, 700] and sampler.next_start == start
    all_of_them, every = NodeSampler(0).sample(np.ones(80, bool))
    assert every and all_of_them.tolist() == list(range(80))
