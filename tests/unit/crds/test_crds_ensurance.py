"""Crane's ensurance kinds: upstream manifests load, defaults, validation, structural schemas."""

from __future__ import annotations

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.crds.ensurance import (
    AVOIDANCE_ACTION,
    METRIC_NAMES,
    NODE_QOS_ENSURANCE_POLICY,
    PRESSURE_METRIC_NAMES,
    AvoidanceAction,
    NodeQOSEnsurancePolicy,
    label_selector_matches,
)
from koordpy.crds.schema import crd_manifest, structural_schema

CRANE_POLICY = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "NodeQOSEnsurancePolicy",
    "metadata": {"name": "waterline1"},
    "spec": {
        "nodeQualityProbe": {"timeoutSeconds": 10, "nodeLocalGet": {"localCacheTTLSeconds": 60}},
        "objectiveEnsurances": [
            {
                "name": "cpu-usage",
                "avoidanceThreshold": 2,
                "restoreThreshold": 2,
                "actionName": "eviction",
                "strategy": "None",
                "metricRule": {"name": "cpu_total_usage", "value": 6000},
            }
        ],
    },
}


def test_upstream_policy_loads_with_crane_defaults():
    pol = NodeQOSEnsurancePolicy.model_validate(CRANE_POLICY)
    rule = pol.spec.objective_ensurances[0]
    assert (rule.avoidance_threshold, rule.restore_threshold, rule.action_name) == (2, 2, "eviction")
    assert rule.metric_rule.threshold == 6000
    minimal = NodeQOSEnsurancePolicy.model_validate(
        {
            "metadata": {"name": "m"},
            "spec": {
                "objectiveEnsurances": [
                    {"name": "r", "actionName": "a", "metricRule": {"name": "cpu_total_usage", "value": "1"}}
                ]
            },
        }
    )
    assert minimal.spec.objective_ensurances[0].avoidance_threshold == 1
    assert minimal.spec.objective_ensurances[0].strategy == "None"


def test_nodeqos_v08_rules_are_read_as_objective_ensurances():
    raw = {**CRANE_POLICY, "kind": "NodeQOS", "spec": {"rules": CRANE_POLICY["spec"]["objectiveEnsurances"]}}
    assert NodeQOSEnsurancePolicy.model_validate(raw).spec.objective_ensurances[0].name == "cpu-usage"


def test_action_defaults_and_fields():
    act = AvoidanceAction.model_validate(
        {
            "metadata": {"name": "throttle"},
            "spec": {
                "throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 10}},
                "eviction": {"terminationGracePeriodSeconds": 5},
            },
        }
    )
    assert act.spec.cool_down_seconds == 300
    assert act.spec.throttle is not None and act.spec.throttle.cpu_throttle is not None
    assert act.spec.throttle.cpu_throttle.min_cpu_ratio == 10
    assert act.spec.eviction is not None and act.spec.eviction.termination_grace_period_seconds == 5


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (
            {
                "objectiveEnsurances": [
                    {"name": "r", "actionName": "a", "metricRule": {"name": "cpu_total_usage", "value": 0}}
                ]
            },
            "spec.objectiveEnsurances[0].metricRule.value",
        ),
        (
            {
                "objectiveEnsurances": [
                    {
                        "name": "r",
                        "actionName": "a",
                        "avoidanceThreshold": 0,
                        "metricRule": {"name": "cpu_total_usage", "value": 1},
                    }
                ]
            },
            "spec.objectiveEnsurances[0].avoidanceThreshold",
        ),
        (
            {
                "objectiveEnsurances": [
                    {"name": "R_bad", "actionName": "a", "metricRule": {"name": "cpu_total_usage", "value": 1}}
                ]
            },
            "spec.objectiveEnsurances[0].name",
        ),
    ],
)
def test_invalid_policy_names_the_field(spec, path):
    with pytest.raises(ConfigError) as info:
        validate(NodeQOSEnsurancePolicy, {"metadata": {"name": "p"}, "spec": spec})
    assert info.value.problems[0][0] == path


def test_invalid_action_names_the_field():
    with pytest.raises(ConfigError) as info:
        validate(
            AvoidanceAction, {"metadata": {"name": "a"}, "spec": {"throttle": {"cpuThrottle": {"stepCPURatio": 101}}}}
        )
    assert info.value.problems[0][0] == "spec.throttle.cpuThrottle.stepCPURatio"


