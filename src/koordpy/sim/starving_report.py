"""summary.json, the terminal table and report.html of ``koordpy simulate --starving``.

Not guaranteed: the layout of the table and the HTML (summary.json's keys are the stable output).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from koordpy.sim.page import page_head
from koordpy.sim.starving import StarvingRun, StarvingScenario
from koordpy.sim.summary import summary_envelope
from koordpy.sim.svg import Series, line_chart
from koordpy.sim.table import Row, cell, html_side_by_side, side_by_side

__all__ = ["charts", "starving_html", "starving_summary", "starving_table"]

COLORS = {"koordpy": "#1f77b4", "baseline": "#d62728"}
ROWS: tuple[Row, ...] = (
    ("bigJobs", "big jobs", "{:,}"),
    ("bigJobsStarted", "  started within the run", "{:,}"),
    ("bigJobsNeverStarted", "  never started", "{:,}"),
    ("bigJobStartLatencyP50Seconds", "big-job start latency p50 (s)", "{:,.1f}"),
    ("bigJobStartLatencyMaxSeconds", "big-job start latency max (s)", "{:,.1f}"),
    ("smallPods", "small pods", "{:,}"),
    ("smallPendingP50Seconds", "small-pod pending p50 (s)", "{:,.1f}"),
    ("smallPendingP95Seconds", "small-pod pending p95 (s)", "{:,.1f}"),
    ("smallPendingMaxSeconds", "small-pod pending max (s)", "{:,.1f}"),
    ("smallPodsPendingAtEnd", "small pods pending at the end", "{:,}"),
    ("idleHeldCpuSeconds", "idle held capacity (cpu·s)", "{:,.1f}"),
    ("idleHeldCpuPercent", "  % of the cluster's cpu·s", "{:,.2f}"),
    ("maxNodesHeld", "most nodes held at once", "{:,}"),
    ("partialJobCpuSeconds", "cpu·s bound to jobs not started", "{:,.1f}"),
    ("requestedCpuPercentMean", "requested cpu, mean % of allocatable", "{:,.2f}"),
    ("reservationsCreated", "Reservations created", "{:,}"),
)


def _policies(runs: Sequence[StarvingRun]) -> list[dict[str, Any]]:
    return [run.summary() | {"jobs": run.job_table()} for run in runs]


def starving_summary(scenario: StarvingScenario, seed: int, runs: Sequence[StarvingRun]) -> dict[str, Any]:
    """The summary.json document; ``reservation`` holds the settings the koordpy run used, without
    ``loadAware`` (the model has no NodeMetric, so it never applies)."""
    settings = scenario.settings()
    pods = runs[0].small_pods + sum(job.members for job in runs[0].jobs) if runs else 0
    return summary_envelope(
        "StarvingScenario",
        scenario.name,
        seed=seed,
        simulated_seconds=scenario.duration_seconds,
        nodes=scenario.nodes.count,
        pods=pods,
        policies=_policies(runs),
        extra={"reservation": settings.model_dump(by_alias=True, exclude={"load_aware"})},
    )


def starving_table(runs: Sequence[StarvingRun]) -> str:
    return side_by_side([run.mode for run in runs], [run.summary() for run in runs], ROWS)


def _arrived(scenario: StarvingScenario, times: Sequence[float]) -> list[int]:
    arrivals = sorted(job.arrival_seconds for job in scenario.big_jobs)
    return [sum(1 for a in arrivals if a <= t) for t in times]


def _jobs_chart(scenario: StarvingScenario, runs: Sequence[StarvingRun]) -> str:
    """Big jobs started over time in each mode, against the jobs that have arrived."""
    end = scenario.duration_seconds
    times = runs[0].times
    series = [Series("big jobs arrived", times, _arrived(scenario, times), "#777", dashed=True, step=True)]
    series += [
        Series(f"big jobs started: {run.mode}", run.times, run.jobs_started, COLORS.get(run.mode, "#555"), step=True)
        for run in runs
    ]
    return line_chart(
        "Big jobs started",
        series,
        "time since the start (h:mm)",
        "jobs",
        x_range=(0.0, end),
        time_axis=True,
        whole_numbers=True,
    )


def _small_chart(scenario: StarvingScenario, runs: Sequence[StarvingRun]) -> str:
    series = [Series(run.mode, run.times, run.small_pending, COLORS.get(run.mode, "#555"), step=True) for run in runs]
    return line_chart(
        "Small pods pending",
        series,
        "time since the start (h:mm)",
        "pods",
        x_range=(0.0, scenario.duration_seconds),
        time_axis=True,
        whole_numbers=True,
    )


def _held_chart(scenario: StarvingScenario, runs: Sequence[StarvingRun]) -> str:
    series = [
        Series(f"idle held cpu: {run.mode}", run.times, run.idle_held_cpu, COLORS.get(run.mode, "#555"), step=True)
        for run in runs
        if run.reservations_created
    ]
    return line_chart(
        "Free cpu held for starving jobs (idle)",
        series,
        "time since the start (h:mm)",
        "cores",
        x_range=(0.0, scenario.duration_seconds),
        time_axis=True,
    )


def charts(scenario: StarvingScenario, runs: Sequence[StarvingRun]) -> list[str]:
    """The report's three SVG charts: big jobs started, small pods pending, idle held cpu."""
    return [_jobs_chart(scenario, runs), _small_chart(scenario, runs), _held_chart(scenario, runs)]


