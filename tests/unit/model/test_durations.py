import re

import pytest

from koordpy.model.durations import (
    DURATION_PATTERN,
    DurationError,
    format_rfc3339,
    parse_duration,
    parse_rfc3339,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300.0), ("1h30m", 5400.0), ("300ms", 0.3), ("3600s", 3600.0), ("0", 0.0), ("1.5h", 5400.0), (90, 90.0)],
)
def test_go_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["5", "m", "5x", "1h 30m", True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(DurationError):
        parse_duration(bad)  # type: ignore[arg-type]


def test_rfc3339_round_trip_and_zones() -> None:
    epoch = parse_rfc3339("2026-11-21T10:00:00Z")
    assert epoch == 1795255200.0
    assert parse_rfc3339("2026-11-21T11:00:00+01:00") == epoch
    assert parse_rfc3339("2026-11-21T10:00:00.500Z") == epoch + 0.5
    assert format_rfc3339(epoch) == "2026-11-21T10:00:00Z"
    with pytest.raises(DurationError):
        parse_rfc3339("2026-11-21T10:00:00")  # no zone
    with pytest.raises(DurationError):
        parse_rfc3339("yesterday")


@pytest.mark.parametrize(
    "text",
    ["5m", "5m0s", "1h30m", "300ms", "1.5h", ".5s", "2us", "3µs", "+10s", "0", "", "-5m", "5", "5 m", "m", "5d", "1h-"],
)
def test_duration_pattern_matches_what_the_parser_reads_as_non_negative(text: str) -> None:
    """DURATION_PATTERN (the chart's values schema uses it) agrees with parse_duration on each string."""
    try:
        parsed_ok = parse_duration(text) >= 0
    except DurationError:
        parsed_ok = False
    assert bool(re.fullmatch(DURATION_PATTERN, text)) is parsed_ok
