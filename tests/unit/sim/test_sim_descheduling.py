"""The LowNodeLoad balance loop in the simulator: the bundled ``loop`` scenario, checked against contradictory
thresholds, and the descheduling rows of the comparison table."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from koordpy.cli.simulate import load_scenario, qos_factory
from koordpy.config.errors import ConfigError, validate
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.scenario import Scenario
from koordpy.descheduler.arbitration import EvictionFilter
from koordpy.descheduler.objects import pod_from_dict
from koordpy.sim.descheduling import pod_object
from koordpy.sim.engine import BASELINE, COMPARED, KOORDPY, Simulation
from koordpy.sim.report import render_table
from koordpy.sim.run import PolicyRun, simulate
from koordpy.sim.scenariocheck import scenario_warnings
from koordpy.sim.trace import build_trace

LOOP = Path("loop")  # the bundled scenario's name


@functools.cache
def _loop_runs() -> tuple[PolicyRun, ...]:
    scenario = load_scenario(LOOP)
    return tuple(simulate(scenario, scenario.seed, [KOORDPY, COMPARED], qos_factory))


def test_contradictory_thresholds_move_pods_again_and_checked_ones_do_not() -> None:
    checked, contradictory = (run.summary for run in _loop_runs())
    # highThresholds cpu 45 below the extender's usageThresholds 65: it places pods on nodes the descheduler
    # then drains, replacements included
    assert contradictory["deschedulerMoves"] > checked["deschedulerMoves"]
    assert contradictory["repeatMoves"] > 0
    # highThresholds cpu 70 >= 65: the nodes the extender fills stay below it; the few hot ones are drained once
    assert checked["deschedulerMoves"] > 0
    assert checked["repeatMoves"] == 0
    assert checked["deschedulerRounds"] == contradictory["deschedulerRounds"] == 2 * 60 + 1  # 2 h / 60 s, and t=0


def test_the_table_shows_the_descheduling_rows_and_a_dash_without_a_descheduler() -> None:
    scenario = load_scenario(LOOP)
    raw = scenario.model_dump(by_alias=True)
    raw["duration"] = 1200
    raw["workloads"] = raw["workloads"][:1]
    short = validate(Scenario, raw, "short")
    runs = simulate(short, short.seed, [KOORDPY, BASELINE], qos_factory)
    table = render_table(short, short.seed, runs)
    row = next(line for line in table.splitlines() if line.startswith("  repeat moves"))
    assert row.split()[-1] == "-" and row.split()[-2] == str(runs[0].summary["repeatMoves"])
    assert runs[1].summary["deschedulerMoves"] is None
    assert "descheduler moves (LowNodeLoad)" in table


def test_a_scenario_without_descheduler_has_no_descheduling_figures() -> None:
    scenario = load_scenario(LOOP)
    raw = scenario.model_dump(by_alias=True)
    raw["duration"] = 600
    raw["descheduler"] = None
    plain = validate(Scenario, raw, "plain")
    (run,) = simulate(plain, plain.seed, [KOORDPY], qos_factory)
    assert "deschedulerMoves" not in run.summary
    assert "descheduler moves" not in render_table(plain, plain.seed, [run])


def test_the_contract_check_warns_about_the_contradictory_arguments_only() -> None:
    warnings = [w for w in scenario_warnings(load_scenario(LOOP)) if w.startswith("descheduler.")]
    assert warnings and all(w.startswith("descheduler.compareLowNodeLoad: contradiction") for w in warnings)
    assert "scheduler.loadAware" in warnings[0]


def test_compared_policy_needs_the_compared_arguments() -> None:
    scenario = load_scenario(LOOP)
    raw = scenario.model_dump(by_alias=True)
    raw["descheduler"]["compareLowNodeLoad"] = None
    alone = validate(Scenario, raw, "alone")
    with pytest.raises(ValueError, match="compareLowNodeLoad"):
        Simulation(alone, build_trace(alone, 1), COMPARED, 1, None)


def test_descheduling_interval_must_be_a_multiple_of_step() -> None:
    raw = load_scenario(LOOP).model_dump(by_alias=True)
    raw["descheduler"]["deschedulingInterval"] = 45
    with pytest.raises(ConfigError, match=r"descheduler\.deschedulingInterval"):
        validate(Scenario, raw, "odd")


def test_the_simulated_pod_passes_the_evictor_filters_as_a_replicaset_pod() -> None:
    scenario = load_scenario(LOOP)
    trace = build_trace(scenario, 1)
    pod = trace.pod(0)
    raw = pod_object(pod, "api", False, scenario.start)
    parsed = pod_from_dict(raw)
    assert parsed.controller is not None and parsed.controller.kind == "ReplicaSet"
    args = MigrationControllerArgs.model_validate({"defaultJobMode": "EvictDirectly"})
    assert EvictionFilter(args, {}, {}).refuse(parsed) is None
    # without the owner reference the evictor refuses it (a bare pod): the owner is what lets it move
    raw["metadata"]["ownerReferences"] = []
    assert EvictionFilter(args, {}, {}).refuse(pod_from_dict(raw)) is not None


def test_docs_loop_table_is_what_the_loop_scenario_gives() -> None:
    """docs/simulate.md, "Descheduling and the `loop` scenario": the table's figures are this run's."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "simulate.md").read_text(encoding="utf-8")
    section = text.split("## Descheduling and the `loop` scenario", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3:
            rows[cells[0]] = cells[1:]
    checked, contradictory = (run.summary for run in _loop_runs())
    keys = {
        "node-minutes above 65% CPU": ("hotNodeMinutes", "{:,.1f}"),
        "descheduler moves": ("deschedulerMoves", "{:,}"),
        "repeat moves": ("repeatMoves", "{:,}"),
        "kept: no destination stays cool": ("podsKeptNoCoolDestination", "{:,}"),
    }
    for label, (key, fmt) in keys.items():
        assert rows[label] == [fmt.format(checked[key]), fmt.format(contradictory[key])], label
    scenario = load_scenario(LOOP)
    assert scenario.descheduler is not None and scenario.descheduler.compare_low_node_load is not None
    high = (
        scenario.descheduler.low_node_load.high_thresholds,
        scenario.descheduler.compare_low_node_load.high_thresholds,
    )
    assert rows["highThresholds cpu (lowThresholds)"][0].startswith(f"{high[0]['cpu']:g} ")
    assert rows["highThresholds cpu (lowThresholds)"][1].startswith(f"{high[1]['cpu']:g} ")
