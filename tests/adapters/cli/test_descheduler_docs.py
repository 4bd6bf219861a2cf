"""docs/descheduler.md says what ``koordpy descheduler arbitrate`` does: its console example prints exactly what
it shows, its JSON excerpt is a true excerpt, its configuration example validates, and it says the manager does
not act on PodMigrationJobs yet."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app
from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.descheduler.arbitration import NON_RETRYABLE_FILTERS, RETRYABLE_FILTERS

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "descheduler.md").read_text(encoding="utf-8")


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
    assert argv[:3] == ["koordpy", "descheduler", "arbitrate"]
    assert _invoke(argv[1:]).rstrip("\n").split("\n") == expected


def test_json_excerpt_is_part_of_the_real_output() -> None:
    (block,) = re.findall(r"```json\n(.*?)```", DOC, flags=re.S)
    shown = json.loads(block)
    stdout = _invoke(
        [
            "descheduler",
            "arbitrate",
            "-f",
            "src/koordpy/examples/migration-dump.yaml",
            "--now",
            "2026-11-23T09:10:00Z",
            "-o",
            "json",
        ]
    )
    verdicts = json.loads(stdout)["verdicts"]
    assert {name: verdicts[name] for name in shown} == shown


def test_configuration_example_validates() -> None:
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S) if "migrationController" in b]
    cfg = validate(ManagerConfiguration, yaml.safe_load(block)).migration_controller
    assert (cfg.max_migrating_per_node, cfg.max_migrating_per_workload, cfg.max_unavailable_per_workload) == (
        2,
        "20%",
        2,
    )


def test_every_filter_is_documented_and_the_status_is_partial() -> None:
    for name in (*NON_RETRYABLE_FILTERS, *RETRYABLE_FILTERS, "TTL", "ExistingJob"):
        assert f"`{name}`" in DOC, name
    assert "**Status (partial).**" in DOC
    assert "Not built: `ReservationFirst`" in DOC


def test_migration_example_is_a_pod_migration_job() -> None:
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S) if "PodMigrationJob" in b]
    job = yaml.safe_load(block)
    assert (job["kind"], job["spec"]["mode"], job["spec"]["podRef"]["name"]) == (
        "PodMigrationJob",
        "EvictDirectly",
        "web-1",
    )
