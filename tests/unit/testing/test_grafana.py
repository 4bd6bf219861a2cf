"""Grafana's substitution of a dashboard's queries (koordpy_testkit.grafana), without Grafana: the panels'
targets, the interval variables with their arithmetic, the dashboard variables and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy_testkit.grafana import (
    format_duration,
    interval_seconds,
    panel_queries,
    rate_interval_seconds,
    resolve_variables,
    substitute,
    time_range_seconds,
)


@pytest.mark.parametrize(
    ("range_seconds", "points", "scrape", "expected"),
    [
        (21600, 1000, 15, 20.0),  # 6 h / 1,000 = 21.6 s -> 20 s
        (3600, 1000, 15, 15.0),  # 3.6 s, under the 15 s scrape interval -> 15 s
        (600, 1000, 1, 1.0),  # 0.6 s, under 1 s -> 1 s
        (600, 100, 1, 5.0),  # 6 s -> 5 s (up to 7.5 s)
        (86400, 1000, 15, 60.0),  # 86.4 s -> 1 m (up to 90 s)
        (86400 * 400, 100, 15, 86400.0),  # 4 days -> 1 d (up to 7 days)
        (86400 * 4500, 100, 15, 31536000.0),  # 45 days, over 42 -> a year
    ],
)
def test_interval_is_rounded_by_grafanas_table(
    range_seconds: float, points: int, scrape: float, expected: float
) -> None:
    assert interval_seconds(range_seconds, points, scrape) == expected


@pytest.mark.parametrize(
    ("interval", "scrape", "expected"),
    [(20, 15, 60), (120, 15, 135), (1, 1, 4), (5, 1, 6)],  # max(i + s, 4 s)
)
def test_rate_interval(interval: float, scrape: float, expected: float) -> None:
    assert rate_interval_seconds(interval, scrape) == expected


@pytest.mark.parametrize(
    ("seconds", "text"), [(60, "1m"), (4, "4s"), (135, "135s"), (7200, "2h"), (0.5, "500ms"), (1.25, "1250ms")]
)
def test_durations_are_prometheus_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


DASHBOARD: dict[str, Any] = {
    "templating": {
        "list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus"},
            {
                "name": "namespace",
                "type": "query",
                "query": {"query": "label_values(koordpy_extender_requests_total, namespace)", "refId": "x"},
                "sort": 1,
            },
        ]
    },
    "panels": [
        {"type": "row", "title": "Row", "collapsed": True, "panels": [{"title": "Inner", "targets": [{"refId": "A", "expr": "up"}]}]},
        {"title": "Rate", "targets": [{"refId": "A", "expr": 'rate(x{namespace="$namespace"}[$__rate_interval])'}]},
        {"title": "Text", "type": "text"},
    ],
}  # fmt: skip


def test_every_target_of_every_panel_rows_included() -> None:
    assert [(q.panel, q.ref_id, q.expr) for q in panel_queries(DASHBOARD)] == [
        ("Inner", "A", "up"),
        ("Rate", "A", 'rate(x{namespace="$namespace"}[$__rate_interval])'),
    ]


def test_a_query_variable_takes_the_first_sorted_label_value() -> None:
    asked: list[tuple[str, str]] = []

    def label_values(label: str, series: str) -> list[str]:
        asked.append((label, series))
        return ["zeta", "koordpy-system"]

    assert resolve_variables(DASHBOARD, label_values) == {"namespace": "koordpy-system"}
    assert asked == [("namespace", "koordpy_extender_requests_total")]
    with pytest.raises(ValueError, match="namespace: .* has no value"):
        resolve_variables(DASHBOARD, lambda label, series: [])


def test_substitution() -> None:
    expr = 'sum(rate(x{namespace="$namespace",a="${namespace}",b="[[namespace]]"}[$__rate_interval])) / $__range'
    assert substitute(expr, {"namespace": "ns"}, interval=1, scrape_interval=1, range_seconds=600) == (
        'sum(rate(x{namespace="ns",a="ns",b="ns"}[4s])) / 10m'
    )
    with pytest.raises(ValueError, match=r"\$team is not a variable"):
        substitute("x{t='$team'}", {}, interval=1, scrape_interval=1, range_seconds=60)
    with pytest.raises(ValueError, match=r"\$__from is not substituted"):
        substitute("x > $__from", {}, interval=1, scrape_interval=1, range_seconds=60)


def test_other_variable_kinds_are_refused() -> None:
    custom = {"templating": {"list": [{"name": "c", "type": "custom", "query": "a,b"}]}}
    with pytest.raises(ValueError, match="type 'custom'"):
        resolve_variables(custom, lambda label, series: [])
    other = {"templating": {"list": [{"name": "q", "type": "query", "query": "query_result(up)"}]}}
    with pytest.raises(ValueError, match="not label_values"):
        resolve_variables(other, lambda label, series: [])


def test_the_default_time_range() -> None:
    assert time_range_seconds({"time": {"from": "now-3h", "to": "now"}}) == 10800
    assert time_range_seconds({"time": {"from": "now-15m", "to": "now"}}) == 900
    with pytest.raises(ValueError, match="not now-<duration> to now"):
        time_range_seconds({"time": {"from": "2026-01-01T00:00:00Z", "to": "now"}})
