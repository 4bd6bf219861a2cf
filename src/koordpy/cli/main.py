"""The ``koordpy`` command: one sub-command per deployable plus the offline tools."""

from __future__ import annotations

from pathlib import Path

import typer

from koordpy.cli import agent, extender, manager, scheduler, simulate

app = typer.Typer(
    help="koordpy: load-aware scheduling and node QoS for Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(scheduler.app, name="scheduler")
app.add_typer(agent.app, name="agent")
extender.register(app)
manager.register(app)
simulate.register(app)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
"""Bundled example inputs for the offline tools (README.md and the CLI tests run them)."""


def main() -> None:
    app()
