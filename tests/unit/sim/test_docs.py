"""The example in docs/simulate.md is a valid scenario that runs and exercises every part."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from koordpy.cli.simulate import qos_factory
from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.sim.agentqos import load_qos_objects
from koordpy.sim.engine import BASELINE, KOORDPY
from koordpy.sim.run import simulate

DOC = Path(__file__).resolve().parents[3] / "docs" / "simulate.md"
BUNDLED = Path(__file__).resolve().parents[3] / "src" / "koordpy" / "examples" / "scenario.yaml"


def _example() -> dict[str, object]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Example", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "docs/simulate.md: no yaml block under ## Example"
    raw = yaml.safe_load(block.group(1))
    assert isinstance(raw, dict)
    return raw


def test_docs_example_validates_and_runs() -> None:
    scenario = validate(Scenario, _example(), "docs/simulate.md")
    policies, actions = load_qos_objects(scenario)
    assert [p.metadata.name for p in policies] == ["cpu"] and set(actions) == {"throttle"}
    assert scenario.node_metric.aggregated_durations == [300.0]
    runs = simulate(scenario, scenario.seed, [KOORDPY, BASELINE], qos_factory)
    for run in runs:
        assert run.summary["binds"] >= 84
        assert run.summary["podsSubmitted"] == 84


def test_docs_list_every_summary_key() -> None:
    scenario = validate(Scenario, _example())
    (run,) = simulate(scenario, 1, [KOORDPY], qos_factory)
    text = DOC.read_text(encoding="utf-8")
    missing = [key for key in run.summary if f"`{key}`" not in text]
    assert missing == []


def test_bundled_example_scenario_is_the_docs_example() -> None:
    """docs/tools.md runs ``koordpy simulate src/koordpy/examples/scenario.yaml``; it must not drift from the doc."""
    assert yaml.safe_load(BUNDLED.read_text(encoding="utf-8")) == _example()
