"""``koordpy descheduler ...``: the offline arbitration tool and the LowNodeLoad balance round (dry run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_documents, read_mapping
from koordpy.cli.options import (
    DumpFiles,
    Kubeconfig,
    KubeContext,
    Now,
    Output,
    RequiredDumpFiles,
    evaluation_instant,
)
from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.offline import ArbitrationReportError, arbitration_report
from koordpy.model.durations import DurationError

__all__ = ["app", "render_table"]

app = typer.Typer(
    help="Descheduler tools: PodMigrationJob arbitration, the LowNodeLoad balance round.", no_args_is_help=True
)


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


def _percent(load: dict[str, Any]) -> str:
    percent = load["percent"]
    return "-" if percent is None else f"{percent:.1f}%"


def render_balance(report: dict[str, Any]) -> str:
    """Per pool: its outcome and capacity, a row per node (state, usage per resource against its high threshold);
    then the moves with their reason and destination, the pods kept and why, the nodes' stops."""
    if report["paused"]:
        return "paused (lowNodeLoad.paused): nothing decided"
    lines = []
    for pool in report["pools"]:
        name = pool["name"] or "(unnamed)"
        counts = ", ".join(f"{state} {count}" for state, count in pool["counts"].items())
        lines.append(f"pool {name}: {pool['outcome']} ({counts})")
        for kind, values in pool["capacity"].items():
            spent = ", ".join(f"{r} {v['before']} -> {v['left']}" for r, v in values.items())
            lines.append(f"  {kind} capacity (idle nodes' high - usage): {spent}")
        resources = pool["resources"]
        header = "".join(f" {r.upper():>17}" for r in resources)
        lines.append(f"  {'NODE':<20} {'STATE':<7}{header}  ACTED")
        for node in pool["nodes"]:
            cells = "".join(
                f" {_percent(load) + '/' + format(load['high'], 'g') + '%':>17}"
                for load in (node["resources"].get(r) for r in resources)
                if load is not None
            ) or "".join(f" {'-':>17}" for _ in resources)
            acted = "yes" if node["acted"] else ""
            state = node["state"]
            if "prod" in node:
                state += f"/{node['prod']['state']}"
                acted = acted or ("prod" if node["prod"]["acted"] else "")
            lines.append(f"  {node['name']:<20} {state:<7}{cells}  {acted}")
    if report["unpooled"]:
        lines.append(f"nodes in no pool: {', '.join(report['unpooled'])}")
    lines.append("")
    lines.append(f"{'MOVE':<32} {'FROM':<16} {'TO':<16} {'EXT':>3}  REASON")
    for move in report["moves"]:
        destination = move["destination"] or {}
        ext = destination.get("extenderScore", "-") if destination.get("node") else "-"
        lines.append(
            f"{move['pod']:<32} {move['node']:<16} {destination.get('node') or '-':<16} {ext!s:>3}  {move['reason']}"
        )
    if report["kept"]:
        lines.append("")
        lines.append(f"{'KEPT':<32} {'ON':<16} WHY")
        for kept in report["kept"]:
            lines.append(f"{kept['pod']:<32} {kept['node']:<16} {kept['why']}")
    if report["stops"]:
        lines.append("")
        for stop in report["stops"]:
            untried = f", {stop['untried']} pod(s) not tried" if stop["untried"] else ""
            lines.append(
                f"{stop['node']} ({stop['kind']}): stopped after {stop['moved']} move(s): {stop['why']}{untried}"
            )
    return "\n".join(lines)


@app.command("balance")
def balance_command(  # noqa: PLR0917 - typer maps each parameter to an option
    files: DumpFiles = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="ManagerConfiguration file (lowNodeLoad, migrationController, deschedulingInterval, "
            "maxNoOfPodsToEvict*).",
        ),
    ] = None,
    scheduler_config: Annotated[
        Path | None,
        typer.Option("--scheduler-config", metavar="FILE", help="Scheduler configuration file (its loadAware)."),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(
            "--now", metavar="RFC3339", help="Evaluation instant; default: the dump's newest timestamp (live: now)."
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Start the anomaly detectors empty (a manager that just started); default: every node hot for "
            "consecutiveAbnormalities rounds already.",
        ),
    ] = False,
    output: Output = "table",
) -> None:
    """One LowNodeLoad balance round, read only: each node's class per resource and pool, the pods it would move
    with the reason, where each would land (the extender's own filter and score) and the capacity left."""
    from koordpy.cli.live import LiveError, read_input
    from koordpy.cli.scheduler import load_scheduler_config
    from koordpy.descheduler.lownodeload.budget import EvictionLimits
    from koordpy.descheduler.lownodeload.offline import BalanceReportError, balance_report
    from koordpy.kube.resources import (
        DEPLOYMENTS,
        NODEMETRICS,
        NODES,
        PODMIGRATIONJOBS,
        PODS,
        REPLICASETS,
        STATEFULSETS,
    )

    if output not in ("json", "table"):
        raise _fail(f"-o: expected json or table, got {output!r}")
    try:
        manager = validate(ManagerConfiguration, {} if config is None else read_mapping(config), str(config or ""))
        if manager.low_node_load is None:
            raise InputError(f"{config or 'the default configuration'}: no lowNodeLoad section: the plugin is off")
        scheduler = load_scheduler_config(scheduler_config)
        resources = (NODES, PODS, NODEMETRICS, PODMIGRATIONJOBS, DEPLOYMENTS, REPLICASETS, STATEFULSETS)
        documents, live = read_input(files, kubeconfig, context, resources)
        instant, note = evaluation_instant(now, documents, live=live)
        limits = EvictionLimits(
            manager.max_no_of_pods_to_evict_per_node,
            manager.max_no_of_pods_to_evict_per_namespace,
            manager.max_no_of_pods_to_evict_total,
        )
        result, ignored = balance_report(
            documents,
            args=manager.low_node_load,
            migration=manager.migration_controller,
            scheduler=scheduler,
            now=instant,
            interval=manager.descheduling_interval_seconds,
            limits=limits,
            fresh=fresh,
        )
    except DurationError as exc:
        raise _fail(f"--now: {exc}") from None
    except (InputError, ConfigError, BalanceReportError, LiveError) as exc:
        raise _fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed object the converters did not attribute to a field
        source = ", ".join(map(str, files)) if files else "the cluster"
        raise _fail(f"{source}: cannot evaluate: {type(exc).__name__}: {exc}") from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
    if not fresh:
        print(
            "note: every node taken as hot for consecutiveAbnormalities rounds already (--fresh: as a new manager)",
            file=sys.stderr,
        )
    report = result.as_json()
    if output == "json":
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        typer.echo(render_balance(report))
