"""``koordpy scheduler explain`` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder

runner = CliRunner()
DUMP = EXAMPLES / "cluster-dump.yaml"
NOW = "2026-11-21T10:01:00Z"


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["scheduler", "explain", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_output_has_the_exact_shape() -> None:
    code, out, _ = run("-f", str(DUMP), "--pod", "default/web-new", "--now", NOW, "-o", "json")
    assert code == 0
    result = json.loads(out)
    # the original keys stay; later additions are listed so that a rename cannot pass unnoticed
    assert set(result) == {"pod", "nodes", "selected"} | {
        "schedulable",
        "notes",
        "boundTo",
        "wouldSelect",
        "now",
        "nowFrom",
        "gang",
    }
    assert result["gang"] is None  # web-new is in no gang
    assert result["pod"] == "default/web-new"
    assert [n["name"] for n in result["nodes"]] == [
        "node-a",
        "node-b",
        "node-c",
        "node-d",
        "node-e",
        "node-f",
        "node-g",
    ]
    for node in result["nodes"]:
        assert set(node) == {"name", "feasible", "failures", "scores", "extenderScore"} | {
            "fit",
            "loadAware",
            "reservation",
        }
        assert 0 <= node["extenderScore"] <= 10
        if node["feasible"]:
            assert node["failures"] == []
            assert 0 <= node["scores"]["LoadAwareScheduling"] <= 100
            assert node["extenderScore"] == node["scores"]["LoadAwareScheduling"] // 10
        else:
            assert node["scores"] == {}
            assert set(node["failures"][0]) == {"plugin", "reason", "unresolvable"} | {"detail"}
    by_name = {n["name"]: n for n in result["nodes"]}
    assert by_name["node-a"]["failures"][0]["reason"] == "node(s) cpu usage exceed threshold"
    assert by_name["node-d"]["failures"][0]["reason"] == "node(s) nodeMetric expired"
    # kube-scheduler's in-tree filters: node-f is cordoned, node-g has 14 of 15.92 cores requested (db-0)
    assert by_name["node-f"]["failures"][0]["plugin"] == "NodeUnschedulable"
    assert by_name["node-g"]["failures"][0]["detail"] == "Insufficient cpu: requested 2, free 1.92 of 15.92"
    best = max((n for n in result["nodes"] if n["feasible"]), key=lambda n: n["scores"]["LoadAwareScheduling"])
    assert result["selected"] == best["name"] == "node-e"


def test_recently_placed_pods_count_against_a_cold_node(tmp_path: Path) -> None:
    # node-c reports 2 cpu but three fresh pods (req 4, lim 6 cpu) were just placed there:
    # each estimates 6c*85% = 5.1c; 2c + 15.3c + incoming 3.4c = 20.7c of 32 -> 64.7% -> 65 -> passes,
    # but scores far below what its raw usage alone would give.
    code, out, _ = run("-f", str(DUMP), "--pod", "default/web-new", "--now", NOW, "-o", "json")
    assert code == 0
    node_c = next(n for n in json.loads(out)["nodes"] if n["name"] == "node-c")
    # cpu: (32 - 20.7) * 100 // 32 = 35; memory: 8Gi + 3*5.6Gi + 2.8Gi = 27.6Gi of 128Gi -> 78; (35 + 78) // 2 = 56
    assert node_c["scores"]["LoadAwareScheduling"] == 56


def test_the_pods_own_node_name_is_ignored_and_terminated_pods_do_not_count(tmp_path: Path) -> None:
    docs = [
        NodeBuilder("n1").allocatable(cpu="10", memory="10Gi", pods="110").build(),
        NodeMetricBuilder("n1").updated(1795255200.0).usage(cpu="6", memory="1Gi").build(),
        PodBuilder("me").requests(cpu="1").node("n1").build(),  # already "placed": ignored
        PodBuilder("done").requests(cpu="8").limits(cpu="8").node("n1").phase("Succeeded").build(),
    ]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code, out, _ = run("-f", str(path), "--pod", "default/me", "--now", "2026-11-21T10:00:30Z", "-o", "json")
    assert code == 0
    # 6c + 0.85c = 6.85c of 10 -> 68.5 -> 69 > 65: fails on its own estimate only
    assert json.loads(out)["nodes"][0]["failures"][0]["reason"] == "node(s) cpu usage exceed threshold"


def test_config_file_is_the_extenders(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: koordpy.io/v1alpha1\nkind: SchedulerConfiguration\nloadAware:\n  usageThresholds: {cpu: 90}\n"
    )
    code, out, _ = run("-f", str(DUMP), "--pod", "default/web-new", "--now", NOW, "-o", "json", "--config", str(config))
    assert code == 0
    assert next(n for n in json.loads(out)["nodes"] if n["name"] == "node-a")["feasible"] is True


def test_list_and_json_inputs_and_ignored_kinds(tmp_path: Path) -> None:
    items = [
        NodeBuilder("n1").allocatable(cpu="10", memory="10Gi", pods="110").build(),
        PodBuilder("p").build(),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
    ]
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = run("-f", str(path), "--pod", "default/p", "--now", NOW, "-o", "json")
    assert code == 0
    assert json.loads(out)["selected"] == "n1"  # no NodeMetric: passes, scores 0
    assert "ignored 1 object(s) of kind ConfigMap" in err


def test_table_output() -> None:
    code, out, _ = run("-f", str(DUMP), "--pod", "default/web-new", "--now", NOW)
    assert code == 0
    assert "selected node-e" in out
    assert "node(s) nodeMetric expired" in out


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: lots}}\n", [], "status.allocatable.cpu"),
        ("- just\n- a list\n", [], "expected a Kubernetes object"),
        ("metadata: {name: x}\n", [], "kind: required"),
        ("kind: [unclosed\n", [], "invalid YAML at line"),
        ("kind: Node\nmetadata: {name: n1}\n", ["--pod", "default/missing"], "pod default/missing is not in the input"),
        ("kind: Node\nmetadata: {name: n1}\n", ["--pod", "nonamespace"], "expected NAMESPACE/NAME"),
        ("kind: Node\nmetadata: {name: n1}\n", ["--now", "tomorrow"], "--now"),
        ("kind: Node\nmetadata: {name: n1}\n", ["-o", "xml"], "-o"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_file_and_field(
    tmp_path: Path, content: str, args: list[str], message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    argv = ["-f", str(path), "--now", NOW, "-o", "json", *args]
    if "--pod" not in args:
        argv += ["--pod", "default/p"]
    code, out, err = run(*argv)
    assert code == 2, (out, err)
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1
    if message.startswith(("status.", "expected a", "kind:", "invalid YAML")):
        assert str(path) in err


def test_bad_config_names_the_field(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("loadAware:\n  usageThresholds: {cpu: 101}\n")
    code, _, err = run("-f", str(DUMP), "--pod", "default/web-new", "--config", str(config))
    assert code == 2
    assert f"{config}: loadAware.usageThresholds.cpu: Input should be less than or equal to 100, got 101" in err


def test_missing_file_is_exit_2(tmp_path: Path) -> None:
    code, _, err = run("-f", str(tmp_path / "nope.yaml"), "--pod", "default/p")
    assert code == 2 and "nope.yaml" in err


def test_a_gang_member_names_its_gang_verdict(tmp_path: Path) -> None:
    """Gang of min 3 with 2 members in the dump: not admitted (2 of 3), permit waits; the table says so."""
    docs = [NodeBuilder("n1").allocatable(cpu="8", memory="16Gi", pods="110").build()]
    for name in ("w0", "w1"):
        raw = PodBuilder(name, "team").requests(cpu="1").build()
        raw["metadata"]["annotations"] = {
            "gang.scheduling.koordinator.sh/name": "job",
            "gang.scheduling.koordinator.sh/min-available": "3",
        }
        docs.append(raw)
    dump = tmp_path / "gang.yaml"
    dump.write_text(yaml.safe_dump_all(docs))
    code, out, _ = run("-f", str(dump), "--pod", "team/w0", "--now", NOW, "-o", "json")
    assert code == 0, out
    gang = json.loads(out)["gang"]
    assert gang["id"] == "team/job"
    assert gang["admit"] == {"ok": False, "reason": "gang team/job: 2 of 3 members exist"}
    assert gang["permit"]["verdict"] == "wait"
    code, out, _ = run("-f", str(dump), "--pod", "team/w0", "--now", NOW)
    assert code == 0
    assert "gang team/job: not admitted (gang team/job: 2 of 3 members exist); permit wait:" in out
