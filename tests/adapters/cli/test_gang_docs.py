"""docs/gang.md says what ``koordpy scheduler gangs`` does: its console example prints exactly what it shows,
its abridged JSON is a true excerpt, and it says the extender does not enforce gangs yet."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from koordpy.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "gang.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _invoke(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_console_example_prints_exactly_what_the_page_shows() -> None:
    (block,) = re.findall(r"```console\n(.*?)```", DOC, flags=re.S)
    first, *expected = block.rstrip("\n").split("\n")
    argv = shlex.split(first.removeprefix("$ "))
    assert argv[:3] == ["koordpy", "scheduler", "gangs"]
    assert _invoke(argv[1:]).rstrip("\n").split("\n") == expected


def test_abridged_json_is_an_excerpt_of_the_real_output() -> None:
    (block,) = re.findall(r"```json\n(.*?)```", DOC, flags=re.S)
    shown = json.loads(block)
    stdout = _invoke(
        [
            "scheduler",
            "gangs",
            "-f",
            "src/koordpy/examples/gangs-dump.yaml",
            "--waiting",
            "team-a/trainer-0=node-1",
            "--failed",
            "team-a/trainer-3",
            "-o",
            "json",
        ]
    )
    entry = next(g for g in json.loads(stdout)["gangs"] if g["id"] == shown["id"])
    assert {k: entry[k] for k in shown} == shown
    assert shown["permit"]["verdict"] == "reject" and shown["waiting"] == []


def test_the_page_names_each_part_of_gang_support() -> None:
    for part in (
        "## PodGroup status and Events (manager)",
        "## kube-scheduler configuration (chart)",
        "## In the extender",
    ):
        assert part in DOC
