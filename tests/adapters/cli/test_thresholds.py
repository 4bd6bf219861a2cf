"""``koordpy thresholds`` through the real CLI entry point: configuration files, a chart-like dump (the
configuration files inside ConfigMaps), agent policies and Nodes; exit status 1 on a contradiction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app

runner = CliRunner()

SCHEDULER = {"apiVersion": "koordpy.io/v1alpha1", "kind": "SchedulerConfiguration", "loadAware": {}}
MANAGER = {
    "apiVersion": "koordpy.io/v1alpha1",
    "kind": "ManagerConfiguration",
    "lowNodeLoad": {"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80}},
}
POLICY = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "NodeQOSEnsurancePolicy",
    "metadata": {"name": "evict-memory"},
    "spec": {
        "objectiveEnsurances": [
            {"name": "mem", "metricRule": {"name": "memory_total_utilization", "value": 70}, "actionName": "evict"}
        ]
    },
}
EVICT = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "AvoidanceAction",
    "metadata": {"name": "evict"},
    "spec": {"eviction": {}},
}


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["thresholds", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_contradictions_exit_1_and_name_the_loop(tmp_path: Path) -> None:
    file = write(tmp_path / "all.yaml", SCHEDULER, MANAGER, POLICY, EVICT)
    code, out, _ = run("-f", file, "-o", "json")
    assert code == 1
    report = json.loads(out)
    found = {(f["loop"], tuple(f["paths"])) for f in report["findings"] if f["severity"] == "contradiction"}

    def doc(i: int) -> str:
        """How the command names the i-th document of the file."""
        return f"{file}#{i}"

    assert found == {
        (
            "scheduler → descheduler",
            (f"{doc(0)}: loadAware.usageThresholds.memory", f"{doc(1)}: lowNodeLoad.highThresholds.memory"),
        ),
        (
            "descheduler → agent",
            (
                f"{doc(1)}: lowNodeLoad.highThresholds.memory",
                f"{doc(2)}: NodeQOSEnsurancePolicy/evict-memory.spec.objectiveEnsurances[0].metricRule.value",
            ),
        ),
        (
            "scheduler → agent",
            (
                f"{doc(0)}: loadAware.usageThresholds.memory",
                f"{doc(2)}: NodeQOSEnsurancePolicy/evict-memory.spec.objectiveEnsurances[0].metricRule.value",
            ),
        ),
    }
    assert report["checked"] == {
        "scheduler": doc(0),
        "descheduler": doc(1),
        "policies": 1,
        "actions": 1,
        "nodes": 0,
    }


def test_checked_defaults_pass(tmp_path: Path) -> None:
    # The bundled balance configuration against the extender's defaults: no contradiction (notes only).
    file = write(tmp_path / "scheduler.yaml", SCHEDULER)
    code, out, _ = run("-f", file, "-f", EXAMPLES / "balance-config.yaml")
    assert code == 0, out
    assert "contradiction" not in out
    assert out.splitlines()[1].startswith("note: scheduler → descheduler: the extender estimates a new pod at 85 %")


def test_configmaps_as_the_chart_renders_them(tmp_path: Path) -> None:
    configmaps = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"koordpy-{name}", "namespace": "koordpy-system"},
            "data": {"config.yaml": yaml.safe_dump(config)},
        }
        for name, config in (("scheduler", SCHEDULER), ("manager", MANAGER))
    ]
    file = write(tmp_path / "rendered.yaml", *configmaps)
    code, out, _ = run("-f", file)
    assert code == 1
    assert (
        "contradiction: scheduler → descheduler: ConfigMap koordpy-system/koordpy-scheduler config.yaml: "
        "loadAware.usageThresholds.memory (95) > ConfigMap koordpy-system/koordpy-manager config.yaml: "
        "lowNodeLoad.highThresholds.memory (80)"
    ) in out


def test_nodes_make_it_per_node(tmp_path: Path) -> None:
    # alloc 30 cores, capacity 32: the descheduler's 75 % of 30 (22.5 cores) is under the agent's 72 % of 32 (23.04
    # cores): no loop on this node, although 75 > 72.
    cpu_policy = {
        **POLICY,
        "spec": {
            "objectiveEnsurances": [
                {"name": "cpu", "metricRule": {"name": "cpu_total_utilization", "value": 72}, "actionName": "evict"}
            ]
        },
    }
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "30", "memory": "64Gi"}, "capacity": {"cpu": "32", "memory": "64Gi"}},
    }
    manager = {**MANAGER, "lowNodeLoad": {"highThresholds": {"cpu": 75}}}
    assert run("-f", write(tmp_path / "a.yaml", manager, cpu_policy, EVICT))[0] == 1
    assert run("-f", write(tmp_path / "b.yaml", manager, cpu_policy, EVICT, node))[0] == 0


def test_strict_fails_on_warnings(tmp_path: Path) -> None:
    deviation = {**MANAGER, "lowNodeLoad": {"useDeviationThresholds": True, "highThresholds": {"cpu": 10}}}
    file = write(tmp_path / "d.yaml", SCHEDULER, deviation)
    assert run("-f", file)[0] == 0
    assert run("-f", file, "--strict")[0] == 1


def test_bad_input(tmp_path: Path) -> None:
    code, _, err = run("-f", write(tmp_path / "two.yaml", SCHEDULER, SCHEDULER))
    assert code == 2 and "SchedulerConfiguration: 2 given" in err
    bad = {**MANAGER, "lowNodeLoad": {"highThresholds": {"cpu": 120}}}
    code, _, err = run("-f", write(tmp_path / "bad.yaml", bad))
    assert code == 2 and "lowNodeLoad.highThresholds.cpu: must be between 0 and 100" in err
    code, _, err = run("-f", write(tmp_path / "x.yaml", SCHEDULER), "-o", "yaml")
    assert code == 2 and err.startswith("error: -o: expected json or table")
