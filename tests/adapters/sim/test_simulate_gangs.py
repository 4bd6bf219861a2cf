"""``koordpy simulate gangs``: the bundled gang scenario by name, its figures, and determinism with gangs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app

GANG_SMALL: dict[str, Any] = {
    "apiVersion": "koordpy.io/v1alpha1",
    "kind": "Scenario",
    "name": "cli-gangs",
    "duration": "1h",
    "nodePools": [{"name": "n", "count": 4, "allocatable": {"cpu": "16", "memory": "64Gi"}}],
    "workloads": [
        {
            "name": "train",
            "arrivals": {"count": 6, "end": "30m"},
            "lifetime": {"min": "10m", "max": "20m"},
            "requests": {"cpu": "8", "memory": "1Gi"},
            "usage": {"cpu": {"mean": "6"}, "memory": {"mean": "1Gi"}},
            "gang": {"members": 4, "mode": "Strict", "waitTime": "5m", "memberSpread": "2m"},
        },
        {
            "name": "sweep",
            "arrivals": {"count": 4, "end": "30m"},
            "lifetime": {"min": "10m", "max": "20m"},
            "requests": {"cpu": "4", "memory": "1Gi"},
            "usage": {"cpu": {"mean": "3"}, "memory": {"mean": "1Gi"}},
            "gang": {"members": 4, "minMember": 3, "mode": "NonStrict", "memberSpread": "1m"},
        },
    ],
    "qos": {"enabled": False},
}


def test_bundled_gangs_scenario_by_name_koordpy_binds_whole_jobs_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["simulate", "gangs", "--compare", "baseline", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "scenario gangs: 12 nodes, 260 pods" in result.stdout
    assert "partial-placement node-minutes" in result.stdout
    document = json.loads((tmp_path / "summary.json").read_text())
    assert document["scenario"] == "gangs" and document["pods"] == 260
    koordpy, baseline = document["policies"]["koordpy"], document["policies"]["baseline"]
    assert koordpy["gangJobs"] == baseline["gangJobs"] == 40
    # koordpy never binds a member of a job that has not started: its partial placement is held binds only
    assert koordpy["partialBoundNodeMinutes"] == 0.0 < koordpy["gangHolds"]
    # the baseline binds members as they fit and leaves jobs partially placed for a while
    assert baseline["partialBoundNodeMinutes"] > koordpy["partialPlacementNodeMinutes"] > 0
    assert baseline["gangHolds"] == 0 and baseline["gangReleases"] == {}
    assert koordpy["gangReleases"]["strict"] > 0 and koordpy["gangDeadlocksResolved"] > 0
    report = (tmp_path / "report.html").read_text()
    assert "Gang jobs fully running" in report and "Partial placement" in report
    # docs/simulate.md quotes this run's figures
    doc = (Path(__file__).resolve().parents[3] / "docs" / "simulate.md").read_text(encoding="utf-8")
    section = doc.split("## The `gangs` scenario (seed 1)", 1)[1].split("\n## ", 1)[0]
    for run in (koordpy, baseline):
        assert f"{run['partialPlacementNodeMinutes']:,.1f}" in section
        assert f"{run['jobStartLatencyP50Seconds']:,.1f} s / {run['jobStartLatencyMaxSeconds']:,.1f} s" in section
    assert f"{koordpy['gangHolds']:,} / {koordpy['gangReleases']['strict']:,}" in section


def test_default_scenario_has_no_gang_keys(tmp_path: Path) -> None:
    path = tmp_path / "plain.yaml"
    raw = json.loads(json.dumps(GANG_SMALL))
    for workload in raw["workloads"]:
        del workload["gang"]
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = CliRunner().invoke(app, ["simulate", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())["policies"]["koordpy"]
    assert not any(key.startswith(("gang", "partial", "jobStart")) for key in summary)
    assert "partial-placement" not in result.stdout


def test_same_seed_gives_identical_files_with_gangs(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(GANG_SMALL), encoding="utf-8")
    outputs = []
    out = tmp_path / "out"  # the same directory: stdout names it
    for _ in ("a", "b"):
        result = CliRunner().invoke(app, ["simulate", str(path), "--compare", "baseline", "--out", str(out)])
        assert result.exit_code == 0, result.output
        outputs.append((result.stdout, *((out / f).read_bytes() for f in ("summary.json", "report.html"))))
    assert outputs[0] == outputs[1]
    summary = json.loads(outputs[0][1])["policies"]
    assert summary["koordpy"]["gangJobs"] == 10 and summary["koordpy"]["gangHolds"] > 0


def test_a_file_named_like_a_bundled_scenario_wins(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    Path("gangs").write_text(yaml.safe_dump({**GANG_SMALL, "name": "local"}), encoding="utf-8")
    result = CliRunner().invoke(app, ["simulate", "gangs", "--out", "o"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("scenario local:")
