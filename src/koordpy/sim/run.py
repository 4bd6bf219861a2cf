"""Run a scenario under one or more policies over one shared trace.

Not guaranteed: memory use is proportional to trace length × nodes for the heat map.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koordpy.config.scenario import Scenario
from koordpy.sim.engine import Policy, Simulation
from koordpy.sim.qos import QosPlanner
from koordpy.sim.stats import RunStats
from koordpy.sim.trace import build_trace

__all__ = ["BUNDLED_SCENARIOS", "DEFAULT_SCENARIO", "PolicyRun", "bundled_scenario", "simulate"]

_SCENARIOS = Path(__file__).resolve().parent / "scenarios"
DEFAULT_SCENARIO = _SCENARIOS / "default.yaml"
"""The bundled scenario ``koordpy simulate`` runs without an argument."""
BUNDLED_SCENARIOS = ("default", "gangs", "loop", "migration", "starving")
"""Names ``koordpy simulate NAME`` accepts (``scenarios/NAME.yaml`` in this package; ``migration`` and
``starving`` are a MigrationScenario and a StarvingScenario, run by their own comparison)."""


def bundled_scenario(name: str) -> Path | None:
    """The bundled scenario file called ``name`` (one of ``BUNDLED_SCENARIOS``), else None."""
    return _SCENARIOS / f"{name}.yaml" if name in BUNDLED_SCENARIOS else None


@dataclass(frozen=True, slots=True)
class PolicyRun:
    policy: Policy
    stats: RunStats
    summary: dict[str, Any]
    still_pending: list[float]
    """Seconds waited so far by each pod still pending at the end."""


QosFactory = Callable[[Scenario, Policy], QosPlanner | None]


def simulate(
    scenario: Scenario,
    seed: int,
    policies: Sequence[Policy],
    qos_factory: QosFactory,
    progress: Callable[[str, float], None] | None = None,
) -> list[PolicyRun]:
    trace = build_trace(scenario, seed)
    runs = []
    for policy in policies:
        sim = Simulation(scenario, trace, policy, seed, qos_factory(scenario, policy))

        def report(fraction: float, name: str = policy.name) -> None:
            if progress is not None:
                progress(name, fraction)

        stats = sim.run(report)
        still = sim.still_pending()
        runs.append(PolicyRun(policy, stats, stats.summary(still), still))
    return runs
