"""``koordpy simulate --starving`` end to end: the bundled scenario's acceptance, determinism, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app

DOC = Path(__file__).resolve().parents[3] / "docs" / "reservations.md"

# Three 8-core nodes kept busy by 1-core pods of 1 to 3 minutes for 20 minutes; one big pod.
SMALL: dict[str, Any] = {
    "kind": "StarvingScenario",
    "name": "cli-starving",
    "seed": 2,
    "durationSeconds": 1800,
    "nodes": {"count": 3, "allocatable": {"cpu": "8", "memory": "32Gi"}},
    "smallPods": {
        "ratePerSecond": 0.15,
        "endSeconds": 1200,
        "lifetimeSeconds": [60, 180],
        "shapes": [{"requests": {"cpu": "1", "memory": "1Gi"}}],
    },
    "bigJobs": [
        {
            "name": "big",
            "arrivalSeconds": 120,
            "requests": {"cpu": "8"},
            "lifetimeSeconds": 300,
            "priority": 1000,
            "priorityClassName": "high",
        }
    ],
    "reservation": {"starvingJobTimeThreshold": 60, "reservedNodePercent": 34},
}


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("starving")
    result = CliRunner().invoke(app, ["simulate", "--starving", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output, out


def test_bundled_big_jobs_start_far_sooner_with_reservations(bundled: tuple[str, Path]) -> None:
    output, out = bundled
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["kind"], summary["scenarioKind"]) == ("SimulationSummary", "StarvingScenario")
    assert summary["scenario"] == "starving" and summary["nodes"] == 20
    assert summary["reservation"]["enabled"] is True and summary["reservation"]["reservedNodePercent"] == 20
    assert list(summary["policies"]) == ["koordpy", "baseline"]
    koordpy, baseline = summary["policies"]["koordpy"], summary["policies"]["baseline"]
    assert [koordpy["policy"], baseline["policy"]] == ["koordpy", "baseline"]
    assert koordpy["bigJobs"] == baseline["bigJobs"] == 6
    assert koordpy["bigJobsNeverStarted"] == 0
    # clearly lower: the slowest job with reservations starts before the quickest one without
    assert koordpy["bigJobStartLatencyMaxSeconds"] < min(j["latencySeconds"] for j in baseline["jobs"])
    assert koordpy["bigJobStartLatencyP50Seconds"] * 5 < baseline["bigJobStartLatencyP50Seconds"]
    # the costs are there and reported
    assert koordpy["idleHeldCpuSeconds"] > 0 == baseline["idleHeldCpuSeconds"]
    assert koordpy["smallPendingP95Seconds"] > baseline["smallPendingP95Seconds"]
    assert 0 < koordpy["maxNodesHeld"] <= 4  # 20 % of 20 nodes
    assert koordpy["smallPods"] == baseline["smallPods"] > 5000  # one shared stream
    assert "big-job start latency p50 (s)" in output and "idle held capacity (cpu·s)" in output


def _doc_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert "## Simulator: the starving scenario" in text, "docs/reservations.md: section missing"
    return text.split("## Simulator: the starving scenario", 1)[1].split("\n## ", 1)[0]


def test_docs_name_every_summary_key(bundled: tuple[str, Path]) -> None:
    _, out = bundled
    summary = json.loads((out / "summary.json").read_text())
    section = _doc_section()
    keys = ["reservation", *summary["policies"]["koordpy"]]
    assert [k for k in keys if f"`{k}`" not in section] == []


def test_docs_figures_are_the_bundled_runs(bundled: tuple[str, Path]) -> None:
    """The table in docs/reservations.md quotes the committed scenario's run (seed 2)."""
    _, out = bundled
    policies = json.loads((out / "summary.json").read_text())["policies"]
    koordpy, baseline = policies["koordpy"], policies["baseline"]
    section = _doc_section()
    assert f"| big-job start latency p50 | {koordpy['bigJobStartLatencyP50Seconds']:,.0f} s" in section
    assert f"| {baseline['bigJobStartLatencyP50Seconds']:,.0f} s" in section
    assert f"| big-job start latency max | {koordpy['bigJobStartLatencyMaxSeconds']:,.0f} s" in section
    assert f"| {baseline['bigJobStartLatencyMaxSeconds']:,.0f} s" in section
    assert f"| {koordpy['idleHeldCpuSeconds']:,.0f} cpu·s ({koordpy['idleHeldCpuPercent']:g} %" in section
    small = f"{koordpy['smallPendingP50Seconds']:g} s / {koordpy['smallPendingP95Seconds']:.0f} s"
    assert small in section
    assert f"| Reservations created | {koordpy['reservationsCreated']} " in section


def _box(svg: str, css_class: str) -> tuple[float, float, float, float]:
    match = re.search(rf'<rect class="{css_class}" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg)
    assert match is not None, css_class
    x, y, w, h = (float(v) for v in match.groups())
    return x, y, w, h


def test_report_has_three_charts_whose_legend_stays_above_the_plot(bundled: tuple[str, Path]) -> None:
    _, out = bundled
    report = (out / "report.html").read_text()
    charts = re.findall(r"<svg.*?</svg>", report, flags=re.S)
    assert len(charts) == 3
    for svg in charts:
        _, legend_y, _, legend_h = _box(svg, "legend-box")
        _, plot_y, _, _ = _box(svg, "plot-area")
        assert legend_y + legend_h <= plot_y
    assert "big jobs started: koordpy" in charts[0] and "big jobs started: baseline" in charts[0]
    assert "idle held cpu: koordpy" in charts[2]
    assert report.count("<tr><th>train-a</th>") == 1


def test_same_seed_same_outputs_and_seed_override(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SMALL), encoding="utf-8")
    outputs = []
    for name, extra in (("a", []), ("b", []), ("c", ["--seed", "3"])):
        result = CliRunner().invoke(app, ["simulate", "--starving", str(path), "--out", str(tmp_path / name), *extra])
        assert result.exit_code == 0, result.output
        outputs.append((tmp_path / name / "summary.json").read_text())
        assert (tmp_path / name / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert outputs[0] == outputs[1]
    assert (tmp_path / "a" / "report.html").read_bytes() == (tmp_path / "b" / "report.html").read_bytes()
    assert json.loads(outputs[2])["seed"] == 3 and outputs[2] != outputs[0]


def test_bad_scenario_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(SMALL | {"reservation": {"reservedNodePercent": 150}}), encoding="utf-8")
    result = CliRunner().invoke(app, ["simulate", "--starving", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert str(path) in result.output and "reservedNodePercent" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--compare", "baseline"], "--compare"), (["--migration"], "--migration and --starving")],
)
def test_options_that_do_not_go_with_starving_are_refused(tmp_path: Path, flags: list[str], named: str) -> None:
    result = CliRunner().invoke(app, ["simulate", "--starving", *flags, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and named in result.output
    assert not (tmp_path / "o").exists()
