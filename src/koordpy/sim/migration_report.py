"""summary.json, the terminal table and report.html of ``koordpy simulate --migration``.

The table's "worst workload" row and the chart follow one workload in both modes, chosen once by
:func:`koordpy.sim.migration.followed_workload` (the most unavailable replicas at one time under
evict-all), against its ``maxUnavailablePerWorkload`` budget. Not guaranteed: the layout of the table
and the HTML (summary.json's keys are the stable output).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from koordpy.sim.migration import MigrationRun, MigrationScenario, followed_workload
from koordpy.sim.page import page_head
from koordpy.sim.summary import summary_envelope
from koordpy.sim.svg import Series, line_chart
from koordpy.sim.table import Row, html_side_by_side, side_by_side

__all__ = ["migration_html", "migration_summary", "migration_table"]

COLORS = {"arbitration": "#1f77b4", "evict-all": "#d62728"}
FOLLOWED_PEAK = "followedWorkloadPeakUnavailable"


def _rows(runs: Sequence[MigrationRun]) -> tuple[Row, ...]:
    followed = runs[-1].names[followed_workload(runs)]
    return (
        ("jobs", "PodMigrationJobs", "{:,}"),
        ("succeeded", "  succeeded", "{:,}"),
        ("maxUnavailableOfOneWorkload", "most unavailable replicas of one workload", "{:,}"),
        (FOLLOWED_PEAK, f"  of the worst: {followed}", "{:,}"),
        ("workloadsAboveBudget", "workloads above maxUnavailablePerWorkload", "{:,}"),
        ("workloadsAboveMaxMigrating", "workloads above maxMigratingPerWorkload", "{:,}"),
        ("nodesAboveMaxMigratingPerNode", "nodes above maxMigratingPerNode", "{:,}"),
        ("secondsToFinish", "seconds until all jobs done and replacements Ready", "{:,.1f}"),
    )


def _policies(runs: Sequence[MigrationRun]) -> list[dict[str, Any]]:
    """Each run's summary plus its peak for the one followed workload."""
    followed = followed_workload(runs)
    return [run.summary() | {FOLLOWED_PEAK: run.peak(followed)} for run in runs]


def migration_summary(scenario: MigrationScenario, seed: int, runs: Sequence[MigrationRun]) -> dict[str, Any]:
    followed = followed_workload(runs)
    kind, namespace, name = runs[-1].refs[followed]
    pods = sum(g.count * g.replicas for g in scenario.deployments) + sum(g.count * g.parallelism for g in scenario.jobs)
    return summary_envelope(
        "MigrationScenario",
        scenario.name,
        seed=seed,
        simulated_seconds=max(run.times[-1] for run in runs),
        nodes=scenario.nodes,
        pods=pods,
        policies=_policies(runs),
        extra={
            "drained": scenario.drained,
            "stepSeconds": scenario.step_seconds,
            "startupSeconds": list(scenario.startup_seconds),
            "followedWorkload": {
                "kind": kind,
                "namespace": namespace,
                "name": name,
                "replicas": runs[-1].replicas[followed],
                "budget": runs[-1].budget.get(followed),
            },
        },
    )


def migration_table(runs: Sequence[MigrationRun]) -> str:
    return side_by_side([run.mode for run in runs], _policies(runs), _rows(runs))


def _chart(runs: Sequence[MigrationRun]) -> str:
    followed = followed_workload(runs)
    end = max(run.times[-1] for run in runs)
    series = [
        Series(f"{run.mode}", run.times, run.unavailable[followed], COLORS.get(run.mode, "#555"), step=True)
        for run in runs
    ]
    budget = runs[-1].budget.get(followed)
    if budget is not None:
        series.append(
            Series(
                f"budget (maxUnavailablePerWorkload = {budget})", [0.0, end], [budget, budget], "#2ca02c", dashed=True
            )
        )
    return line_chart(
        f"Unavailable replicas of {runs[-1].names[followed]}",
        series,
        "time since the drain started (s)",
        "unavailable replicas (pods)",
        x_range=(0.0, end),
        whole_numbers=True,
    )


def _total_chart(runs: Sequence[MigrationRun]) -> str:
    end = max(run.times[-1] for run in runs)
    series = []
    for run in runs:
        deployments = [uid for uid, n in run.replicas.items() if n is not None]
        totals = [sum(run.unavailable[uid][i] for uid in deployments) for i in range(len(run.times))]
        series.append(Series(run.mode, run.times, totals, COLORS.get(run.mode, "#555"), step=True))
    return line_chart(
        "Unavailable replicas, all Deployments together",
        series,
        "time since the drain started (s)",
        "unavailable replicas (pods)",
        x_range=(0.0, end),
        whole_numbers=True,
    )


def migration_html(scenario: MigrationScenario, seed: int, runs: Sequence[MigrationRun]) -> str:
    table = html_side_by_side([r.mode for r in runs], _policies(runs), _rows(runs))
    summary = json.dumps(migration_summary(scenario, seed, runs), indent=2)
    return f"""{page_head("koordpy simulate --migration: " + scenario.name)}<p>{html.escape(scenario.description)}</p>
<p>{scenario.nodes} nodes, {scenario.drained} drained at once, {runs[0].jobs} PodMigrationJobs (EvictDirectly),
seed {seed}. <b>arbitration</b>: the manager's arbitration and lifecycle each {scenario.step_seconds:g} s;
<b>evict-all</b>: every job passes at once (arbitration off). A replacement pod is Ready
{scenario.startup_seconds[0]:g}–{scenario.startup_seconds[1]:g} s after the eviction.
Not modelled: scheduling delays, node capacity, objectLimiters.</p>
{table}
<section><h2>The worst workload</h2>
{_chart(runs)}
</section>
<section><h2>All Deployments</h2>
{_total_chart(runs)}
</section>
<section><h2>summary.json</h2><pre>{html.escape(summary)}</pre></section>
</body></html>
"""
