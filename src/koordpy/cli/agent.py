"""``koordpy agent ...``: the node agent and its offline planner."""

from __future__ import annotations

import typer

app = typer.Typer(help="Node agent: usage collection, NodeMetric reporting, waterline QoS.", no_args_is_help=True)
