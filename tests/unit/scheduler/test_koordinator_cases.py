"""Koordinator's own LoadAwareScheduling unit-test expectations, replayed through ``koordpy scheduler explain``.

Each ``tests/fixtures/koordinator/*.yaml`` is one upstream case: a comment header naming the Go file,
commit and test, with the arithmetic; a ``SchedulerConfiguration`` (the Go test's args under
``loadAware``); an ``ExpectedExplain`` (pod, ``--now``, per-node verdict/reason/score); then the
Nodes, Pods and NodeMetrics exactly as the Go test builds them, with Go's ``time.Now()`` pinned to
``now``. The whole file is passed to the real CLI with ``-f`` (the two non-Kubernetes kinds are
ignored by explain) and the configuration document is written to its own ``--config`` file.
The Go tests run the plugin alone, so kube-scheduler's in-tree filters are off (``--no-in-tree``:
their nodes list no ``allocatable.pods``, which NodeResourcesFit would refuse).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "koordinator"
CASES = sorted(FIXTURES.glob("*.yaml"))
runner = CliRunner()


def _split(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    config = [d for d in docs if d.get("kind") == "SchedulerConfiguration"]
    expected = [d for d in docs if d.get("kind") == "ExpectedExplain"]
    assert len(config) == 1 and len(expected) == 1, f"{path.name}: needs one configuration and one expectation"
    return config[0], expected[0]


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30


def test_every_case_names_its_upstream_source() -> None:
    for path in CASES:
        head = path.read_text(encoding="utf-8").split("\n---", 1)[0]
        assert "koordinator" in head.lower() and "commit " in head and "Go test:" in head, path.name


@pytest.mark.parametrize("fixture", CASES, ids=[p.stem for p in CASES])
def test_explain_matches_koordinator(fixture: Path, tmp_path: Path) -> None:
    config, expected = _split(fixture)
    config_file = tmp_path / "scheduler.yaml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    args = ["scheduler", "explain", "-f", str(fixture), "--pod", expected["pod"], "--now", expected["now"]]
    result = runner.invoke(app, [*args, "-o", "json", "--config", str(config_file), "--no-in-tree"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    rows = {row["name"]: row for row in out["nodes"]}
    assert set(rows) == set(expected["nodes"])
    for name, want in expected["nodes"].items():
        row = rows[name]
        assert row["feasible"] is want["feasible"], (name, row)
        if want["feasible"]:
            assert [{k: f[k] for k in ("plugin", "reason", "unresolvable")} for f in row["failures"]] == []
            if "score" in want:
                assert row["scores"] == {"LoadAwareScheduling": want["score"]}
                assert row["extenderScore"] == want["score"] // 10
        else:
            assert [{k: f[k] for k in ("plugin", "reason", "unresolvable")} for f in row["failures"]] == [
                {"plugin": "LoadAwareScheduling", "reason": want["reason"], "unresolvable": False}
            ]
            assert row["scores"] == {}
