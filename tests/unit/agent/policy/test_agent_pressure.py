"""Pressure rules (koordpy's PSI metrics): detection and restore with Crane's counters, stepwise throttling of
the candidates below the protected pods, the own-limit exclusion, and what a rule protects.

The node has two batch pods (``batch-a`` Burstable, request 200m, priority 5000, demand 0.9 cores;
``batch-b`` BestEffort, demand 0.6 cores), the latency-sensitive ``web`` (Guaranteed 500m, priority
9000, label ``app=web``) and ``admin`` (Guaranteed 200m, priority 9500). Unless a test says otherwise
the rule is ``pod_cpu_pressure_some_avg10 > 20`` (percent) on the pods labelled ``app=web``, its action
steps CPU by 50 % with a 1 s cool-down and samples come every second.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.agent.policy import ActionKind, AgentState, NodeSample, Plan, PodSample, plan
from koordpy.agent.policy.metrics import BUILTIN
from koordpy.agent.policy.pressure import own_limited, pressure_needs
from koordpy.crds.ensurance import NodeQOS, PodQOS
from koordpy_testkit.agent import evict_action, node_sample, pod_sample, qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder

METRIC = "pod_cpu_pressure_some_avg10"
KEY = "cpu_pressure_some_avg10"
WEB = {"matchLabels": {"app": "web"}}
DEMAND = {"batch-a": 0.9, "batch-b": 0.6, "web": 0.3, "admin": 0.1}


def pods() -> dict[str, dict[str, Any]]:
    return {
        "batch-a": PodBuilder("batch-a").requests(cpu="200m").priority(5000).build(),
        "batch-b": PodBuilder("batch-b").build(),
        "web": PodBuilder("web").requests(cpu="500m").limits(cpu="500m").priority(9000).label("app", "web").build(),
        "admin": PodBuilder("admin").requests(cpu="200m").limits(cpu="200m").priority(9500).build(),
    }


def samples(
    web_pressure: float | None,
    caps: dict[str, float] | None = None,
    *,
    own: dict[str, float] | None = None,
    extra: dict[str, dict[str, float]] | None = None,
) -> list[PodSample]:
    """Each pod uses min(demand, cap); ``web`` reads ``web_pressure``; ``extra`` adds pressure to others."""
    caps = caps or {}
    out = []
    for name, raw in pods().items():
        pressure = dict((extra or {}).get(name, {}))
        if name == "web" and web_pressure is not None:
            pressure[KEY] = web_pressure
        usage = min(DEMAND[name], caps.get(name, DEMAND[name]))
        out.append(pod_sample(raw, cpu=usage, pressure=pressure, own_limit_age=own if name == "web" else None))
    return out


def step(
    pressure: float | None,
    state: AgentState,
    now: float,
    *,
    policy: Any = None,
    actions: list[Any] | None = None,
    caps: dict[str, float] | None = None,
    **kw: Any,
) -> Plan:
    pol = policy or qos_policy("p", rule("web", METRIC, 20, "throttle", avoid=2, restore=3, selector=WEB))
    acts = actions or [throttle_action("throttle", step=50, cool_down=1)]
    node = node_sample(cpu=1.9, cores=2.0, time=now)
    return plan([pol], acts, node, samples(pressure, caps, **kw), state, now=now)


def names(p: Plan) -> list[tuple[str, str]]:
    return [(str(a.kind), a.pod.split("/")[1]) for a in p.actions]


def run(series: list[float]) -> list[list[tuple[str, str, float | None]]]:
    """Feed ``web``'s pressure tick by tick (t = 0, 1, ...), applying caps to usage; actions per tick."""
    state, caps, out = AgentState(), {}, []
    for now, pressure in enumerate(series):
        p = step(pressure, state, float(now), caps=caps)
        state = p.state
        for a in p.actions:
            name = a.pod.split("/")[1]
            if a.cpu_cap is None:
                caps.pop(name, None)
            else:
                caps[name] = a.cpu_cap
        out.append(
            [(str(a.kind), a.pod.split("/")[1], None if a.cpu_cap is None else round(a.cpu_cap, 4)) for a in p.actions]
        )
    return out