def test_structural_schemas_and_crds():
    pol = structural_schema(NODE_QOS_ENSURANCE_POLICY.spec)  # type: ignore[arg-type]
    rule = pol["properties"]["objectiveEnsurances"]["items"]
    assert rule["properties"]["metricRule"]["properties"]["value"]["x-kubernetes-int-or-string"] is True
    assert rule["properties"]["actionName"]["type"] == "string"
    act = structural_schema(AVOIDANCE_ACTION.spec)  # type: ignore[arg-type]
    assert act["properties"]["throttle"]["properties"]["cpuThrottle"]["properties"]["minCPURatio"]["type"] == "integer"
    for res in (NODE_QOS_ENSURANCE_POLICY, AVOIDANCE_ACTION):
        crd = crd_manifest(res)
        assert crd["spec"]["scope"] == "Cluster"
        assert crd["spec"]["group"] == "ensurance.crane.io"


def test_label_selector_semantics():
    pol = NodeQOSEnsurancePolicy.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {
                "selector": {
                    "matchLabels": {"a": "1"},
                    "matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]}],
                }
            },
        }
    )
    sel = pol.spec.selector
    assert label_selector_matches(sel, {"a": "1"})
    assert label_selector_matches(sel, {"a": "1", "b": "y"})
    assert not label_selector_matches(sel, {"a": "1", "b": "x"})
    assert not label_selector_matches(sel, {"a": "2"})
    assert label_selector_matches(None, {})


# Every MetricName constant of gocrane/crane pkg/ensurance/collector/types/types.go (v0.11.0): a manifest
# written for Crane may name any of them (the disk write metrics reuse the read names there).
CRANE_NAMES = [
    "cpu_total_usage",
    "cpu_total_utilization",
    "cpu_load_1_min",
    "cpu_load_5_min",
    "cpu_load_15_min",
    "cpu_core_numbers",
    "exclusive_cpu_idle",
    "memory_total_usage",
    "memory_total_utilization",
    "memory_total",
    "disk_read_kibps",
    "disk_write_kibps",
    "disk_read_iops",
    "disk_read_utilization",
    "network_receive_kibps",
    "network_sent_kibps",
    "network_receive_pckps",
    "network_sent_pckps",
    "network_drop_in",
    "network_drop_out",
    "container_cpu_total_usage",
    "container_cpu_limit",
    "container_cpu_quota",
    "container_cpu_period",
    "container_sched_run_queue_time",
    "ext_res_container_cpu_total_usage",
    "ext_cpu_total_distribute",
    "container_mem_total_usage",
    "ext_res_container_mem_total_usage",
]


def _rule_named(name: str) -> dict[str, object]:
    rule = {"name": "r", "actionName": "a", "metricRule": {"name": name, "value": 1}}
    return {"metadata": {"name": "p"}, "spec": {"objectiveEnsurances": [rule]}}


@pytest.mark.parametrize("name", CRANE_NAMES)
def test_every_crane_metric_name_is_accepted(name):
    assert validate(NodeQOSEnsurancePolicy, _rule_named(name)).spec.objective_ensurances[0].metric_rule.name == name


@pytest.mark.parametrize(
    "name",
    ["cpu_pressure_some_avg10", "memory_pressure_full_avg300", "io_pressure_some_avg60", "pod_cpu_pressure_full_avg10"],
)
def test_koordpy_pressure_metric_names_are_accepted(name):
    assert validate(NodeQOSEnsurancePolicy, _rule_named(name)).spec.objective_ensurances[0].metric_rule.name == name


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("cpu_total_usge", "did you mean 'cpu_total_usage'?"),
        ("pod_cpu_pressure_some_avg_10", "did you mean 'pod_cpu_pressure_some_avg10'?"),
        ("cpu_pressure_some_avg_10", "did you mean 'cpu_pressure_some_avg10'?"),
        ("gpu_temperature", "expected a Crane metric"),
        ("CPU_TOTAL_USAGE", "expected a Crane metric"),
    ],
)
def test_a_misspelt_metric_name_is_refused_naming_the_closest(name, hint):
    with pytest.raises(ConfigError) as info:
        validate(NodeQOSEnsurancePolicy, _rule_named(name))
    where, message = info.value.problems[0]
    assert where == "spec.objectiveEnsurances[0].metricRule.name"
    assert f"unknown metric {name!r}" in message and hint in message


def test_the_crd_enumerates_the_metric_names():
    # The API server refuses a misspelt name itself: the CRD's schema lists every accepted one.
    crd = crd_manifest(NODE_QOS_ENSURANCE_POLICY)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    name = spec["properties"]["objectiveEnsurances"]["items"]["properties"]["metricRule"]["properties"]["name"]
    assert name["type"] == "string"
    assert name["enum"] == list(METRIC_NAMES)
    assert set(CRANE_NAMES) | set(PRESSURE_METRIC_NAMES) == set(METRIC_NAMES)
    assert len(PRESSURE_METRIC_NAMES) == 36  # node and pod x cpu/memory/io x some/full x 3 windows
