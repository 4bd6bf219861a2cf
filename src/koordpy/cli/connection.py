"""The services' Kubernetes connection check: one line on stderr and exit 2 when none is usable.

Not guaranteed: a connection that loads may still be refused by the server (bad token, unreachable host);
that surfaces later, from the service's own retry loop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from koordpy.kube.connection import ConnectionInfo

__all__ = ["connection_source", "one_line_reason", "require_connection"]


def connection_source(kubeconfig: str | None) -> str:
    """Where :func:`koordpy.kube.connection.load_connection` looks, in words (same order)."""
    if kubeconfig is not None:
        return f"--kubeconfig {kubeconfig}"
    if os.environ.get("KUBECONFIG"):
        return f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "the in-cluster service account"
    return f"{Path('~/.kube/config').expanduser()} (no --kubeconfig, no $KUBECONFIG, not in a pod)"


def require_connection(kubeconfig: str | None) -> ConnectionInfo:
    """The connection settings, or ``typer.Exit(2)`` after one ``error:`` line naming where it looked."""
    from koordpy.kube.connection import load_connection

    try:
        return load_connection(kubeconfig)
    except Exception as exc:  # the kubernetes loader raises ConfigException, OSError or a YAML error
        typer.echo(
            f"error: cannot load Kubernetes connection settings from {connection_source(kubeconfig)}: "
            f"{one_line_reason(exc)}",
            err=True,
        )
        raise typer.Exit(2) from None


def one_line_reason(exc: Exception) -> str:
    """The loader's reason in one line (a YAML error as its line and problem)."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:  # a YAML error: its first line ("while parsing ...") says little
        return f"invalid YAML at line {mark.line + 1}: {getattr(exc, 'problem', '')}"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
