"""The simulator holds no policy of its own: its decisions come from the functions the services import.

Two checks: spies on the load-aware plugin's filter/score and the agent's plan/naive_plan prove
they are what decides in a run; a static read of every ``koordpy.sim`` module proves it imports
them from their own modules and defines no filter, score, estimate or waterline logic itself.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import koordpy.sim
from koordpy.agent import policy as agent_policy
from koordpy.cli.simulate import load_scenario, qos_factory
from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin
from koordpy.sim import agentqos
from koordpy.sim.engine import BASELINE, KOORDPY
from koordpy.sim.run import simulate

SIM_DIR = Path(koordpy.sim.__file__).parent


def _hot_scenario(raw: dict[str, Any]) -> Scenario:
    default = load_scenario(None)
    raw["qos"] = {
        "interval": "30s",
        "policies": default.qos.policies,
        "actions": default.qos.actions,
    }
    # jobs that burn 3 cores on 1-core requests: nodes go above the waterlines
    raw["workloads"][1]["usage"] = {"pattern": "steady", "cpu": {"mean": "3"}, "memory": {"mean": "1Gi"}}
    raw["workloads"][1]["arrivals"]["count"] = 60
    return validate(Scenario, raw)


def test_runs_call_the_plugin_and_the_agent_plan(small_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()

    def spy(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(LoadAwarePlugin, "filter", spy("filter", LoadAwarePlugin.filter))
    monkeypatch.setattr(LoadAwarePlugin, "score", spy("score", LoadAwarePlugin.score))
    monkeypatch.setitem(agentqos.PLAN_FUNCTIONS, "waterline", spy("plan", agent_policy.plan))
    monkeypatch.setitem(agentqos.PLAN_FUNCTIONS, "naive", spy("naive_plan", agent_policy.naive_plan))
    scenario = _hot_scenario(small_raw)
    (koordpy_run,) = simulate(scenario, 3, [KOORDPY], qos_factory)
    assert calls["filter"] >= koordpy_run.summary["binds"] > 0  # every placement went through the plugin
    assert calls["score"] >= koordpy_run.summary["binds"]
    assert calls["plan"] > 0 and calls["naive_plan"] == 0
    assert koordpy_run.summary["throttleActions"] > 0  # and the plan's actions were applied
    before = dict(calls)
    (baseline_run,) = simulate(scenario, 3, [BASELINE], qos_factory)
    assert calls["filter"] == before["filter"] and calls["score"] == before["score"]  # baseline: requests only
    assert calls["naive_plan"] > 0
    assert baseline_run.summary["throttleActions"] > 0


def test_the_quiet_node_shortcut_changes_nothing(small_raw: dict[str, Any]) -> None:
    scenario = _hot_scenario(small_raw)
    policies, actions = agentqos.load_qos_objects(scenario)
    results = []
    planners = []
    for gate in (True, False):

        def factory(s: Scenario, p: Any, gate: bool = gate) -> agentqos.AgentQosPlanner:
            planner = agentqos.AgentQosPlanner(p.qos, policies, actions, agentqos.PLAN_FUNCTIONS[p.qos], gate=gate)
            planners.append(planner)
            return planner

        (run,) = simulate(scenario, 3, [KOORDPY], factory)
        results.append(run.summary)
    gated, every = ({k: v for k, v in r.items() if k != "qosPlans"} for r in results)
    assert gated == every
    assert gated["throttleActions"] > 0
    assert results[0]["qosPlans"] == planners[0].plans < planners[1].plans == results[1]["qosPlans"]


def _modules() -> list[tuple[str, ast.Module]]:
    return [(path.name, ast.parse(path.read_text())) for path in sorted(SIM_DIR.glob("*.py"))]


def test_sim_imports_the_policy_from_its_own_modules() -> None:
    imported: dict[str, set[str]] = {}
    for _, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.setdefault(node.module, set()).update(a.name for a in node.names)
    assert "ClusterState" in imported["koordpy.scheduler.framework.cluster"]
    assert "build_plugins" in imported["koordpy.scheduler.profile"]
    assert {"plan", "naive_plan"} <= imported["koordpy.agent.policy"]
    # gang decisions come from the gang model's public GangCache (its package, not its modules) ...
    assert "GangCache" in imported["koordpy.scheduler.plugins.gang"]
    # ... reservations from the manager's decision, the ledger and the extender's enforcement ...
    assert "decide" in imported["koordpy.scheduler.plugins.reservation.controller"]
    assert "reserved_verdict" in imported["koordpy.scheduler.plugins.reservation.ledger"]
    assert "owner_prefers" in imported["koordpy.scheduler.plugins.reservation.enforcement"]
    # ... and nothing from the plugin internals (estimator, thresholds, gang state, reservation
    # placement or starving rules) is re-used piecemeal
    plugins = {m for m in imported if m.startswith("koordpy.scheduler.plugins")}
    assert plugins == {
        "koordpy.scheduler.plugins.gang",
        "koordpy.scheduler.plugins.gang.keys",
        "koordpy.scheduler.plugins.reservation.controller",
        "koordpy.scheduler.plugins.reservation.enforcement",
        "koordpy.scheduler.plugins.reservation.ledger",
        "koordpy.scheduler.plugins.reservation.spec",
    }


FORBIDDEN_NAMES = {"filter", "score", "estimate_pod", "estimate_node", "waterline", "gaps", "detect", "go_round"}
FORBIDDEN_ATTRIBUTES = {
    "usage_thresholds",
    "prod_usage_thresholds",
    "estimated_scaling_factors",
    "resource_weights",
    "avoidance_threshold",
    "restore_threshold",
    "min_cpu_ratio",
    "step_cpu_ratio",
}


def test_sim_defines_no_filter_score_or_waterline_logic() -> None:
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.name not in FORBIDDEN_NAMES, f"{name}: defines {node.name}()"
            if isinstance(node, ast.Attribute):
                assert node.attr not in FORBIDDEN_ATTRIBUTES, f"{name}: reads .{node.attr}"
