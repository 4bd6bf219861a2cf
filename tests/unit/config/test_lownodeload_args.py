"""``lowNodeLoad:``: Koordinator's LowNodeLoadArgs names and defaults, node pools, field-path errors.

Translated from Koordinator v1.8.0: ``TestSetDefaults_LowNodeLoadArgs`` and
``TestSetDefaults_NodePoolsUseDefaultArgsFromLowNodeLoadArgs`` (v1alpha2/defaults_test.go),
``TestValidateLowLoadUtilizationArgs_*`` (validation/validation_loadaware_test.go). Differences, each on purpose:
a threshold above 100 is refused (upstream: "we do not check threshold larger than 100"); a pool's anomaly count of
0 takes the top level's (upstream's defaulting does that before its validation, which the validation test skips);
two pools without a node selector overlap and are refused (upstream's second inheritance case has two; here they
select ``pool: 1`` and ``pool: 2``).
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.config.lownodeload import DEFAULT_POOL, AnomalyCondition, LowNodeLoadArgs
from koordpy.config.manager import ManagerConfiguration


def load(**fields: Any) -> LowNodeLoadArgs:
    return validate(LowNodeLoadArgs, fields)


def problems(fields: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        validate(LowNodeLoadArgs, fields)
    return caught.value.problems


def test_defaults() -> None:
    args = load()
    assert (args.paused, args.dry_run, args.node_fit, args.number_of_nodes) == (False, False, True, 0)
    assert (args.node_metric_expiration_seconds, args.detector_cache_timeout) == (180, 300.0)
    assert args.pools == ()  # no threshold at the top level: no default pool


@pytest.mark.parametrize(
    ("fields", "weights", "anomaly"),
    [
        # "set nodeFit" / "set detectorCacheTimeout": weights cpu, memory 1; the default anomaly condition.
        pytest.param(
            {"nodeFit": False, "highThresholds": {"cpu": 80}}, {"cpu": 1, "memory": 1}, (60.0, 5, 3), id="nodeFit"
        ),
        # "set anomalyCondition": consecutiveAbnormalities 0 -> 5, the others kept.
        pytest.param(
            {
                "highThresholds": {"cpu": 80},
                "anomalyCondition": {"timeout": "10s", "consecutiveAbnormalities": 0, "consecutiveNormalities": 3},
            },
            {"cpu": 1, "memory": 1},
            (10.0, 5, 3),
            id="anomalyCondition",
        ),
        # Upstream leaves consecutiveNormalities at 0 when both are 0 (an else-if chain): here each is defaulted.
        pytest.param(
            {"highThresholds": {"cpu": 80}, "anomalyCondition": {"consecutiveAbnormalities": 0}},
            {"cpu": 1, "memory": 1},
            (60.0, 5, 3),
            id="both counts 0",
        ),
        # "set weights": given cpu 10 / memory 5 kept, pods (a low threshold resource) gets 1.
        pytest.param(
            {"lowThresholds": {"cpu": 30, "memory": 30, "pods": 10}, "resourceWeights": {"cpu": 10, "memory": 5}},
            {"cpu": 10, "memory": 5, "pods": 1},
            (60.0, 5, 3),
            id="weights",
        ),
    ],
)
def test_upstream_defaults(fields: dict[str, Any], weights: dict[str, int], anomaly: tuple[float, int, int]) -> None:
    (pool,) = load(**fields).pools
    assert pool.resource_weights == weights
    assert pool.anomaly == AnomalyCondition(*anomaly)


def test_pools_inherit_every_field() -> None:
    # "nodePools inherit all fields from top-level config".
    args = load(
        highThresholds={"cpu": 80, "memory": 80},
        lowThresholds={"cpu": 20, "memory": 20},
        prodHighThresholds={"cpu": 90},
        prodLowThresholds={"cpu": 10},
        resourceWeights={"cpu": 2},
        useDeviationThresholds=True,
        anomalyCondition={"timeout": "2m", "consecutiveAbnormalities": 10, "consecutiveNormalities": 5},
        nodePools=[{"name": "test-pool"}],
    )
    default, pool = args.pools
    assert (default.name, pool.name) == (DEFAULT_POOL, "test-pool")
    assert (pool.high, pool.low) == ({"cpu": 80, "memory": 80}, {"cpu": 20, "memory": 20})
    assert (pool.prod_high, pool.prod_low) == ({"cpu": 90}, {"cpu": 10})
    assert pool.resource_weights == {"cpu": 2, "memory": 1}
    assert pool.anomaly == AnomalyCondition(120.0, 10, 5)
    assert pool.use_deviation_thresholds  # upstream: false unless the pool sets it


def test_pools_inherit_what_they_leave_out() -> None:
    # "multiple nodePools inherit from top-level config", with disjoint selectors.
    args = load(
        highThresholds={"cpu": 80},
        lowThresholds={"cpu": 20},
        nodePools=[
            {"name": "pool-1", "nodeSelector": {"matchLabels": {"pool": "1"}}},
            {"name": "pool-2", "nodeSelector": {"matchLabels": {"pool": "2"}}, "highThresholds": {"cpu": 70}},
        ],
    )
    _, one, two = args.pools
    assert (one.high, one.low) == ({"cpu": 80}, {"cpu": 20})
    assert (two.high, two.low) == ({"cpu": 70}, {"cpu": 20})
    assert two.anomaly == AnomalyCondition(60.0, 5, 3)


def test_upstream_args_paste_unchanged() -> None:
    # Koordinator's shipped descheduler-config.yaml LowNodeLoad args.
    args = load(
        apiVersion="descheduler/v1alpha2",
        kind="LowNodeLoadArgs",
        evictableNamespaces={"exclude": ["kube-system", "koordinator-system"]},
        useDeviationThresholds=False,
        lowThresholds={"cpu": 45, "memory": 55},
        highThresholds={"cpu": 75, "memory": 80},
    )
    (pool,) = args.pools
    assert (pool.low, pool.high, pool.resources) == (
        {"cpu": 45, "memory": 55},
        {"cpu": 75, "memory": 80},
        ("cpu", "memory"),
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({"numberOfNodes": -1}, ("numberOfNodes", "greater than or equal to 0"), id="numberOfNodes -1"),
        pytest.param({"numberOfNodes": -5}, ("numberOfNodes", "greater than or equal to 0"), id="numberOfNodes -5"),
        pytest.param(
            {"evictableNamespaces": {"include": ["namespace1"], "exclude": ["namespace2"]}},
            ("evictableNamespaces.include", "only one of include and exclude"),
            id="include and exclude",
        ),
        pytest.param(
            {"nodePools": [{"lowThresholds": {"cpu": -1}, "highThresholds": {"cpu": 0}}]},
            ("nodePools[0].lowThresholds.cpu", "between 0 and 100"),
            id="pool low -1",
        ),
        pytest.param(
            {"nodePools": [{"lowThresholds": {"cpu": -100}, "highThresholds": {"cpu": -10}}]},
            ("nodePools[0].lowThresholds.cpu", "between 0 and 100"),
            id="pool both negative",
        ),
        pytest.param(
            {"nodePools": [{"lowThresholds": {"cpu": 50}, "highThresholds": {"cpu": 120}}]},
            ("nodePools[0].highThresholds.cpu", "between 0 and 100, got 120"),
            id="pool high 120 (upstream accepts)",
        ),
        pytest.param(
            {"lowThresholds": {"cpu": 80}, "highThresholds": {"cpu": 70}},
            ("lowThresholds.cpu", "80 is above highThresholds.cpu 70"),
            id="low above high",
        ),
        pytest.param(
            {"prodHighThresholds": {"memory": 90}, "highThresholds": {"memory": 80}},
            ("prodHighThresholds.memory", "90 is above highThresholds.memory 80"),
            id="prod high above node high",
        ),
        pytest.param(
            {"lowThresholds": {"cpu": 45}, "nodePools": [{"name": "a", "highThresholds": {"cpu": 40}}]},
            ("nodePools[0].highThresholds.cpu", "40 is below lowThresholds (inherited).cpu 45"),
            id="pool high below the inherited low",
        ),
        pytest.param(
            {"highThresholds": {"nvidia.com/gpu": 80}},
            ("highThresholds.nvidia.com/gpu", "unknown resource"),
            id="unknown resource",
        ),
        pytest.param(
            {"nodePools": [{"name": "a", "resourceWeights": {"example.com/foo": 1}}]},
            ("nodePools[0].resourceWeights.example.com/foo", "unknown resource"),
            id="unknown resource in a pool's weights",
        ),
        pytest.param(
            {
                "nodePools": [
                    {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}},
                    {"name": "b", "nodeSelector": {"matchLabels": {"zone": "x"}}},
                ]
            },
            ("nodePools[1].nodeSelector", "may select the same nodes as nodePools[0].nodeSelector"),
            id="overlapping pools",
        ),
        pytest.param(
            {"nodePools": [{"name": "a"}, {"name": "a", "nodeSelector": {"matchLabels": {"x": "y"}}}]},
            ("nodePools[1].name", "'a' is already the name of nodePools[0]"),
            id="same name",
        ),
        pytest.param(
            {"podSelectors": [{"name": "bad", "selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}}]},
            ("podSelectors[0].selector.matchExpressions[0].operator", "Input should be 'In'"),
            id="selector operator",
        ),
        pytest.param(
            {"podSelectors": [{"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}]},
            ("podSelectors[0].selector.matchExpressions[0].values", "required with operator In"),
            id="In without values",
        ),
        pytest.param(
            {"nodePools": [{"nodeSelector": {"matchLabels": {"bad key!": "x"}}}]},
            ("nodePools[0].nodeSelector.matchLabels.bad key!", "the name part must be"),
            id="selector key",
        ),
        pytest.param(
            {"nodeSelector": {"matchLabels": {"pool": "a b"}}},
            ("nodeSelector.matchLabels.pool", "a label value must be"),
            id="selector value",
        ),
        pytest.param(
            {"nodeMetricExpirationSeconds": 0}, ("nodeMetricExpirationSeconds", "greater than 0"), id="expiration 0"
        ),
        pytest.param(
            {"lowThresholds": {"cpu": "45"}}, ("lowThresholds.cpu", "expected a number"), id="string threshold"
        ),
        pytest.param({"lowThreshold": {"cpu": 45}}, ("lowThreshold", "Extra inputs are not permitted"), id="a typo"),
    ],
)
def test_refused_with_the_field_path(fields: dict[str, Any], expected: tuple[str, str]) -> None:
    path, fragment = expected
    found = problems(fields)
    assert any(p == path and fragment in message for p, message in found), found


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"numberOfNodes": 10}, id="numberOfNodes 10"),
        pytest.param({"evictableNamespaces": {"include": ["namespace1", "namespace2"]}}, id="include only"),
        pytest.param({"nodePools": [{"lowThresholds": {"cpu": 90}, "highThresholds": {"cpu": 100}}]}, id="90/100"),
        pytest.param({"nodePools": [{"lowThresholds": {"cpu": 0}, "highThresholds": {"cpu": 0}}]}, id="0/0"),
        # A pool's anomaly count 0 is the top level's (upstream defaults it the same before validating).
        pytest.param(
            {"nodePools": [{"highThresholds": {"cpu": 80}, "anomalyCondition": {"consecutiveAbnormalities": 0}}]},
            id="pool count 0",
        ),
        # Deviations: low and high are distances from the mean, any pair is consistent.
        pytest.param(
            {"useDeviationThresholds": True, "lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 10}},
            id="deviation",
        ),
        # Disjoint pools: the same key with other values, or a key one requires and the other forbids.
        pytest.param(
            {
                "nodePools": [
                    {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}},
                    {
                        "name": "b",
                        "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b", "c"]}]},
                    },
                    {"name": "d", "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}},
                ]
            },
            id="disjoint pools",
        ),
    ],
)
def test_accepted(fields: dict[str, Any]) -> None:
    load(**fields)


def test_manager_configuration_nests_it() -> None:
    config = validate(
        ManagerConfiguration,
        {"deschedulingInterval": "30s", "maxNoOfPodsToEvictTotal": 20, "lowNodeLoad": {"highThresholds": {"cpu": 70}}},
    )
    assert config.descheduling_interval_seconds == 30.0
    assert config.max_no_of_pods_to_evict_total == 20
    assert config.low_node_load is not None and config.low_node_load.pools[0].high == {"cpu": 70}
    assert validate(ManagerConfiguration, {}).low_node_load is None
    assert validate(ManagerConfiguration, {}).descheduling_interval == "10s"
    with pytest.raises(ConfigError) as caught:
        validate(ManagerConfiguration, {"deschedulingInterval": "0s", "lowNodeLoad": {"lowThresholds": {"cpu": 101}}})
    assert {p for p, _ in caught.value.problems} == {"deschedulingInterval", "lowNodeLoad.lowThresholds.cpu"}
