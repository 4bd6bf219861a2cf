"""``koordpy descheduler balance`` through the real CLI entry point, on the bundled balance dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app

runner = CliRunner()
DUMP = EXAMPLES / "balance-dump.yaml"
CONFIG = EXAMPLES / "balance-config.yaml"
NOW = "2027-03-01T10:00:00Z"


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["descheduler", "balance", *args])
    return result.exit_code, result.stdout, result.stderr


def report(*args: str, config: Path = CONFIG) -> dict[str, Any]:
    code, out, err = run("-f", str(DUMP), "--config", str(config), "--now", NOW, "-o", "json", *args)
    assert code == 0, err
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_exact_shape() -> None:
    got = report()
    assert set(got) == {"now", "paused", "dryRun", "pools", "moves", "kept", "stops", "unpooled"}
    (pool,) = got["pools"]
    assert set(pool) == {"name", "outcome", "resources", "counts", "capacity", "nodes"}
    for node in pool["nodes"]:
        assert {"name", "pool", "state", "schedulable", "metricAgeSeconds", "resources", "acted", "anomaly"} <= set(
            node
        )
    for move in got["moves"]:
        assert set(move) == {"pod", "node", "pool", "kind", "reason", "usage", "destination"}
        assert set(move["destination"]) == {
            "node",
            "extenderScore",
            "score",
            "candidates",
            "unfit",
            "refused",
            "after",
            "checked",
        }


def test_decisions_on_the_bundled_dump() -> None:
    got = report()
    (pool,) = got["pools"]
    assert {n["name"]: n["state"] for n in pool["nodes"]} == {
        "node-busy": "normal",
        "node-hot": "hot",
        "node-idle": "idle",
        "node-stale": "stale",
    }
    # node-hot: 13200m of 16000m (82.5 %), high 12000m: excess 1200m. The koord-batch pod goes first (800m, then
    # 12400m); db-0 (1200m, the size of the excess: score 2) is next but its StatefulSet has one replica; api-2
    # (1500m, 1/1.25 + 1 = 1.8) moves and node-hot is at 10900m: back under.
    assert [(m["pod"], m["destination"]["node"], m["reason"]) for m in got["moves"]] == [
        ("batch/report-x2k9", "node-idle", "node is overutilized, cpu usage(82.50%)>threshold(75.00%)"),
        ("shop/api-2", "node-idle", "node is overutilized, cpu usage(77.50%)>threshold(75.00%)"),
    ]
    assert [(k["pod"], k["why"].split(":")[0]) for k in got["kept"]] == [
        ("shop/db-0", "migrationController filter ExpectedReplicas")
    ]
    # capacity: node-idle's 12000 - 3200 = 8800m, less the two moved pods' 2300m
    assert pool["capacity"]["node"]["cpu"] == {"before": 8800, "left": 6500}


def test_table_names_the_moves_and_the_kept() -> None:
    code, out, err = run("-f", str(DUMP), "--config", str(CONFIG), "--now", NOW)
    assert code == 0, err
    assert "pool __default_node_pool__: balanced (hot 1, idle 1, normal 1, stale 1)" in out
    assert "shop/api-2                       node-hot         node-idle" in out
    assert "shop/db-0" in out and "ExpectedReplicas" in out
    assert "every node taken as hot for consecutiveAbnormalities rounds" in err


def test_fresh_detectors_act_on_nothing() -> None:
    got = report("--fresh")
    assert got["moves"] == []
    assert got["pools"][0]["outcome"] == "no node hot long enough (anomalyCondition)"


def test_dry_run_and_paused(tmp_path: Path) -> None:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["lowNodeLoad"]["dryRun"] = True
    path = tmp_path / "dry.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    dry = report(config=path)
    assert dry["dryRun"] is True and len(dry["moves"]) == 2
    config["lowNodeLoad"]["paused"] = True
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    paused = report(config=path)
    assert (paused["paused"], paused["moves"], paused["pools"]) == (True, [], [])


def test_limits_from_the_configuration(tmp_path: Path) -> None:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["maxNoOfPodsToEvictTotal"] = 1
    path = tmp_path / "limited.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    got = report(config=path)
    assert [m["pod"] for m in got["moves"]] == ["batch/report-x2k9"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "yaml"], "error: -o: expected json or table, got 'yaml'"),
        (["--now", "soon"], "error: --now: "),
    ],
)
def test_bad_options(args: list[str], message: str) -> None:
    code, _, err = run("-f", str(DUMP), "--config", str(CONFIG), *args)
    assert code == 2
    assert err.startswith(message)


def test_a_configuration_without_low_node_load(tmp_path: Path) -> None:
    path = tmp_path / "manager.yaml"
    path.write_text("migrationController: {maxMigratingPerNode: 2}\n", encoding="utf-8")
    code, _, err = run("-f", str(DUMP), "--config", str(path), "--now", NOW)
    assert code == 2
    assert "no lowNodeLoad section: the plugin is off" in err


def test_a_bad_configuration_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "manager.yaml"
    path.write_text("lowNodeLoad: {lowThresholds: {cpu: 80}, highThresholds: {cpu: 70}}\n", encoding="utf-8")
    code, _, err = run("-f", str(DUMP), "--config", str(path), "--now", NOW)
    assert code == 2
    assert "lowNodeLoad.lowThresholds.cpu: 80 is above highThresholds.cpu 70" in err


def test_a_bad_object_names_the_field(tmp_path: Path) -> None:
    dump = yaml.safe_load(DUMP.read_text(encoding="utf-8"))
    node = next(item for item in dump["items"] if item["kind"] == "NodeMetric")
    node["status"]["updateTime"] = "yesterday"
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump), encoding="utf-8")
    code, _, err = run("-f", str(path), "--config", str(CONFIG), "--now", NOW)
    assert code == 2
    assert "NodeMetric node-hot: status.updateTime" in err
