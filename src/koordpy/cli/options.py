"""Options shared by the offline tools: where the objects come from (dump files or a live cluster), and
the instant they are judged at (``--now``).

Not guaranteed: that a command accepts both sources; ``koordpy.cli.live.read_input`` refuses ``-f``
together with ``--kubeconfig``/``--context``, and reads the cluster kubectl would read without ``-f``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from koordpy.model.dumps import newest_timestamp
from koordpy.model.durations import parse_rfc3339

__all__ = [
    "NOTE_CLOCK",
    "NOTE_NEWEST",
    "DumpFiles",
    "KubeContext",
    "Kubeconfig",
    "LogFormatOption",
    "Now",
    "Output",
    "RequiredDumpFiles",
    "evaluation_instant",
    "log_format",
]

NOTE_NEWEST = "note: evaluated at the newest timestamp in the input (not the clock); pass --now"
NOTE_CLOCK = "note: the input carries no timestamp: evaluated at the clock"

DumpFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "-f",
        "--filename",
        metavar="FILE",
        help="YAML or JSON dump; repeatable. Without -f the cluster is read, as kubectl finds it.",
    ),
]
RequiredDumpFiles = Annotated[
    list[Path], typer.Option("-f", "--filename", metavar="FILE", help="YAML or JSON dump; repeatable.")
]
"""``-f`` for the tools that read dumps only."""
Now = Annotated[
    str | None,
    typer.Option("--now", metavar="RFC3339", help="Evaluation instant; default: the dump's newest timestamp."),
]
Output = Annotated[str, typer.Option("-o", "--output", metavar="json|table", help="json or table.")]
Kubeconfig = Annotated[
    str | None,
    typer.Option(
        "--kubeconfig", metavar="FILE", help="Kubeconfig of the cluster to read; default: $KUBECONFIG, ~/.kube/config."
    ),
]
KubeContext = Annotated[
    str | None, typer.Option("--context", metavar="NAME", help="Kubeconfig context; default: the current one.")
]
LogFormatOption = Annotated[
    str,
    typer.Option(
        "--log-format",
        metavar="json|text",
        help="Log lines as JSON objects (default) or key=value text; the same fields either way.",
    ),
]
"""The services' ``--log-format`` (see :mod:`koordpy.runtime.logging`)."""


def log_format(value: str) -> Any:
    """``--log-format``'s value, or ``typer.Exit(2)`` after one ``error:`` line."""
    if value not in ("json", "text"):
        typer.echo(f"error: --log-format: expected json or text, got {value!r}", err=True)
        raise typer.Exit(2)
    return value


def evaluation_instant(
    now: str | None, documents: Iterable[tuple[str, Any]], *, live: bool = False
) -> tuple[float, str]:
    """The instant and the stderr note saying where it came from: ``--now`` when given (no note), the
    clock for a live cluster (no note), else the dump's newest timestamp, else the clock. Raises
    ``DurationError`` for a ``--now`` that is not RFC 3339."""
    if now:
        return parse_rfc3339(now), ""
    if live:
        return time.time(), ""
    newest = newest_timestamp(documents)
    if newest is None:
        return time.time(), NOTE_CLOCK
    return newest, NOTE_NEWEST
