"""report.html says each figure one way: every number a plot legend quotes is the table's cell for that
policy, in the table's unit (the spread is a fraction, 0.102, on the table, the legend and the axis, not
10.2 percentage points on one of them), and the utilisation plot marks the hot threshold."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.sim.engine import BASELINE, KOORDPY
from koordpy.sim.report import render_html
from koordpy.sim.run import PolicyRun, simulate
from koordpy.sim.svg import HOT

NS = {"s": "http://www.w3.org/2000/svg"}
NUMBER = r"\d[\d,]*(?:\.\d+)?%?"


def _runs(scenario: Scenario) -> list[PolicyRun]:
    return simulate(scenario, scenario.seed, [KOORDPY, BASELINE], lambda _s, _p: None)


@pytest.fixture
def gang_raw(small_raw: dict[str, Any]) -> dict[str, Any]:
    small_raw["workloads"].append(
        {
            "name": "train",
            "arrivals": {"count": 3, "end": "20m"},
            "lifetime": {"min": "10m", "max": "20m"},
            "requests": {"cpu": "4", "memory": "1Gi"},
            "usage": {"cpu": {"mean": "3"}, "memory": {"mean": "1Gi"}},
            "gang": {"members": 3},
        }
    )
    return small_raw


def _table(page: str) -> dict[str, dict[str, str]]:
    """policy → row label → cell, from the page's summary table."""
    head = re.search(r"<table><tr><th></th>(.*?)</tr>", page)
    assert head is not None
    policies = re.findall(r"<th>([^<]*)</th>", head.group(1))
    table: dict[str, dict[str, str]] = {p: {} for p in policies}
    for label, cells in re.findall(r"<tr><th>([^<]*)</th>((?:<td>[^<]*</td>)+)</tr>", page):
        for policy, value in zip(policies, re.findall(r"<td>([^<]*)</td>", cells), strict=True):
            table[policy][label] = value
    return table


def _legends(page: str) -> list[tuple[str, list[str]]]:
    """(chart title, legend texts) of every plot."""
    out = []
    for svg_text in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        svg = ET.fromstring(svg_text)
        legend = svg.find("s:g[@class='legend']", NS)
        if legend is None:
            continue
        title = "".join(next(svg.iter(f"{{{NS['s']}}}text")).itertext())
        out.append((title, ["".join(t.itertext()) for t in legend.iterfind("s:text", NS)]))
    return out


@pytest.mark.parametrize("with_gangs", [False, True])
def test_every_number_in_a_legend_is_the_tables_cell(
    small_raw: dict[str, Any], gang_raw: dict[str, Any], with_gangs: bool
) -> None:
    scenario = validate(Scenario, gang_raw if with_gangs else small_raw)
    page = render_html(scenario, scenario.seed, _runs(scenario), "note")
    table = _table(page)
    quoted = 0
    for title, texts in _legends(page):
        for text in texts:
            match = re.fullmatch(r"(\w+) \((.*)\)", text)
            if match is None or match.group(1) not in table:
                continue  # a line that is no policy's (the threshold)
            policy, inside = match.groups()
            inside = re.sub(r" of [\d,]+ jobs", " jobs", inside)  # "3 of 3 jobs started": the total is no row
            for number in re.findall(NUMBER, inside):
                assert number in table[policy].values(), (title, text, table[policy])
                quoted += 1
    assert quoted >= 2 * (7 if with_gangs else 5)  # mean, spread, hot, throttles, evictions (+ gang: 2 per policy)


def test_the_spread_plot_is_in_the_tables_unit(small: Scenario) -> None:
    runs = _runs(small)
    page = render_html(small, small.seed, runs, "note")
    (spread,) = [s for s in re.findall(r"<svg.*?</svg>", page, flags=re.S) if "spread" in s]
    svg = ET.fromstring(spread)
    y_ticks = [float(t.text or "") for t in svg.iterfind("s:text", NS) if t.get("text-anchor") == "end"]
    top = max(max(r.stats.spread) for r in runs)
    assert max(y_ticks) < 1.0 and max(y_ticks) >= top  # a fraction of allocatable, not percentage points
    for run in runs:
        assert f"{run.policy.name} (mean {run.summary['cpuUtilisationStd']:.3f})" in spread


def test_the_utilisation_plot_marks_the_hot_threshold(small: Scenario) -> None:
    page = render_html(small, small.seed, _runs(small), "note")
    (cluster,) = [s for s in re.findall(r"<svg.*?</svg>", page, flags=re.S) if "cluster-wide" in s]
    svg = ET.fromstring(cluster)
    assert f"hot threshold of a node ({small.hot_threshold}%)" in "".join(svg.itertext())
    plot = svg.find("s:rect[@class='plot-area']", NS)
    assert plot is not None
    top, height = float(plot.get("y", "0")), float(plot.get("height", "0"))
    ticks = {
        float(t.text or ""): float(t.get("y", "0")) - 4
        for t in svg.iterfind("s:text", NS)
        if t.get("text-anchor") == "end"
    }
    lo, hi = min(ticks), max(ticks)
    expected_y = top + height - (small.hot_threshold - lo) / (hi - lo) * height
    (line,) = [p for p in svg.iterfind("s:polyline", NS) if p.get("stroke") == HOT]
    ys = {round(float(point.split(",")[1]), 1) for point in (line.get("points") or "").split()}
    assert ys == {round(expected_y, 1)} and line.get("stroke-dasharray")
