"""PodQOS as the planner's candidate filter, driven by Crane's own NodeQOS + PodQOS example.

Fixture: tests/fixtures/crane/be-rules.yaml (line: cpu_total_usage 5000 milliCPU = 5 cores; the
PodQOS allows the AvoidanceAction ``eviction`` on BestEffort pods only).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from koordpy.agent.policy import AgentState, naive_plan, plan
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, NodeQOSEnsurancePolicy, PodQOS
from koordpy_testkit.agent import node_sample, pod_sample, qos_policy, rule
from koordpy_testkit.builders import PodBuilder

CRANE = Path(__file__).resolve().parents[3] / "fixtures" / "crane" / "be-rules.yaml"


def crane() -> tuple[NodeQOSEnsurancePolicy, PodQOS, AvoidanceAction]:
    docs = {d["kind"]: d for d in yaml.safe_load_all(CRANE.read_text())}
    return (
        NodeQOS.model_validate(docs["NodeQOS"]).to_policy(),
        PodQOS.model_validate(docs["PodQOS"]),
        AvoidanceAction.model_validate(docs["AvoidanceAction"]),
    )


def pods():
    burstable = PodBuilder("web").requests(cpu="2").build()  # Burstable, the biggest user
    return [
        pod_sample(burstable, cpu=3.0),
        pod_sample(PodBuilder("be-a").build(), cpu=0.5),
        pod_sample(PodBuilder("be-b").build(), cpu=0.8),
    ]


def evicted(result) -> list[str]:
    return [a.pod for a in result.actions]


@pytest.mark.parametrize("plan_function", [plan, naive_plan])
@pytest.mark.parametrize(
    ("node_cpu", "expected"),
    [
        (5.0, []),  # not above the 5-core line
        # gap 6.0 - 5 = 1.0; BestEffort candidates by cpu: be-b 0.8 (0.2 left), be-a 0.5 -> closed.
        (6.0, ["default/be-b", "default/be-a"]),
        # gap 4.0: both BestEffort pods free 1.3, GapNotClosed; web (Burstable, 3 cores) is never evicted.
        (9.0, ["default/be-b", "default/be-a"]),
    ],
)
def test_burstable_pod_is_not_evicted_when_podqos_allows_only_besteffort(plan_function, node_cpu, expected):
    policy, pod_qos, action = crane()
    result = plan_function(
        [policy],
        [action],
        node_sample(cpu=node_cpu),
        pods(),
        AgentState(),
        now=0.0,
        assume_fired=True,
        pod_qos=[pod_qos],
    )
    assert evicted(result) == expected
    if node_cpu > 5.0:
        assert result.candidates["evict"] == ("default/be-b", "default/be-a")
    if plan_function is plan:  # naive_plan acts on every candidate and reports no gap
        assert any(e.reason == "GapNotClosed" for e in result.events) == (node_cpu == 9.0)


def test_the_same_rule_as_a_nodeqosensurancepolicy_acts_on_every_pod():
    # Crane before v0.8 had no PodQOS: every eligible pod is a candidate, so web's 3 cores go too.
    policy, pod_qos, action = crane()
    legacy = NodeQOSEnsurancePolicy.model_validate(
        {**policy.model_dump(by_alias=True), "kind": "NodeQOSEnsurancePolicy"}
    )
    result = plan(
        [legacy], [action], node_sample(cpu=9.0), pods(), AgentState(), now=0.0, assume_fired=True, pod_qos=[pod_qos]
    )
    assert "default/web" in evicted(result)


def test_pods_no_podqos_selects_are_never_acted_on():
    # Crane v0.8+: without a PodQOS listing the action, a NodeQOS rule has no candidate at all.
    policy, _, action = crane()
    result = plan([policy], [action], node_sample(cpu=9.0), pods(), AgentState(), now=0.0, assume_fired=True)
    assert result.actions == ()
    assert result.candidates["evict"] == ()
    assert any(e.reason == "GapNotClosed" for e in result.events)


def test_a_podqos_listing_another_action_does_not_allow_eviction():
    policy, pod_qos, action = crane()
    throttle_only = PodQOS.model_validate(
        {
            **pod_qos.model_dump(by_alias=True),
            "spec": {**pod_qos.model_dump(by_alias=True)["spec"], "allowedActions": ["throttle"]},
        }
    )
    result = plan(
        [policy],
        [action],
        node_sample(cpu=9.0),
        pods(),
        AgentState(),
        now=0.0,
        assume_fired=True,
        pod_qos=[throttle_only],
    )
    assert result.actions == ()


def test_an_unscoped_rule_for_the_same_action_widens_the_pool():
    # A legacy policy and a NodeQOS both drive "eviction": the pool is the union (as Crane merged
    # pods across actions), so web becomes a candidate through the legacy rule.
    policy, pod_qos, action = crane()
    legacy = qos_policy("legacy", rule("cpu", "cpu_total_usage", 5000, "eviction"))
    result = plan(
        [policy, legacy],
        [action],
        node_sample(cpu=9.0),
        pods(),
        AgentState(),
        now=0.0,
        assume_fired=True,
        pod_qos=[pod_qos],
    )
    assert "default/web" in result.candidates["evict"]


def test_detection_counts_the_crane_avoidance_threshold():
    # avoidanceThreshold 2: the first above-sample does not act, the second (consecutive) does.
    policy, pod_qos, action = crane()
    first = plan([policy], [action], node_sample(cpu=6.0, time=10.0), pods(), AgentState(), now=10.0, pod_qos=[pod_qos])
    assert first.actions == ()
    second = plan([policy], [action], node_sample(cpu=6.0, time=20.0), pods(), first.state, now=20.0, pod_qos=[pod_qos])
    assert evicted(second) == ["default/be-b", "default/be-a"]
