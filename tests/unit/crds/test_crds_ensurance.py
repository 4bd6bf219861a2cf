"""Crane's ensurance kinds: upstream manifests load, defaults, validation, structural schemas."""

from __future__ import annotations

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.crds.ensurance import (
    AVOIDANCE_ACTION,
    NODE_QOS_ENSURANCE_POLICY,
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
                "objectiveEnsurances": [{"name": "r", "actionName": "a", "metricRule": {"name": "x", "value": "1"}}]
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
            {"objectiveEnsurances": [{"name": "r", "actionName": "a", "metricRule": {"name": "x", "value": 0}}]},
            "spec.objectiveEnsurances[0].metricRule.value",
        ),
        (
            {
                "objectiveEnsurances": [
                    {"name": "r", "actionName": "a", "avoidanceThreshold": 0, "metricRule": {"name": "x", "value": 1}}
                ]
            },
            "spec.objectiveEnsurances[0].avoidanceThreshold",
        ),
        (
            {"objectiveEnsurances": [{"name": "R_bad", "actionName": "a", "metricRule": {"name": "x", "value": 1}}]},
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
