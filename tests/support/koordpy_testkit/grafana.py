"""A Grafana dashboard's Prometheus queries as Grafana sends them: every panel's targets (rows and nested
panels included), with the dashboard's variables and Grafana's interval variables substituted.

The rules are Grafana's (``pkg/tsdb/prometheus`` and the frontend's template service):

- ``$__interval``: the time range divided by the panel's data points (``maxDataPoints``, by default its
  width in pixels; given here), never below the data source's scrape interval ("min interval"), rounded
  down to Grafana's table of round intervals (``RoundInterval``: ..., 1s, 2s, 5s, 10s, 15s, 20s, 30s,
  1m, ...);
- ``$__rate_interval``: ``max($__interval + scrape interval, 4 * scrape interval)``;
- ``$__range``: the time range (the dashboard's default, ``time``: ``now-3h`` to ``now``);
- a dashboard variable (``$name``, ``${name}``, ``${name:format}``, ``[[name]]``): its single value, as is.

A query variable is resolved as Grafana resolves ``label_values(<series>, <label>)``: the label's values
on the matching series (Prometheus' ``/api/v1/label/<label>/values?match[]=``), sorted when the variable
asks for it, the first one chosen (no ``current`` value saved in the dashboard). Data source variables are
left out (their value is the data source the queries go to). Other variable kinds and any other ``$__``
variable are refused with an error naming them: a dashboard that starts using one fails here instead of
being queried differently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PanelQuery",
    "format_duration",
    "interval_seconds",
    "panel_queries",
    "rate_interval_seconds",
    "resolve_variables",
    "substitute",
    "time_range_seconds",
]

# Grafana's RoundInterval: (upper bound of the raw interval, the round interval), seconds.
_ROUND = (
    (0.010, 0.001),
    (0.015, 0.010),
    (0.035, 0.020),
    (0.075, 0.050),
    (0.150, 0.100),
    (0.350, 0.200),
    (0.750, 0.500),
    (1.5, 1.0),
    (3.5, 2.0),
    (7.5, 5.0),
    (12.5, 10.0),
    (17.5, 15.0),
    (25.0, 20.0),
    (45.0, 30.0),
    (90.0, 60.0),
    (210.0, 120.0),
    (450.0, 300.0),
    (750.0, 600.0),
    (1050.0, 900.0),
    (1500.0, 1200.0),
    (2700.0, 1800.0),
    (5400.0, 3600.0),
    (9000.0, 7200.0),
    (16200.0, 10800.0),
    (24300.0, 21600.0),
    (32400.0, 28800.0),
    (86400.0, 43200.0),
    (604800.0, 86400.0),
    (1814400.0, 604800.0),
    (3628800.0, 2592000.0),
)
_YEAR = 31536000.0
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")
_RELATIVE = re.compile(r"^now-(\d+)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(.*?)\s*,\s*)?(\w+)\s*\)\s*$")


@dataclass(frozen=True)
class PanelQuery:
    panel: str
    """The panel's title."""
    ref_id: str
    expr: str
    """As written in the dashboard, variables not yet substituted."""


def panel_queries(dashboard: Mapping[str, Any]) -> list[PanelQuery]:
    """Every Prometheus target of every panel, in the dashboard's order (a collapsed row's panels too)."""

    def walk(panels: list[Mapping[str, Any]]) -> Iterator[PanelQuery]:
        for panel in panels:
            for target in panel.get("targets") or []:
                if "expr" in target:
                    yield PanelQuery(panel.get("title", ""), target.get("refId", ""), target["expr"])
            yield from walk(panel.get("panels") or [])

    return list(walk(list(dashboard.get("panels") or [])))


def time_range_seconds(dashboard: Mapping[str, Any]) -> float:
    """The length of the dashboard's default time range (``time``: ``now-3h`` to ``now``), in seconds; only
    ranges relative to now are read."""
    window = dashboard.get("time") or {}
    match = _RELATIVE.match(str(window.get("from", "")))
    if match is None or window.get("to") != "now":
        raise ValueError(f"time range {window!r} is not now-<duration> to now")
    return float(int(match[1]) * _UNIT[match[2]])


def _round(seconds: float) -> float:
    for bound, rounded in _ROUND:
        if seconds <= bound:
            return rounded
    return _YEAR


def interval_seconds(range_seconds: float, max_data_points: int, scrape_interval: float) -> float:
    """``$__interval`` for a panel showing ``range_seconds`` in ``max_data_points`` points, the data source's
    scrape interval ``scrape_interval`` its lower bound. 6 h over 1,000 points: 21.6 s, rounded to 20 s."""
    raw = range_seconds / max_data_points
    return _round(max(raw, scrape_interval))


def rate_interval_seconds(interval: float, scrape_interval: float) -> float:
    """``$__rate_interval``: ``max($__interval + scrape interval, 4 x scrape interval)``. 20 s and 15 s:
    max(35, 60) = 60 s."""
    return max(interval + scrape_interval, 4 * scrape_interval)


def format_duration(seconds: float) -> str:
    """A Prometheus duration: whole seconds as ``<n>s`` (or minutes, hours when exact), else milliseconds."""
    millis = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"


def resolve_variables(dashboard: Mapping[str, Any], label_values: Callable[[str, str], list[str]]) -> dict[str, str]:
    """The value Grafana picks for each variable of the dashboard's ``templating``; ``label_values(label,
    series)`` answers ``label_values(series, label)``. A query variable without any value is an error."""
    values: dict[str, str] = {}
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        kind, name = variable.get("type"), variable["name"]
        if kind == "datasource":
            continue
        if kind != "query":
            raise ValueError(f"variable {name}: type {kind!r} is not resolved here")
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, Mapping) else str(query)
        match = _LABEL_VALUES.match(text)
        if match is None:
            raise ValueError(f"variable {name}: {text!r} is not label_values(...)")
        series, label = match[1] or "", match[2]
        found = label_values(label, series)
        if variable.get("sort") in (1, 3, 5):  # ascending: alphabetical, numerical, case-insensitive
            found = sorted(found)
        elif variable.get("sort") in (2, 4, 6):
            found = sorted(found, reverse=True)
        if not found:
            raise ValueError(f"variable {name}: {text} has no value")
        values[name] = found[0]
    return values


def substitute(
    expr: str, variables: Mapping[str, str], *, interval: float, scrape_interval: float, range_seconds: float
) -> str:
    """``expr`` with Grafana's ``$__interval``, ``$__rate_interval`` and ``$__range`` and the dashboard's
    ``variables`` put in."""
    builtins = {
        "__interval": format_duration(interval),
        "__rate_interval": format_duration(rate_interval_seconds(interval, scrape_interval)),
        "__range": format_duration(range_seconds),
        "__interval_ms": str(round(interval * 1000)),
    }

    def value(match: re.Match[str]) -> str:
        name = match[1] or match[2] or match[3]
        if name in builtins:
            return builtins[name]
        if name.startswith("__"):
            raise ValueError(f"{expr}: Grafana variable ${name} is not substituted here")
        if name not in variables:
            raise ValueError(f"{expr}: ${name} is not a variable of the dashboard")
        return variables[name]

    return _VARIABLE.sub(value, expr)
