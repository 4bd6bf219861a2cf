"""One test per upstream Crane bug listed in reference/agent-and-descheduler.md §1, proving koordpy lacks it.

Adapter-level bugs (policy/v1beta1 eviction and 429 handling, systemd pod paths reading 0, no
cgroup v2) are tested next to their adapters: tests/adapters/agent/ and tests/node/.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.agent.policy import ActionKind, AgentState, plan
from koordpy_testkit.agent import evict_action, node_sample, pod_sample, qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder


def be(name: str):
    return PodBuilder(name).build()


def run(pols, acts, samples, pods, state=None):
    """Feed (time, node_cpu) samples; return every plan."""
    out = []
    state = state or AgentState()
    for t, cpu in samples:
        p = plan(pols, acts, node_sample(cpu=cpu, time=t), pods, state, now=t)
        out.append(p)
        state = p.state
    return out


def test_bug_1_4_avoidance_threshold_counts_consecutive_not_cumulative_samples():
    # avoidanceThreshold 3; samples above, above, below, above, above: Crane's cumulative counter
    # reaches 4 >= 3 at the 4th sample and fires; consecutive counting has only 2 in a row.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle", avoid=3))
    pods = [pod_sample(be("a"), cpu=2.0)]
    plans = run([pol], [throttle_action("throttle")], [(0, 5), (1, 5), (2, 3), (3, 5), (4, 5)], pods)
    assert all(p.actions == () for p in plans)
    assert plans[-1].state.rules["p.cpu"].above == 2
    sixth = run([pol], [throttle_action("throttle")], [(5, 5)], pods, plans[-1].state)[0]
    assert [a.kind for a in sixth.actions] == [ActionKind.THROTTLE]


def test_consecutive_means_distinct_samples_and_no_missing_or_late_ones():
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle", avoid=2))
    acts = [throttle_action("throttle")]
    pods = [pod_sample(be("a"), cpu=2.0)]
    # The same sample twice is one sample.
    p1 = plan([pol], acts, node_sample(cpu=5, time=1), pods, AgentState(), now=1)
    p2 = plan([pol], acts, node_sample(cpu=5, time=1), pods, p1.state, now=2)
    assert p2.actions == () and p2.state.rules["p.cpu"].above == 1
    # A missing value in between resets the run.
    p3 = plan([pol], acts, node_sample(cpu=None, time=2), pods, p2.state, now=2)
    p4 = plan([pol], acts, node_sample(cpu=5, time=3), pods, p3.state, now=3)
    assert p4.actions == () and p4.state.rules["p.cpu"].above == 1
    # A hole longer than max_sample_gap resets it too.
    from koordpy.agent.policy import PlanOptions

    opts = PlanOptions(max_sample_gap=15)
    p5 = plan([pol], acts, node_sample(cpu=5, time=60), pods, p4.state, now=60, options=opts)
    assert p5.actions == () and p5.state.rules["p.cpu"].above == 1
    p6 = plan([pol], acts, node_sample(cpu=5, time=70), pods, p5.state, now=70, options=opts)
    assert len(p6.actions) == 1


def test_bug_1_1_eviction_grace_period_reaches_the_eviction():
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "evict"))
    pods = [pod_sample(be("a"), cpu=2.0)]
    p = plan([pol], [evict_action("evict", grace=7)], node_sample(cpu=2.5), pods, AgentState(), now=0)
    assert p.actions[0].grace_seconds == 7


def test_bug_1_1_cool_down_rate_limits_evictions_not_only_scheduling():
    # Crane re-evicts every 10 s tick while the rule stays triggered; coolDownSeconds 60 here.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "evict"))
    pods = [pod_sample(be(f"p{i}"), cpu=0.5) for i in range(6)]
    plans = run([pol], [evict_action("evict", cool_down=60)], [(t, 1.4) for t in range(0, 60, 10)], pods)
    assert [len(p.actions) for p in plans] == [1, 0, 0, 0, 0, 0]


def test_bug_1_7_min_cpu_ratio_floor_is_not_100x_too_large():
    # limit 2 cores, minCPURatio 10 -> floor 0.2 cores. Crane: 2000 x 10 / 1000 = 20 "cores" -> no throttle.
    raw = PodBuilder("a").limits(cpu="2").build()
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "throttle"))
    act = throttle_action("throttle", min_ratio=10, step=95)
    p = plan([pol], [act], node_sample(cpu=3.0), [pod_sample(raw, cpu=1.9, cpu_cap=2.0)], AgentState(), now=0)
    # step 95 %: 1.9 x 0.05 = 0.095 < floor 0.2 -> 0.2
    assert p.actions[0].cpu_cap == pytest.approx(0.2)


def test_bug_1_7_pod_throttled_from_unlimited_returns_to_unlimited():
    # Crane only stepped quota up and never wrote -1 again. Node 8 cores, no limit -> ceiling 8.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle"))
    act = throttle_action("throttle", step=50, cool_down=1)
    pods = [pod_sample(be("a"), cpu=2.0)]
    plans = run([pol], [act], [(0, 5.0)] + [(t, 1.0) for t in range(1, 9)], pods)
    assert plans[0].actions[0].cpu_cap == pytest.approx(1.0)  # 2.0 x (1 - 50 %)
    caps = [(a.cpu_cap, a.restore_original) for p in plans[1:] for a in p.actions]
    # up steps x1.5: 1.5, 2.25, 3.375, 5.0625, 7.59375, then 11.39 >= ceiling 8 -> original (None = unlimited)
    assert [c for c, _ in caps[:-1]] == pytest.approx([1.5, 2.25, 3.375, 5.0625, 7.59375])
    assert caps[-1] == (None, True)
    assert all(not orig for _, orig in caps[:-1])
    assert plans[-1].state.throttled == {}


def test_bug_1_7_restore_walks_the_order_backwards():
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle"))
    act = throttle_action("throttle", step=50, cool_down=1)
    low = pod_sample(PodBuilder("low").priority(1).build(), cpu=2.0)
    higher = pod_sample(PodBuilder("higher").priority(5).build(), cpu=2.0)
    plans = run([pol], [act], [(0, 6.0), (1, 1.0)], [low, higher])
    assert [a.pod for a in plans[0].actions] == ["default/low", "default/higher"]
    restore = plans[1]
    assert restore.candidates["restore"] == ("default/higher", "default/low")
    assert restore.actions[0].pod == "default/higher"


def test_bug_1_7_1_8_missing_usage_never_fails_open():
    # Crane throttles/evicts every candidate when a needed metric is missing.
    pol = qos_policy("p", rule("u", "cpu_total_utilization", 50, "evict"))
    pods = [pod_sample(be(f"p{i}"), cpu=1.0) for i in range(5)]
    p = plan([pol], [evict_action("evict")], node_sample(cpu=7.0, cores=None), pods, AgentState(), now=0)
    assert p.actions == ()
    assert [e.reason for e in p.events] == ["MetricMissing"]


def test_bug_1_7_restore_touches_only_pods_it_throttled():
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle"))
    act = throttle_action("throttle", step=50, cool_down=1)
    pods = [pod_sample(be("a"), cpu=2.0), pod_sample(be("b"), cpu=0.1), pod_sample(be("c"), cpu=0.1)]
    plans = run([pol], [act], [(0, 4.5), (1, 1.0)], pods)
    assert [a.pod for a in plans[0].actions] == ["default/a"]
    assert {a.pod for a in plans[1].actions} == {"default/a"}


def test_bug_1_5_up_gap_never_overwrites_down_gap():
    # Two throttle rules on one metric: line 4 fires (node 5), line 6 is "below" (restore state).
    # Crane wrote both gaps into one map, the up gap (6 - 5) replacing the down gap (5 - 4).
    pol = qos_policy(
        "p",
        rule("low", "cpu_total_usage", 4000, "throttle"),
        rule("high", "cpu_total_usage", 6000, "throttle"),
    )
    pods = [pod_sample(be("a"), cpu=3.0)]
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=5.0), pods, AgentState(), now=0)
    assert p.gaps["throttle"] == {"cpu_total_usage": 1.0}
    assert p.gaps["restore"] == {}
    assert [a.kind for a in p.actions] == [ActionKind.THROTTLE]


def test_bug_1_8_terminating_pod_is_neither_picked_nor_credited_twice():
    # Tick 1 evicts a (2 cores, gap 1). Tick 2: node usage unchanged (a still terminating): Crane
    # would pick a again or evict b. The ledger credits a's 2 cores once: gap 1 - 2 < 0, no action.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "evict"))
    act = evict_action("evict", cool_down=1)
    a = PodBuilder("a").build()
    pods = [pod_sample(a, cpu=2.0), pod_sample(be("b"), cpu=1.5)]
    plans = run([pol], [act], [(0, 5.0), (10, 5.0)], pods)
    assert [x.pod for x in plans[0].actions] == ["default/a"]
    assert plans[1].actions == ()
    # Now a shows a deletionTimestamp as well: still credited once, not twice (gap 2.5 - 2 = 0.5 -> b).
    a_deleting = PodBuilder("a").build()
    a_deleting["metadata"]["deletionTimestamp"] = "2026-11-21T10:00:00Z"
    pods2 = [pod_sample(a_deleting, cpu=2.0), pod_sample(be("b"), cpu=1.5)]
    p3 = plan([pol], [act], node_sample(cpu=6.5, time=20), pods2, plans[1].state, now=20)
    assert [x.pod for x in p3.actions] == ["default/b"]
    assert p3.gaps["evict"] == {"cpu_total_usage": pytest.approx(0.5)}


def test_bug_1_1_waterline_compared_exactly_not_rounded_up():
    # Crane compares Quantity.Value() (rounded up): line "50.5" becomes 51, so 50.7 % never fires.
    pol = qos_policy("p", rule("u", "cpu_total_utilization", "50.5", "evict"))
    pods = [pod_sample(be("a"), cpu=1.0)]
    p = plan([pol], [evict_action("evict")], node_sample(cpu=4.056, cores=8.0), pods, AgentState(), now=0)
    assert p.gaps["evict"] == {"cpu_total_utilization": pytest.approx(0.2)}
    assert len(p.actions) == 1


def test_bug_1_6_order_is_total_and_stable():
    # Go sort.Sort is not stable: equal pods came out in any order. Ties break by namespace/name.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "throttle"))
    pods = [pod_sample(be(n), cpu=1.0) for n in ("c", "a", "d", "b")]
    for perm in (pods, list(reversed(pods))):
        p = plan([pol], [throttle_action("throttle")], node_sample(cpu=1.2), perm, AgentState(), now=0)
        assert p.candidates["throttle"] == ("default/a", "default/b", "default/c", "default/d")


@settings(max_examples=150, deadline=None)
@given(
    above=st.lists(st.one_of(st.booleans(), st.none()), min_size=1, max_size=20),
    avoid=st.integers(min_value=1, max_value=4),
)
def test_fires_exactly_after_n_consecutive_above_samples(above, avoid):
    # Samples: True = above the line, False = below, None = metric missing. The rule acts on a tick
    # exactly when the last `avoid` samples were all present and above.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle", avoid=avoid))
    act = throttle_action("throttle", cool_down=1)
    pods = [pod_sample(be("a"), cpu=3.0)]
    state = AgentState()
    for i, sample in enumerate(above):
        cpu = None if sample is None else (5.0 if sample else 3.0)
        p = plan([pol], [act], node_sample(cpu=cpu, time=10.0 * i), pods, state, now=10.0 * i)
        state = p.state
        window = above[max(0, i - avoid + 1) : i + 1]
        expected = len(window) == avoid and all(s is True for s in window)
        assert ("p.cpu" in p.fired) == expected
