"""Throttle arithmetic, the metric registry contract, report aggregation, and a precision property."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.agent.policy import AgentState, Metric, PlanOptions, naive_plan, plan, registry
from koordpy.agent.policy.metrics import CPU_TOTAL_USAGE
from koordpy.agent.policy.report import CollectPolicy, UsageHistory, go_duration, nodemetric_status, policy_from_spec
from koordpy.agent.policy.throttle import MIN_CAP, cpu_ceiling, cpu_floor, step_down, step_up
from koordpy.crds.ensurance import METRIC_NAMES, PRESSURE_METRIC_NAMES
from koordpy.model.objects import nodemetric_from_dict, pod_from_dict
from koordpy_testkit.agent import evict_action, node_sample, pod_sample, qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder

GiB = 1 << 30


@pytest.mark.parametrize(
    ("request_", "limit", "ratio", "floor"),
    [
        (None, None, 50, MIN_CAP),  # BestEffort: only the kernel minimum
        ("500m", "4", 25, 1.0),  # max(0.5, 4 x 25 / 100 = 1.0)
        ("2", "4", 25, 2.0),  # max(2, 1.0)
        (None, "4096m", 10, 0.4096),  # Crane's doc example: limit 4096m, ratio 10 -> 409.6m
    ],
)
def test_cpu_floor(request_, limit, ratio, floor):
    b = PodBuilder("p")
    if request_:
        b.requests(cpu=request_)
    if limit:
        b.limits(cpu=limit)
    assert cpu_floor(pod_from_dict(b.build()), ratio) == pytest.approx(floor)


@pytest.mark.parametrize(
    ("usage", "cap", "floor", "step", "expected"),
    [
        (2.0, None, 0.01, 50, 1.0),  # uncapped: 2.0 x 0.5
        (2.0, 4.0, 0.01, 50, 1.0),  # cap above usage: from usage, 2.0 x 0.5
        (1.0, 1.2, 0.01, 10, 0.9),  # 1.0 x 0.9
        (2.0, None, 1.5, 50, 1.5),  # floored
        (1.5, None, 1.5, 50, None),  # already at the floor: no step
        (2.0, None, 0.01, 0, None),  # step 0: nothing
    ],
)
def test_step_down(usage, cap, floor, step, expected):
    got = step_down(usage, cap, floor, step)
    assert got == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("cap", "original", "ceiling", "step", "new", "original_flag", "handed_back"),
    [
        (1.0, 4.0, 8.0, 50, 1.5, False, 0.5),  # 1.0 x 1.5
        (3.0, 4.0, 8.0, 50, 4.0, True, 1.0),  # 4.5 >= original 4 -> original exactly, +1.0
        (6.0, None, 8.0, 50, None, True, 2.0),  # 9 >= ceiling 8 -> unlimited again, +2.0 counted
        (1.0, None, None, 50, None, True, 0.0),  # no ceiling known: straight back
        (1.0, 4.0, 8.0, 0, 4.0, True, 3.0),  # step 0: back to the original
        (2.0, 3.0, 8.0, 50, 3.0, True, 1.0),  # 2.0 x 1.5 = 3.0 reaches the original exactly: it, flagged
        (3.5, 4.0, 8.0, 50, 4.0, True, 0.5),  # 5.25 >= 4 -> the original, +0.5 (less than a core)
    ],
)
def test_step_up(cap, original, ceiling, step, new, original_flag, handed_back):
    out = step_up(cap, original, ceiling, step)
    assert (out.cap, out.original) == (new if new is None else pytest.approx(new), original_flag)
    assert out.handed_back == pytest.approx(handed_back)


def test_cpu_ceiling():
    assert cpu_ceiling(pod_from_dict(PodBuilder("p").limits(cpu="3").build()), 8.0) == 3.0
    assert cpu_ceiling(pod_from_dict(PodBuilder("p").build()), 8.0) == 8.0
    assert cpu_ceiling(pod_from_dict(PodBuilder("p").limits(cpu="500m").build()), 8.0) == 0.5  # below a core


def test_builtin_registry_declarations():
    reg = registry()
    usage = {"cpu_total_usage", "cpu_total_utilization", "memory_total_usage", "memory_total_utilization"}
    assert set(reg) == usage | set(PRESSURE_METRIC_NAMES)
    assert set(reg) <= set(METRIC_NAMES)  # every name the registry acts on is one the CRD accepts
    for name in usage:
        m = reg[name]
        assert m.sortable and m.evictable and m.evict_qualified and not m.stepwise and m.family == "usage"
    assert reg["cpu_total_usage"].throttleable and reg["cpu_total_usage"].throttle_qualified
    assert not reg["memory_total_usage"].throttleable
    for name in PRESSURE_METRIC_NAMES:
        m = reg[name]
        # No size: stepwise, never "qualified"; CPU pressure throttles, every pressure evicts.
        assert m.stepwise and m.family == "pressure" and m.evictable and m.unit == "percent"
        assert not m.throttle_qualified and not m.evict_qualified
        assert m.throttleable == (m.resource == "cpu")
        assert m.scope == ("pods" if name.startswith("pod_") else "node")
        assert m.window == {"avg10": 10.0, "avg60": 60.0, "avg300": 300.0}[name.rsplit("_", 1)[1]]


def test_new_metric_plugs_in_without_touching_the_executor():
    # Crane's "cpu_load_1_min" (which koordpy does not act on), made up here as node cpu x 2, evict-qualified
    # with its own release function.
    load = Metric(
        name="cpu_load_1_min",
        unit="load",
        compressible=True,
        node_value=lambda node: None if node.cpu is None else node.cpu * 2,
        waterline=float,
        sort_key=lambda s: (-(s.cpu or 0), s.key),
        evictable=True,
        evict_qualified=True,
        evict=lambda s, node: None if s.cpu is None else s.cpu * 2,
    )
    pol = qos_policy("p", rule("load", "cpu_load_1_min", 10, "evict"))
    pods = [pod_sample(PodBuilder(n).build(), cpu=c) for n, c in (("a", 1.0), ("b", 2.0), ("c", 0.5))]
    opts = PlanOptions(metrics=registry(load))
    # load 7 x 2 = 14, line 10 -> gap 4; b frees 4 -> closed
    p = plan([pol], [evict_action("evict")], node_sample(cpu=7.0), pods, AgentState(), now=0, options=opts)
    assert [(a.pod, a.released) for a in p.actions] == [("default/b", 4.0)]
    # Without the registry entry the rule is reported and ignored.
    p2 = plan([pol], [evict_action("evict")], node_sample(cpu=7.0), pods, AgentState(), now=0)
    assert p2.actions == () and [e.reason for e in p2.events] == ["UnknownMetric"]


def test_non_qualified_metric_falls_back_to_every_candidate_as_the_seed_says():
    unqualified = replace(CPU_TOTAL_USAGE, throttle_qualified=False)
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle"))
    pods = [pod_sample(PodBuilder(n).build(), cpu=1.0) for n in "abc"]
    p = plan(
        [pol],
        [throttle_action("throttle")],
        node_sample(cpu=4.5),
        pods,
        AgentState(),
        now=0,
        options=PlanOptions(metrics=registry(unqualified)),
    )
    assert len(p.actions) == 3
    assert "NotQualified" in [e.reason for e in p.events]


def test_memory_metric_cannot_throttle():
    pol = qos_policy("p", rule("mem", "memory_total_usage", GiB, "throttle"))
    pods = [pod_sample(PodBuilder("a").build(), cpu=1.0, memory=2 * GiB)]
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=1.0, memory=3 * GiB), pods, AgentState(), now=0)
    assert p.actions == () and "NotThrottleable" in [e.reason for e in p.events]


@settings(max_examples=200, deadline=None)
@given(
    usages=st.lists(st.floats(min_value=0.0, max_value=4.0), min_size=1, max_size=12),
    node_extra=st.floats(min_value=0.0, max_value=6.0),
    line=st.integers(min_value=500, max_value=8000),
    kind=st.sampled_from(["evict", "throttle"]),
)
def test_precision_property_no_action_after_the_gap_is_closed(usages, node_extra, line, kind):
    pods = [pod_sample(PodBuilder(f"p{i:02d}").build(), cpu=u) for i, u in enumerate(usages)]
    node_cpu = sum(usages) + node_extra
    pol = qos_policy("p", rule("r", "cpu_total_usage", line, kind))
    act = evict_action(kind) if kind == "evict" else throttle_action(kind, step=40)
    p = plan([pol], [act], node_sample(cpu=node_cpu, cores=64), pods, AgentState(), now=0)
    gap = node_cpu - line / 1000
    released = [a.released for a in p.actions]
    if gap <= 0:
        assert released == []
        return
    # Every action but the last happened while the gap was still open...
    for i in range(len(released)):
        assert sum(released[:i]) < gap + 1e-9
    # ...and if the gap is still open, every pod that could have freed something was acted on.
    if sum(released) < gap - 1e-9:
        helpful = {
            s.key for s in pods if (s.cpu > 0 if kind == "evict" else step_down(s.cpu, None, MIN_CAP, 40) is not None)
        }
        assert {a.pod for a in p.actions} == helpful
        assert any(e.reason == "GapNotClosed" for e in p.events)
    assert all(a.released > 0 for a in p.actions)
    # naive acts on at least as many pods
    n = naive_plan([pol], [act], node_sample(cpu=node_cpu, cores=64), pods, AgentState(), now=0)
    assert len(n.actions) >= len(p.actions)


def test_report_aggregation_and_shape():
    raw = PodBuilder("a").node("n").label("koordinator.sh/qosClass", "LS").build()
    pod = pod_from_dict(raw)
    h = UsageHistory(horizon=600)
    for t in range(0, 601, 60):  # 11 samples, cpu 1..11 cores, memory 1 GiB
        h.add_node(1000.0 + t, float(t // 60 + 1), GiB)
        h.add_pod(pod.uid, 1000.0 + t, 0.5, GiB // 2)
    h.add_pod("gone", 1000.0, 9.0, GiB)
    h.prune(1600.0, present=[pod.uid])
    assert "gone" not in h.pods
    status = nodemetric_status(h, [pod], 1600.0, CollectPolicy(aggregate_duration=120, durations=(600.0,)))
    # last 120 s: samples at 1480, 1540, 1600 -> cpu 9, 10, 11 -> mean 10 cores
    assert status["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "10000m", "memory": str(GiB)}}
    agg = status["nodeMetric"]["aggregatedNodeUsages"][0]
    assert agg["duration"] == "10m0s"
    assert agg["usage"]["p50"]["resources"]["cpu"] == "6000m"  # median of 1..11
    assert agg["usage"]["p90"]["resources"]["cpu"] == "10000m"  # linear: 1 + 0.9 x 10
    assert status["podsMetric"] == [
        {
            "namespace": "default",
            "name": "a",
            "podUsage": {"resources": {"cpu": "500m", "memory": str(GiB // 2)}},
            "priority": "koord-prod",
            "qos": "LS",
        }
    ]
    info = nodemetric_from_dict({"metadata": {"name": "n"}, "status": status})
    assert info.node_usage == {"cpu": 10000, "memory": GiB}
    assert info.aggregated[0].duration == 600.0


def test_report_without_samples_has_no_node_metric():
    status = nodemetric_status(UsageHistory(), [], 0.0, CollectPolicy())
    assert "nodeMetric" not in status and status["podsMetric"] == []
    assert nodemetric_from_dict({"metadata": {"name": "n"}, "status": status}).node_usage is None


@pytest.mark.parametrize(("seconds", "text"), [(300, "5m0s"), (1800, "30m0s"), (45, "45s"), (3660, "1h1m0s")])
def test_go_duration(seconds, text):
    assert go_duration(seconds) == text


def test_policy_from_spec_overrides_defaults():
    d = CollectPolicy()
    assert policy_from_spec(None, d) == d
    assert policy_from_spec({"metricCollectPolicy": {"reportIntervalSeconds": 0}}, d) == d  # 0 = default
    got = policy_from_spec(
        {"metricCollectPolicy": {"aggregateDurationSeconds": 120, "nodeAggregatePolicy": {"durations": ["5m", "1h"]}}},
        d,
    )
    assert got == CollectPolicy(report_interval=60, aggregate_duration=120, durations=(300.0, 3600.0))
