"""``koordpy scheduler reservations`` through the real CLI entry point, on the bundled reservations dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app

runner = CliRunner()
DUMP = EXAMPLES / "reservations-dump.yaml"
CONFIG = EXAMPLES / "reservations-config.yaml"
NOW = "2026-11-23T12:00:00Z"


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["scheduler", "reservations", *args])
    return result.exit_code, result.stdout, result.stderr


def report(*args: str) -> dict[str, Any]:
    code, out, err = run("-f", str(DUMP), "-o", "json", *args)
    assert code == 0, err
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_exact_report_on_the_bundled_dump() -> None:
    got = report("--config", str(CONFIG), "--now", NOW)
    assert got == {
        # batch/big: created 11:30, now 12:00 → waited 1800 s > 300 s; not bound, nothing reserved.
        "starving": [
            {"job": "batch/big", "priority": 1000, "waitingSeconds": 1800, "minMember": 1, "ready": 0, "reserved": 0}
        ],
        "reservations": [
            {
                "name": "old-hold",
                "job": None,
                "node": "node-b",
                "phase": "Failed",
                "requests": {"cpu": "1", "memory": "1Gi"},
            },
            # cap: floor(2 nodes × 50 / 100) = 1 node; node-b (2 cpu) can never hold 3 cpu; node-a can once it drains.
            {
                "name": "starving-batch-big-0",
                "job": "batch/big",
                "node": "node-a",
                "phase": "Waiting",
                "requests": {"cpu": "3", "memory": "3Gi"},
            },
            # node-b: 2 − 1 (web-1) − 0.5 (etl) = 0.5 cpu free, exactly the template's 500m.
            {
                "name": "web-canary",
                "job": None,
                "node": "node-b",
                "phase": "Available",
                "requests": {"cpu": "500m", "memory": "1Gi"},
            },
        ],
        "actions": [
            {
                "action": "delete",
                "reservation": "starving-batch-etl-0",
                "node": "node-b",
                "reason": "job batch/etl is Ready (1/1 members bound)",
            },
            {
                "action": "place",
                "reservation": "old-hold",
                "node": "node-b",
                "reason": "Failed: expired at 2026-11-23T11:00:00Z",
            },
            {
                "action": "place",
                "reservation": "web-canary",
                "node": "node-b",
                "reason": "Available: placed on node-b (node score 10.00): free resources cover the template",
            },
            {
                "action": "create",
                "reservation": "starving-batch-big-0",
                "node": "node-a",
                # node-a: free cpu 3 − 3 = 0 → s_cpu = 0, s_memory = 0 → score 0.00
                "reason": "starving job batch/big (priority 1000, waiting 1800s): placed on node-a "
                "(node score 0.00): waiting for the node's pods to leave",
            },
        ],
    }


def test_defaults_report_starving_jobs_but_create_nothing() -> None:
    # Default config: enabled false, threshold 600 s (1800 s waited: still starving), cap 20 % of 2 = 0 nodes.
    got = report("--now", NOW)
    assert [s["job"] for s in got["starving"]] == ["batch/big"]
    assert [a["action"] for a in got["actions"]] == ["delete", "place", "place"]
    assert "starving-batch-big-0" not in {r["name"] for r in got["reservations"]}


def test_zero_percent_creates_nothing(tmp_path: Path) -> None:
    config = tmp_path / "manager.yaml"
    config.write_text(
        yaml.safe_dump({"reservation": {"enabled": True, "starvingJobTimeThreshold": 300, "reservedNodePercent": 0}}),
        encoding="utf-8",
    )
    got = report("--config", str(config), "--now", NOW)
    assert got["starving"][0]["job"] == "batch/big"
    assert [a for a in got["actions"] if a["action"] == "create"] == []


def test_default_now_is_the_newest_timestamp_and_says_so() -> None:
    # Newest timestamp in the dump: small-5 created 11:58 → big waited 1680 s.
    code, out, err = run("-f", str(DUMP), "--config", str(CONFIG), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["starving"][0]["waitingSeconds"] == 1680
    assert "newest timestamp" in err


def test_table_lists_the_three_blocks() -> None:
    code, out, err = run("-f", str(DUMP), "--config", str(CONFIG), "--now", NOW)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["STARVING", "JOB", "PRIORITY", "WAITING", "MIN", "READY", "RESERVED"]
    assert lines[1].split() == ["batch/big", "1000", "1800s", "1", "0", "0"]
    assert any(line.startswith("create  starving-batch-big-0") for line in lines)


def test_bad_inputs_name_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Reservation",
                "metadata": {"name": "r"},
                "spec": {"template": {}, "owners": [{}], "ttl": "soon"},
            }
        ),
        encoding="utf-8",
    )
    code, _, err = run("-f", str(bad), "--now", NOW)
    assert code == 2
    assert f"{bad}" in err and "Reservation r: spec.ttl" in err
    code, _, err = run("-f", str(DUMP), "-o", "yaml")
    assert code == 2 and "-o: expected json or table" in err
    code, _, err = run("-f", str(DUMP), "--now", "noon")
    assert code == 2 and "--now" in err
