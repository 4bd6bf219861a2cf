"""``koordpy scheduler ...``: the offline explain and gangs tools."""

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
from koordpy.scheduler.plugins.gang.offline import GangReportError, gang_report, newest_timestamp

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
    files: Annotated[list[Path], typer.Option("-f", "--filename", help="YAML or JSON dump; repeatable.")],
    pod: Annotated[str, typer.Option("--pod", help="NAMESPACE/NAME of the pod being placed.")],
    config: Annotated[Path | None, typer.Option("--config", help="Scheduler configuration file.")] = None,
    now: Annotated[str | None, typer.Option("--now", help="Evaluation instant, RFC 3339.")] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="json or table.")] = "table",
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


def render_gangs_table(report: dict[str, Any]) -> str:
    lines = [
        f"{'GANG':<28} {'MODE':<9} {'POLICY':<19} {'MIN':>3} {'PODS':>4} {'HELD':>4} {'BOUND':>5} "
        f"{'PHASE':<13} VERDICT  REASON"
    ]
    for gang in report["gangs"]:
        lines.append(
            f"{gang['id']:<28} {gang['mode']:<9} {gang['matchPolicy']:<19} {gang['minMember']:>3} "
            f"{len(gang['children']):>4} {len(gang['waiting']):>4} {len(gang['bound']):>5} {gang['phase']:<13} "
            f"{gang['permit']['verdict']:<8} {gang['permit']['reason']}"
        )
    return "\n".join(lines)


@app.command("gangs")
def gangs_command(
    *,
    files: Annotated[list[Path], typer.Option("-f", "--filename", help="YAML or JSON dump; repeatable.")],
    waiting: Annotated[
        list[str] | None, typer.Option("--waiting", help="NAMESPACE/NAME=NODE: a member held at the bind barrier.")
    ] = None,
    failed: Annotated[
        list[str] | None, typer.Option("--failed", help="NAMESPACE/NAME: a member whose scheduling failed.")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Scheduler configuration file.")] = None,
    now: Annotated[
        str | None, typer.Option("--now", help="Evaluation instant, RFC 3339 (default: newest in dump).")
    ] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="json or table.")] = "table",
) -> None:
    """Gang verdicts (admit, permit, phase) from a dump of Pods and PodGroups; offline analysis only."""
    if output not in ("json", "table"):
        raise fail(f"-o: expected json or table, got {output!r}")
    held: dict[str, str] = {}
    for item in waiting or []:
        key, sep, node = item.partition("=")
        if not sep or not node:
            raise fail(f"--waiting: expected NAMESPACE/NAME=NODE, got {item!r}")
        held[key] = node
    try:
        cfg = load_scheduler_config(config)
        documents = read_documents(files)
        instant = parse_rfc3339(now) if now else (newest_timestamp(documents) or time.time())
        report, ignored = gang_report(documents, cfg.gang, instant, held, failed or [])
    except DurationError as exc:
        raise fail(f"--now: {exc}") from None
    except (InputError, ConfigError, GangReportError) as exc:
        raise fail(str(exc)) from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(render_gangs_table(report))
