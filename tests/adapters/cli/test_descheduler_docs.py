"""docs/descheduler.md says what ``koordpy descheduler arbitrate`` does: its console example prints exactly what
it shows, its JSON excerpt is a true excerpt, its configuration example validates, its PodMigrationJob examples
are valid jobs of both modes, and its status says what is not built."""

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
from koordpy.crds.podmigrationjob import PodMigrationJobSpec
from koordpy.descheduler.arbitration import GANG_FILTERS, NON_RETRYABLE_FILTERS, RETRYABLE_FILTERS

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


def test_configuration_examples_validate() -> None:
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S) if "migrationController" in b]
    general, gang = (validate(ManagerConfiguration, yaml.safe_load(b)).migration_controller for b in blocks)
    assert (
        general.max_migrating_per_node,
        general.max_migrating_per_workload,
        general.max_unavailable_per_workload,
    ) == (
        2,
        "20%",
        2,
    )
    # the gang example: a 4-replica StatefulSet's four members may move together
    assert (gang.max_migrating_per_workload, gang.max_unavailable_per_workload, gang.skip_check_expected_replicas) == (
        4,
        4,
        True,
    )


def test_every_filter_is_documented_and_the_status_says_what_is_not_built() -> None:
    for name in (*NON_RETRYABLE_FILTERS, *RETRYABLE_FILTERS, *GANG_FILTERS, "TTL", "ExistingJob", "WaitForGang"):
        assert f"`{name}`" in DOC, name
    assert "Not built:\npreemption for a migration's Reservation" in DOC
    assert "ReservationFirst needs the Reservation API" not in DOC


def test_migration_examples_are_pod_migration_jobs_of_both_modes() -> None:
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S) if "PodMigrationJob" in b]
    jobs = [yaml.safe_load(block) for block in blocks]
    for job in jobs:
        PodMigrationJobSpec.model_validate(job["spec"])
        assert (job["kind"], job["spec"]["podRef"]["name"]) == ("PodMigrationJob", "web-1")
    # mode unset is defaultJobMode, ReservationFirst
    assert [job["spec"].get("mode") for job in jobs] == ["EvictDirectly", None]
