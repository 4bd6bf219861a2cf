"""``koordpy extender``: the kube-scheduler HTTP extender (load-aware filter/score and the binder)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from koordpy.cli.connection import require_connection
from koordpy.cli.files import InputError
from koordpy.cli.options import LogFormatOption, log_format
from koordpy.cli.scheduler import load_scheduler_config
from koordpy.config.errors import ConfigError

__all__ = ["extender_command", "register"]


def extender_command(  # noqa: PLR0917 - typer maps each parameter to an option
    config: Annotated[
        Path, typer.Option("--config", metavar="FILE", help="SchedulerConfiguration file (YAML or JSON).")
    ],
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig", metavar="FILE", help="kubeconfig; default: $KUBECONFIG, in-cluster, ~/.kube/config."
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", metavar="ADDRESS", help="Listen address (overrides extender.host).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", metavar="PORT", help="Listen port (overrides extender.port).")
    ] = None,
    metrics_host: Annotated[
        str | None,
        typer.Option(
            "--metrics-host",
            metavar="ADDRESS",
            help="Listen address of the metricsPort listener (overrides extender.metricsHost).",
        ),
    ] = None,
    log_format_name: LogFormatOption = "json",
) -> None:
    """Serve /filter, /prioritize and /bind for kube-scheduler, fed by list+watch of the cluster.

    With extender.metricsPort set, /healthz, /readyz and /metrics are served on that port as well.
    """
    fmt = log_format(log_format_name)
    from koordpy.runtime.listeners import listen_host

    try:
        cfg = load_scheduler_config(config)
        ops_host = cfg.extender.metrics_host if metrics_host is None else listen_host(metrics_host, "--metrics-host")
    except (InputError, ConfigError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if port is not None and not 1 <= port <= 65535:
        typer.echo(f"error: --port: must be 1..65535, got {port}", err=True)
        raise typer.Exit(2)
    metrics_port = cfg.extender.metrics_port
    if port is not None and port == metrics_port:
        typer.echo(f"error: --port: must differ from extender.metricsPort ({metrics_port})", err=True)
        raise typer.Exit(2)
    # Imported here so `koordpy --help` and the offline tools do not pay for the server stack.
    from koordpy.kube.client import ApiClient
    from koordpy.runtime.logging import configure_logging
    from koordpy.scheduler.extender.server import serve

    client = ApiClient(require_connection(str(kubeconfig) if kubeconfig is not None else None))
    configure_logging(cfg.extender.log_level, fmt=fmt)
    serve(
        cfg,
        client,
        host or cfg.extender.host,
        port or cfg.extender.port,
        metrics_host=ops_host,
        metrics_port=metrics_port,
    )


def register(app: typer.Typer) -> None:
    """Add the ``extender`` command to the ``koordpy`` application."""
    app.command("extender")(extender_command)
