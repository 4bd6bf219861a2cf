"""AgentConfiguration: defaults, field-path errors."""

from __future__ import annotations

import pytest

from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate


def test_defaults():
    cfg = validate(AgentConfiguration, {"apiVersion": "koordpy.io/v1alpha1", "kind": "AgentConfiguration"})
    assert cfg.collect_interval_seconds == 10
    assert cfg.node_metric.report_interval_seconds == 60
    assert cfg.node_metric.aggregate_duration_seconds == 300
    assert cfg.qos.protected_namespaces == ("kube-system",)
    assert cfg.sample_gap == 30  # 3 x collectIntervalSeconds


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"kind": "SchedulerConfiguration"}, "kind"),
        ({"qos": {"protectedNamespace": ["x"]}}, "qos.protectedNamespace"),
        ({"collectIntervalSeconds": 0}, "collectIntervalSeconds"),
        ({"stateDir": "relative/dir"}, "stateDir"),
        ({"collectIntervalSeconds": 120}, "nodeMetric.reportIntervalSeconds"),
        ({"server": {"port": 70000}}, "server.port"),
    ],
)
def test_errors_name_the_field(data, path):
    with pytest.raises(ConfigError) as info:
        validate(AgentConfiguration, data, "agent.yaml")
    assert path in [p for p, _ in info.value.problems]
    assert str(info.value).startswith("agent.yaml: ")
