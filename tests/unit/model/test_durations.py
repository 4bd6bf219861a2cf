import re

import pytest

from koordpy.model.durations import (
    DURATION_PATTERN,
    DurationError,
    format_rfc3339,
    human_duration,
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


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("2026-01-01", "not an RFC 3339 timestamp: '2026-01-01' is a date without a time (say 2026-01-01T00:00:00Z)"),
        (
            "2026-01-01T10:00:00",
            "RFC 3339 timestamp needs a zone: '2026-01-01T10:00:00' (Z or +hh:mm, say 2026-01-01T10:00:00Z)",
        ),
        ("yesterday", "not an RFC 3339 timestamp: 'yesterday'"),
    ],
)
def test_rfc3339_errors_say_what_is_missing(raw: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_rfc3339(raw)
    assert str(caught.value) == message


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


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("2026-11-21T10:00:00Z", "2026-11-21T10:00:00+00:00"),  # the API server's form, read directly
        ("2026-11-21T10:00:00.25Z", "2026-11-21T10:00:00.25+00:00"),
        ("2026-11-21T10:00:00z", "2026-11-21T10:00:00+00:00"),  # lower case: through the general path
        (" 2026-11-21T10:00:00Z ", "2026-11-21T10:00:00+00:00"),  # surrounding blanks: likewise
        ("2026-11-21 10:00:00Z", "2026-11-21T10:00:00+00:00"),
    ],
)
def test_rfc3339_utc_forms_equal_the_explicit_offset(text: str, same_as: str) -> None:
    assert parse_rfc3339(text) == parse_rfc3339(same_as) == 1795255200.0 + (0.25 if ".25" in text else 0)


@pytest.mark.parametrize(
    "bad", ["Z", "2026-11-21Z", "2026-11-21T10:00:00+01:00Z", "yesterdayZ", "2026-11-21T25:00:00Z"]
)
def test_rfc3339_a_bad_utc_form_is_refused(bad: str) -> None:
    with pytest.raises(DurationError, match="RFC 3339 timestamp"):  # unreadable, or a date without a zone
        parse_rfc3339(bad)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        # kubectl's HumanDuration: seconds under 2 minutes, then m+s under 10 minutes, m under 3 hours,
        # h+m under 8 hours, h under 2 days, d+h under 8 days, d under 2 years, y+d under 8 years.
        (-5, "0s"),
        (0, "0s"),
        (45.9, "45s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (2400, "40m"),
        (10799, "179m"),
        (10800, "3h"),
        (18600, "5h10m"),
        (30 * 3600, "30h"),
        (8754 * 60, "6d1h"),  # 525,240 s = 6 days 1 hour 54 minutes
        (6 * 86400, "6d"),
        (40 * 86400, "40d"),
        ((2 * 365 + 30) * 86400, "2y30d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration_reads_like_kubectl(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown
