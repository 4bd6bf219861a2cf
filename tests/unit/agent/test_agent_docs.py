"""docs/agent.md: every YAML block parses into the models it claims, and the policy example behaves as described."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from koordpy.agent.policy import ActionKind, AgentState, plan
from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import validate
from koordpy.crds.ensurance import AvoidanceAction, NodeQOSEnsurancePolicy
from koordpy_testkit.agent import node_sample, pod_sample
from koordpy_testkit.builders import PodBuilder

DOC = Path(__file__).resolve().parents[3] / "docs" / "agent.md"
GiB = 1 << 30


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_policy_example_validates_and_acts_as_documented():
    docs = list(yaml.safe_load_all(blocks("yaml")[0]))
    policies = [
        validate(NodeQOSEnsurancePolicy, d, "docs/agent.md") for d in docs if d["kind"] == "NodeQOSEnsurancePolicy"
    ]
    actions = [validate(AvoidanceAction, d, "docs/agent.md") for d in docs if d["kind"] == "AvoidanceAction"]
    assert [a.metadata.name for a in actions] == ["throttle", "evict"]
    labels = {"node-role.example.com/colocation": "true"}
    pods = [pod_sample(PodBuilder(n).build(), cpu=c, memory=m) for n, c, m in (("a", 2.0, GiB), ("b", 1.0, 2 * GiB))]
    state = AgentState()
    results = []
    # 16 cores, 7 in use (line 6000m): two consecutive samples are needed, then a (2.0 -> 1.6) and
    # b (1.0 -> 0.8) are throttled by 20 %: 0.4 + 0.2 = 0.6 < gap 1.0, so both; the preview rule never acts.
    for t in (0.0, 10.0):
        r = plan(
            policies, actions, node_sample(cpu=7.0, cores=16, memory=4 * GiB, time=t, labels=labels), pods, state, now=t
        )
        state = r.state
        results.append(r)
    assert results[0].actions == ()
    assert [(a.kind, a.pod) for a in results[1].actions] == [
        (ActionKind.THROTTLE, "default/a"),
        (ActionKind.THROTTLE, "default/b"),
    ]
    # The selector: a node without the label gets nothing.
    other = plan(policies, actions, node_sample(cpu=7.0, cores=16, time=20.0), pods, AgentState(), now=20.0)
    assert other.waterlines["throttle"] == {}
    # Preview: cpu 99 % fires the preview rule: an Event, no eviction.
    hot = plan(
        policies,
        actions,
        node_sample(cpu=15.9, cores=16, memory=4 * GiB, time=0.0, labels=labels),
        pods,
        AgentState(),
        now=0.0,
    )
    assert "PreviewOnly" in [e.reason for e in hot.events]
    assert all(a.kind is not ActionKind.EVICT for a in hot.actions)


def test_agent_configuration_example_validates():
    (example,) = [b for b in blocks("yaml") if "kind: AgentConfiguration" in b]
    cfg = validate(AgentConfiguration, yaml.safe_load(example), "docs/agent.md")
    assert cfg.server.port == 9316 and cfg.node_metric.aggregation_durations_seconds == (300, 600, 1800)


def test_nodeqos_podqos_example_is_cranes_and_evicts_only_besteffort():
    from koordpy.crds.ensurance import NodeQOS, PodQOS

    (example,) = [b for b in blocks("yaml") if "kind: PodQOS" in b and "cpu_total_usage" in b]
    docs = {d["kind"]: d for d in yaml.safe_load_all(example)}
    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "crane" / "be-rules.yaml"
    crane = {d["kind"]: d for d in yaml.safe_load_all(fixture.read_text())}
    # Same objects as Crane's example, minus nodeQualityProbe (accepted and ignored) and the description.
    assert docs["PodQOS"] == crane["PodQOS"]
    assert docs["NodeQOS"]["spec"]["rules"] == crane["NodeQOS"]["spec"]["rules"]
    policy = validate(NodeQOS, docs["NodeQOS"], "docs/agent.md").to_policy()
    pod_qos = validate(PodQOS, docs["PodQOS"], "docs/agent.md")
    action = validate(AvoidanceAction, docs["AvoidanceAction"], "docs/agent.md")
    burstable = pod_sample(PodBuilder("web").requests(cpu="1").build(), cpu=3.0)
    best_effort = pod_sample(PodBuilder("job").build(), cpu=1.0)
    # 6 cores > 5: gap 1; only the BestEffort pod may be evicted (1 core closes it).
    result = plan(
        [policy],
        [action],
        node_sample(cpu=6.0),
        [burstable, best_effort],
        AgentState(),
        now=0.0,
        assume_fired=True,
        pod_qos=[pod_qos],
    )
    assert [(a.kind, a.pod) for a in result.actions] == [(ActionKind.EVICT, "default/job")]


def test_pressure_rule_example_protects_every_pod_the_podqos_does_not_allow():
    from koordpy.crds.ensurance import NodeQOS, PodQOS

    (example,) = [b for b in blocks("yaml") if "pod_cpu_pressure_some_avg10" in b]
    docs = {d["kind"]: d for d in yaml.safe_load_all(example)}
    policy = validate(NodeQOS, docs["NodeQOS"], "docs/agent.md").to_policy()
    pod_qos = validate(PodQOS, docs["PodQOS"], "docs/agent.md")
    action = validate(AvoidanceAction, docs["AvoidanceAction"], "docs/agent.md")
    web = PodBuilder("web").requests(cpu="1", memory="1Gi").limits(cpu="1", memory="1Gi").priority(9000).build()
    batch = PodBuilder("batch").priority(5000).build()
    pods = [
        pod_sample(web, cpu=0.4, pressure={"cpu_pressure_some_avg10": 25.0}),
        pod_sample(batch, cpu=3.0),
    ]
    state, results = AgentState(), []
    # "20 % of the last 10 s", two consecutive samples: the batch pod (priority 5000, allowed by the PodQOS)
    # steps 50 % at the second; web (9000, not allowed) is what the rule protects.
    for t in (0.0, 1.0):
        r = plan([policy], [action], node_sample(cpu=3.4, cores=4, time=t), pods, state, now=t, pod_qos=[pod_qos])
        state = r.state
        results.append(r)
    assert results[0].actions == ()
    assert [(a.pod, a.cpu_cap) for a in results[1].actions] == [("default/batch", 1.5)]
