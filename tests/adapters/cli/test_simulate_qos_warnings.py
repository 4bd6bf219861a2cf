"""``koordpy simulate`` prints the QoS objects' warnings on stderr (Crane's NodeQOS + PodQOS example)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app

CRANE = Path(__file__).resolve().parents[2] / "fixtures" / "crane" / "be-rules.yaml"


def test_simulate_prints_object_warnings(tmp_path: Path) -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all(CRANE.read_text())}
    sched = {
        "name": "sched",
        "actionName": "disablescheduling",
        "metricRule": {"name": "cpu_total_usage", "value": 4000},
    }
    docs["NodeQOS"]["spec"]["rules"].append(sched)
    scenario = {
        "apiVersion": "koordpy.io/v1alpha1",
        "kind": "Scenario",
        "name": "warn",
        "duration": "10m",
        "nodePools": [{"name": "n", "count": 2, "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        "workloads": [
            {
                "name": "be",
                "arrivals": {"count": 4},
                "usage": {"pattern": "steady", "cpu": {"mean": "1"}, "memory": {"mean": "1Gi"}},
            }
        ],
        "qos": {
            "policies": [docs["NodeQOS"]],
            "actions": [docs["AvoidanceAction"], {"metadata": {"name": "disablescheduling"}, "spec": {}}],
            "podQOS": [docs["PodQOS"]],
        },
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = CliRunner().invoke(app, ["simulate", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: NodeQOS eviction-on-high-usage: spec.rules[1] (sched): AvoidanceAction 'disablescheduling' "
        "neither evicts nor throttles CPU (koordpy does not disable scheduling): the rule does nothing"
    ]
