"""Prometheus metrics of the migration rounds (:mod:`koordpy.manager.migration`): jobs by phase, evictor
calls, round and arbitration times, per-job errors, gang units.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter

__all__ = [
    "MigrationMetrics",
]


class MigrationMetrics:
    """Prometheus metrics of the migration rounds, on ``registry``."""

    PHASES = ("Pending", "Running", "Succeeded", "Failed", "Aborted")

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.jobs = Gauge(
            "koordpy_migration_jobs", "PodMigrationJobs by phase after the last round.", ["phase"], registry=registry
        )
        self.evictions = PromCounter(
            "koordpy_migration_evictions",
            "Evictor calls by evictor and outcome (evicted, refused).",
            ["evictor", "outcome"],
            registry=registry,
        )
        self.arbitration_seconds = Histogram(
            "koordpy_migration_arbitration_seconds",
            "Time of one arbitration call (reading pods and owners included).",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=registry,
        )
        self.round_seconds = Histogram(
            "koordpy_migration_round_seconds",
            "Time of one migration round (arbitration, writes and lifecycle steps).",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=registry,
        )
        self.last_round = Gauge(
            "koordpy_migration_last_round_seconds", "Time of the last migration round.", registry=registry
        )
        self.rounds = PromCounter(
            "koordpy_migration_rounds",
            "Migration rounds by outcome: done, or error (the round stopped on an error it did not expect).",
            ["outcome"],
            registry=registry,
        )
        self.errors = PromCounter(
            "koordpy_migration_errors",
            "Per-job failures by step (step, arbitration, owner, bookkeeping) and kind of error; the job is "
            "retried after a backoff, the round goes on.",
            ["step", "error"],
            registry=registry,
        )
        # zero series from the start: the first failed round counts in increase() (one born at 1 would not)
        for outcome in ("done", "error"):
            self.rounds.labels(outcome=outcome)
        self.observe_phases({})

        self.gang_units = PromCounter(
            "koordpy_migration_gang_units",
            "Gangs (or GangGroups) whose PodMigrationJobs passed arbitration together, in one round.",
            registry=registry,
        )
        self.gang_held = Gauge(
            "koordpy_migration_gang_held_jobs",
            "Waiting PodMigrationJobs the gang rule requeued in the last arbitration (GangBelowMinimum, "
            "GangDisruptionAll, GangMemberWaiting, GangUnknown).",
            registry=registry,
        )

    def observe_phases(self, phases: Mapping[str, int]) -> None:
        for phase in {*self.PHASES, *phases}:
            self.jobs.labels(phase=phase).set(phases.get(phase, 0))
