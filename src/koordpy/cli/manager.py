"""``koordpy manager``: the kopf operator (NodeMetrics, PodGroup status, PodMigrationJobs, Reservations)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer

from koordpy.cli.connection import require_connection
from koordpy.cli.files import InputError, read_mapping
from koordpy.cli.options import LogFormatOption, log_format
from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration

__all__ = ["load_manager_config", "manager_command", "register"]


def load_manager_config(path: Path) -> ManagerConfiguration:
    """The manager configuration file. Raises InputError/ConfigError naming the file and field path."""
    return validate(ManagerConfiguration, read_mapping(path), str(path))


def manager_command(
    config: Annotated[Path, typer.Option("--config", metavar="FILE", help="ManagerConfiguration file (YAML or JSON).")],
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", metavar="FILE", help="kubeconfig file; default: in-cluster service account."),
    ] = None,
    health_host: Annotated[
        str | None,
        typer.Option(
            "--health-host", metavar="ADDRESS", help="Listen address of /healthz and /metrics (overrides health.host)."
        ),
    ] = None,
    scheduler_config: Annotated[
        Path | None,
        typer.Option(
            "--scheduler-config",
            metavar="FILE",
            help="The extender's SchedulerConfiguration: the LowNodeLoad round asks its filter and score where a "
            "moved pod would land (read only with lowNodeLoad; default: the extender's defaults).",
        ),
    ] = None,
    log_format_name: LogFormatOption = "json",
) -> None:
    """Run the manager: NodeMetric per node, PodGroup status, PodMigrationJobs, Reservations; /healthz, /metrics.

    One process keeps a NodeMetric per node (the configured collect policy), writes PodGroup status and gang
    Events, arbitrates and carries out PodMigrationJobs, places Reservations (and reserves nodes for starving
    jobs with reservation.enabled) and, with lowNodeLoad, files PodMigrationJobs for pods of hot nodes."""
    fmt = log_format(log_format_name)
    from koordpy.runtime.listeners import listen_host

    scheduler = None
    try:
        cfg = load_manager_config(config)
        if scheduler_config is not None and cfg.low_node_load is not None:
            from koordpy.cli.scheduler import load_scheduler_config

            scheduler = load_scheduler_config(scheduler_config)
        if health_host is not None:
            health = cfg.health.model_copy(update={"host": listen_host(health_host, "--health-host")})
            cfg = cfg.model_copy(update={"health": health})
    except (InputError, ConfigError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            typer.echo(f"error: --kubeconfig: {kubeconfig}: no such file", err=True)
            raise typer.Exit(2)
        # The manager's connection (its own client and kopf's session) is loaded from KUBECONFIG.
        os.environ["KUBECONFIG"] = str(kubeconfig)
    # kopf would retry a missing login forever with a traceback per attempt: check it once, up front.
    require_connection(str(kubeconfig) if kubeconfig is not None else None)
    from koordpy.manager.operator import run
    from koordpy.runtime.logging import configure_logging

    configure_logging(cfg.log_level, fmt=fmt)

    asyncio.run(run(cfg, scheduler=scheduler))


def register(app: typer.Typer) -> None:
    """Add ``koordpy manager`` to the top-level command."""
    app.command("manager")(manager_command)
