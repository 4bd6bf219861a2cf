"""The manager's ``reservation:`` section: defaults, bounds with field paths, unknown keys refused."""

from __future__ import annotations

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.reservation import ReservationSettings


def test_defaults_are_opt_in_and_documented() -> None:
    settings = validate(ManagerConfiguration, {}).reservation
    assert settings == ReservationSettings(
        enabled=False,
        starving_job_time_threshold=600,
        reserved_node_percent=20,
        interval_seconds=10.0,
        max_hold_seconds=1800,
        priority_threshold=0,
    )


def test_every_field_by_its_yaml_name() -> None:
    raw = {
        "enabled": True,
        "starvingJobTimeThreshold": 172800,
        "reservedNodePercent": 50,
        "intervalSeconds": 2.5,
        "maxHoldSeconds": 60,
        "priorityThreshold": -5,
    }
    settings = validate(ManagerConfiguration, {"reservation": raw}).reservation
    assert (
        settings.enabled,
        settings.starving_job_time_threshold,
        settings.reserved_node_percent,
        settings.interval_seconds,
        settings.max_hold_seconds,
        settings.priority_threshold,
    ) == (True, 172800, 50, 2.5, 60, -5)


@pytest.mark.parametrize(
    ("raw", "path", "fragment"),
    [
        ({"reservedNodePercent": 101}, "reservation.reservedNodePercent", "less than or equal to 100"),
        ({"reservedNodePercent": -1}, "reservation.reservedNodePercent", "greater than or equal to 0"),
        ({"reservedNodePercent": "50"}, "reservation.reservedNodePercent", "integer"),
        ({"starvingJobTimeThreshold": 0}, "reservation.starvingJobTimeThreshold", "greater than or equal to 1"),
        ({"intervalSeconds": 0.5}, "reservation.intervalSeconds", "greater than or equal to 1"),
        ({"maxHoldSeconds": True}, "reservation.maxHoldSeconds", "integer"),
        ({"enabled": "yes"}, "reservation.enabled", "boolean"),
        ({"starvingJobTimeTreshold": 5}, "reservation.starvingJobTimeTreshold", "Extra inputs"),
    ],
)
def test_bad_values_name_their_field(raw: dict[str, object], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(ManagerConfiguration, {"reservation": raw})
    assert [p for p, _ in info.value.problems] == [path]
    assert fragment in info.value.problems[0][1]
