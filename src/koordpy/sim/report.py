"""Turning runs into the summary table (stdout), ``summary.json`` and a self-contained ``report.html``.

All three are functions of the scenario, the seed and the runs only (no wall clock, no paths),
so two runs with the same seed produce byte-identical files.

Not guaranteed: the HTML layout; ``summary.json`` keys are the stable interface.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from koordpy.config.scenario import Scenario
from koordpy.sim.page import page_head
from koordpy.sim.run import PolicyRun
from koordpy.sim.stats import HEATMAP_BUCKET_SECONDS
from koordpy.sim.summary import summary_envelope
from koordpy.sim.svg import HOT, Series, heatmap, line_chart

__all__ = ["ROWS", "render_html", "render_table", "shown", "summary_document"]

COLOURS = {"koordpy": "#1f6fd1", "baseline": "#d1541f", "koordpy-compared": "#7a3fb0"}

ROWS: tuple[tuple[str, str, str], ...] = (
    ("cpuUtilisationClusterMean", "CPU utilisation, mean", "{:.1%}"),
    ("cpuUtilisationStd", "CPU utilisation std across nodes", "{:.3f}"),
    ("hotNodeMinutes", "node-minutes above threshold", "{:,.1f}"),
    ("pendingP50Seconds", "pending time p50 (s)", "{:,.1f}"),
    ("pendingP99Seconds", "pending time p99 (s)", "{:,.1f}"),
    ("pendingAtEnd", "pods still pending at end", "{:,}"),
    ("binds", "binds", "{:,}"),
    ("podsThrottled", "pods throttled", "{:,}"),
    ("throttleActions", "throttle actions", "{:,}"),
    ("podsEvicted", "pods evicted", "{:,}"),
    ("evictions", "evictions", "{:,}"),
    ("podsTouched", "pods touched by QoS", "{:,}"),
)
GANG_ROWS: tuple[tuple[str, str, str], ...] = (
    ("gangJobsFullyRunning", "gang jobs fully running (ever)", "{:,}"),
    ("partialPlacementNodeMinutes", "partial-placement node-minutes", "{:,.1f}"),
    ("partialBoundNodeMinutes", "  of which bound (not held)", "{:,.1f}"),
    ("jobStartLatencyP50Seconds", "job start latency p50 (s)", "{:,.1f}"),
    ("jobStartLatencyMaxSeconds", "job start latency max (s)", "{:,.1f}"),
)
"""Rows shown only when the scenario has gang jobs."""
DESCHEDULING_ROWS: tuple[tuple[str, str, str], ...] = (
    ("deschedulerMoves", "descheduler moves (LowNodeLoad)", "{:,}"),
    ("repeatMoves", "  repeat moves (moved again)", "{:,}"),
    ("agentRepeatEvictions", "  agent evictions after placing", "{:,}"),
    ("podsKeptNoCoolDestination", "  kept: no destination stays cool", "{:,}"),
)
"""Rows shown only when the scenario has a ``descheduler`` ("-" for a policy without one)."""
NONE = "-"


def _rows(runs: Sequence[PolicyRun]) -> tuple[tuple[str, str, str], ...]:
    rows = ROWS + GANG_ROWS if runs and "gangJobs" in runs[0].summary else ROWS
    return rows + DESCHEDULING_ROWS if runs and "deschedulerMoves" in runs[0].summary else rows


_FORMATS = {key: fmt for key, _, fmt in ROWS + GANG_ROWS + DESCHEDULING_ROWS}


def _cell(fmt: str, value: Any) -> str:
    return NONE if value is None else fmt.format(value)


def shown(run: PolicyRun, key: str) -> str:
    """A figure as the table shows it; plot legends quote figures through this, so the two agree."""
    return _cell(_FORMATS[key], run.summary[key])


def summary_document(
    scenario: Scenario, seed: int, runs: Sequence[PolicyRun], qos_note: str, warnings: Sequence[str] = ()
) -> dict[str, Any]:
    """The summary.json document (see :mod:`koordpy.sim.summary`)."""
    return summary_envelope(
        "Scenario",
        scenario.name,
        seed=seed,
        simulated_seconds=scenario.duration,
        nodes=sum(p.count for p in scenario.node_pools),
        pods=sum(w.pods for w in scenario.workloads),
        policies=[
            {"policy": run.policy.name, "placement": run.policy.placement, "qos": run.policy.qos} | run.summary
            for run in runs
        ],
        warnings=warnings,
        extra={"hotThresholdPercent": scenario.hot_threshold, "qos": qos_note},
    )


def render_table(scenario: Scenario, seed: int, runs: Sequence[PolicyRun]) -> str:
    nodes = sum(p.count for p in scenario.node_pools)
    pods = sum(w.pods for w in scenario.workloads)
    lines = [
        f"scenario {scenario.name}: {nodes} nodes, {pods} pods, {scenario.duration / 3600:g} h simulated, seed {seed}",
        f"hot = CPU utilisation above {scenario.hot_threshold}%",
        "",
    ]
    header = f"{'':<34}" + "".join(f"{run.policy.name:>14}" for run in runs)
    lines.append(header)
    for key, label, fmt in _rows(runs):
        cells = "".join(f"{_cell(fmt, run.summary[key]):>14}" for run in runs)
        lines.append(f"{label:<34}{cells}")
    return "\n".join(lines)


def _cumulative(times: Sequence[float], end: float) -> tuple[list[float], list[float]]:
    """A step curve (seconds, count so far) from 0 to ``end``."""
    xs, ys = [0.0], [0.0]
    for i, t in enumerate(sorted(times), start=1):
        xs.append(t)
        ys.append(float(i))
    xs.append(end)
    ys.append(float(len(times)))
    return xs, ys


def _downsample(xs: list[float], ys: list[float], limit: int = 600) -> tuple[list[float], list[float]]:
    if len(xs) <= limit:
        return xs, ys
    stride = -(-len(xs) // limit)
    return xs[::stride], [float(np.mean(ys[i : i + stride])) for i in range(0, len(ys), stride)]


def _percent(values: Sequence[float]) -> list[float]:
    return [100.0 * v for v in values]


def _pending_cdf(run: PolicyRun) -> tuple[list[float], list[float]]:
    waits = np.sort(np.asarray(list(run.stats.pending_seconds) + list(run.still_pending), dtype=np.float64))
    if waits.size == 0:
        return [0.0], [0.0]
    quantiles = np.linspace(0, 100, 101)
    values = np.percentile(waits, quantiles)
    return [float(v) for v in values], [float(q) for q in quantiles]


def _qos_times(run: PolicyRun, kind: str) -> list[float]:
    return run.stats.throttle_times if kind == "Throttle actions" else run.stats.eviction_times


TIME_LABEL = "simulated time since the start (h:mm)"


def _charts(scenario: Scenario, runs: Sequence[PolicyRun]) -> list[tuple[str, str]]:
    """(section title, svg) of every plot. Throttles and evictions get a panel each: in the default
    scenario evictions are 3 and 26 against 1,084 and 5,634 throttles, too few to see on one axis."""
    end = scenario.duration
    span = (0.0, end)
    pools = [(p.name, p.count) for p in scenario.node_pools]

    def colour(run: PolicyRun) -> str:
        return COLOURS.get(run.policy.name, "#555")

    def over_time(run: PolicyRun, values: Sequence[float], label: str) -> Series:
        return Series(label, *_downsample(list(run.stats.times), list(values)), colour(run))

    charts: list[tuple[str, str]] = []
    cluster = [
        over_time(r, _percent(r.stats.cluster), f"{r.policy.name} (mean {shown(r, 'cpuUtilisationClusterMean')})")
        for r in runs
    ]
    threshold = float(scenario.hot_threshold)
    cluster.append(
        Series(f"hot threshold of a node ({scenario.hot_threshold}%)", [0.0, end], [threshold] * 2, HOT, dashed=True)
    )
    charts.append(
        (
            "Cluster CPU utilisation",
            line_chart(
                "CPU utilisation, cluster-wide (Σ usage / Σ allocatable)",
                cluster,
                TIME_LABEL,
                "CPU utilisation (%)",
                x_range=span,
                time_axis=True,
            ),
        )
    )
    spread = [
        over_time(r, list(r.stats.spread), f"{r.policy.name} (mean {shown(r, 'cpuUtilisationStd')})") for r in runs
    ]
    charts.append(
        (
            "Utilisation spread",
            line_chart(
                "CPU utilisation spread: standard deviation across nodes",
                spread,
                TIME_LABEL,
                "std across nodes (utilisation 0-1)",
                x_range=span,
                time_axis=True,
            ),
        )
    )
    hot = [
        over_time(r, [float(h) for h in r.stats.hot], f"{r.policy.name} ({shown(r, 'hotNodeMinutes')} node-minutes)")
        for r in runs
    ]
    charts.append(
        (
            "Hot nodes",
            line_chart(
                f"Nodes above {scenario.hot_threshold}% CPU",
                hot,
                TIME_LABEL,
                "hot nodes (count)",
                x_range=span,
                time_axis=True,
                whole_numbers=True,
            ),
        )
    )
    cdf = []
    for r in runs:
        xs, ys = _pending_cdf(r)
        cdf.append(Series(r.policy.name, xs, ys, colour(r), step=True))
    all_zero = all(not any(r.stats.pending_seconds) and not r.still_pending for r in runs)
    if all_zero:  # a CDF standing on the y axis says nothing; say it in words
        charts.append(("Pending time", "<p>Every pod was bound the instant it arrived (p50 = p99 = max = 0 s).</p>"))
    else:
        charts.append(
            (
                "Pending time",
                line_chart(
                    "Pending time distribution (CDF)",
                    cdf,
                    "pending time (s)",
                    "pods bound within (% of pods)",
                    y_min=0.0,
                    y_max=100.0,
                ),
            )
        )
    if runs and "gangJobs" in runs[0].summary:
        charts.extend(_gang_charts(scenario, runs, over_time))
    for kind, noun, key in (
        ("Throttle actions", "throttle actions", "throttleActions"),
        ("Evictions", "evictions", "evictions"),
    ):
        curves = [
            Series(
                f"{r.policy.name} ({shown(r, key)} {noun})",
                *_downsample(*_cumulative(_qos_times(r, kind), end)),
                colour(r),
                step=True,
            )
            for r in runs
        ]
        charts.append(
            (
                f"QoS: {kind.lower()}",
                line_chart(
                    f"{kind} by the agent (cumulative)",
                    curves,
                    TIME_LABEL,
                    f"{noun} so far (count)",
                    x_range=span,
                    time_axis=True,
                    whole_numbers=True,
                ),
            )
        )
    for r in runs:
        charts.append(
            (
                f"Heat map: {r.policy.name}",
                heatmap(
                    f"Per-node CPU utilisation, {r.policy.name} (5-minute means)",
                    r.stats.heatmap(),
                    HEATMAP_BUCKET_SECONDS,
                    scenario.hot_threshold,
                    pools=pools,
                    duration=end,
                ),
            )
        )
    return charts


def _gang_charts(
    scenario: Scenario, runs: Sequence[PolicyRun], over_time: Callable[[PolicyRun, Sequence[float], str], Series]
) -> list[tuple[str, str]]:
    """Jobs fully running, and the CPU requests held by jobs that are not, over time."""
    span = (0.0, scenario.duration)
    jobs = runs[0].summary["gangJobs"]
    running = [
        over_time(
            r,
            [float(j) for j in r.stats.jobs_running],
            f"{r.policy.name} ({shown(r, 'gangJobsFullyRunning')} of {jobs:,} jobs started)",
        )
        for r in runs
    ]
    partial = [
        over_time(
            r,
            list(r.stats.partial_nodes),
            f"{r.policy.name} ({shown(r, 'partialPlacementNodeMinutes')} node-minutes)",
        )
        for r in runs
    ]
    return [
        (
            "Gang jobs fully running",
            line_chart(
                "Gang jobs running (at least minMember members running)",
                running,
                TIME_LABEL,
                "jobs fully running (count)",
                x_range=span,
                time_axis=True,
                whole_numbers=True,
            ),
        ),
        (
            "Partial placement",
            line_chart(
                "CPU requests held by jobs not started yet (bound or held members)",
                partial,
                TIME_LABEL,
                "nodes' worth of CPU requests",
                x_range=span,
                time_axis=True,
            ),
        ),
    ]


def render_html(
    scenario: Scenario,
    seed: int,
    runs: Sequence[PolicyRun],
    qos_note: str,
    warnings: Sequence[str] = (),
) -> str:
    charts = _charts(scenario, runs)
    table_rows = "".join(
        "<tr><th>{}</th>{}</tr>".format(
            html.escape(label), "".join(f"<td>{html.escape(_cell(fmt, r.summary[key]))}</td>" for r in runs)
        )
        for key, label, fmt in _rows(runs)
    )
    head = "".join(f"<th>{html.escape(r.policy.name)}</th>" for r in runs)
    sections = "\n".join(f"<section><h2>{html.escape(title)}</h2>\n{svg}\n</section>" for title, svg in charts)
    summary = json.dumps(summary_document(scenario, seed, runs, qos_note, warnings), indent=2, sort_keys=False)
    nodes = sum(p.count for p in scenario.node_pools)
    pods = sum(w.pods for w in scenario.workloads)
    warning_list = (
        "<p>Scenario warnings (rules that do nothing):</p><ul>"
        + "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
        + "</ul>\n"
        if warnings
        else ""
    )
    return f"""{page_head("koordpy simulate: " + scenario.name)}<p>{html.escape(scenario.description)}</p>
<p>{nodes} nodes, {pods} pods, {scenario.duration / 3600:g} simulated hours, seed {seed}.
CPU utilisation, mean = Σ usage / Σ allocatable CPU over the cluster, averaged over time;
hot = a node's CPU utilisation above {scenario.hot_threshold}%. QoS: {html.escape(qos_note)}</p>
{warning_list}<table><tr><th></th>{head}</tr>{table_rows}</table>
{sections}
<section><h2>summary.json</h2><pre>{html.escape(summary)}</pre></section>
</body></html>
"""
