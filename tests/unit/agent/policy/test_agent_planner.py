"""The precise executor plan: gaps closed exactly, ledger, cool-downs, protection, restore."""

from __future__ import annotations

from dataclasses import replace

import pytest

from koordpy.agent.policy import ActionKind, AgentState, PlanOptions, forget, naive_plan, plan
from koordpy.agent.policy.ordering import general_key, memory_usage_key
from koordpy.agent.policy.types import Event
from koordpy_testkit.agent import evict_action, node_sample, pod_sample, qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder

GiB = 1 << 30


def be(name: str, ns: str = "default", **kw: object) -> dict[str, object]:
    return PodBuilder(name, ns).build()


def throttle_setup(node_cpu: float, *usages: tuple[str, float], step: int = 50, min_ratio: int = 0):
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle"))
    act = throttle_action("throttle", step=step, min_ratio=min_ratio, cool_down=10)
    pods = [pod_sample(be(n), cpu=u) for n, u in usages]
    return [pol], [act], node_sample(cpu=node_cpu), pods


def keys(p) -> list[tuple[str, str, float]]:
    return [(str(a.kind), a.pod, round(a.released, 9)) for a in p.actions]


def test_throttle_stops_as_soon_as_gap_is_closed():
    # line 4000m = 4 cores, node 5.0 -> gap 1.0. Order by usage desc: a(1.5) b(1.0) c(0.5) d(0.2).
    # a: 1.5 x 50% = 0.75 -> released 0.75, gap 0.25; b: 1.0 -> 0.5, released 0.5, gap -0.25 -> stop.
    pols, acts, node, pods = throttle_setup(5.0, ("d", 0.2), ("c", 0.5), ("a", 1.5), ("b", 1.0))
    p = plan(pols, acts, node, pods, AgentState(), now=0.0)
    assert keys(p) == [("throttle", "default/a", 0.75), ("throttle", "default/b", 0.5)]
    assert p.gaps["throttle"] == {"cpu_total_usage": 1.0}
    assert p.candidates["throttle"] == ("default/a", "default/b", "default/c", "default/d")
    assert [a.cpu_cap for a in p.actions] == [0.75, 0.5]
    assert p.state.throttled[pods[2].uid].original is None


@pytest.mark.parametrize(
    ("node_cpu", "expected"),
    [
        (4.0, []),  # not above (strictly greater fires)
        (4.5, ["a"]),  # gap 0.5 <= a's 0.75
        (4.75, ["a"]),  # gap 0.75 == a's release: closed exactly
        (5.5, ["a", "b", "c"]),  # 1.5 - 0.75 - 0.5 = 0.25 -> c releases 0.25 -> 0
        (9.0, ["a", "b", "c", "d"]),  # 5.0 - 1.6 left over: every candidate, GapNotClosed
    ],
)
def test_precision_table(node_cpu, expected):
    pols, acts, node, pods = throttle_setup(node_cpu, ("a", 1.5), ("b", 1.0), ("c", 0.5), ("d", 0.2))
    p = plan(pols, acts, node, pods, AgentState(), now=0.0)
    assert [a.pod.split("/")[1] for a in p.actions] == expected
    # Precision: removing the last action would leave the gap open.
    if expected:
        released = sum(a.released for a in p.actions)
        assert released >= node_cpu - 4.0 - 1e-9 or expected == ["a", "b", "c", "d"]
        assert released - p.actions[-1].released < node_cpu - 4.0
    assert any(e.reason == "GapNotClosed" for e in p.events) == (node_cpu == 9.0)


def test_eviction_precise_stop_like_crane_pr_557():
    # memory_total_utilization line 50 %, capacity 12 GiB, node at 78.7 % -> gap 28.7 % = 3.44 GiB.
    # Pods 3.5 GiB and 2 GiB: evicting the 3.5 GiB one (29.17 %) closes the gap; the 2 GiB one stays.
    pol = qos_policy("p", rule("mem", "memory_total_utilization", 50, "evict"))
    cap = 12 * GiB
    node = node_sample(memory=int(cap * 0.787), memory_capacity=cap)
    pods = [pod_sample(be("small"), cpu=0.1, memory=2 * GiB), pod_sample(be("big"), cpu=0.1, memory=int(3.5 * GiB))]
    p = plan([pol], [evict_action("evict", grace=5)], node, pods, AgentState(), now=0.0)
    assert [(a.kind, a.pod) for a in p.actions] == [(ActionKind.EVICT, "default/big")]
    assert p.actions[0].released == pytest.approx(3.5 / 12 * 100)
    assert p.actions[0].grace_seconds == 5
    naive = naive_plan([pol], [evict_action("evict")], node, pods, AgentState(), now=0.0)
    assert [a.pod for a in naive.actions] == ["default/big", "default/small"]


