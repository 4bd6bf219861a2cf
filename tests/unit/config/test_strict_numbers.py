"""Every configuration model refuses NaN, infinity, booleans for numbers, huge durations and values
out of their documented range, naming the field path."""

from __future__ import annotations

import math

import pytest

from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scenario import Scenario
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy_testkit.hostile import base_scenario, set_path

NAN, INF = math.nan, math.inf
DIGITS_400 = "9" * 400


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"collectIntervalSeconds": 1e-9}, "collectIntervalSeconds"),  # below the 0.1 s minimum
        ({"collectIntervalSeconds": NAN}, "collectIntervalSeconds"),
        ({"collectIntervalSeconds": INF}, "collectIntervalSeconds"),
        ({"collectIntervalSeconds": True}, "collectIntervalSeconds"),
        ({"collectIntervalSeconds": "10"}, "collectIntervalSeconds"),
        ({"qos": {"protectedPriorityAbove": True}}, "qos.protectedPriorityAbove"),
        ({"qos": {"protectedPriorityAbove": 2**31}}, "qos.protectedPriorityAbove"),  # int32 like spec.priority
        ({"qos": {"evictionTimeoutSeconds": INF}}, "qos.evictionTimeoutSeconds"),
        ({"qos": {"evictionTimeoutSeconds": -NAN}}, "qos.evictionTimeoutSeconds"),
        ({"qos": {"maxSampleGapSeconds": 0.0}}, "qos.maxSampleGapSeconds"),
        ({"qos": {"evictionRetries": 10**400}}, "qos.evictionRetries"),
        ({"qos": {"enabled": 1}}, "qos.enabled"),
        ({"nodeMetric": {"reportIntervalSeconds": int(DIGITS_400)}}, "nodeMetric.reportIntervalSeconds"),
        ({"nodeMetric": {"reportIntervalSeconds": 60.0}}, "nodeMetric.reportIntervalSeconds"),
        ({"nodeMetric": {"aggregationDurationsSeconds": [300, False]}}, "nodeMetric.aggregationDurationsSeconds[1]"),
        ({"server": {"port": True}}, "server.port"),
    ],
)
def test_agent_configuration(data, path):
    with pytest.raises(ConfigError) as info:
        validate(AgentConfiguration, data, "agent.yaml")
    assert path in [p for p, _ in info.value.problems], info.value.problems
    assert str(info.value).startswith("agent.yaml: ")


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"loadAware": {"usageThresholds": {"cpu": NAN}}}, "loadAware.usageThresholds.cpu"),
        ({"loadAware": {"usageThresholds": {"cpu": True}}}, "loadAware.usageThresholds.cpu"),
        ({"loadAware": {"usageThresholds": {"cpu": 65.5}}}, "loadAware.usageThresholds.cpu"),
        ({"loadAware": {"nodeMetricExpirationSeconds": True}}, "loadAware.nodeMetricExpirationSeconds"),
        ({"loadAware": {"nodeMetricExpirationSeconds": 2**31}}, "loadAware.nodeMetricExpirationSeconds"),
        ({"loadAware": {"resourceWeights": {"cpu": INF}}}, "loadAware.resourceWeights.cpu"),
        ({"loadAware": {"filterExpiredNodeMetrics": "yes"}}, "loadAware.filterExpiredNodeMetrics"),
        (
            {"loadAware": {"aggregated": {"usageAggregatedDuration": DIGITS_400 + "h"}}},
            "loadAware.aggregated.usageAggregatedDuration",
        ),
        (
            {"loadAware": {"aggregated": {"scoreAggregatedDuration": INF}}},
            "loadAware.aggregated.scoreAggregatedDuration",
        ),
        ({"extender": {"bindTimeoutSeconds": NAN}}, "extender.bindTimeoutSeconds"),
        ({"extender": {"bindTimeoutSeconds": 1e-9}}, "extender.bindTimeoutSeconds"),
        ({"extender": {"watchTimeoutSeconds": True}}, "extender.watchTimeoutSeconds"),
        ({"extender": {"maxRequestBytes": 1 << 40}}, "extender.maxRequestBytes"),
        ({"extender": {"port": 10262.0}}, "extender.port"),
    ],
)
def test_scheduler_configuration(data, path):
    with pytest.raises(ConfigError) as info:
        validate(SchedulerConfiguration, data, "scheduler.yaml")
    assert path in [p for p, _ in info.value.problems], info.value.problems


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"nodeMetric": {"reportIntervalSeconds": True}}, "nodeMetric.reportIntervalSeconds"),
        ({"nodeMetric": {"nodeAggregateDurations": [DIGITS_400 + "s"]}}, "nodeMetric.nodeAggregateDurations"),
        ({"health": {"port": "8080"}}, "health.port"),
        ({"peering": {"enabled": "true"}}, "peering.enabled"),
    ],
)
def test_manager_configuration(data, path):
    with pytest.raises(ConfigError) as info:
        validate(ManagerConfiguration, data, "manager.yaml")
    assert path in [p for p, _ in info.value.problems], info.value.problems


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("seed", True),
        ("seed", NAN),
        ("duration", NAN),
        ("duration", INF),
        ("duration", DIGITS_400 + "h"),
        ("start", INF),
        ("start", -1),
        ("step", 1e-12),  # more than 1,000,000 steps
        ("nodePools[0].count", True),
        ("nodePools[0].allocatable.cpu", "1e400"),
        ("workloads[0].priority", 2**31),
        ("workloads[0].lifetime.min", NAN),
        ("workloads[0].usage.cpu.mean", "1e400"),
        ("workloads[0].usage.cpu.spread", NAN),
        ("workloads[0].usage.amplitude", True),
        ("workloads[0].usage.burstFactor", INF),
        ("nodeMetric.lag", INF),
        ("report.hotThreshold", True),
        ("qos.enabled", "yes"),
    ],
)
def test_scenario(path, value):
    with pytest.raises(ConfigError) as info:
        validate(Scenario, set_path(base_scenario(), path, value), "s.yaml")
    assert any(p.startswith(path) for p, _ in info.value.problems), info.value.problems
    assert str(info.value).startswith("s.yaml: ")


def test_the_bounds_accept_what_platform_engineers_write():
    agent = validate(
        AgentConfiguration,
        {"collectIntervalSeconds": 0.2, "qos": {"evictionTimeoutSeconds": 60, "protectedPriorityAbove": 7999}},
    )
    assert agent.collect_interval_seconds == 0.2 and agent.qos.eviction_timeout_seconds == 60.0
    scheduler = validate(SchedulerConfiguration, {"extender": {"bindTimeoutSeconds": 4, "watchTimeoutSeconds": 300}})
    assert scheduler.extender.bind_timeout_seconds == 4.0
    assert validate(Scenario, base_scenario()).duration == 600.0
