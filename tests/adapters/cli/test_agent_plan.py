"""``koordpy agent plan`` through the real CLI entry point: exact shape, units, errors."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app

runner = CliRunner()
DUMP = EXAMPLES / "agent-node.yaml"
NOW = "2026-11-21T10:00:30Z"
GiB = 1 << 30


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["agent", "plan", *args])
    return result.exit_code, result.stdout, result.stderr


def test_exact_output_for_the_example():
    code, out, _ = run("-f", str(DUMP), "--node", "node-1", "--now", NOW, "-o", "json")
    assert code == 0
    # evict line 19Gi, node 20Gi -> gap 1Gi; memory order: batch-a (3Gi) closes it and frees 0.3 cores.
    # throttle line 5000m = 5 cores, node 6.5 -> gap 1.5; minus batch-a's 0.3 = 1.2 left:
    # batch-b 1.8 x 50 % -> 0.9 freed (0.3 left), batch-c 1.2 x 50 % -> 0.6 freed: closed.
    # web (Guaranteed, 9000) and kube-proxy (kube-system) are never acted on.
    assert json.loads(out) == {
        "node": "node-1",
        "waterlines": {
            "evict": {"memory_total_usage": 19 * GiB},
            "throttle": {"cpu_total_usage": 5},
            "restore": {"cpu_total_usage": 5},
        },
        "gaps": {"evict": {"memory_total_usage": GiB}, "throttle": {"cpu_total_usage": 1.5}, "restore": {}},
        "candidates": {
            "evict": ["batch/batch-a", "batch/batch-b", "batch/batch-c", "default/web"],
            "throttle": ["batch/batch-b", "batch/batch-c", "default/web"],
            "restore": [],
        },
        "actions": [
            {"action": "evict", "pod": "batch/batch-a", "metric": "memory_total_usage", "released": 3 * GiB},
            {"action": "throttle", "pod": "batch/batch-b", "metric": "cpu_total_usage", "released": 0.9},
            {"action": "throttle", "pod": "batch/batch-c", "metric": "cpu_total_usage", "released": 0.6},
        ],
    }


def test_several_files_and_utilization_units(tmp_path):
    docs = list(yaml.safe_load_all(DUMP.read_text()))
    policy, *rest = docs
    policy["spec"]["objectiveEnsurances"] = [
        {"name": "util", "actionName": "evict", "metricRule": {"name": "cpu_total_utilization", "value": 75}}
    ]
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    (tmp_path / "rest.yaml").write_text(yaml.safe_dump_all(rest))
    code, out, _ = run(
        "-f", str(tmp_path / "policy.yaml"), "-f", str(tmp_path / "rest.yaml"), "--node", "node-1", "--now", NOW
    )
    assert code == 0
    result = json.loads(out)
    # 6.5 of 8 cores = 81.25 % -> gap 6.25 points; batch-b (1.8 cores = 22.5 %) closes it.
    assert result["gaps"]["evict"] == {"cpu_total_utilization": 6.25}
    assert result["actions"] == [
        {"action": "evict", "pod": "batch/batch-b", "metric": "cpu_total_utilization", "released": 22.5}
    ]


def test_utilization_without_node_capacity_is_missing_not_fail_open(tmp_path):
    docs = [d for d in yaml.safe_load_all(DUMP.read_text()) if d["kind"] != "Node"]
    docs[0]["spec"]["objectiveEnsurances"][0]["metricRule"] = {"name": "cpu_total_utilization", "value": 50}
    (tmp_path / "d.yaml").write_text(yaml.safe_dump_all(docs))
    code, out, err = run("-f", str(tmp_path / "d.yaml"), "--node", "node-1", "--now", NOW)
    assert code == 0
    result = json.loads(out)
    assert [a["metric"] for a in result["actions"]] == ["memory_total_usage"]
    assert "MetricMissing" in err


def test_errors_name_the_problem(tmp_path):
    code, _, err = run("-f", str(DUMP), "--node", "node-9", "--now", NOW)
    assert code == 2 and "no NodeMetric named 'node-9'" in err
    docs = list(yaml.safe_load_all(DUMP.read_text()))
    docs[1]["spec"]["throttle"]["cpuThrottle"]["stepCPURatio"] = 150
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump_all(docs))
    code, _, err = run("-f", str(tmp_path / "bad.yaml"), "--node", "node-1", "--now", NOW)
    assert code == 2 and "spec.throttle.cpuThrottle.stepCPURatio" in err and "bad.yaml" in err
    code, _, err = run("-f", str(DUMP), "--node", "node-1", "-o", "table")
    assert code == 2 and "-o" in err
    code, _, err = run("-f", str(DUMP), "--node", "node-1", "--now", "yesterday")
    assert code == 2 and "--now" in err


def test_missing_batch_metrics_never_evict_the_guaranteed_prod_pod(tmp_path):
    # The example with the batch pods' podsMetric entries gone: memory gap 1 GiB; before the fix the
    # only pod with a metric, web (Guaranteed, priority 9000), was evicted. Now nothing is: the walk
    # stops at batch-a (BestEffort, 5000, usage unknown) and says why.
    docs = list(yaml.safe_load_all(DUMP.read_text()))
    metric = next(d for d in docs if d["kind"] == "NodeMetric")
    metric["status"]["podsMetric"] = [p for p in metric["status"]["podsMetric"] if p["namespace"] != "batch"]
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(docs))
    code, out, err = run("-f", str(tmp_path / "dump.yaml"), "--node", "node-1", "--now", NOW)
    assert code == 0, err
    result = json.loads(out)
    assert [a for a in result["actions"] if a["action"] == "evict"] == []
    assert "default/web" not in {a["pod"] for a in result["actions"]}
    assert "note: PodMetricMissing batch/batch-a" in err
    assert "note: GapNotClosed" in err
