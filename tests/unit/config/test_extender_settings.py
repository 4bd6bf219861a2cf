"""ExtenderSettings: the optional operations listener (metricsPort, metricsHost) and its field-path errors."""

from __future__ import annotations

import pytest

from koordpy.config import ConfigError, SchedulerConfiguration, validate


def test_no_ops_listener_by_default() -> None:
    extender = validate(SchedulerConfiguration, {}).extender
    assert extender.metrics_port is None
    assert extender.metrics_host == "0.0.0.0"


def test_metrics_port_and_host_by_their_aliases() -> None:
    extender = validate(SchedulerConfiguration, {"extender": {"metricsPort": 10263, "metricsHost": "::"}}).extender
    assert (extender.metrics_port, extender.metrics_host) == (10263, "::")


@pytest.mark.parametrize(
    ("extender", "message"),
    [
        ({"metricsPort": 10262}, "must differ from port (10262)"),
        ({"port": 9000, "metricsPort": 9000}, "must differ from port (9000)"),
        ({"metricsPort": 0}, "greater than or equal to 1"),
        ({"metricsPort": 65536}, "less than or equal to 65535"),
    ],
)
def test_metrics_port_errors_name_the_field_path(extender: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(SchedulerConfiguration, {"extender": extender}, "sched.yaml")
    assert [path for path, _ in caught.value.problems] == ["extender.metricsPort"]
    assert message in caught.value.problems[0][1]
    assert str(caught.value).startswith("sched.yaml: extender.metricsPort: ")


def test_port_clash_is_reported_with_the_other_problems() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(
            SchedulerConfiguration, {"extender": {"metricsPort": 10262}, "loadAware": {"usageThresholds": {"cpu": 200}}}
        )
    assert {path for path, _ in caught.value.problems} == {"extender.metricsPort", "loadAware.usageThresholds.cpu"}
