"""The KubeSchedulerConfiguration the chart ships: field names and types of kubescheduler.config.k8s.io/v1,
and the koordpy-specific choices (binder extender on loopback, nodeCacheCapable, not ignorable, ...).

The schema below covers the v1 fields the chart uses (reference §1.6 and componentbase's
LeaderElectionConfiguration), with unknown fields refused: a misspelt field would be silently dropped by
kube-scheduler's lenient decoder, or rejected by its strict one, and neither is acceptable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helm_render import CHART, SCENARIOS, named, render, render_scenario, run_helm

from koordpy.config.errors import validate
from koordpy.config.scenario import CHART_PERCENTAGE_OF_NODES_TO_SCORE
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.durations import parse_duration

DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}

EXTENDER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["urlPrefix"],
    "properties": {
        "urlPrefix": {"type": "string", "pattern": "^https?://"},
        "filterVerb": {"type": "string"},
        "preemptVerb": {"type": "string"},
        "prioritizeVerb": {"type": "string"},
        "bindVerb": {"type": "string"},
        "weight": {"type": "integer", "minimum": 0},
        "enableHTTPS": {"type": "boolean"},
        "tlsConfig": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                k: {"type": "boolean" if k == "insecure" else "string"}
                for k in ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")
            },
        },
        "httpTimeout": DURATION,
        "nodeCacheCapable": {"type": "boolean"},
        "managedResources": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "ignoredByScheduler": {"type": "boolean"}},
            },
        },
        "ignorable": {"type": "boolean"},
    },
}

KUBE_SCHEDULER_CONFIGURATION_V1 = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "profiles"],
    "properties": {
        "apiVersion": {"const": "kubescheduler.config.k8s.io/v1"},
        "kind": {"const": "KubeSchedulerConfiguration"},
        "parallelism": {"type": "integer", "minimum": 1},
        "percentageOfNodesToScore": {"type": "integer", "minimum": 0, "maximum": 100},
        "podInitialBackoffSeconds": {"type": "integer", "minimum": 1},
        "podMaxBackoffSeconds": {"type": "integer", "minimum": 1},
        "delayCacheUntilActive": {"type": "boolean"},
        "clientConnection": {"type": "object"},
        "leaderElection": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "leaderElect": {"type": "boolean"},
                "leaseDuration": DURATION,
                "renewDeadline": DURATION,
                "retryPeriod": DURATION,
                "resourceLock": {"enum": ["leases", "endpointsleases", "configmapsleases"]},
                "resourceName": {"type": "string", "minLength": 1},
                "resourceNamespace": {"type": "string", "minLength": 1},
            },
        },
        "profiles": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["schedulerName"],
                "properties": {
                    "schedulerName": {"type": "string", "minLength": 1},
                    "percentageOfNodesToScore": {"type": "integer", "minimum": 0, "maximum": 100},
                    "plugins": {"type": "object"},
                    "pluginConfig": {"type": "array"},
                },
            },
        },
        "extenders": {"type": "array", "items": EXTENDER},
    },
}


def kube_scheduler_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(named(objects, "ConfigMap", "-scheduler")["data"]["kube-scheduler.yaml"])
    return data


def koordpy_config(objects: list[dict[str, Any]]) -> SchedulerConfiguration:
    raw = yaml.safe_load(named(objects, "ConfigMap", "-scheduler")["data"]["config.yaml"])
    return validate(SchedulerConfiguration, raw)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_field_names_and_types(scenario: str) -> None:
    cfg = kube_scheduler_config(render_scenario(scenario))
    jsonschema.validate(cfg, KUBE_SCHEDULER_CONFIGURATION_V1)
    # kube-scheduler's own validation rules for what we set:
    binders = [e for e in cfg["extenders"] if e.get("bindVerb")]
    assert len(binders) <= 1, "only one extender can implement bind"
    for ext in cfg["extenders"]:
        if ext.get("prioritizeVerb"):
            assert ext["weight"] > 0, "prioritizeVerb needs a positive weight"
    le = cfg["leaderElection"]
    assert parse_duration(le["leaseDuration"]) > parse_duration(le["renewDeadline"]) > parse_duration(le["retryPeriod"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_profile_and_extender_agree_with_the_extenders_own_config(scenario: str) -> None:
    objects = render_scenario(scenario)
    cfg = kube_scheduler_config(objects)
    mine = koordpy_config(objects)
    main, binder = cfg["extenders"]
    assert [p["schedulerName"] for p in cfg["profiles"]] == [mine.extender.scheduler_name]
    # Both entries are the same sidecar on loopback.
    assert main["urlPrefix"] == binder["urlPrefix"] == f"http://127.0.0.1:{mine.extender.port}"
    assert mine.extender.host == "127.0.0.1"
    # The binder's httpTimeout IS the extender's gang.binderHttpTimeoutSeconds (one value renders both),
    # and exceeds one pods/binding call's deadline, so a slow bind is reported by the extender, not cut off.
    assert parse_duration(binder["httpTimeout"]) == mine.gang.binder_http_timeout_seconds
    assert parse_duration(binder["httpTimeout"]) > mine.extender.bind_timeout_seconds
    assert mine.gang.binder_answer_margin_seconds < mine.gang.binder_http_timeout_seconds


def test_koordpy_choices() -> None:
    objects = render()
    cfg = kube_scheduler_config(objects)
    main, binder = cfg["extenders"]
    # Entry 1: filter and prioritize, inside kube-scheduler's serial cycle: a short timeout.
    assert (main["filterVerb"], main["prioritizeVerb"], main["weight"]) == ("filter", "prioritize", 1)
    assert "bindVerb" not in main
    assert main["httpTimeout"] == "5s"
    # Entry 2: bind only, not ignorable, with the gang-sized timeout (defaultTimeout 600 s + 60 s = 660 s).
    assert binder["bindVerb"] == "bind"
    assert not {"filterVerb", "prioritizeVerb", "preemptVerb", "weight"} & set(binder)
    assert binder["httpTimeout"] == "660s"
    assert parse_duration(binder["httpTimeout"]) >= koordpy_config(objects).gang.default_timeout
    for entry in (main, binder):
        assert entry["nodeCacheCapable"] is True
        assert entry["ignorable"] is False
    # kube-scheduler's adaptive sample, as the simulator assumes by default (docs/performance.md)
    assert cfg["percentageOfNodesToScore"] == CHART_PERCENTAGE_OF_NODES_TO_SCORE == 0
    assert cfg["leaderElection"]["leaderElect"] is True
    assert cfg["leaderElection"]["resourceName"] == "koordpy-scheduler"
    assert cfg["leaderElection"]["resourceNamespace"] == "koordpy-system"
    deployment = named(objects, "Deployment", "-scheduler")
    images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert re.fullmatch(r"registry\.k8s\.io/kube-scheduler:v1\.\d+\.\d+", images["kube-scheduler"])
    assert set(images) == {"kube-scheduler", "extender"}


def test_schema_refuses_misspelt_fields() -> None:
    cfg = kube_scheduler_config(render())
    cfg["extenders"][0]["nodeCacheCapabel"] = True
    with pytest.raises(jsonschema.ValidationError, match="nodeCacheCapabel"):
        jsonschema.validate(cfg, KUBE_SCHEDULER_CONFIGURATION_V1)
    cfg = kube_scheduler_config(render())
    cfg["extenders"][0]["httpTimeout"] = 30
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(cfg, KUBE_SCHEDULER_CONFIGURATION_V1)


def test_managed_resources_pass_through() -> None:
    cfg = kube_scheduler_config(render_scenario("tuned-values.yaml"))
    assert cfg["extenders"][0]["managedResources"] == [{"name": "koordpy.io/scheduled", "ignoredByScheduler": True}]
    assert cfg["extenders"][0]["weight"] == 5


def test_binder_timeout_and_extender_setting_are_one_value() -> None:
    objects = render("--set", "scheduler.config.gang.binderHttpTimeoutSeconds=3600")
    _, binder = kube_scheduler_config(objects)["extenders"]
    assert binder["httpTimeout"] == "3600s"
    assert koordpy_config(objects).gang.binder_http_timeout_seconds == 3600
    # The filter/prioritize timeout is its own value.
    main, _ = kube_scheduler_config(render("--set", "scheduler.extender.httpTimeoutSeconds=2"))["extenders"]
    assert main["httpTimeout"] == "2s"


def test_the_system_driver_reads_both_entries_as_kube_scheduler_does() -> None:
    from koordpy_testkit.schedulerdriver import ExtenderConfig

    entries = kube_scheduler_config(render())["extenders"]
    config = ExtenderConfig.from_entries(entries, url_prefix="http://127.0.0.1:5555")
    assert (config.filter_verb, config.prioritize_verb, config.bind_verb) == ("filter", "prioritize", "bind")
    assert (config.timeout("filter"), config.timeout("prioritize"), config.timeout("bind")) == (5.0, 5.0, 660.0)
    assert config.url("bind") == "http://127.0.0.1:5555/bind"
    with pytest.raises(ValueError, match=r"extenders\[1\].bindVerb: only one extender can implement bind"):
        ExtenderConfig.from_entries([entries[1], entries[1]])


def test_default_kube_scheduler_tag_is_the_version_the_real_cluster_tier_runs() -> None:
    """The chart's default kube-scheduler is the binary tests/cluster builds from tools/kubernetes/go.mod."""
    root = Path(__file__).resolve().parents[2]
    pinned = re.search(r"^\s*k8s\.io/kubernetes (v[0-9.]+)$", (root / "tools/kubernetes/go.mod").read_text(), re.M)
    assert pinned, "tools/kubernetes/go.mod pins no k8s.io/kubernetes version"
    values = yaml.safe_load((root / "charts/koordpy/values.yaml").read_text())
    assert values["scheduler"]["kubeScheduler"]["image"]["tag"] == pinned.group(1)


def _kube_scheduler_command(*args: str) -> list[str]:
    deployment = named(render(*args), "Deployment", "-scheduler")
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "kube-scheduler"]
    command: list[str] = container["command"]
    return command


def test_feature_gates_reach_kube_scheduler_sorted_and_none_by_default() -> None:
    """``scheduler.kubeScheduler.featureGates`` (Kubernetes' own gangs need ``GenericWorkload: true`` on this
    kube-scheduler as on kube-apiserver): one ``--feature-gates`` flag, names sorted; none when empty."""
    assert not any(a.startswith("--feature-gates") for a in _kube_scheduler_command())
    gated = _kube_scheduler_command(
        "--set",
        "scheduler.kubeScheduler.featureGates.GenericWorkload=true",
        "--set",
        "scheduler.kubeScheduler.featureGates.CompositePodGroup=false",
    )
    assert [a for a in gated if a.startswith("--feature-gates")] == [
        "--feature-gates=CompositePodGroup=false,GenericWorkload=true"
    ]
    refused = run_helm("template", "x", str(CHART), "--set", "scheduler.kubeScheduler.featureGates.GenericWorkload=yes")
    assert refused.returncode != 0 and "want boolean" in refused.stderr, refused.stderr
