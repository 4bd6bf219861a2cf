"""NodeMetric bookkeeping decisions (koordpy.manager.policy), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration, NodeMetricSettings
from koordpy.manager.policy import Create, Delete, Patch, desired_policy, go_duration, reconcile_nodemetric


def settings(**raw: Any) -> NodeMetricSettings:
    return validate(ManagerConfiguration, {"nodeMetric": raw}).node_metric


DEFAULT_WIRE = {
    "aggregateDurationSeconds": 300,
    "reportIntervalSeconds": 60,
    "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (300, "5m0s"),  # 300 = 5*60 + 0
        (600, "10m0s"),
        (1800, "30m0s"),
        (3600, "1h0m0s"),  # Go prints hours with zero minutes and seconds
        (5430, "1h30m30s"),  # 5430 = 3600 + 30*60 + 30
        (90, "1m30s"),
        (45, "45s"),
    ],
)
def test_go_duration(seconds: int, text: str) -> None:
    assert go_duration(seconds) == text


def test_defaults_are_koordinators() -> None:
    policy = desired_policy(settings(), {})
    assert policy.model_dump(by_alias=True, exclude_none=True) == DEFAULT_WIRE


def test_durations_are_normalised_to_go_form() -> None:
    policy = desired_policy(settings(nodeAggregateDurations=["5m", "1h", "90s"]), {})
    assert policy.node_aggregate_policy is not None
    assert policy.node_aggregate_policy.durations == ["5m0s", "1h0m0s", "1m30s"]


def test_first_matching_override_wins_and_inherits_unset_fields() -> None:
    cfg = settings(
        overrides=[
            {"nodeSelector": {"pool": "batch", "zone": "a"}, "reportIntervalSeconds": 10},
            {
                "nodeSelector": {"pool": "batch"},
                "reportIntervalSeconds": 30,
                "nodeMemoryCollectPolicy": "usageWithHotPageCache",
            },
            {"nodeSelector": {"pool": "batch"}, "reportIntervalSeconds": 99},
        ]
    )
    # pool=batch without zone=a: the first override does not match (all labels required), the second does.
    policy = desired_policy(cfg, {"pool": "batch"})
    assert policy.report_interval_seconds == 30
    assert policy.node_memory_collect_policy == "usageWithHotPageCache"
    assert policy.aggregate_duration_seconds == 300  # inherited
    assert desired_policy(cfg, {"pool": "batch", "zone": "a"}).report_interval_seconds == 10
    assert desired_policy(cfg, {"pool": "web"}).report_interval_seconds == 60


def test_missing_nodemetric_is_created_with_the_desired_spec() -> None:
    action = reconcile_nodemetric("n1", settings(), {}, None, exists=False)
    assert action == Create(
        "n1",
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "n1"},
            "spec": {"metricCollectPolicy": DEFAULT_WIRE},
        },
    )


def test_matching_nodemetric_needs_nothing() -> None:
    assert reconcile_nodemetric("n1", settings(), {}, {"metricCollectPolicy": DEFAULT_WIRE}, exists=True) is None


def test_drifted_nodemetric_is_patched_and_foreign_keys_removed() -> None:
    current = {"metricCollectPolicy": {**DEFAULT_WIRE, "reportIntervalSeconds": 5, "nodeMemoryCollectPolicy": "x"}}
    action = reconcile_nodemetric("n1", settings(), {}, current, exists=True)
    assert action == Patch("n1", {"spec": {"metricCollectPolicy": {**DEFAULT_WIRE, "nodeMemoryCollectPolicy": None}}})


def test_nodemetric_without_policy_is_patched() -> None:
    assert reconcile_nodemetric("n1", settings(), {}, {}, exists=True) == Patch(
        "n1", {"spec": {"metricCollectPolicy": DEFAULT_WIRE}}
    )


def test_nodemetric_of_missing_node_is_deleted() -> None:
    assert reconcile_nodemetric("gone", settings(), None, {"metricCollectPolicy": DEFAULT_WIRE}, exists=True) == Delete(
        "gone"
    )
    assert reconcile_nodemetric("gone", settings(), None, None, exists=False) is None


def test_disabled_does_nothing() -> None:
    cfg = settings(enabled=False)
    assert reconcile_nodemetric("n1", cfg, {}, None, exists=False) is None
    assert reconcile_nodemetric("gone", cfg, None, None, exists=True) is None


@pytest.mark.parametrize(
    ("raw", "path", "fragment"),
    [
        (
            {"nodeMetric": {"reportIntervalSeconds": 0}},
            "nodeMetric.reportIntervalSeconds",
            "greater than or equal to 1",
        ),
        ({"nodeMetric": {"nodeAggregateDurations": ["5m", "soon"]}}, "nodeMetric.nodeAggregateDurations", "[1]"),
        ({"nodeMetric": {"nodeAggregateDurations": ["5m", "300s"]}}, "nodeMetric.nodeAggregateDurations", "repeats"),
        ({"nodeMetric": {"overrides": [{"nodeSelector": {}}]}}, "nodeMetric.overrides[0].nodeSelector", "at least 1"),
        ({"peering": {"enabled": "maybe"}}, "peering.enabled", "boolean"),
        # kopf renews a keep-alive 5 to 10 s before it runs out: below 15 s there is no margin left
        ({"peering": {"lifetimeSeconds": 10}}, "peering.lifetimeSeconds", "greater than or equal to 15"),
        ({"peering": {"lifetimeSeconds": "60"}}, "peering.lifetimeSeconds", "integer"),
        ({"health": {"port": 70000}}, "health.port", "less than or equal"),
        ({"health": {"loopStallSeconds": 0}}, "health.loopStallSeconds", "greater than or equal to 1"),
        ({"kind": "SchedulerConfiguration"}, "kind", "ManagerConfiguration"),
        ({"nodeMetrics": {}}, "nodeMetrics", "Extra inputs"),
    ],
)
def test_config_errors_name_the_field(raw: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(ManagerConfiguration, raw, "manager.yaml")
    problems = dict(info.value.problems)
    assert path in problems, problems
    assert fragment in problems[path]
    assert str(info.value).startswith("manager.yaml: ")
