"""The simulator runs Crane's own NodeQOS + PodQOS example through the agent's plan(); the PodQOS
limits evictions to BestEffort pods. Fixture: tests/fixtures/crane/be-rules.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.agent import policy as agent_policy
from koordpy.cli.simulate import qos_factory
from koordpy.config.errors import ConfigError, validate
from koordpy.config.scenario import Scenario
from koordpy.sim import agentqos
from koordpy.sim.engine import KOORDPY
from koordpy.sim.run import simulate

CRANE = Path(__file__).resolve().parents[2] / "fixtures" / "crane" / "be-rules.yaml"


def crane() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(CRANE.read_text())}


def scenario(**qos: Any) -> Scenario:
    raw = {
        "apiVersion": "koordpy.io/v1alpha1",
        "kind": "Scenario",
        "name": "crane",
        "seed": 1,
        "duration": "30m",
        "step": "30s",
        "nodePools": [{"name": "n", "count": 3, "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        "workloads": [
            {  # Burstable: a cpu request, no limit; 3 cores each
                "name": "burst",
                "arrivals": {"count": 6, "end": "1m"},
                "requests": {"cpu": "1", "memory": "1Gi"},
                "usage": {"pattern": "steady", "cpu": {"mean": "3"}, "memory": {"mean": "1Gi"}},
            },
            {  # BestEffort: no requests or limits; 2 cores each
                "name": "be",
                "arrivals": {"count": 6, "end": "1m"},
                "usage": {"pattern": "steady", "cpu": {"mean": "2"}, "memory": {"mean": "512Mi"}},
            },
        ],
        "qos": {"interval": "30s", **qos},
    }
    return validate(Scenario, raw)


def run_with_spy(parsed: Scenario, monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], set[str]]:
    """(workloads with a pod evicted, workloads with a pod ever an eviction candidate); pods are named
    ``<workload>-<i>[-r<attempt>]``."""
    evicted: set[str] = set()
    candidates: set[str] = set()

    def spy(*args: Any, **kwargs: Any) -> agent_policy.Plan:
        result = agent_policy.plan(*args, **kwargs)
        evicted.update(_workload(a.pod) for a in result.actions if a.kind is agent_policy.ActionKind.EVICT)
        candidates.update(_workload(key) for key in result.candidates["evict"])
        return result

    monkeypatch.setitem(agentqos.PLAN_FUNCTIONS, "waterline", spy)
    simulate(parsed, 1, [KOORDPY], qos_factory)
    return evicted, candidates


def _workload(key: str) -> str:
    return key.split("/")[1].split("-", maxsplit=1)[0]


def test_crane_pair_evicts_only_besteffort_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = crane()
    parsed = scenario(policies=[docs["NodeQOS"]], actions=[docs["AvoidanceAction"]], podQOS=[docs["PodQOS"]])
    evicted, candidates = run_with_spy(parsed, monkeypatch)
    # 6 x 3 + 6 x 2 = 30 cores on 24: some node is above the 5-core line for 2 samples.
    assert evicted == {"be"}
    assert candidates == {"be"}
    assert agentqos.scenario_qos_warnings(parsed) == []


def test_same_rules_as_nodeqosensurancepolicy_consider_every_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = crane()
    legacy = {**docs["NodeQOS"], "kind": "NodeQOSEnsurancePolicy"}
    legacy["spec"] = {"objectiveEnsurances": legacy["spec"]["rules"]}
    parsed = scenario(policies=[legacy], actions=[docs["AvoidanceAction"]], podQOS=[docs["PodQOS"]])
    _, candidates = run_with_spy(parsed, monkeypatch)
    assert "burst" in candidates  # no PodQOS scoping before Crane v0.8


def test_warnings_and_errors_name_the_scenario_path() -> None:
    docs = crane()
    nodeqos = docs["NodeQOS"]
    nodeqos["spec"]["selector"] = {"matchLabels": {"pool": "gpu"}}
    parsed = scenario(policies=[nodeqos], actions=[docs["AvoidanceAction"]])
    assert agentqos.scenario_qos_warnings(parsed) == [
        "NodeQOS eviction-on-high-usage: spec.selector matches no node: its rules never apply",
        "NodeQOS eviction-on-high-usage: spec.rules[0] (cpu-usage): no PodQOS lists 'eviction' in allowedActions: "
        "the rule acts on no pod",
    ]
    bad = scenario(podQOS=[{"metadata": {"name": "x"}, "spec": {"scopeSelector": {"matchExpressions": [{}]}}}])
    with pytest.raises(ConfigError) as err:
        agentqos.load_qos(bad)
    assert ("qos.podQOS[0].spec.scopeSelector.matchExpressions[0].scopeName", "Field required") in err.value.problems
    wrong_kind = scenario(policies=[{"kind": "PodQOS", "metadata": {"name": "x"}}])
    with pytest.raises(ConfigError, match="qos.policies\\[0\\].kind"):
        agentqos.load_qos(wrong_kind)
