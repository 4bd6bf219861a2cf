"""``koordpy simulate --migration`` end to end: the bundled drain, determinism, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app

SMALL: dict[str, Any] = {
    "kind": "MigrationScenario",
    "name": "cli-drain",
    "seed": 2,
    "nodes": 3,
    "drained": 1,
    "deployments": [{"count": 3, "replicas": 4}, {"count": 1, "replicas": 20}],
    "jobs": [{"count": 1, "parallelism": 3}],
}


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("migration")
    result = CliRunner().invoke(app, ["simulate", "--migration", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output, out


def test_bundled_drain_keeps_every_workload_inside_its_budget(bundled: tuple[str, Path]) -> None:
    output, out = bundled
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["kind"], summary["scenarioKind"]) == ("SimulationSummary", "MigrationScenario")
    assert summary["scenario"] == "migration" and summary["drained"] == 3 and summary["nodes"] == 12
    assert list(summary["policies"]) == ["arbitration", "evict-all"]
    arbitrated, evict_all = summary["policies"]["arbitration"], summary["policies"]["evict-all"]
    assert arbitrated["jobs"] == evict_all["jobs"] >= 300  # a few hundred PodMigrationJobs
    assert arbitrated["succeeded"] == arbitrated["jobs"] and evict_all["succeeded"] == evict_all["jobs"]
    assert arbitrated["workloadsAboveBudget"] == 0 < evict_all["workloadsAboveBudget"]
    assert arbitrated["workloadsAboveMaxMigrating"] == 0 < evict_all["workloadsAboveMaxMigrating"]
    assert arbitrated["nodesAboveMaxMigratingPerNode"] == 0 < evict_all["nodesAboveMaxMigratingPerNode"]
    budget = summary["followedWorkload"]["budget"]
    assert arbitrated["followedWorkloadPeakUnavailable"] <= budget < evict_all["followedWorkloadPeakUnavailable"]
    assert "workloads above maxUnavailablePerWorkload" in output and "wrote" in output


def test_the_table_and_the_chart_follow_the_same_worst_workload(bundled: tuple[str, Path]) -> None:
    """One workload is "the worst" everywhere: the table row, the chart and summary.json. In the bundled drain
    six 60-replica Deployments tie at 6 unavailable under arbitration, and web-082 and web-080 tie at 18
    under evict-all, so a per-mode choice would name different workloads in the two columns."""
    output, out = bundled
    followed = json.loads((out / "summary.json").read_text())["followedWorkload"]
    name = f"{followed['kind']} {followed['namespace']}/{followed['name']} ({followed['replicas']} replicas)"
    report = (out / "report.html").read_text()
    (chart,) = re.findall(r"<h2>The worst workload</h2>\n(<svg.*?</svg>)", report, flags=re.S)
    assert f"Unavailable replicas of {name}</text>" in chart
    named = [line for line in output.splitlines() + re.findall(r"<th>([^<]*)</th>", report) if "shop/" in line]
    assert named and all(name in line for line in named)  # the terminal and HTML tables name only that one
    assert len(re.findall(r"shop/web-\d+", report)) == report.count(f"shop/{followed['name']}")


def _box(svg: str, css_class: str) -> tuple[float, float, float, float]:
    match = re.search(rf'<rect class="{css_class}" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg)
    assert match is not None, css_class
    x, y, w, h = (float(v) for v in match.groups())
    return x, y, w, h


def test_report_has_two_charts_whose_legend_stays_above_the_plot(bundled: tuple[str, Path]) -> None:
    _, out = bundled
    report = (out / "report.html").read_text()
    charts = re.findall(r"<svg.*?</svg>", report, flags=re.S)
    assert len(charts) == 2
    for svg in charts:
        _, legend_y, _, legend_h = _box(svg, "legend-box")
        _, plot_y, _, _ = _box(svg, "plot-area")
        assert legend_y + legend_h <= plot_y
        assert "time since the drain started (s)" in svg and "unavailable replicas (pods)" in svg
    assert "budget (maxUnavailablePerWorkload = " in charts[0]


def test_same_seed_same_outputs_and_seed_override(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SMALL), encoding="utf-8")
    outputs = []
    for name, extra in (("a", []), ("b", []), ("c", ["--seed", "3"])):
        result = CliRunner().invoke(app, ["simulate", "--migration", str(path), "--out", str(tmp_path / name), *extra])
        assert result.exit_code == 0, result.output
        outputs.append((tmp_path / name / "summary.json").read_text())
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[2])["seed"] == 3 and outputs[2] != outputs[0]


def test_bad_scenario_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(SMALL | {"drained": 3}), encoding="utf-8")
    result = CliRunner().invoke(app, ["simulate", "--migration", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert str(path) in result.output and "drained" in result.output
    assert not (tmp_path / "o").exists()


def test_compare_is_refused_with_migration(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["simulate", "--migration", "--compare", "baseline", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--compare" in result.output
