"""values.schema.json's ``*.config`` parts: generated from the component models, enforced by the real helm."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml
from helm_render import CHART, ROOT, render, run_helm
from pydantic import BaseModel

from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.crds import RESOURCES

SCRIPT = ROOT / "scripts" / "render-values-schema.py"
MODELS: dict[str, type[BaseModel]] = {
    "scheduler": SchedulerConfiguration,
    "manager": ManagerConfiguration,
    "agent": AgentConfiguration,
}


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_values_schema", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    return schema


def config_node(component: str) -> dict[str, Any]:
    node: dict[str, Any] = committed()["properties"][component]["properties"]["config"]
    return node


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_committed_schema_is_the_generated_one() -> None:
    proc = run_script("--check")
    assert proc.returncode == 0, proc.stderr


def test_a_stale_schema_is_detected(tmp_path: Path) -> None:
    schema = committed()
    thresholds = config_node("scheduler")["properties"]["loadAware"]["properties"]["usageThresholds"]
    assert thresholds["additionalProperties"]["maximum"] == 100  # the model's Percent bound, not a copy
    thresholds["additionalProperties"]["maximum"] = 101
    schema["properties"]["scheduler"]["properties"]["config"]["properties"]["loadAware"]["properties"][
        "usageThresholds"
    ] = thresholds
    stale = tmp_path / "values.schema.json"
    stale.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    proc = run_script("--check", "--schema", str(stale))
    assert proc.returncode == 1
    assert "properties.scheduler.properties.config" in proc.stderr
    assert "manager" not in proc.stderr
    assert run_script("--schema", str(stale)).returncode == 0  # rewrites it
    assert run_script("--check", "--schema", str(stale)).returncode == 0


def test_only_the_config_parts_are_generated_and_other_keys_survive() -> None:
    schema = committed()
    schema["properties"]["networkPolicy"] = {"type": "object", "description": "a colleague's key"}
    schema["properties"]["agent"]["properties"]["resources"] = {"type": "object", "description": "changed"}
    fresh = generator().render(schema)
    assert fresh["properties"]["networkPolicy"] == {"type": "object", "description": "a colleague's key"}
    assert fresh["properties"]["agent"]["properties"]["resources"]["description"] == "changed"
    assert fresh["properties"]["scheduler"]["properties"]["config"] == config_node("scheduler")


@pytest.mark.parametrize("component", sorted(MODELS))
def test_generated_parts_are_closed_and_self_contained(component: str) -> None:
    node = config_node(component)
    text = json.dumps(node)
    assert "$ref" not in text and "$defs" not in text
    assert "apiVersion" not in node.get("required", []) and "kind" not in node.get("required", [])

    def walk(sub: Any, path: str) -> None:
        if isinstance(sub, dict):
            if "properties" in sub:
                assert sub.get("additionalProperties") is False, f"{path} accepts unknown keys"
                for name, prop in sub["properties"].items():
                    walk(prop, f"{path}.{name}")
            for key in ("items", "additionalProperties"):
                if isinstance(sub.get(key), dict):
                    walk(sub[key], f"{path}.{key}")
            for option in sub.get("anyOf", []):
                walk(option, path)

    walk(node, f"{component}.config")


def helm_errors(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    proc = run_helm("template", "koordpy", str(CHART), "-f", str(path))
    assert proc.returncode != 0, "helm template accepted invalid values"
    return proc.stderr


def test_out_of_range_threshold_fails_at_template_time(tmp_path: Path) -> None:
    err = helm_errors(tmp_path, {"scheduler": {"config": {"loadAware": {"usageThresholds": {"cpu": 120}}}}})
    assert "at '/scheduler/config/loadAware/usageThresholds/cpu': maximum: got 120, want 100" in err, err


def test_manager_reservation_settings_pass_through_and_are_checked_at_template_time(tmp_path: Path) -> None:
    tuned = yaml.safe_load((CHART / "ci" / "tuned-values.yaml").read_text(encoding="utf-8"))
    proc = run_helm("template", "koordpy", str(CHART), "-f", str(CHART / "ci" / "tuned-values.yaml"))
    assert proc.returncode == 0, proc.stderr
    configs = [
        yaml.safe_load(d["data"]["config.yaml"])
        for d in yaml.safe_load_all(proc.stdout)
        if isinstance(d, dict) and d.get("kind") == "ConfigMap" and d["metadata"]["name"].endswith("-manager")
    ]
    # schedulerNames, when not given, is the koordpy-scheduler profile's name (only its pods can starve)
    profile = tuned["scheduler"]["config"]["extender"]["schedulerName"]
    assert profile != "koordpy-scheduler"
    expected = {"schedulerNames": [profile], **tuned["manager"]["config"]["reservation"]}
    assert [c["reservation"] for c in configs] == [expected]
    assert validate(MODELS["manager"], configs[0]).reservation.reserved_node_percent == 50
    err = helm_errors(tmp_path, {"manager": {"config": {"reservation": {"reservedNodePercent": 150}}}})
    assert "at '/manager/config/reservation/reservedNodePercent': maximum: got 150, want 100" in err, err


TYPOS: dict[str, tuple[dict[str, Any], str, str]] = {
    "scheduler": ({"loadAware": {"usageThreshold": {"cpu": 60}}}, "/scheduler/config/loadAware", "usageThreshold"),
    "manager": ({"nodeMetric": {"usageThreshold": 1}}, "/manager/config/nodeMetric", "usageThreshold"),
    "agent": ({"qos": {"usageThreshold": 1}}, "/agent/config/qos", "usageThreshold"),
}


@pytest.mark.parametrize("component", sorted(TYPOS))
def test_a_typo_in_any_component_config_fails_at_template_time(tmp_path: Path, component: str) -> None:
    config, where, key = TYPOS[component]
    err = helm_errors(tmp_path, {component: {"config": config}})
    assert f"at '{where}': additional properties '{key}' not allowed" in err, err
    with pytest.raises(ConfigError) as caught:  # the component refuses the same file
        validate(MODELS[component], config)
    assert [p for p, _ in caught.value.problems] == [f"{where.split('/config/')[1].replace('/', '.')}.{key}"]


BAD: dict[str, dict[str, Any]] = {
    "scheduler": {
        "loadAware": {"usageThresholds": {"cpu": 120}, "usageThreshold": {"cpu": 1}, "estimator": "mine"},
        "extender": {"port": 0, "logLevel": "loud"},
    },
    "manager": {"nodeMetric": {"reportIntervalSeconds": 0, "nodeAggregateDurations": ["5x"]}, "helth": {}},
    "agent": {"collectIntervalSeconds": 0, "stateDir": "relative", "server": {"port": 70000}},
}
BAD_PATHS = {
    "scheduler": [
        "loadAware.usageThresholds.cpu",
        "loadAware.usageThreshold",
        "loadAware.estimator",
        "extender.port",
        "extender.logLevel",
    ],
    "manager": ["nodeMetric.reportIntervalSeconds", "nodeMetric.nodeAggregateDurations", "helth"],
    "agent": ["collectIntervalSeconds", "stateDir", "server.port"],
}


def test_every_config_error_is_reported_at_once_by_helm(tmp_path: Path) -> None:
    err = helm_errors(tmp_path, {component: {"config": config} for component, config in BAD.items()})
    for component, paths in BAD_PATHS.items():
        for path in paths:
            parent, _, leaf = path.rpartition(".")
            pointer = f"/{component}/config/{path.replace('.', '/')}"
            extra = f"at '/{component}/config{'/' + parent.replace('.', '/') if parent else ''}': additional"
            assert f"at '{pointer}" in err or (extra in err and f"'{leaf}'" in err), f"{pointer} missing:\n{err}"


@pytest.mark.parametrize("component", sorted(BAD))
def test_every_config_error_is_reported_at_once_by_the_component(component: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(MODELS[component], BAD[component], f"{component}.yaml")
    message = str(caught.value)
    assert sorted(p for p, _ in caught.value.problems) == sorted(BAD_PATHS[component])
    for path in BAD_PATHS[component]:
        assert f"{path}: " in message  # one message, every problem with its path


# (component, config, accepted): the schema and the model must agree on each.
AGREEMENT = [
    ("scheduler", {}, True),
    ("scheduler", {"loadAware": {"usageThresholds": {"cpu": 100, "memory": 0}}}, True),
    ("scheduler", {"loadAware": {"usageThresholds": {"cpu": 101}}}, False),
    ("scheduler", {"loadAware": {"usageThresholds": {"cpu": -1}}}, False),
    ("scheduler", {"loadAware": {"resourceWeights": {"cpu": 0}}}, False),  # weights are 1..100
    ("scheduler", {"loadAware": {"estimatedScalingFactors": {"cpu": 0}}}, False),  # factors are > 0
    ("scheduler", {"loadAware": {"estimatedScalingFactors": {"cpu": 100}}}, True),
    ("scheduler", {"loadAware": {"dominantResourceWeight": 101}}, False),
    ("scheduler", {"loadAware": {"nodeMetricExpirationSeconds": 0}}, False),
    ("scheduler", {"loadAware": {"estimator": "defaultEstimator"}}, True),
    ("scheduler", {"loadAware": {"aggregated": {"usageAggregatedDuration": "5m"}}}, True),
    ("scheduler", {"loadAware": {"aggregated": {"usageAggregatedDuration": 300}}}, True),
    ("scheduler", {"loadAware": {"aggregated": {"usageAggregatedDuration": None}}}, True),
    ("scheduler", {"loadAware": {"aggregated": {"usageAggregatedDuration": "1h30m"}}}, True),
    ("scheduler", {"loadAware": {"aggregated": {"usageAggregatedDuration": "soon"}}}, False),
    ("scheduler", {"loadAware": {"aggregated": {"usageAggregatedDuration": -5}}}, False),
    ("scheduler", {"loadAware": {"aggregated": {"usageAggregationType": "p42"}}}, False),
    ("scheduler", {"loadAware": {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "X"}}, True),
    ("scheduler", {"apiVersion": "koordpy.io/v1alpha1", "kind": "SchedulerConfiguration"}, True),
    ("scheduler", {"kind": "ManagerConfiguration"}, False),
    ("scheduler", {"extender": {"metricsPort": None}}, True),
    ("scheduler", {"extender": {"bindTimeoutSeconds": 0}}, False),
    ("scheduler", {"extender": {"watchTimeoutSeconds": 9}}, False),
    ("manager", {"nodeMetric": {"nodeAggregateDurations": ["5m0s", "1h"]}}, True),
    ("manager", {"nodeMetric": {"nodeMemoryCollectPolicy": "usageWithPageCache"}}, True),
    ("manager", {"nodeMetric": {"nodeMemoryCollectPolicy": "all"}}, False),
    (
        "manager",
        {"nodeMetric": {"overrides": [{"nodeSelector": {"pool": "batch"}, "reportIntervalSeconds": 30}]}},
        True,
    ),
    ("manager", {"nodeMetric": {"overrides": [{"nodeSelector": {}}]}}, False),
    ("manager", {"nodeMetric": {"overrides": [{"nodeSelector": {"a": "b"}, "interval": 3}]}}, False),
    ("manager", {"peering": {"name": ""}}, False),
    ("manager", {"health": {"port": 65536}}, False),
    ("agent", {"collectIntervalSeconds": 0.5, "nodeMetric": {"aggregationDurationsSeconds": [60]}}, True),
    ("agent", {"qos": {"evictionTimeoutSeconds": 0}}, False),
    ("agent", {"qos": {"maxSampleGapSeconds": None, "protectedNamespaces": ["kube-system", "ops"]}}, True),
    ("agent", {"stateDir": "/var/lib/x"}, True),
    ("agent", {"logLevel": "trace"}, False),
]


@pytest.mark.parametrize(("component", "config", "accepted"), AGREEMENT)
def test_schema_and_model_agree(component: str, config: dict[str, Any], accepted: bool) -> None:
    schema_ok = jsonschema.Draft7Validator(config_node(component)).is_valid(config)
    try:
        validate(MODELS[component], config)
        model_ok = True
    except ConfigError:
        model_ok = False
    assert (schema_ok, model_ok) == (accepted, accepted)


def test_the_chart_readme_shows_helms_own_output() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    block = readme.split("```console\n$ helm template ", 1)[1].split("```", 1)[0]
    command, _, shown = block.partition("\n    ")
    args, _, output = shown.partition("\n")
    argv = (command + " " + args).replace("\\", " ").split()
    assert argv[:2] == ["koordpy", "charts/koordpy"]
    proc = run_helm("template", "koordpy", str(CHART), *argv[2:])
    assert proc.returncode != 0
    assert proc.stderr.rstrip("\n") + "\n" == output, proc.stderr


def test_the_chart_readme_names_every_crd_to_exclude_and_each_example_renders() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    names = {r.name for r in RESOURCES}
    examples = [
        line.split("'crds.exclude={", 1)[1].split("}'", 1)[0].split(",")
        for line in readme.splitlines()
        if "--set 'crds.exclude={" in line
    ]
    assert len(examples) == 2
    excluded = {name for example in examples for name in example}
    assert excluded == {
        "nodemetrics.slo.koordinator.sh",
        "podmigrationjobs.scheduling.koordinator.sh",
        "reservations.scheduling.koordinator.sh",
        "podgroups.scheduling.sigs.k8s.io",
        "nodeqosensurancepolicies.ensurance.crane.io",
        "avoidanceactions.ensurance.crane.io",
        "nodeqoss.ensurance.crane.io",
        "podqoss.ensurance.crane.io",
    }
    words = {7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    assert f"With both, list all {words[len(excluded)]} (both rows)." in readme  # the count stays true
    values_yaml = (CHART / "values.yaml").read_text(encoding="utf-8")
    for name in excluded:
        assert name in values_yaml, f"values.yaml does not name {name}"
    for example in examples:
        rendered = render("--set", "crds.exclude={" + ",".join(example) + "}")
        left = {c["metadata"]["name"] for c in rendered if c["kind"] == "CustomResourceDefinition"}
        assert left == names - set(example)
