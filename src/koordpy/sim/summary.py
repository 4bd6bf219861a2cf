"""The one ``summary.json`` layout every ``koordpy simulate`` mode writes (``koordpy.io/v1alpha1``,
``kind: SimulationSummary``), described by the JSON Schema shipped next to this module
(``summary.schema.json``) and in docs/simulate.md.

Every document has the same envelope: ``apiVersion``, ``kind``, ``scenarioKind`` (``Scenario``,
``MigrationScenario`` or ``StarvingScenario``: which mode wrote it), ``scenario`` (its name),
``seed``, ``simulatedSeconds``, ``nodes``, ``pods``, ``warnings`` and ``policies`` (one object per
compared run, keyed by the run's name, in run order, each with its name again under ``policy``);
the keys a mode adds sit between ``pods`` and ``warnings``. Keys are camelCase; figures are JSON
numbers (never formatted text), ``null`` where a figure does not exist (no job started, say).

Not guaranteed: key order (it is stable, but readers should look keys up by name).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

__all__ = ["API_VERSION", "KIND", "SCHEMA_PATH", "ScenarioKind", "load_schema", "summary_envelope"]

API_VERSION = "koordpy.io/v1alpha1"
KIND = "SimulationSummary"
SCHEMA_PATH = Path(__file__).resolve().parent / "summary.schema.json"
"""The JSON Schema (draft 2020-12) every ``summary.json`` validates against."""

ScenarioKind = Literal["Scenario", "MigrationScenario", "StarvingScenario"]


def summary_envelope(
    scenario_kind: ScenarioKind,
    scenario: str,
    *,
    seed: int,
    simulated_seconds: float,
    nodes: int,
    pods: int,
    policies: Sequence[Mapping[str, Any]],
    warnings: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The document: the envelope around ``extra`` (the mode's own keys) and ``policies`` (each run's
    figures, a mapping with its name under ``policy``). Raises ValueError on a repeated policy name or
    an ``extra`` key that is an envelope key."""
    named = {str(run["policy"]): dict(run) for run in policies}
    if len(named) != len(policies):
        raise ValueError(f"policies: repeated names in {[run['policy'] for run in policies]}")
    head: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "scenarioKind": scenario_kind,
        "scenario": scenario,
        "seed": seed,
        "simulatedSeconds": float(simulated_seconds),
        "nodes": nodes,
        "pods": pods,
    }
    clash = sorted(set(extra or {}) & (set(head) | {"warnings", "policies"}))
    if clash:
        raise ValueError(f"extra: envelope keys {clash}")
    return head | dict(extra or {}) | {"warnings": list(warnings), "policies": named}


def load_schema() -> dict[str, Any]:
    """The shipped JSON Schema as a mapping."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema
