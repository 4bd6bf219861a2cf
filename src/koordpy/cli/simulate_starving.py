"""``koordpy simulate --starving [SCENARIO] [--out DIR] [--seed N]``.

Runs a ``kind: StarvingScenario`` (the bundled ``starving`` scenario without an argument) twice over the
same stream of pods, with koordpy's reservations and with the stock kube-scheduler model, prints a
table and writes ``report.html`` and ``summary.json`` into ``--out``. Exit 2 on a bad scenario, naming
the file and field.

Not guaranteed: the table's layout (summary.json is the stable output).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_mapping
from koordpy.config.errors import ConfigError, validate
from koordpy.sim.starving import StarvingScenario, compare_starving
from koordpy.sim.starving_report import starving_html, starving_summary, starving_table

__all__ = ["STARVING_SCENARIO", "load_starving_scenario", "simulate_starving"]

STARVING_SCENARIO = Path(__file__).resolve().parent.parent / "sim" / "scenarios" / "starving.yaml"


def load_starving_scenario(path: Path | None) -> StarvingScenario:
    """The scenario file (or the bundled one). Raises InputError/ConfigError naming the file."""
    source = path if path is not None else STARVING_SCENARIO
    return validate(StarvingScenario, read_mapping(source), str(source))


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def simulate_starving(scenario: Path | None, out: Path, seed: int | None) -> None:
    try:
        parsed = load_starving_scenario(scenario)
    except (InputError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    except UNEXPECTED as exc:
        raise _fail(f"{scenario or STARVING_SCENARIO}: cannot load: {type(exc).__name__}: {exc}") from None
    chosen_seed = parsed.seed if seed is None else seed
    runs = compare_starving(parsed, chosen_seed)
    try:
        out.mkdir(parents=True, exist_ok=True)
        document = starving_summary(parsed, chosen_seed, runs)
        (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        (out / "report.html").write_text(starving_html(parsed, chosen_seed, runs), encoding="utf-8")
    except OSError as exc:
        raise _fail(f"--out {out}: {exc.strerror or exc}") from None
    typer.echo(starving_table(runs))
    typer.echo(f"wrote {out / 'report.html'} and {out / 'summary.json'}")
