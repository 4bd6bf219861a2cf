"""``koordpy descheduler ...``: the offline arbitration tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_documents, read_mapping
from koordpy.cli.options import Now, Output, RequiredDumpFiles, evaluation_instant
from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.offline import ArbitrationReportError, arbitration_report
from koordpy.model.durations import DurationError

__all__ = ["app", "render_table"]

app = typer.Typer(help="Descheduler tools: PodMigrationJob arbitration.", no_args_is_help=True)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def load_migration_args(path: Path | None) -> MigrationControllerArgs:
    """``migrationController`` of a ManagerConfiguration file, or the defaults. Raises InputError/ConfigError."""
    if path is None:
        return validate(MigrationControllerArgs, {})
    return validate(ManagerConfiguration, read_mapping(path), str(path)).migration_controller


def render_table(report: dict[str, Any]) -> str:
    """One row per waiting job in arbitration order: rank, job, verdict, filter, reason."""
    lines = [f"{'#':>4} {'JOB':<28} {'VERDICT':<8} {'FILTER':<26} REASON"]
    for rank, name in enumerate(report["order"], start=1):
        verdict = report["verdicts"][name]
        lines.append(f"{rank:>4} {name:<28} {verdict['verdict']:<8} {verdict['filter'] or '-':<26} {verdict['reason']}")
    return "\n".join(lines)


@app.command("arbitrate")
def arbitrate_command(
    *,
    files: RequiredDumpFiles,
    config: Annotated[
        Path | None,
        typer.Option("--config", metavar="FILE", help="ManagerConfiguration file (its migrationController section)."),
    ] = None,
    now: Now = None,
    output: Output = "table",
) -> None:
    """One arbitration round over the waiting PodMigrationJobs of a dump: order and verdicts; offline only."""
    if output not in ("json", "table"):
        raise _fail(f"-o: expected json or table, got {output!r}")
    try:
        args = load_migration_args(config)
        documents = read_documents(files)
        instant, note = evaluation_instant(now, documents)
        report, ignored = arbitration_report(documents, args, instant)
    except DurationError as exc:
        raise _fail(f"--now: {exc}") from None
    except (InputError, ConfigError, ArbitrationReportError) as exc:
        raise _fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed object the converters did not attribute to a field
        raise _fail(f"{', '.join(map(str, files))}: cannot evaluate: {type(exc).__name__}: {exc}") from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(render_table(report))