def test_memory_before_cpu_and_eviction_credits_every_metric():
    # evict lines: cpu 4 cores (node 5 -> gap 1), memory 10 GiB (node 12 GiB -> gap 2 GiB).
    # Memory first: order by memory desc: m (3 GiB, 1.2 cores) closes memory AND cpu (1.2 >= 1).
    pol = qos_policy(
        "p", rule("cpu", "cpu_total_usage", 4000, "evict"), rule("mem", "memory_total_usage", 10 * GiB, "evict")
    )
    node = node_sample(cpu=5.0, memory=12 * GiB)
    pods = [
        pod_sample(be("c"), cpu=3.0, memory=1 * GiB),
        pod_sample(be("m"), cpu=1.2, memory=3 * GiB),
    ]
    p = plan([pol], [evict_action("evict")], node, pods, AgentState(), now=0.0)
    assert [(a.pod, a.metric) for a in p.actions] == [("default/m", "memory_total_usage")]


def test_order_class_priority_usage_ext_running_time():
    # BestEffort before Burstable regardless of usage; within BestEffort lower priority first,
    # then higher usage, then gocrane.io/cpu users, then the newer pod.
    burst = PodBuilder("burst").requests(cpu="100m").build()
    hi = PodBuilder("hi").priority(100).build()
    old = PodBuilder("old").condition("Initialized", 1000.0).build()
    new = PodBuilder("new").condition("Initialized", 2000.0).build()
    ext = PodBuilder("ext").limits(**{"gocrane.io/cpu": "1"}).condition("Initialized", 1000.0).build()
    big = PodBuilder("big").build()
    pods = [
        pod_sample(burst, cpu=3.0),
        pod_sample(hi, cpu=3.0),
        pod_sample(old, cpu=1.0),
        pod_sample(new, cpu=1.0),
        pod_sample(ext, cpu=1.0),
        pod_sample(big, cpu=2.0),
    ]
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "throttle"))
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=7.9), pods, AgentState(), now=0.0)
    assert p.candidates["throttle"] == (
        "default/big",
        "default/ext",
        "default/new",
        "default/old",
        "default/hi",
        "default/burst",
    )


def test_protected_pods_never_touched_even_if_gap_stays_open():
    sys_pod = pod_sample(PodBuilder("dns", "kube-system").build(), cpu=3.0)
    critical = pod_sample(PodBuilder("crit").priority(2_000_000_000).build(), cpu=3.0)
    mirror = pod_sample(PodBuilder("static").annotation("kubernetes.io/config.mirror", "x").build(), cpu=3.0)
    low = pod_sample(be("low"), cpu=0.5)
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "evict"))
    p = plan(
        [pol], [evict_action("evict")], node_sample(cpu=7.0), [sys_pod, critical, mirror, low], AgentState(), now=0.0
    )
    assert [a.pod for a in p.actions] == ["default/low"]
    assert p.candidates["evict"] == ("default/low",)
    custom = PlanOptions(protected_priority_above=0)
    p2 = plan(
        [pol], [evict_action("evict")], node_sample(cpu=7.0), [critical, low], AgentState(), now=0.0, options=custom
    )
    assert [a.pod for a in p2.actions] == ["default/low"]


def test_throttle_floor_is_request_or_limit_ratio():
    # request 0.5, limit 4, minCPURatio 25 -> floor max(0.5, 4 x 25 / 100 = 1.0) = 1.0.
    # usage 3.0, step 90 -> 0.3 -> floored to 1.0; released 2.0.
    raw = PodBuilder("a").requests(cpu="500m").limits(cpu="4").build()
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "throttle"))
    act = throttle_action("throttle", min_ratio=25, step=90)
    p = plan([pol], [act], node_sample(cpu=7.0), [pod_sample(raw, cpu=3.0, cpu_cap=4.0)], AgentState(), now=0.0)
    assert p.actions[0].cpu_cap == pytest.approx(1.0)
    assert p.actions[0].released == pytest.approx(2.0)
    assert p.state.throttled[p.actions[0].uid].original == 4.0