def _start(start: float | None) -> float | None:
    return None if start is None else round(start, 1)


def starving_html(scenario: StarvingScenario, seed: int, runs: Sequence[StarvingRun]) -> str:
    table = html_side_by_side([r.mode for r in runs], [run.summary() for run in runs], ROWS)
    job_head = "".join(f"<th>start {html.escape(r.mode)} (s)</th>" for r in runs)
    job_rows = "".join(
        "<tr><th>{}</th><td>{}</td><td>{}</td><td>{:,.1f}</td>{}</tr>".format(
            html.escape(job.name),
            html.escape(job.kind),
            job.members,
            job.arrival,
            "".join(f"<td>{html.escape(cell(_start(r.jobs[i].start), '{:,.1f}'))}</td>" for r in runs),
        )
        for i, job in enumerate(runs[0].jobs)
    )
    settings = scenario.settings()
    summary = json.dumps(starving_summary(scenario, seed, runs), indent=2)
    figures = charts(scenario, runs)
    return f"""{page_head("koordpy simulate --starving: " + scenario.name)}<p>{html.escape(scenario.description)}</p>
<p>{scenario.nodes.count:,} nodes, {runs[0].small_pods:,} small pods, {len(scenario.big_jobs)} big jobs,
{scenario.duration_seconds:g} s, seed {seed}. <b>baseline</b>: kube-scheduler's NodeResourcesFit and
LeastAllocated on requests; <b>koordpy</b>: the same plus the manager's reservation decision every
{settings.interval_seconds:g} s (starvingJobTimeThreshold {settings.starving_job_time_threshold} s,
reservedNodePercent {settings.reserved_node_percent}, maxHoldSeconds {settings.max_hold_seconds}) and the
extender's reserved-node filter and owner preference. Not modelled: preemption, the gang bind barrier,
load-aware placement, latencies.</p>
{table}
<section><h2>Big jobs</h2>
{figures[0]}
<table><tr><th>job</th><th>kind</th><th>pods</th><th>arrival (s)</th>{job_head}</tr>{job_rows}</table>
</section>
<section><h2>Small pods</h2>
{figures[1]}
</section>
<section><h2>Held capacity</h2>
{figures[2]}
</section>
<section><h2>summary.json</h2><pre>{html.escape(summary)}</pre></section>
</body></html>
"""
