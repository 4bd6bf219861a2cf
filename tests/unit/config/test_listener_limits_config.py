"""The listener limit fields of the three configuration files: defaults and rejected values, by field path."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration

SECTIONS: list[tuple[type[Any], str]] = [
    (SchedulerConfiguration, "extender"),
    (AgentConfiguration, "server"),
    (ManagerConfiguration, "health"),
]


@pytest.mark.parametrize(("model", "section"), SECTIONS)
def test_defaults_bound_heads_at_64_kib_and_reads_at_10_s(model: type[Any], section: str) -> None:
    settings = getattr(validate(model, {}), section)
    assert (settings.max_header_bytes, settings.request_read_timeout_seconds) == (65536, 10.0)
    tuned = getattr(validate(model, {section: {"maxHeaderBytes": 4096, "requestReadTimeoutSeconds": 2.5}}), section)
    assert (tuned.max_header_bytes, tuned.request_read_timeout_seconds) == (4096, 2.5)


@pytest.mark.parametrize(("model", "section"), SECTIONS)
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxHeaderBytes", 1023),  # below one KiB: no real request head fits
        ("maxHeaderBytes", 16 * 1024 * 1024 + 1),  # above 16 MiB: no bound worth the name
        ("requestReadTimeoutSeconds", 0),
        ("requestReadTimeoutSeconds", -1),
        ("requestReadTimeoutSeconds", 3601),  # more than an hour: a slow-loris holds the connection
        ("requestReadTimeoutSeconds", float("nan")),
        ("requestReadTimeoutSeconds", float("inf")),
    ],
)
def test_out_of_range_values_are_rejected_with_their_field_path(
    model: type[Any], section: str, field: str, value: float
) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(model, {section: {field: value}})
    assert [path for path, _ in caught.value.problems] == [f"{section}.{field}"]
