"""``koordpy scheduler ...``: the offline explain tool."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from koordpy.cli.files import InputError, read_documents, read_mapping
from koordpy.config.errors import ConfigError, validate
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.durations import DurationError, parse_rfc3339
from koordpy.scheduler.explain import ExplainError, explain

app = typer.Typer(help="Scheduler tools.", no_args_is_help=True)


def load_scheduler_config(path: Path | None) -> SchedulerConfiguration:
    """The scheduler configuration file, or the defaults. Raises InputError/ConfigError."""
    if path is None:
        return validate(SchedulerConfiguration, {})
    return validate(SchedulerConfiguration, read_mapping(path), str(path))


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def render_table(result: dict[str, Any]) -> str:
    lines = [f"pod {result['pod']}: selected {result['selected'] or '<none>'}"]
    header = f"{'NODE':<24} {'FEASIBLE':<8} {'LOADAWARE':>9} {'EXT':>4}  REASON"
    lines.append(header)
    for row in result["nodes"]:
        reason = "; ".join(f"{f['plugin']}: {f['reason']}" for f in row["failures"])
        score = row["scores"].get("LoadAwareScheduling", "-")
        ext = row["extenderScore"] if row["feasible"] else "-"
        mark = "*" if row["name"] == result["selected"] else " "
        lines.append(f"{mark}{row['name']:<23} {row['feasible']!s:<8} {score!s:>9} {ext!s:>4}  {reason}")
    return "\n".join(lines)


@app.command("explain")
def explain_command(
    files: Annotated[
        list[Path], typer.Option("-f", "--filename", metavar="FILE", help="YAML or JSON dump; repeatable.")
    ],
    pod: Annotated[str, typer.Option("--pod", metavar="NS/NAME", help="NAMESPACE/NAME of the pod being placed.")],
    config: Annotated[
        Path | None, typer.Option("--config", metavar="FILE", help="Scheduler configuration file.")
    ] = None,
    now: Annotated[str | None, typer.Option("--now", metavar="RFC3339", help="Evaluation instant, RFC 3339.")] = None,
    output: Annotated[str, typer.Option("-o", "--output", metavar="json|table", help="json or table.")] = "table",
) -> None:
    """Explain where a pod would go and why, from a dump of Nodes, Pods and NodeMetrics."""
    if output not in ("json", "table"):
        raise fail(f"-o: expected json or table, got {output!r}")
    try:
        instant = parse_rfc3339(now) if now else time.time()
    except DurationError as exc:
        raise fail(f"--now: {exc}") from None
    try:
        cfg = load_scheduler_config(config)
        documents = read_documents(files)
        result, ignored = explain(documents, pod, cfg, instant)
    except (InputError, ConfigError, ExplainError) as exc:
        raise fail(str(exc)) from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if output == "json":
        typer.echo(json.dumps(result, indent=2))
    else:
        typer.echo(render_table(result))