def test_throttle_at_floor_is_not_an_action():
    # request 2 cores, usage 2.0 -> floor 2.0: a step would release nothing, so no action at all.
    raw = PodBuilder("a").requests(cpu="2").build()
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "throttle"))
    p = plan(
        [pol], [throttle_action("throttle")], node_sample(cpu=7.0), [pod_sample(raw, cpu=2.0)], AgentState(), now=0.0
    )
    assert p.actions == ()


@pytest.mark.parametrize(
    ("metric", "line"),
    [("cpu_total_usage", 1000), ("cpu_total_utilization", 12)],  # 1 core; 12 % of 8 cores = 0.96 core
)
def test_a_pod_at_its_floor_is_passed_over_and_the_walk_goes_on(metric, line):
    # node 7 cores, above either line. The BestEffort pod uses 0.01 cores, its floor (MIN_CAP): no step, and its
    # usage is known, so nothing is reported and the Burstable pod behind it (3.0, request 0.5) is stepped down.
    floor = pod_sample(PodBuilder("floor").build(), cpu=0.01)
    burst = pod_sample(PodBuilder("burst").requests(cpu="500m").build(), cpu=3.0)
    pol = qos_policy("p", rule("cpu", metric, line, "throttle"))
    p = plan([pol], [throttle_action("throttle")], node_sample(cpu=7.0), [floor, burst], AgentState(), now=0.0)
    assert [(a.pod, a.cpu_cap) for a in p.actions] == [("default/burst", 1.5)]
    assert [e.reason for e in p.events if e.pod] == []


def test_cool_down_rate_limits_the_action():
    pols, acts, node, pods = throttle_setup(5.0, ("a", 1.5), ("b", 1.0))
    p1 = plan(pols, acts, node, pods, AgentState(), now=0.0)
    assert len(p1.actions) == 2
    node2 = node_sample(cpu=5.0, time=5.0)
    p2 = plan(pols, acts, node2, pods, p1.state, now=5.0)  # cool-down 10 s
    assert p2.actions == () and p2.cooling_down == ("throttle",)
    p3 = plan(pols, acts, node_sample(cpu=5.0, time=10.0), pods, p2.state, now=10.0)
    # a and b are stepped down again from their caps (0.75 -> 0.375, 0.5 -> 0.25) etc.
    assert [a.pod for a in p3.actions][:1] == ["default/a"]
    assert p3.actions[0].cpu_cap == pytest.approx(0.375)


def test_missing_pod_usage_skips_the_pod():
    pols, acts, node, _ = throttle_setup(6.5)  # gap 2.5: known frees 1.0, the unknown one is reached
    pods = [pod_sample(be("unknown"), cpu=None), pod_sample(be("known"), cpu=2.0)]
    p = plan(pols, acts, node, pods, AgentState(), now=0.0)
    assert [a.pod for a in p.actions] == ["default/known"]
    assert [e for e in p.events if e.reason == "PodMetricMissing"] == [
        Event("PodMetricMissing", "cpu_total_usage usage unknown: not throttled", True, "default/unknown")
    ]


def test_forget_makes_a_refused_eviction_pickable_again():
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "evict"))
    act = evict_action("evict", cool_down=1)
    pods = [pod_sample(be("a"), cpu=2.0), pod_sample(be("b"), cpu=1.0)]
    p1 = plan([pol], [act], node_sample(cpu=5.0), pods, AgentState(), now=0.0)
    assert [a.pod for a in p1.actions] == ["default/a"]
    # The Eviction API answered 429: the adapter forgets it, so it is a candidate again.
    state = forget(p1.state, [p1.actions[0].uid])
    p2 = plan([pol], [act], node_sample(cpu=5.0, time=2.0), pods, state, now=2.0)
    assert [a.pod for a in p2.actions] == ["default/a"]


