"""``koordpy simulate`` meets a newcomer's mistakes with one line that says what to do: a misspelt bundled
scenario name lists the names, a MigrationScenario or StarvingScenario runs without its option (with a
note), and a scenario passed with the wrong option names the right one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app
from koordpy.sim.run import BUNDLED_SCENARIOS

SMALL_MIGRATION: dict[str, Any] = {
    "apiVersion": "koordpy.io/v1alpha1",
    "kind": "MigrationScenario",
    "name": "cli-drain",
    "seed": 2,
    "nodes": 3,
    "drained": 1,
    "deployments": [{"count": 3, "replicas": 4}],
    "jobs": [{"count": 1, "parallelism": 3}],
}


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(
    ("name", "hint"),
    [("gang", "; did you mean 'gangs'?"), ("migrate", "; did you mean 'migration'?"), ("nothing", "")],
)
def test_a_misspelt_bundled_name_lists_the_names(name: str, hint: str, tmp_path: Path) -> None:
    result = run("simulate", name, "--out", str(tmp_path))
    assert result.exit_code == 2
    names = ", ".join(BUNDLED_SCENARIOS)
    assert result.stderr == (
        f"error: {name}: no such file, and no bundled scenario of that name (bundled: {names}){hint}\n"
    )
    assert set(BUNDLED_SCENARIOS) == {"default", "gangs", "loop", "migration", "starving"}


def test_a_missing_file_path_is_reported_as_a_file(tmp_path: Path) -> None:
    result = run("simulate", str(tmp_path / "gang.yaml"), "--out", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'gang.yaml'}: No such file or directory\n"


def test_a_migration_scenario_runs_without_the_option(tmp_path: Path) -> None:
    scenario = tmp_path / "drain.yaml"
    scenario.write_text(yaml.safe_dump(SMALL_MIGRATION), encoding="utf-8")
    implied = run("simulate", str(scenario), "--out", str(tmp_path / "implied"))
    assert implied.exit_code == 0, implied.output
    assert implied.stderr == f"note: {scenario} is a MigrationScenario: running it as with --migration\n"
    explicit = run("simulate", "--migration", str(scenario), "--out", str(tmp_path / "explicit"))
    assert explicit.exit_code == 0, explicit.output
    assert explicit.stderr == ""
    assert json.loads((tmp_path / "implied" / "summary.json").read_text()) == json.loads(
        (tmp_path / "explicit" / "summary.json").read_text()
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["gangs", "--migration"], "a Scenario, not a MigrationScenario: run it without --migration"),
        (["migration", "--starving"], "a MigrationScenario, not a StarvingScenario: use --migration"),
    ],
)
def test_the_wrong_option_names_the_right_one(args: list[str], line: str, tmp_path: Path) -> None:
    result = run("simulate", *args, "--out", str(tmp_path))
    assert result.exit_code == 2
    (error,) = result.stderr.splitlines()
    assert error.startswith("error: ") and error.endswith(line)
    assert not (tmp_path / "summary.json").exists()


def test_compare_with_a_comparison_scenario_says_why(tmp_path: Path) -> None:
    result = run("simulate", "migration", "--compare", "baseline", "--out", str(tmp_path))
    assert (result.exit_code, result.stderr) == (
        2,
        "error: --compare: not used with a MigrationScenario (it always compares arbitration with evict-all)\n",
    )
