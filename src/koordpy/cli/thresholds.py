"""``koordpy thresholds``: check that the scheduler's, the descheduler's and the agent's thresholds do not contradict
one another, on files (a ``helm template`` output, ``kubectl get -o yaml`` dumps, configuration files) or a cluster.

The rule is :mod:`koordpy.descheduler.contract`; this adapter reads the objects (and the configuration files inside
ConfigMaps: the ``config.yaml`` key, as the chart renders them) and prints one line per finding. Exit status: 1 when
a contradiction is found, 2 for unreadable input, 0 otherwise (warnings and notes do not fail).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Annotated, Any

import typer

from koordpy.cli.files import UNEXPECTED, InputError, one_line, parse_text
from koordpy.cli.options import DumpFiles, Kubeconfig, KubeContext, Output

__all__ = ["register", "render_table", "unwrap_configmaps"]

CONFIG_KINDS = ("SchedulerConfiguration", "ManagerConfiguration")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def unwrap_configmaps(documents: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The documents, with each ConfigMap whose ``config.yaml`` holds a scheduler or manager configuration replaced by
    that configuration (named ``ConfigMap <namespace>/<name> config.yaml``). Raises InputError."""
    from koordpy.model.dumps import iter_objects

    out: list[tuple[str, Any]] = []
    for source, document in documents:
        for where, obj in iter_objects(source, document):
            if obj.get("kind") != "ConfigMap":
                out.append((where, obj))
                continue
            data = obj.get("data") or {}
            text = data.get("config.yaml") if isinstance(data, dict) else None
            meta = obj.get("metadata") or {}
            name = f"{meta.get('namespace', '')}/{meta.get('name', '')}" if isinstance(meta, dict) else "?"
            if not isinstance(text, str):
                out.append((where, obj))
                continue
            label = f"ConfigMap {name} config.yaml"
            for config in parse_text(f"{where}: {label}", text):
                if isinstance(config, dict) and config.get("kind") in CONFIG_KINDS:
                    out.append((label, config))
    return out


def render_table(report: dict[str, Any]) -> str:
    lines = []
    checked = report["checked"]
    lines.append(
        f"checked: scheduler {checked['scheduler'] or '-'}, descheduler {checked['descheduler'] or '-'}, "
        f"{checked['policies']} agent polic{'y' if checked['policies'] == 1 else 'ies'}, {checked['nodes']} node(s)"
    )
    if not report["findings"]:
        lines.append("no contradiction")
    for finding in report["findings"]:
        lines.append(f"{finding['severity']}: {finding['loop']}: {finding['message']}")
    return "\n".join(lines)


def thresholds_command(
    *,
    files: DumpFiles = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    output: Output = "table",
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 on warnings too (not only on contradictions).")
    ] = False,
) -> None:
    """Check the scheduler's, descheduler's and agent's thresholds against one another and say which loop each
    contradiction allows (files, a helm template output, or a cluster)."""
    from koordpy.cli.live import LiveError, read_input
    from koordpy.descheduler.contract_input import ThresholdsReportError, thresholds_report
    from koordpy.kube.resources import AVOIDANCEACTIONS, CONFIGMAPS, NODEQOSENSURANCEPOLICIES, NODEQOSS, NODES
    from koordpy.model.dumps import DumpError

    if output not in ("json", "table"):
        raise _fail(f"-o: expected json or table, got {output!r}")
    try:
        resources = (CONFIGMAPS, NODES, NODEQOSENSURANCEPOLICIES, NODEQOSS, AVOIDANCEACTIONS)
        documents, live = read_input(files, kubeconfig, context, resources)
        report, findings, ignored = thresholds_report(unwrap_configmaps(documents), actions_listed=live)
    except (InputError, ThresholdsReportError, LiveError, DumpError) as exc:
        raise _fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed object the converters did not attribute to a field
        source = ", ".join(map(str, files)) if files else "the cluster"
        raise _fail(f"{source}: cannot evaluate: {type(exc).__name__}: {exc}") from None
    for kind, count in sorted(ignored.items()):
        print(f"note: ignored {count} object(s) of kind {kind}", file=sys.stderr)
    if output == "json":
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        typer.echo(render_table(report))
    failing = {"contradiction", "warning"} if strict else {"contradiction"}
    if any(finding.severity in failing for finding in findings):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``thresholds`` command to the ``koordpy`` application."""
    app.command("thresholds")(thresholds_command)