def test_orphaned_throttle_is_restored_when_its_action_disappears():
    pols, acts, node, pods = throttle_setup(5.0, ("a", 1.5))
    p1 = plan(pols, acts, node, pods, AgentState(), now=0.0)
    assert p1.state.throttled
    p2 = plan([], [], node_sample(cpu=5.0, time=1.0), pods, p1.state, now=1.0)
    assert [(a.kind, a.restore_original, a.cpu_cap) for a in p2.actions] == [(ActionKind.RESTORE, True, None)]
    assert p2.state.throttled == {}


def test_state_round_trips_through_json_form():
    pols, acts, node, pods = throttle_setup(5.0, ("a", 1.5), ("b", 1.0))
    p = plan(pols, acts, node, pods, AgentState(), now=0.0)
    assert AgentState.from_dict(p.state.to_dict()) == p.state


def test_to_json_shape():
    pols, acts, node, pods = throttle_setup(5.0, ("a", 1.5), ("b", 1.0))
    out = plan(pols, acts, node, pods, AgentState(), now=0.0).to_json()
    assert set(out) == {"node", "waterlines", "gaps", "candidates", "actions", "warnings"}
    assert out["waterlines"] == {"evict": {}, "throttle": {"cpu_total_usage": 4}, "restore": {"cpu_total_usage": 4}}
    assert out["actions"][0] == {
        "action": "throttle",
        "pod": "default/a",
        "metric": "cpu_total_usage",
        "released": 0.75,
    }


def test_preview_strategy_emits_events_and_never_acts():
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 1000, "evict", strategy="Preview"))
    pods = [pod_sample(be("a"), cpu=2.0)]
    p = plan([pol], [evict_action("evict")], node_sample(cpu=3.0), pods, AgentState(), now=0.0)
    assert p.actions == ()
    assert [e.reason for e in p.events] == ["AvoidanceTriggered", "PreviewOnly"]
    assert p.waterlines["evict"] == {}  # preview rules draw no waterline


def test_throttle_on_utilization_counts_gap_and_release_in_percent():
    # Crane converted percent gaps to absolute units for eviction only, so a throttle on a % metric
    # compared percent with milliCPU. Here: 16 cores, line 50 %, node 9 cores = 56.25 % -> gap 6.25 points.
    # a: 2.0 -> 1.0 cores frees 1.0 core = 6.25 points: closed exactly by one pod.
    pol = qos_policy("p", rule("u", "cpu_total_utilization", 50, "throttle"))
    pods = [pod_sample(be("a"), cpu=2.0), pod_sample(be("b"), cpu=1.0)]
    p = plan([pol], [throttle_action("throttle", step=50)], node_sample(cpu=9.0, cores=16), pods, AgentState(), now=0.0)
    assert p.gaps["throttle"] == {"cpu_total_utilization": 6.25}
    assert [(a.pod, a.released) for a in p.actions] == [("default/a", 6.25)]


def test_throttled_pod_that_is_then_evicted_keeps_its_cap_in_the_ledger():
    pol = qos_policy(
        "p", rule("cpu", "cpu_total_usage", 4000, "throttle"), rule("ev", "cpu_total_usage", 6000, "evict")
    )
    acts = [throttle_action("throttle", cool_down=1), evict_action("evict", cool_down=1)]
    pods = [pod_sample(be("a"), cpu=3.0)]
    p1 = plan([pol], acts, node_sample(cpu=5.0), pods, AgentState(), now=0.0)
    uid = pods[0].uid
    assert uid in p1.state.throttled
    p2 = plan([pol], acts, node_sample(cpu=7.0, time=5.0), pods, p1.state, now=5.0)
    assert [a.kind for a in p2.actions] == [ActionKind.EVICT]
    assert uid in p2.state.evicting and uid in p2.state.throttled
    refused = forget(p2.state, [uid])  # 429: only the eviction is forgotten
    assert uid not in refused.evicting and uid in refused.throttled
    assert uid not in forget(refused, [uid], throttles=True).throttled


def _band_pods(spec: list[tuple[str, int, bool, float | None]]):
    """(name, priority, guaranteed, memory GiB or None) -> pod samples; Guaranteed pods request 1 cpu / 1 GiB."""
    out = []
    for name, priority, guaranteed, mem in spec:
        builder = PodBuilder(name).priority(priority)
        if guaranteed:
            builder = builder.requests(cpu="1", memory="1Gi").limits(cpu="1", memory="1Gi")
        out.append(pod_sample(builder.build(), cpu=0.5, memory=None if mem is None else int(mem * GiB)))
    return out


