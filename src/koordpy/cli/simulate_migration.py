"""``koordpy simulate --migration [SCENARIO] [--out DIR] [--seed N]``.

Runs a ``kind: MigrationScenario`` (the bundled ``migration`` scenario without an argument) twice on the
same cluster, with arbitration and with every job evicted at once, prints a table and writes
``report.html`` and ``summary.json`` into ``--out``. Exit 2 on a bad scenario, naming the file and field.

Not guaranteed: the table's layout (summary.json is the stable output).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_mapping
from koordpy.config.errors import ConfigError, validate
from koordpy.sim.migration import MigrationScenario, compare
from koordpy.sim.migration_report import migration_html, migration_summary, migration_table

__all__ = ["MIGRATION_SCENARIO", "load_migration_scenario", "simulate_migration"]

MIGRATION_SCENARIO = Path(__file__).resolve().parent.parent / "sim" / "scenarios" / "migration.yaml"


def load_migration_scenario(path: Path | None) -> MigrationScenario:
    """The scenario file (or the bundled one). Raises InputError/ConfigError naming the file."""
    source = path if path is not None else MIGRATION_SCENARIO
    return validate(MigrationScenario, read_mapping(source), str(source))


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def simulate_migration(scenario: Path | None, out: Path, seed: int | None) -> None:
    try:
        parsed = load_migration_scenario(scenario)
    except (InputError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    except UNEXPECTED as exc:
        raise _fail(f"{scenario or MIGRATION_SCENARIO}: cannot load: {type(exc).__name__}: {exc}") from None
    chosen_seed = parsed.seed if seed is None else seed
    runs = compare(parsed, chosen_seed)
    try:
        out.mkdir(parents=True, exist_ok=True)
        document = migration_summary(parsed, chosen_seed, runs)
        (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        (out / "report.html").write_text(migration_html(parsed, chosen_seed, runs), encoding="utf-8")
    except OSError as exc:
        raise _fail(f"--out {out}: {exc.strerror or exc}") from None
    typer.echo(migration_table(runs))
    typer.echo(f"wrote {out / 'report.html'} and {out / 'summary.json'}")
