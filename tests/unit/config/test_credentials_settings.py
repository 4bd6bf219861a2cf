"""``credentials.refusedNotReadySeconds`` in the three configuration files: its default, and rejected values by
field path."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration

MODELS: list[type[Any]] = [SchedulerConfiguration, ManagerConfiguration, AgentConfiguration]


@pytest.mark.parametrize("model", MODELS)
def test_the_default_outlasts_two_minutes_of_refusals_and_can_be_set(model: type[Any]) -> None:
    assert validate(model, {}).credentials.refused_not_ready_seconds == 120.0
    tuned = validate(model, {"credentials": {"refusedNotReadySeconds": 1}})
    assert tuned.credentials.refused_not_ready_seconds == 1.0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("value", [0, 0.5, 86_401, float("nan"), float("inf"), "60", True])
def test_out_of_range_values_are_rejected_with_their_field_path(model: type[Any], value: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(model, {"credentials": {"refusedNotReadySeconds": value}})
    assert [path for path, _ in caught.value.problems] == ["credentials.refusedNotReadySeconds"]


@pytest.mark.parametrize("model", MODELS)
def test_an_unknown_key_is_an_error(model: type[Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(model, {"credentials": {"tokenReloadSeconds": 30}})
    assert [path for path, _ in caught.value.problems] == ["credentials.tokenReloadSeconds"]
