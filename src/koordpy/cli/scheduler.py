"""``koordpy scheduler ...``: the offline explain, gangs and reservations tools."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_mapping
from koordpy.cli.options import (
    NOTE_CLOCK,
    DumpFiles,
    Kubeconfig,
    KubeContext,
    Now,
    Output,
    RequiredDumpFiles,
    evaluation_instant,
)
from koordpy.config.errors import ConfigError, validate
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.kube.resources import PODGROUPS, PODGROUPS_NATIVE, PODGROUPS_VOLCANO, PODGROUPS_X_K8S
from koordpy.model.durations import DurationError, parse_rfc3339
from koordpy.scheduler.explain import ExplainError, NoInstantError, explain
from koordpy.scheduler.plugins.gang.offline import GangReportError, gang_report

app = typer.Typer(help="Scheduler tools.", no_args_is_help=True)

PODGROUP_RESOURCES = (PODGROUPS, PODGROUPS_X_K8S, PODGROUPS_VOLCANO, PODGROUPS_NATIVE)
"""The PodGroup APIs live mode lists (each one the cluster does not serve is skipped with a note)."""


def load_scheduler_config(path: Path | None) -> SchedulerConfiguration:
    """The scheduler configuration file, or the defaults. Raises InputError/ConfigError."""
    if path is None:
        return validate(SchedulerConfiguration, {})
    return validate(SchedulerConfiguration, read_mapping(path), str(path))


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def render_table(result: dict[str, Any]) -> str:
    """One line for the pod, then one row per node: in-tree fit, load-aware verdict, score, reason."""
    if result.get("schedulable", True):
        lines = [f"pod {result['pod']}: selected {result['selected'] or '<none>'}"]
    else:
        lines = [f"pod {result['pod']}: kube-scheduler would not schedule it"]
        lines.extend(f"  note: {note}" for note in result.get("notes", []))
        lines.append(f"  if it were pending: would select {result.get('wouldSelect') or '<none>'}")
    gang = result.get("gang")
    if gang:
        admit = "admitted" if gang["admit"]["ok"] else f"not admitted ({gang['admit']['reason']})"
        lines.append(f"gang {gang['id']}: {admit}; permit {gang['permit']['verdict']}: {gang['permit']['reason']}")
    chosen = result["selected"] or result.get("wouldSelect")
    lines.append(f"{'NODE':<16} {'FIT':<5} {'LOADAWARE':<13} {'SCORE':>5} {'EXT':>3}  REASON")
    for row in result["nodes"]:
        fit = row.get("fit", {})
        load = row.get("loadAware", {})
        fit_text = "skip" if fit.get("skipped") else "ok" if fit.get("feasible", True) else "fail"
        score = row["scores"].get("LoadAwareScheduling", "-")
        ext = row["extenderScore"] if row["feasible"] else "-"
        if row["failures"]:
            reason = "; ".join(f"{f['plugin']}: {f.get('detail') or f['reason']}" for f in row["failures"])
        else:
            reason = load.get("detail", "")
        mark = "*" if row["name"] == chosen else " "
        verdict = load.get("verdict", "-")
        lines.append(f"{mark}{row['name']:<15} {fit_text:<5} {verdict:<13} {score!s:>5} {ext!s:>3}  {reason}")
    lines.extend(_reservation_lines(result["nodes"]))
    return "\n".join(lines)


def _reservation_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per Reservation holding on a node (none without Reservations in the input)."""

    def amounts(resources: dict[str, str]) -> str:
        return ", ".join(f"{name} {amount}" for name, amount in resources.items()) or "nothing"

    lines = []
    for row in rows:
        reservation = row.get("reservation") or {}
        for holding in reservation.get("holdings", []):
            whose = "this pod's" if holding["owner"] else "not this pod's"
            preferred = " (preferred)" if holding["owner"] and reservation.get("preferred") else ""
            lines.append(
                f"reservation {holding['name']} on {row['name']}: {holding['phase']}, {whose}{preferred}, "
                f"holds {amounts(holding['requests'])}, remaining {amounts(holding['remaining'])}"
            )
    return lines