@pytest.mark.parametrize(
    ("spec", "expected", "gap_open"),
    [
        # The case: the batch pods (5000) have no metric, the Guaranteed prod pod (9000) does.
        # Line 10 GiB, node 12 GiB -> gap 2 GiB. batch-a is unknown: nothing above band (BE, 5000) is
        # touched, so web stays; the gap stays open.
        ([("batch-a", 5000, False, None), ("batch-b", 5000, False, None), ("web", 9000, True, 3)], [], True),
        # Same band may close the gap: batch-b (3 GiB, known) sorts before unknown batch-a and closes 2 GiB.
        ([("batch-a", 5000, False, None), ("batch-b", 5000, False, 3), ("web", 9000, True, 3)], ["batch-b"], False),
        # batch-b frees 1 GiB (gap 1 GiB left), batch-a unknown in the same band: web (9000) is not reached.
        ([("batch-a", 5000, False, None), ("batch-b", 5000, False, 1), ("web", 9000, True, 3)], ["batch-b"], True),
        # Every lower pod known: the walk goes up as before (1 + 0.5 = 1.5 GiB < 2 GiB -> web too).
        (
            [("batch-a", 5000, False, 0.5), ("batch-b", 5000, False, 1), ("web", 9000, True, 3)],
            ["batch-b", "batch-a", "web"],
            False,
        ),
        # Unknown pod in a higher band than the known ones: the lower known ones are still acted on.
        # 1.5 GiB of 2 GiB: mid (7000) unknown stops the walk before web (9000): 0.5 GiB stays open.
        ([("batch-a", 5000, False, 1.5), ("mid", 7000, False, None), ("web", 9000, True, 3)], ["batch-a"], True),
    ],
)
def test_unknown_usage_never_pushes_the_choice_up_the_priority_order(spec, expected, gap_open):
    pol = qos_policy("p", rule("mem", "memory_total_usage", 10 * GiB, "evict"))
    node = node_sample(memory=12 * GiB)
    p = plan([pol], [evict_action("evict")], node, _band_pods(spec), AgentState(), now=0.0)
    assert [a.pod.split("/")[1] for a in p.actions] == expected
    unknown = {name for name, _, _, mem in spec if mem is None}
    assert {e.pod.split("/")[1] for e in p.events if e.reason == "PodMetricMissing"} <= unknown
    assert any(e.reason == "GapNotClosed" for e in p.events) == gap_open


def test_unknown_cpu_usage_blocks_throttling_higher_bands_too():
    # cpu line 4 cores, node 5 -> gap 1. Low pod (priority 0) unknown; the 9000 pod known with 3 cores.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle"))
    low = pod_sample(PodBuilder("low").build(), cpu=None)
    high = pod_sample(PodBuilder("high").priority(9000).build(), cpu=3.0)
    p = plan([pol], [throttle_action("throttle", step=50)], node_sample(cpu=5.0), [low, high], AgentState(), now=0.0)
    assert p.actions == ()
    assert [e.pod for e in p.events if e.reason == "PodMetricMissing"] == ["default/low"]


@pytest.mark.parametrize(
    ("gang_key", "value"),
    [
        ("label", "pod-group.scheduling.sigs.k8s.io"),
        ("annotation", "scheduling.k8s.io/group-name"),
        ("annotation", "gang.scheduling.koordinator.sh/name"),
    ],
)
def test_gang_members_are_evicted_after_the_other_pods_of_their_class_and_priority(gang_key, value):
    # memory line 10 GiB, node 11 GiB: gap 1 GiB. BestEffort "member" (3 GiB, in a gang) and "plain"
    # (1 GiB): by usage alone member would go first; in one class and priority the pod in no gang goes
    # first, and its 1 GiB closes the gap. A Burstable pod still comes after both (class first).
    member = PodBuilder("member")
    member = member.label(value, "train") if gang_key == "label" else member.annotation(value, "train")
    burst = PodBuilder("burst").requests(memory="1Gi").build()
    pods = [
        pod_sample(member.build(), cpu=0.1, memory=3 * GiB),
        pod_sample(be("plain"), cpu=0.1, memory=1 * GiB),
        pod_sample(burst, cpu=0.1, memory=4 * GiB),
    ]
    pol = qos_policy("p", rule("mem", "memory_total_usage", 10 * GiB, "evict"))
    p = plan([pol], [evict_action("evict")], node_sample(memory=11 * GiB), pods, AgentState(), now=0.0)
    assert [a.pod for a in p.actions] == ["default/plain"]
    assert p.candidates["evict"] == ("default/plain", "default/member", "default/burst")
    # a gap of 3 GiB: plain (1), then the member (3) closes it; the Burstable pod is never reached
    p = plan([pol], [evict_action("evict")], node_sample(memory=13 * GiB), pods, AgentState(), now=0.0)
    assert [a.pod for a in p.actions] == ["default/plain", "default/member"]