def test_detection_step_throttling_and_restore_table():
    # avoidanceThreshold 2: t0 is the first sample above 20 %, t1 the second -> fires. Every candidate below
    # web (Guaranteed, 9000), in Crane's order (BestEffort first), steps down 50 % from min(cap, usage):
    # batch-b 0.6 -> 0.3, batch-a 0.9 -> 0.45 (its floor is its 200m request); admin (9500) ranks above web
    # and is never a candidate for it. t2: still above and the 1 s cool-down is over: 0.15 and 0.225.
    # t3, t4: at or below the line, 1 and 2 samples; t5 the third = restoreThreshold: every pod the rule
    # throttled steps up 50 % in reverse order (batch-a first): 0.225 x 1.5 = 0.3375, 0.15 x 1.5 = 0.225;
    # t6, t7 again (cool-down 1 s): x 1.5 each, towards the uncapped original (ceiling: the node's 2 cores).
    got = run([30, 30, 30, 10, 10, 10, 10, 10])
    assert got == [
        [],
        [("throttle", "batch-b", 0.3), ("throttle", "batch-a", 0.45)],
        [("throttle", "batch-b", 0.15), ("throttle", "batch-a", 0.225)],
        [],
        [],
        [("restore", "batch-a", 0.3375), ("restore", "batch-b", 0.225)],
        [("restore", "batch-a", 0.5063), ("restore", "batch-b", 0.3375)],
        [("restore", "batch-a", 0.7594), ("restore", "batch-b", 0.5062)],
    ]


@pytest.mark.parametrize(
    ("series", "throttle_ticks"),
    [
        ([30, 10, 30, 10, 30], []),  # never two consecutive samples above: nothing (Crane counts cumulatively)
        ([30, 30, 10, 30, 30], [1, 4]),  # fires at t1; t2 below resets the run; again at t4
        ([20, 20, 20], []),  # at the line is not above it
        ([21, 21, 21, 21], [1, 2, 3]),  # keeps stepping while above, once per cool-down
    ],
)
def test_detection_counts_consecutive_samples(series, throttle_ticks):
    got = run(series)
    assert [t for t, acts in enumerate(got) if any(k == "throttle" for k, _, _ in acts)] == throttle_ticks


def test_restore_needs_restore_threshold_consecutive_samples():
    # Fired at t1; t2, t3 below, t4 above again (resets the below-run), t5-t7 below -> restore at t7 only.
    got = run([30, 30, 10, 10, 30, 10, 10, 10])
    assert [t for t, acts in enumerate(got) if any(k == "restore" for k, _, _ in acts)] == [7]


def test_cool_down_rate_limits_the_steps():
    # Cool-down 5 s: fired at t1 (step), t2-t5 above but cooling down, t6 the next step.
    state, kinds = AgentState(), []
    for now in range(8):
        p = step(30, state, float(now), actions=[throttle_action("throttle", step=50, cool_down=5)])
        state = p.state
        kinds.append(bool(p.actions))
        if now in (2, 3):
            assert p.cooling_down == ("throttle",)
    assert kinds == [False, True, False, False, False, False, True, False]


@pytest.mark.parametrize(
    ("metric", "own", "pressure", "fires"),
    [
        (METRIC, None, 90, True),  # no own limit seen: the pressure counts
        (METRIC, {"cpu": 5.0}, 90, False),  # its cpu.max held it back 5 s ago: 5 <= 3 x 10 s, not counted
        (METRIC, {"cpu": 30.0}, 90, False),  # 30 <= 30: still within three windows
        (METRIC, {"cpu": 31.0}, 90, True),  # 31 > 30: the stall has decayed below 5 %, counts again
        ("pod_cpu_pressure_some_avg60", {"cpu": 100.0}, 90, False),  # avg60: three windows are 180 s
        (METRIC, {"memory": 5.0}, 90, True),  # its memory limit says nothing about CPU pressure
    ],
)
def test_own_limit_exclusion_table(metric, own, pressure, fires):
    key = metric.removeprefix("pod_")
    pol = qos_policy("p", rule("web", metric, 20, "throttle", selector=WEB))
    raw = pods()
    batch = pod_sample(raw["batch-a"], cpu=0.9)
    web = pod_sample(raw["web"], cpu=0.3, pressure={key: pressure}, own_limit_age=own)
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=1.2, cores=2.0), [batch, web], AgentState(), now=0)
    assert bool(p.actions) is fires
    assert any(e.reason == "OwnLimit" and e.pod == "default/web" for e in p.events) is (not fires)
    assert own_limited(web, BUILTIN[metric]) is (not fires)


