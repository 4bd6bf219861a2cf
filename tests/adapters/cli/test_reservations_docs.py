"""docs/reservations.md: its console example prints exactly what it shows, and its config table matches the model."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from koordpy.cli.main import app
from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.config.reservation import ReservationSettings

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "reservations.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_console_example_prints_exactly_what_the_page_shows() -> None:
    (block,) = re.findall(r"```console\n(.*?)```", DOC, flags=re.S)
    first, *expected = block.rstrip("\n").split("\n")
    argv = shlex.split(first.removeprefix("$ "))
    assert argv[:3] == ["koordpy", "scheduler", "reservations"]
    result = CliRunner().invoke(app, argv[1:])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip("\n").split("\n") == expected


def test_config_table_lists_every_key_with_its_default() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", DOC, flags=re.M))
    defaults = ReservationSettings.model_validate({}).model_dump(by_alias=True)
    assert set(rows) == set(defaults)
    for key, shown in rows.items():
        value = defaults[key]
        if isinstance(value, dict):  # a nested section shown as `{}`: all of its own defaults
            assert shown == "{}", key
            assert value == LoadAwareSchedulingArgs.model_validate({}).model_dump(by_alias=True)
            continue
        if isinstance(value, tuple | list):  # a list shown as YAML flow: `[]`
            assert shown == json.dumps(list(value)), key
            continue
        assert shown == (str(value).lower() if isinstance(value, bool) else f"{value:g}"), key