def test_missing_pod_memory_is_reported_and_the_pod_not_evicted():
    # evict line 8 GiB, node 12 GiB -> gap 4 GiB. known (2 GiB) first; 2 GiB left reach unknown (no usage).
    pol = qos_policy("p", rule("mem", "memory_total_usage", 8 * GiB, "evict"))
    node = node_sample(memory=12 * GiB)
    pods = [pod_sample(be("unknown"), cpu=0.1, memory=None), pod_sample(be("known"), cpu=0.1, memory=2 * GiB)]
    p = plan([pol], [evict_action("evict")], node, pods, AgentState(), now=0.0)
    assert [(a.pod, a.action_name, a.released) for a in p.actions] == [("default/known", "evict", 2 * GiB)]
    assert [e for e in p.events if e.reason == "PodMetricMissing"] == [
        Event("PodMetricMissing", "memory_total_usage usage unknown: not evicted", True, "default/unknown")
    ]


def test_a_pod_whose_eviction_frees_nothing_of_the_metric_is_passed_over():
    # evict line 8 GiB, node 12 GiB -> gap 4 GiB. some (1 GiB) is evicted; idle (0 bytes) would free nothing:
    # not evicted, and the walk goes on to the Burstable pod behind it (2 GiB), which the gap still needs.
    pol = qos_policy("p", rule("mem", "memory_total_usage", 8 * GiB, "evict"))
    node = node_sample(memory=12 * GiB)
    burstable = PodBuilder("burst").requests(cpu="100m").build()
    pods = [
        pod_sample(be("some"), cpu=0.1, memory=1 * GiB),
        pod_sample(be("idle"), cpu=0.1, memory=0),
        pod_sample(burstable, cpu=0.1, memory=2 * GiB),
    ]
    p = plan([pol], [evict_action("evict")], node, pods, AgentState(), now=0.0)
    assert [a.pod for a in p.actions] == ["default/some", "default/burst"]


def test_a_pod_evicted_for_memory_is_not_evicted_again_for_cpu():
    # evict lines: memory 10 GiB (node 12 -> gap 2 GiB), cpu 4 cores (node 5 -> gap 1). Memory first: m (3 GiB,
    # 0.5 cores) closes it and leaves 0.5 cores of the cpu gap. cpu order: m (0.5), c (0.4), x (0.3): m is out
    # already, c leaves 0.1, x closes it.
    pol = qos_policy(
        "p", rule("cpu", "cpu_total_usage", 4000, "evict"), rule("mem", "memory_total_usage", 10 * GiB, "evict")
    )
    node = node_sample(cpu=5.0, memory=12 * GiB)
    pods = [
        pod_sample(be("m"), cpu=0.5, memory=3 * GiB),
        pod_sample(be("c"), cpu=0.4, memory=0),
        pod_sample(be("x"), cpu=0.3, memory=0),
    ]
    p = plan([pol], [evict_action("evict")], node, pods, AgentState(), now=0.0)
    assert [(a.pod, a.metric) for a in p.actions] == [
        ("default/m", "memory_total_usage"),
        ("default/c", "cpu_total_usage"),
        ("default/x", "cpu_total_usage"),
    ]


@pytest.mark.parametrize(("grace", "expires"), [(None, 330.0), (10, 310.0)])  # 300 s timeout + 30 s default / own
def test_an_eviction_stays_in_flight_for_the_timeout_and_the_pods_grace(grace, expires):
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "evict"))
    raw = be("a")
    if grace is not None:
        raw["spec"]["terminationGracePeriodSeconds"] = grace  # type: ignore[index]
    p = plan([pol], [evict_action("evict")], node_sample(cpu=5.0), [pod_sample(raw, cpu=2.0)], AgentState(), now=0.0)
    [entry] = p.state.evicting.values()
    assert (entry.since, entry.expires) == (0.0, expires)