def test_own_limited_pod_does_not_hide_a_contended_one():
    # Two protected pods: web at its own limit (90 %, excluded), web-2 contended (25 %) -> value 25, fires.
    pol = qos_policy("p", rule("web", METRIC, 20, "throttle", selector=WEB))
    raw = pods()
    web2 = PodBuilder("web-2").requests(cpu="500m").limits(cpu="500m").priority(9000).label("app", "web").build()
    pods_in = [
        pod_sample(raw["batch-a"], cpu=0.9),
        pod_sample(raw["web"], cpu=0.5, pressure={KEY: 90}, own_limit_age={"cpu": 1.0}),
        pod_sample(web2, cpu=0.2, pressure={KEY: 25}),
    ]
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=1.6, cores=2.0), pods_in, AgentState(), now=0)
    assert names(p) == [("throttle", "batch-a")]
    assert p.gaps["throttle"] == {METRIC: 5.0}  # 25 - 20: the excluded 90 does not count


def test_node_qos_protects_the_pods_no_pod_qos_lets_it_act_on():
    # NodeQOS + PodQOS allowing the action on priorities 0-5999: candidates batch-a, batch-b; protected: web
    # and admin. admin's pressure (40) fires; both batch pods step down. web (9000) ranks below admin (9500)
    # but is protected, so it is never a candidate.
    nq = NodeQOS.model_validate(
        {
            "metadata": {"name": "nq"},
            "spec": {"rules": [rule("protect", METRIC, 20, "throttle")]},
        }
    ).to_policy()
    pq = PodQOS.model_validate(
        {
            "metadata": {"name": "batch"},
            "spec": {
                "allowedActions": ["throttle"],
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "Priority", "operator": "In", "values": ["0-5999"]}]
                },
            },
        }
    )
    p = plan(
        [nq],
        [throttle_action("throttle")],
        node_sample(cpu=1.9, cores=2.0),
        samples(5, extra={"admin": {KEY: 40}}),
        AgentState(),
        now=0,
        pod_qos=[pq],
    )
    assert names(p) == [("throttle", "batch-b"), ("throttle", "batch-a")]
    # web is the protected pod now (5 %, below the line) and admin too: nothing above -> nothing happens.
    quiet = plan(
        [nq],
        [throttle_action("throttle")],
        node_sample(cpu=1.9, cores=2.0),
        samples(5),
        AgentState(),
        now=0,
        pod_qos=[pq],
    )
    assert quiet.actions == ()


def test_never_acts_on_a_pod_ranked_at_or_above_the_pressured_one():
    # The selector protects batch-b (BestEffort, the lowest rank): no candidate ranks below it, so its
    # pressure (50 %) fires the rule and nothing is throttled.
    pol = qos_policy("p", rule("be", METRIC, 20, "throttle", selector={"matchLabels": {"tier": "be"}}))
    raw = pods()
    be = PodBuilder("be-probe").label("tier", "be").build()
    pods_in = [pod_sample(raw["batch-b"], cpu=0.6), pod_sample(be, cpu=0.1, pressure={KEY: 50})]
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=0.7, cores=2.0), pods_in, AgentState(), now=0)
    assert p.fired == ("p.be",) and p.actions == ()


def test_protected_pods_without_readings_leave_the_rule_unknown():
    p = step(None, AgentState(), 0.0)
    assert p.actions == ()
    assert [e.reason for e in p.events] == ["MetricMissing"]
    assert "pod_cpu_pressure_some_avg10 of the pods it protects is unavailable" in p.events[0].message


def test_no_protected_pod_reads_zero():
    pol = qos_policy("p", rule("web", METRIC, 20, "throttle", selector={"matchLabels": {"app": "nothing"}}))
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=1.9, cores=2.0), samples(99), AgentState(), now=0)
    assert p.actions == () and p.events == ()


def test_memory_pressure_evicts_one_pod_per_round():
    # pod_memory_pressure_some_avg10 > 10 on web: the memory order (BestEffort first, then the most memory)
    # takes batch-b; one eviction per round however high the pressure, the next after the cool-down.
    pol = qos_policy("p", rule("mem", "pod_memory_pressure_some_avg10", 10, "evict", selector=WEB))
    raw = pods()
    pods_in = [
        pod_sample(raw["batch-a"], cpu=0.9, memory=900 << 20),
        pod_sample(raw["batch-b"], cpu=0.6, memory=300 << 20),
        pod_sample(raw["web"], cpu=0.3, memory=100 << 20, pressure={"memory_pressure_some_avg10": 60}),
    ]
    p = plan(
        [pol], [evict_action("evict", cool_down=10)], node_sample(cpu=1.8, cores=2.0), pods_in, AgentState(), now=0
    )
    assert names(p) == [("evict", "batch-b")]
    assert p.actions[0].released == 300 << 20
    later = plan(
        [pol],
        [evict_action("evict", cool_down=10)],
        node_sample(cpu=1.8, cores=2.0, time=10),
        pods_in[::2],
        p.state,
        now=10,
    )
    assert names(later) == [("evict", "batch-a")]


