"""The chart refuses exactly what ``koordpy.descheduler.contract.check_thresholds`` calls a contradiction.

The rule has one source, the Python function; the chart's template helper (``koordpy.thresholdContract``) must
agree with it. On a table of values: the real ``helm template`` fails when, and only when, the function (given
the same three configurations, without nodes, the paths the chart names them by) finds a contradiction, and its
message lists the same (loop, path, path) triples. A refused install names the field paths.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_render import CHART, NAMESPACE, RELEASE, run_helm

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, NodeQOSEnsurancePolicy
from koordpy.descheduler.contract import Policy, check_thresholds

MEMORY_70 = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "NodeQOSEnsurancePolicy",
    "metadata": {"name": "evict-memory"},
    "spec": {
        "objectiveEnsurances": [
            {"name": "mem", "metricRule": {"name": "memory_total_utilization", "value": 70}, "actionName": "evict"}
        ]
    },
}
CPU_80_NODEQOS = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "NodeQOS",
    "metadata": {"name": "cpu"},
    "spec": {
        "rules": [
            {"name": "cpu", "metricRule": {"name": "cpu_total_utilization", "value": "80"}, "actionName": "evict"}
        ]
    },
}
EVICT = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "AvoidanceAction",
    "metadata": {"name": "evict"},
    "spec": {"eviction": {}},
}
THROTTLE = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "AvoidanceAction",
    "metadata": {"name": "evict"},
    "spec": {"throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 10}}},
}
PREVIEW = {
    **MEMORY_70,
    "spec": {
        "objectiveEnsurances": [
            {**MEMORY_70["spec"]["objectiveEnsurances"][0], "strategy": "Preview"}  # type: ignore[index]
        ]
    },
}

CASES: dict[str, dict[str, Any]] = {
    "defaults (no lowNodeLoad, no policy)": {},
    "shipped example against the extender's defaults": {
        "manager": {
            "config": {
                "lowNodeLoad": {"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80}}
            }
        }
    },
    "checked defaults": {
        "manager": {
            "config": {
                "lowNodeLoad": {"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 95}}
            }
        }
    },
    "pools: own and inherited, deviation not compared": {
        "scheduler": {"config": {"loadAware": {"usageThresholds": {"cpu": 70, "memory": 80}}}},
        "manager": {
            "config": {
                "lowNodeLoad": {
                    "highThresholds": {"cpu": 75, "memory": 85},
                    "nodePools": [
                        {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "highThresholds": {"cpu": 60}},
                        {"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}},
                        {
                            "name": "c",
                            "nodeSelector": {"matchLabels": {"pool": "c"}},
                            "useDeviationThresholds": True,
                            "highThresholds": {"cpu": 5},
                        },
                    ],
                }
            }
        },
    },
    "aggregated and prod thresholds": {
        "scheduler": {
            "config": {
                "loadAware": {
                    "usageThresholds": {"cpu": 99, "memory": 99},
                    "aggregated": {"usageThresholds": {"cpu": 70, "memory": 90}, "usageAggregationType": "p95"},
                    "prodUsageThresholds": {"cpu": 60},
                }
            }
        },
        "manager": {
            "config": {"lowNodeLoad": {"highThresholds": {"cpu": 75, "memory": 95}, "prodHighThresholds": {"cpu": 55}}}
        },
    },
    "agent waterline below both": {
        "manager": {"config": {"lowNodeLoad": {"highThresholds": {"cpu": 75, "memory": 95}}}},
        "agent": {"qosPolicies": [MEMORY_70, EVICT]},
    },
    "agent waterline without any action listed": {
        "scheduler": {"config": {"loadAware": {"usageThresholds": {"cpu": 60, "memory": 60}}}},
        "agent": {"qosPolicies": [MEMORY_70, CPU_80_NODEQOS]},
    },
    "throttling action, preview rule: no eviction": {
        "manager": {"config": {"lowNodeLoad": {"highThresholds": {"cpu": 75, "memory": 95}}}},
        "agent": {"qosPolicies": [MEMORY_70, PREVIEW, THROTTLE]},
    },
    "NodeQOS rules with an evicting action": {
        "scheduler": {"config": {"loadAware": {"usageThresholds": {"cpu": 85, "memory": 60}}}},
        "manager": {"config": {"lowNodeLoad": {"highThresholds": {"cpu": 85, "memory": 95}}}},
        "agent": {"qosPolicies": [CPU_80_NODEQOS, EVICT]},
    },
    "a component off is not checked": {
        "scheduler": {"enabled": False},
        "manager": {"config": {"lowNodeLoad": {"highThresholds": {"cpu": 50}}}},
    },
}


def python_contradictions(values: dict[str, Any]) -> set[tuple[str, str, str]]:
    """What the Python rule calls a contradiction, for the configurations the chart would render."""
    scheduler = manager = None
    if values.get("scheduler", {}).get("enabled", True):
        config = {"extender": {}, **values.get("scheduler", {}).get("config", {})}
        scheduler = validate(SchedulerConfiguration, config).load_aware
    if values.get("manager", {}).get("enabled", True):
        manager = validate(ManagerConfiguration, values.get("manager", {}).get("config", {})).low_node_load
    policies, actions = [], None
    listed = values.get("agent", {}).get("qosPolicies", []) if values.get("agent", {}).get("enabled", True) else []
    if any(obj["kind"] == "AvoidanceAction" for obj in listed):
        actions = {
            obj["metadata"]["name"]: AvoidanceAction.model_validate(obj)
            for obj in listed
            if obj["kind"] == "AvoidanceAction"
        }
    for i, obj in enumerate(listed):
        if obj["kind"] == "NodeQOSEnsurancePolicy":
            policies.append(Policy(f"agent.qosPolicies[{i}]", NodeQOSEnsurancePolicy.model_validate(obj)))
        elif obj["kind"] == "NodeQOS":
            policies.append(Policy(f"agent.qosPolicies[{i}]", NodeQOS.model_validate(obj).to_policy()))
    findings = check_thresholds(
        scheduler=scheduler,
        descheduler=manager,
        policies=policies,
        actions=actions,
        scheduler_path="scheduler.config.loadAware",
        descheduler_path="manager.config.lowNodeLoad",
    )
    return {(f.loop, f.paths[0], f.paths[1]) for f in findings if f.severity == "contradiction"}


LINE = re.compile(r"^- (?P<loop>.+?): (?P<a>\S+) \([^)]*\) > (?P<b>\S+) \([^)]*\)$")


def chart_contradictions(values: dict[str, Any], tmp_path: Path) -> tuple[bool, set[tuple[str, str, str]], str]:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values), encoding="utf-8")
    proc = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(file))
    if proc.returncode == 0:
        return True, set(), ""
    found = set()
    for line in proc.stderr.splitlines():
        match = LINE.match(line.strip())
        if match:
            found.add((match["loop"], match["a"], match["b"]))
    return False, found, proc.stderr


@pytest.mark.chart
@pytest.mark.parametrize("case", list(CASES))
def test_chart_and_python_agree(case: str, tmp_path: Path) -> None:
    values = CASES[case]
    expected = python_contradictions(values)
    rendered, found, stderr = chart_contradictions(values, tmp_path)
    if not expected:
        assert rendered, stderr
        return
    assert not rendered, f"helm template accepted a contradiction: {expected}"
    assert "contradictory thresholds" in stderr
    assert found == expected, stderr


def test_the_table_has_both_outcomes() -> None:
    # the agreement above means something only if some cases are refused and others accepted, by each loop
    outcomes = {name: python_contradictions(values) for name, values in CASES.items()}
    assert any(not found for found in outcomes.values())
    loops = {loop for found in outcomes.values() for loop, _, _ in found}
    assert loops == {"scheduler → descheduler", "descheduler → agent", "scheduler → agent"}


@pytest.mark.chart
def test_refused_install_names_the_paths(tmp_path: Path) -> None:
    _, found, stderr = chart_contradictions(CASES["shipped example against the extender's defaults"], tmp_path)
    assert found == {
        (
            "scheduler → descheduler",
            "scheduler.config.loadAware.usageThresholds.memory",
            "manager.config.lowNodeLoad.highThresholds.memory",
        )
    }
    assert "docs/descheduler.md" in stderr


@pytest.mark.chart
def test_the_error_docs_show_is_helms(tmp_path: Path) -> None:
    doc = (CHART.parent.parent / "docs" / "descheduler.md").read_text(encoding="utf-8")
    (shown,) = re.findall(r"\n```\n(Error: .*?)```", doc, flags=re.S)
    _, _, stderr = chart_contradictions(CASES["shipped example against the extender's defaults"], tmp_path)
    assert stderr.startswith(shown)


@pytest.mark.chart
def test_policies_are_rendered(tmp_path: Path) -> None:
    file = tmp_path / "values.yaml"
    # a waterline above the extender's default memory threshold (95): accepted, and rendered as given
    policy = {
        **MEMORY_70,
        "spec": {
            "objectiveEnsurances": [
                {
                    **MEMORY_70["spec"]["objectiveEnsurances"][0],
                    "metricRule": {"name": "memory_total_utilization", "value": 97},
                }
            ]
        },
    }  # type: ignore[index]
    file.write_text(yaml.safe_dump({"agent": {"qosPolicies": [policy, EVICT]}}), encoding="utf-8")
    proc = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(file))
    assert proc.returncode == 0, proc.stderr
    kinds = [
        doc["kind"]
        for doc in yaml.safe_load_all(proc.stdout)
        if doc and doc.get("apiVersion") == "ensurance.crane.io/v1alpha1"
    ]
    assert sorted(kinds) == ["AvoidanceAction", "NodeQOSEnsurancePolicy"]  # helm orders by kind