def test_naive_plan_waits_for_the_rule_to_fire_like_plan():
    # avoidance threshold 2: one sample above the line fires nothing yet, in either plan
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "evict", avoid=2))
    pods = [pod_sample(be("a"), cpu=2.0)]
    naive = naive_plan([pol], [evict_action("evict")], node_sample(cpu=5.0), pods, AgentState(), now=0.0)
    assert (naive.fired, naive.actions) == ((), ())


def test_the_naive_plan_evicts_a_pod_that_frees_nothing_and_counts_nothing_for_it():
    # evict line 8 GiB, node 12 GiB: the naive plan evicts every candidate, idle (0 bytes) included, freeing 0
    pol = qos_policy("p", rule("mem", "memory_total_usage", 8 * GiB, "evict"))
    pods = [pod_sample(be("some"), cpu=0.1, memory=1 * GiB), pod_sample(be("idle"), cpu=0.1, memory=0)]
    p = naive_plan([pol], [evict_action("evict")], node_sample(memory=12 * GiB), pods, AgentState(), now=0.0)
    assert [(a.pod, a.released) for a in p.actions] == [("default/some", 1 * GiB), ("default/idle", 0.0)]


def test_memory_order_takes_gocrane_memory_users_first_at_equal_usage():
    # same class, priority and memory: at 1 GiB the pod using gocrane.io/memory first, though the other is newer
    # and its name sorts first; at 0 bytes its use counts 0, as the other's: the newer pod first
    ext = {"gocrane.io/memory": "1Gi"}
    pods = [
        pod_sample(PodBuilder("a-plain").condition("Initialized", 2000.0).build(), cpu=0.1, memory=GiB),
        pod_sample(PodBuilder("b-ext").limits(**ext).condition("Initialized", 1000.0).build(), cpu=0.1, memory=GiB),
        pod_sample(PodBuilder("c-plain").condition("Initialized", 1000.0).build(), cpu=0.1, memory=0),
        pod_sample(PodBuilder("d-ext").requests(**ext).condition("Initialized", 2000.0).build(), cpu=0.1, memory=0),
    ]
    assert [p.key for p in sorted(pods, key=memory_usage_key)] == [
        "default/b-ext",
        "default/a-plain",
        "default/d-ext",
        "default/c-plain",
    ]


def test_the_general_order_is_class_priority_then_the_newer_pod_then_the_name():
    # no usage in the key: BestEffort before Burstable, lower priority first, newer first, then by name
    pods = [
        pod_sample(PodBuilder("burst").requests(cpu="100m").build(), cpu=9.0),
        pod_sample(PodBuilder("hi").priority(100).condition("Initialized", 3000.0).build(), cpu=9.0),
        pod_sample(PodBuilder("old").condition("Initialized", 1000.0).build(), cpu=9.0),
        pod_sample(PodBuilder("new-b").condition("Initialized", 2000.0).build(), cpu=0.1),
        pod_sample(PodBuilder("new-a").condition("Initialized", 2000.0).build(), cpu=0.1),
    ]
    assert [p.key for p in sorted(pods, key=general_key)] == [
        "default/new-a",
        "default/new-b",
        "default/old",
        "default/hi",
        "default/burst",
    ]


def test_a_pod_throttled_on_a_metric_the_registry_no_longer_has_is_restored_by_usage_rules():
    # a was throttled (cap 0.75, original unlimited) on a metric name this agent's registry does not know (an
    # older agent's): it counts as the "usage" family, so the cpu_total_usage rule, now below its line, restores it.
    pols, acts, node, pods = throttle_setup(5.0, ("a", 1.5))
    p1 = plan(pols, acts, node, pods, AgentState(), now=0.0)
    [(uid, entry)] = p1.state.throttled.items()
    state = replace(p1.state, throttled={uid: replace(entry, metric="cpu_usage_of_an_older_agent")})
    p2 = plan(pols, acts, node_sample(cpu=2.0, time=20.0), pods, state, now=20.0)
    assert [(a.kind, a.pod) for a in p2.actions] == [(ActionKind.RESTORE, "default/a")]