def test_memory_pressure_cannot_throttle():
    pol = qos_policy("p", rule("mem", "pod_memory_pressure_some_avg10", 10, "throttle", selector=WEB))
    raw = pods()
    pods_in = [
        pod_sample(raw["batch-a"], cpu=0.9),
        pod_sample(raw["web"], cpu=0.3, pressure={"memory_pressure_some_avg10": 60}),
    ]
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=1.2, cores=2.0), pods_in, AgentState(), now=0)
    assert p.actions == () and [e.reason for e in p.events] == ["AvoidanceTriggered", "NotThrottleable"]


def test_node_pressure_steps_every_candidate():
    # Node-scope: /proc/pressure/cpu some avg10 = 35 > 25. A NodeQOSEnsurancePolicy acts on every eligible pod,
    # lowest class first, one step each: batch-b 0.6 -> 0.3, batch-a 0.9 -> 0.45. web (0.3 used, floor: its
    # 500m request) and admin (0.1 used, floor 200m) cannot go lower than they use: no step for them.
    pol = qos_policy("p", rule("node", "cpu_pressure_some_avg10", 25, "throttle"))
    node = node_sample(cpu=1.9, cores=2.0, pressure={"cpu_pressure_some_avg10": 35})
    p = plan([pol], [throttle_action("throttle")], node, samples(0), AgentState(), now=0)
    assert [(n, round(a.cpu_cap or 0, 3)) for n, a in zip(names(p), p.actions, strict=True)] == [
        (("throttle", "batch-b"), 0.3),
        (("throttle", "batch-a"), 0.45),
    ]
    assert p.candidates["throttle"] == ("default/batch-b", "default/batch-a", "default/web", "default/admin")
    missing = plan(
        [pol], [throttle_action("throttle")], node_sample(cpu=1.9, cores=2.0), samples(0), AgentState(), now=0
    )
    assert missing.actions == () and [e.reason for e in missing.events] == ["MetricMissing"]


def test_a_usage_restore_gives_back_nothing_a_pressure_rule_took():
    # t0: node 1.4 cores, under the usage line (1.5); web's pressure 30 > 20 fires the pressure rule, which
    # steps batch-b and batch-a (the ledger records its metric). t1: node 1.0 -> the usage rule restores (gap
    # 0.5) while the pressure rule, now below, has 1 of its 3 samples: the pressure family keeps its caps.
    pressure_rule = rule("web", METRIC, 20, "throttle", avoid=1, restore=3, selector=WEB)
    usage_rule = rule("cpu", "cpu_total_usage", 1500, "throttle", avoid=1, restore=1)
    pol = qos_policy("p", pressure_rule, usage_rule)
    acts = [throttle_action("throttle", step=50, cool_down=1)]
    first = plan([pol], acts, node_sample(cpu=1.4, cores=2.0, time=0), samples(30), AgentState(), now=0)
    assert {a.metric for a in first.actions} == {METRIC}
    assert {t.metric for t in first.state.throttled.values()} == {METRIC}
    caps = {a.pod.split("/")[1]: a.cpu_cap or 0.0 for a in first.actions}
    later = plan([pol], acts, node_sample(cpu=1.0, cores=2.0, time=1), samples(10, caps), first.state, now=1)
    assert later.gaps["restore"] == {"cpu_total_usage": 0.5}
    assert later.actions == ()
    # Two more below-samples: the pressure rule restores them itself.
    state = later.state
    for now in (2, 3):
        done = plan([pol], acts, node_sample(cpu=1.0, cores=2.0, time=now), samples(10, caps), state, now=now)
        state = done.state
    assert sorted(names(done)) == [("restore", "batch-a"), ("restore", "batch-b")]


def test_pressure_needs_names_the_files_a_tick_reads():
    pol = qos_policy(
        "p",
        rule("a", METRIC, 20, "throttle"),
        rule("b", "memory_pressure_full_avg60", 5, "evict"),
        rule("c", "cpu_total_usage", 1000, "throttle"),
    )
    needs = pressure_needs([pol], BUILTIN)
    assert (needs.node, needs.pods) == (frozenset({"memory"}), frozenset({"cpu"}))
    assert (
        pressure_needs([qos_policy("q", rule("c", "cpu_total_usage", 1000, "throttle"))], BUILTIN).pods == frozenset()
    )


def test_node_sample_pressure_defaults_to_unmeasured():
    assert NodeSample("n", 0.0, 1.0, 2.0, None, None).pressure == {}
    assert ActionKind.THROTTLE == "throttle"
