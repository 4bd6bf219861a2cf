"""``koordpy simulate --migration|--starving [SCENARIO] [--out DIR] [--seed N]``: the scenario families
that replay one story twice and compare the runs.

* ``--migration``: a ``kind: MigrationScenario`` (bundled ``migration``), once with arbitration and once
  with every job evicted at once, on the same cluster.
* ``--starving``: a ``kind: StarvingScenario`` (bundled ``starving``), once with koordpy's reservations
  and once with the stock kube-scheduler model, over the same stream of pods.

Each prints a table and writes ``report.html`` and ``summary.json`` into ``--out``; a bad scenario exits
2 naming the file and field.

Not guaranteed: the table's layout (``summary.json`` is the stable output).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import typer
from pydantic import BaseModel

from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_mapping
from koordpy.config.errors import ConfigError, validate
from koordpy.sim import migration, migration_report, starving, starving_report

__all__ = ["FAMILIES", "MIGRATION", "STARVING", "ScenarioFamily", "simulate_family"]

SCENARIOS = Path(__file__).resolve().parent.parent / "sim" / "scenarios"


S = TypeVar("S", bound=BaseModel)
R = TypeVar("R")


@dataclass(frozen=True)
class ScenarioFamily(Generic[S, R]):
    """One kind of comparison: its scenario model, bundled file and the sim functions that run and report it."""

    model: type[S]
    bundled: Path
    compare: Callable[[S, int], Sequence[R]]
    summary: Callable[[S, int, Sequence[R]], dict[str, Any]]
    html: Callable[[S, int, Sequence[R]], str]
    table: Callable[[Sequence[R]], str]
    seed: Callable[[S], int]
    """The scenario's own seed (used without ``--seed``)."""
    kind: str
    """The ``kind:`` of its scenario files."""
    option: str
    """The ``koordpy simulate`` option that selects it."""
    compares: str
    """What its two runs are, for messages."""

    def load(self, path: Path | None) -> S:
        """The scenario file (or the bundled one). Raises InputError/ConfigError naming the file."""
        source = path if path is not None else self.bundled
        return validate(self.model, read_mapping(source), str(source))


MIGRATION: ScenarioFamily[migration.MigrationScenario, migration.MigrationRun] = ScenarioFamily(
    migration.MigrationScenario,
    SCENARIOS / "migration.yaml",
    migration.compare,
    migration_report.migration_summary,
    migration_report.migration_html,
    migration_report.migration_table,
    lambda scenario: scenario.seed,
    kind="MigrationScenario",
    option="--migration",
    compares="arbitration with evict-all",
)
STARVING: ScenarioFamily[starving.StarvingScenario, starving.StarvingRun] = ScenarioFamily(
    starving.StarvingScenario,
    SCENARIOS / "starving.yaml",
    starving.compare_starving,
    starving_report.starving_summary,
    starving_report.starving_html,
    starving_report.starving_table,
    lambda scenario: scenario.seed,
    kind="StarvingScenario",
    option="--starving",
    compares="koordpy with the baseline",
)
FAMILIES: dict[str, ScenarioFamily[Any, Any]] = {family.kind: family for family in (MIGRATION, STARVING)}
"""The comparison families by the ``kind:`` of their scenario files."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def simulate_family(family: ScenarioFamily[S, R], scenario: Path | None, out: Path, seed: int | None) -> None:
    try:
        parsed = family.load(scenario)
    except (InputError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed scenario the validators did not attribute to a field
        raise _fail(f"{scenario or family.bundled}: cannot load: {type(exc).__name__}: {exc}") from None
    chosen_seed = family.seed(parsed) if seed is None else seed
    runs = family.compare(parsed, chosen_seed)
    try:
        out.mkdir(parents=True, exist_ok=True)
        document = family.summary(parsed, chosen_seed, runs)
        (out / "summary.json").write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        (out / "report.html").write_text(family.html(parsed, chosen_seed, runs), encoding="utf-8")
    except OSError as exc:
        raise _fail(f"--out {out}: {exc.strerror or exc}") from None
    typer.echo(family.table(runs))
    typer.echo(f"wrote {out / 'report.html'} and {out / 'summary.json'}")
