"""summary.json, the terminal table and report.html of ``koordpy simulate --migration``.

The chart follows one workload in both modes: the one with the most unavailable replicas at one time
under evict-all (the worst case), against its ``maxUnavailablePerWorkload`` budget. Not guaranteed: the
layout of the table and the HTML (summary.json's keys are the stable output).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from koordpy.sim.migration import MigrationRun, MigrationScenario
from koordpy.sim.page import page_head
from koordpy.sim.svg import Series, line_chart
from koordpy.sim.table import html_side_by_side, side_by_side

__all__ = ["migration_html", "migration_summary", "migration_table"]

COLORS = {"arbitration": "#1f77b4", "evict-all": "#d62728"}
ROWS = (
    ("jobs", "PodMigrationJobs"),
    ("succeeded", "  succeeded"),
    ("max_unavailable_of_one_workload", "most unavailable replicas of one workload"),
    ("that_workload", "  that workload"),
    ("workloads_above_budget", "workloads above maxUnavailablePerWorkload"),
    ("workloads_above_max_migrating", "workloads above maxMigratingPerWorkload"),
    ("nodes_above_max_migrating_per_node", "nodes above maxMigratingPerNode"),
    ("seconds_to_finish", "seconds until all jobs done and replacements Ready"),
)


def _followed(runs: Sequence[MigrationRun]) -> str:
    """The workload the chart follows: the worst one of the last run (evict-all when compared)."""
    return runs[-1].worst()


def migration_summary(scenario: MigrationScenario, seed: int, runs: Sequence[MigrationRun]) -> dict[str, Any]:
    followed = _followed(runs)
    return {
        "scenario": scenario.name,
        "kind": "MigrationScenario",
        "seed": seed,
        "nodes": scenario.nodes,
        "drained": scenario.drained,
        "step_seconds": scenario.step_seconds,
        "startup_seconds": list(scenario.startup_seconds),
        "followed_workload": runs[-1].names[followed],
        "followed_workload_budget": runs[-1].budget.get(followed),
        "results": [run.summary() | {"followed_workload_peak_unavailable": run.peak(followed)} for run in runs],
    }


def migration_table(runs: Sequence[MigrationRun]) -> str:
    return side_by_side([run.mode for run in runs], [run.summary() for run in runs], ROWS)


def _chart(runs: Sequence[MigrationRun]) -> str:
    followed = _followed(runs)
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
    )


def migration_html(scenario: MigrationScenario, seed: int, runs: Sequence[MigrationRun]) -> str:
    summaries = [run.summary() for run in runs]
    table = html_side_by_side([r.mode for r in runs], summaries, ROWS)
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
