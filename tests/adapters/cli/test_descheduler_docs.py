"""docs/descheduler.md says what ``koordpy descheduler arbitrate``, ``koordpy descheduler balance`` and
``koordpy thresholds`` do: each console example prints exactly what it shows, each JSON excerpt is a true excerpt,
the configuration examples validate, the PodMigrationJob examples are valid jobs (of both modes, and the one a
planned move becomes), and the status says what is not built."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.files import read_documents
from koordpy.cli.main import app
from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.crds.podmigrationjob import PodMigrationJobSpec
from koordpy.descheduler.arbitration import GANG_FILTERS, NON_RETRYABLE_FILTERS, RETRYABLE_FILTERS
from koordpy.descheduler.lownodeload import migration_job
from koordpy.descheduler.lownodeload.offline import balance_report
from koordpy.model.durations import parse_rfc3339

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "descheduler.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _invoke(args: list[str], code: int = 0) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == code, result.stderr
    return result.stdout


CONSOLE = re.findall(r"```console\n(.*?)```", DOC, flags=re.S)


@pytest.mark.parametrize("block", CONSOLE, ids=[b.split("\n", 1)[0] for b in CONSOLE])
def test_console_example_prints_exactly_what_the_page_shows(block: str) -> None:
    first, *expected = block.rstrip("\n").split("\n")
    argv = shlex.split(first.removeprefix("$ "))
    # koordpy thresholds exits 1 on a contradiction, as the page says
    code = 1 if argv[1] == "thresholds" and any(line.startswith("contradiction:") for line in expected) else 0
    assert _invoke(argv[1:], code).rstrip("\n").split("\n") == expected


def test_every_tool_has_its_example() -> None:
    assert [tuple(shlex.split(b.split("\n", 1)[0].removeprefix("$ "))[1:3]) for b in CONSOLE] == [
        ("descheduler", "arbitrate"),
        ("thresholds", "-f"),
        ("descheduler", "balance"),
    ]


JSON = re.findall(r"```json\n(.*?)```", DOC, flags=re.S)


def test_json_excerpt_is_part_of_the_real_output() -> None:
    (block,) = [b for b in JSON if "pmj-" in b]
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


def test_balance_json_excerpt_is_a_move_of_the_real_output() -> None:
    (block,) = [b for b in JSON if '"destination"' in b]
    stdout = _invoke(
        [
            "descheduler",
            "balance",
            "-f",
            "src/koordpy/examples/balance-dump.yaml",
            "--config",
            "src/koordpy/examples/balance-config.yaml",
            "--now",
            "2027-03-01T10:00:00Z",
            "-o",
            "json",
        ]
    )
    assert json.loads(block) in json.loads(stdout)["moves"]


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S)


def test_low_node_load_example_validates() -> None:
    (block,) = [b for b in _yaml_blocks() if "lowNodeLoad:" in b]
    config = validate(ManagerConfiguration, yaml.safe_load(block))
    assert config.descheduling_interval_seconds == 10.0
    assert config.low_node_load is not None
    default, batch = config.low_node_load.pools
    assert (default.high, batch.name, batch.high, batch.low) == (
        {"cpu": 75, "memory": 95},
        "batch",
        {"cpu": 85, "memory": 95},
        {"cpu": 45, "memory": 55},
    )


def test_the_planned_move_job_is_what_migration_job_makes() -> None:
    (block,) = [b for b in _yaml_blocks() if "LowNodeLoad" in b and "PodMigrationJob" in b]
    shown = yaml.safe_load(block)
    manager = validate(
        ManagerConfiguration,
        yaml.safe_load(Path("src/koordpy/examples/balance-config.yaml").read_text(encoding="utf-8")),
    )
    assert manager.low_node_load is not None
    result, _ = balance_report(
        read_documents([Path("src/koordpy/examples/balance-dump.yaml")]),
        args=manager.low_node_load,
        migration=manager.migration_controller,
        scheduler=validate(SchedulerConfiguration, {}),
        now=parse_rfc3339("2027-03-01T10:00:00Z"),
    )
    move = next(m for m in result.moves if m.pod == "shop/api-2")
    assert migration_job(move, shown["metadata"]["name"], validate(MigrationControllerArgs, {})) == shown
    PodMigrationJobSpec.model_validate(shown["spec"])


def test_the_status_says_the_manager_does_not_run_the_round() -> None:
    status = DOC.split("\n\n", 2)[1]
    assert "the manager\ndoes not run the balance round yet, so no plugin files PodMigrationJobs" in status


def test_migration_examples_are_pod_migration_jobs_of_both_modes() -> None:
    blocks = [b for b in _yaml_blocks() if "PodMigrationJob" in b and "LowNodeLoad" not in b]
    jobs = [yaml.safe_load(block) for block in blocks]
    for job in jobs:
        PodMigrationJobSpec.model_validate(job["spec"])
        assert (job["kind"], job["spec"]["podRef"]["name"]) == ("PodMigrationJob", "web-1")
    # mode unset is defaultJobMode, ReservationFirst
    assert [job["spec"].get("mode") for job in jobs] == ["EvictDirectly", None]