@app.command("explain")
def explain_command(  # noqa: PLR0917 - typer maps each parameter to an option
    pod: Annotated[
        str, typer.Option("--pod", metavar="NAMESPACE/NAME", help="NAMESPACE/NAME of the pod being placed.")
    ],
    files: DumpFiles = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    config: Annotated[
        Path | None, typer.Option("--config", metavar="FILE", help="Scheduler configuration file.")
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            metavar="RFC3339",
            help="Evaluation instant, RFC 3339; default: the dump's newest timestamp (live: now).",
        ),
    ] = None,
    output: Output = "table",
    in_tree: Annotated[
        bool,
        typer.Option("--in-tree/--no-in-tree", help="Run kube-scheduler's in-tree filters before the extender's."),
    ] = True,
) -> None:
    """Explain where a pod would go and why, from a dump of Nodes, Pods, NodeMetrics, Reservations and
    PodGroups (or a cluster)."""
    from koordpy.cli.live import LiveError, read_input
    from koordpy.kube.resources import NODEMETRICS, NODES, PODS, RESERVATIONS

    if output not in ("json", "table"):
        raise fail(f"-o: expected json or table, got {output!r}")
    try:
        cfg = load_scheduler_config(config)
        resources = (NODES, PODS, NODEMETRICS, RESERVATIONS, *PODGROUP_RESOURCES)
        documents, live = read_input(files, kubeconfig, context, resources)
        instant = parse_rfc3339(now) if now else time.time() if live else None
        from_clock = live and not now
        try:
            result, ignored = explain(documents, pod, cfg, instant, in_tree=in_tree)
        except NoInstantError:
            print(NOTE_CLOCK, file=sys.stderr)
            result, ignored = explain(documents, pod, cfg, time.time(), in_tree=in_tree)
            from_clock = True
        if from_clock:
            result["nowFrom"] = "clock"
    except DurationError as exc:
        raise fail(f"--now: {exc}") from None
    except (InputError, ConfigError, ExplainError, LiveError) as exc:
        raise fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed object the converters did not attribute to a field
        source = ", ".join(map(str, files)) if files else "the cluster"
        raise fail(f"{source}: cannot evaluate: {type(exc).__name__}: {exc}") from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if result["nowFrom"] == "dump":
        print(
            f"note: evaluated at {result['now']}, the newest timestamp in the input (not the clock); "
            "pass --now to choose",
            file=sys.stderr,
        )
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
    files: DumpFiles = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    waiting: Annotated[
        list[str] | None,
        typer.Option(
            "--waiting", metavar="NAMESPACE/NAME=NODE", help="A member held at the bind barrier on NODE; repeatable."
        ),
    ] = None,
    failed: Annotated[
        list[str] | None,
        typer.Option("--failed", metavar="NAMESPACE/NAME", help="A member whose scheduling failed; repeatable."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", metavar="FILE", help="Scheduler configuration file.")
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(
            "--now", metavar="RFC3339", help="Evaluation instant; default: the dump's newest timestamp (live: now)."
        ),
    ] = None,
    output: Output = "table",
) -> None:
    """Gang verdicts (admit, permit, phase) from a dump of Pods and PodGroups of the four APIs (or a cluster).

    Live mode lists Pods and the four PodGroup kinds (three CRDs and Kubernetes' own scheduling.k8s.io); it
    cannot see binds held at the extender's barrier (pass them with --waiting). A PodGroup API the cluster
    does not serve is skipped with a note."""
    from koordpy.cli.live import LiveError, read_input
    from koordpy.kube.resources import PODS

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
        documents, live = read_input(files, kubeconfig, context, (PODS, *PODGROUP_RESOURCES))
        instant, note = evaluation_instant(now, documents, live=live)
        report, ignored = gang_report(documents, cfg.gang, instant, held, failed or [])
    except DurationError as exc:
        raise fail(f"--now: {exc}") from None
    except (InputError, ConfigError, GangReportError, LiveError) as exc:
        raise fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed object the converters did not attribute to a field
        source = ", ".join(map(str, files)) if files else "the cluster"
        raise fail(f"{source}: cannot evaluate: {type(exc).__name__}: {exc}") from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(render_gangs_table(report))


def render_reservations_table(report: dict[str, Any]) -> str:
    """Three blocks: starving jobs in pick order, reservations after the decision, the actions."""
    lines = [f"{'STARVING JOB':<32} {'PRIORITY':>8} {'WAITING':>8} {'MIN':>3} {'READY':>5} {'RESERVED':>8}"]
    for job in report["starving"]:
        lines.append(
            f"{job['job']:<32} {job['priority']:>8} {job['waitingSeconds']:>7}s {job['minMember']:>3} "
            f"{job['ready']:>5} {job['reserved']:>8}"
        )
    lines.append("")
    lines.append(f"{'RESERVATION':<36} {'PHASE':<10} {'NODE':<16} {'JOB':<28} REQUESTS")
    for res in report["reservations"]:
        requests = ",".join(f"{k}={v}" for k, v in res["requests"].items())
        lines.append(
            f"{res['name']:<36} {res['phase']:<10} {res['node'] or '-':<16} {res['job'] or '-':<28} {requests}"
        )
    lines.append("")
    lines.append(f"{'ACTION':<7} {'RESERVATION':<36} {'NODE':<16} REASON")
    for action in report["actions"]:
        lines.append(
            f"{action['action']:<7} {action['reservation']:<36} {action['node'] or '-':<16} {action['reason']}"
        )
    return "\n".join(lines)


@app.command("reservations")
def reservations_command(
    *,
    files: RequiredDumpFiles,
    config: Annotated[
        Path | None,
        typer.Option("--config", metavar="FILE", help="ManagerConfiguration file (its reservation section)."),
    ] = None,
    now: Now = None,
    output: Output = "table",
) -> None:
    """The reservation decision the manager would take on a dump: starving jobs, reservations, actions; offline only.

    Reads Nodes, Pods, PodGroups, Reservations and NodeMetrics; placement runs the load-aware filter
    with the configuration's ``reservation.loadAware`` (a node without a NodeMetric passes)."""
    from koordpy.cli.files import read_documents
    from koordpy.config.manager import ManagerConfiguration
    from koordpy.scheduler.plugins.reservation.offline import ReservationReportError, reservation_report

    if output not in ("json", "table"):
        raise fail(f"-o: expected json or table, got {output!r}")
    try:
        manager = (
            validate(ManagerConfiguration, {})
            if config is None
            else validate(ManagerConfiguration, read_mapping(config), str(config))
        )
        documents = read_documents(files)
        instant, note = evaluation_instant(now, documents)
        decision, ignored = reservation_report(documents, manager.reservation, instant, manager.reservation.load_aware)
    except DurationError as exc:
        raise fail(f"--now: {exc}") from None
    except (InputError, ConfigError, ReservationReportError) as exc:
        raise fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed object the converters did not attribute to a field
        raise fail(f"{', '.join(map(str, files))}: cannot evaluate: {type(exc).__name__}: {exc}") from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
    report = decision.report()
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(render_reservations_table(report))
