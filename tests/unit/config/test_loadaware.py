import pytest

from koordpy.config import ConfigError, LoadAwareSchedulingArgs, SchedulerConfiguration, validate


def test_defaults_are_koordinators() -> None:
    args = validate(LoadAwareSchedulingArgs, {})
    assert args.filter_expired_node_metrics is True
    assert args.node_metric_expiration_seconds == 180
    assert args.enable_schedule_when_node_metrics_expired is False
    assert args.resource_weights == {"cpu": 1, "memory": 1}
    assert args.usage_thresholds == {"cpu": 65, "memory": 95}
    assert args.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert args.prod_usage_thresholds == {}
    assert args.dominant_resource_weight == 0
    assert args.aggregated is None


def test_weights_not_defaulted_when_dominant_weight_set() -> None:
    args = validate(LoadAwareSchedulingArgs, {"dominantResourceWeight": 5})
    assert args.resource_weights == {}


def test_scaling_factors_are_merged_not_replaced() -> None:
    args = validate(LoadAwareSchedulingArgs, {"estimatedScalingFactors": {"cpu": 100}})
    assert args.estimated_scaling_factors == {"cpu": 100, "memory": 70}


def test_user_thresholds_replace_defaults() -> None:
    args = validate(LoadAwareSchedulingArgs, {"usageThresholds": {"cpu": 50}})
    assert args.usage_thresholds == {"cpu": 50}


def test_koordinator_args_paste_verbatim() -> None:
    pasted = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "LoadAwareSchedulingArgs",
        "filterExpiredNodeMetrics": False,
        "nodeMetricExpirationSeconds": 300,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 75, "memory": 85},
        "prodUsageThresholds": {"cpu": 55, "memory": 75},
        "scoreAccordingProdUsage": True,
        "estimatedScalingFactors": {"cpu": 80, "memory": 70},
        "aggregated": {
            "usageThresholds": {"cpu": 65},
            "usageAggregationType": "p95",
            "usageAggregatedDuration": "5m",
            "scoreAggregationType": "p95",
            "scoreAggregatedDuration": "30m",
        },
    }
    args = validate(LoadAwareSchedulingArgs, pasted)
    assert args.aggregated is not None
    assert args.aggregated.usage_aggregated_duration == 300.0
    assert args.aggregated.score_aggregated_duration == 1800.0
    assert args.aggregated.filter_enabled and args.aggregated.score_enabled


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"resourceWeights": {"cpu": 0}}, "resourceWeights.cpu"),
        ({"resourceWeights": {"cpu": 101}}, "resourceWeights.cpu"),
        ({"resourceWeights": {"nvidia.com/gpu": 1}}, "resourceWeights.nvidia.com/gpu"),
        ({"usageThresholds": {"cpu": 101}}, "usageThresholds.cpu"),
        ({"prodUsageThresholds": {"memory": -1}}, "prodUsageThresholds.memory"),
        ({"estimatedScalingFactors": {"cpu": 0}}, "estimatedScalingFactors.cpu"),
        ({"nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds"),
        ({"dominantResourceWeight": 101}, "dominantResourceWeight"),
        ({"aggregated": {"usageAggregationType": "p42"}}, "aggregated.usageAggregationType"),
        ({"aggregated": {"usageAggregatedDuration": "soon"}}, "aggregated.usageAggregatedDuration"),
        ({"usageThreshold": {"cpu": 1}}, "usageThreshold"),
    ],
)
def test_errors_name_the_field_path(data: dict[str, object], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(SchedulerConfiguration, {"loadAware": data}, "sched.yaml")
    paths = [p for p, _ in caught.value.problems]
    assert f"loadAware.{path}" in paths
    assert str(caught.value).startswith("sched.yaml: ")


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(
            SchedulerConfiguration, {"loadAware": {"resourceWeights": {"cpu": 0}, "usageThresholds": {"cpu": 200}}}
        )
    assert {p for p, _ in caught.value.problems} == {"loadAware.resourceWeights.cpu", "loadAware.usageThresholds.cpu"}


def test_scheduler_configuration_header_is_checked() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(SchedulerConfiguration, {"apiVersion": "koordpy.io/v2", "kind": "Other"})
    assert {p for p, _ in caught.value.problems} == {"apiVersion", "kind"}


def test_resources_are_name_sorted_and_include_every_named_resource() -> None:
    args = validate(
        LoadAwareSchedulingArgs,
        {"supportedResources": ["nvidia.com/gpu"], "usageThresholds": {"cpu": 60, "ephemeral-storage": 80}},
    )
    assert args.resources == ("cpu", "ephemeral-storage", "memory", "nvidia.com/gpu")


def test_bounds_are_field_constraints_so_the_json_schema_carries_them() -> None:
    props = LoadAwareSchedulingArgs.model_json_schema(by_alias=True)["properties"]
    assert props["usageThresholds"]["additionalProperties"] == {"type": "integer", "minimum": 0, "maximum": 100}
    assert props["resourceWeights"]["additionalProperties"] == {"type": "integer", "minimum": 1, "maximum": 100}
    assert props["estimatedScalingFactors"]["additionalProperties"] == {
        "type": "integer",
        "exclusiveMinimum": 0,
        "maximum": 100,
    }
    assert props["estimator"]["enum"] == ["", "defaultEstimator"]


def test_a_bound_error_names_the_value() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(SchedulerConfiguration, {"loadAware": {"usageThresholds": {"cpu": 120}}}, "sched.yaml")
    assert str(caught.value) == (
        "sched.yaml: loadAware.usageThresholds.cpu: Input should be less than or equal to 100, got 120"
    )


def test_the_cross_field_rule_is_reported_with_the_field_errors() -> None:
    # usageThresholds.cpu is out of range, "typo" is unknown and gpu has a weight but no scaling factor:
    # three problems, one message (the rule does not wait for the field errors to be fixed).
    with pytest.raises(ConfigError) as caught:
        validate(
            SchedulerConfiguration,
            {"loadAware": {"usageThresholds": {"cpu": 120}, "resourceWeights": {"gpu": 5}, "typo": 1}},
        )
    assert sorted(p for p, _ in caught.value.problems) == [
        "loadAware.resourceWeights.gpu",
        "loadAware.typo",
        "loadAware.usageThresholds.cpu",
    ]
