"""``koordpy agent ...``: the node agent and its offline planner."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from koordpy.cli.connection import require_connection
from koordpy.cli.files import InputError, read_documents, read_mapping
from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.model.durations import DurationError, parse_rfc3339

app = typer.Typer(help="Node agent: usage collection, NodeMetric reporting, waterline QoS.", no_args_is_help=True)


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def load_agent_config(path: Path | None) -> AgentConfiguration:
    """The agent configuration file, or the defaults. Raises InputError/ConfigError."""
    if path is None:
        return validate(AgentConfiguration, {})
    return validate(AgentConfiguration, read_mapping(path), str(path))


@app.command("plan")
def plan_command(
    files: Annotated[
        list[Path], typer.Option("-f", "--filename", metavar="FILE", help="YAML or JSON dump; repeatable.")
    ],
    node: Annotated[
        str, typer.Option("--node", metavar="NAME", help="Node to plan for (its NodeMetric must be in the input).")
    ],
    now: Annotated[str | None, typer.Option("--now", metavar="RFC3339", help="Evaluation instant, RFC 3339.")] = None,
    output: Annotated[str, typer.Option("-o", "--output", metavar="json", help="json (the only format).")] = "json",
    config: Annotated[
        Path | None, typer.Option("--config", metavar="FILE", help="Agent configuration (protected pods).")
    ] = None,
) -> None:
    """Waterlines, gaps, candidates and the precise actions for a node, assuming the rules fire now.

    Units: cpu in cores, memory in bytes, utilizations in percent.
    """
    from koordpy.agent.policy.offline import OfflineError, offline_plan
    from koordpy.agent.policy.planner import PlanOptions

    if output != "json":
        raise fail(f"-o: expected json, got {output!r}")
    try:
        instant = parse_rfc3339(now) if now else time.time()
    except DurationError as exc:
        raise fail(f"--now: {exc}") from None
    try:
        cfg = load_agent_config(config)
        options = PlanOptions(
            protected_namespaces=frozenset(cfg.qos.protected_namespaces),
            protected_priority_above=cfg.qos.protected_priority_above,
        )
        result = offline_plan(read_documents(files), node, instant, options)
    except (InputError, ConfigError, OfflineError) as exc:
        raise fail(str(exc)) from None
    for event in result.events:
        where = f" {event.pod}" if event.pod else ""
        print(f"note: {event.reason}{where}: {event.message}", file=sys.stderr)
    typer.echo(json.dumps(result.to_json(), indent=2))


@app.command("run")
def run_command(
    config: Annotated[Path, typer.Option("--config", metavar="FILE", help="AgentConfiguration file.")],
    node: Annotated[
        str, typer.Option("--node", metavar="NAME", help="This node's name (downward API: spec.nodeName).")
    ],
    kubeconfig: Annotated[
        str | None, typer.Option("--kubeconfig", metavar="FILE", help="Kubeconfig; default: in-cluster.")
    ] = None,
    cgroup_root: Annotated[
        str, typer.Option("--cgroup-root", metavar="DIR", help="cgroupfs mount.")
    ] = "/sys/fs/cgroup",
    proc_root: Annotated[str, typer.Option("--proc-root", metavar="DIR", help="procfs mount (the host's).")] = "/proc",
) -> None:
    """Run the node agent: collection, NodeMetric reporting and waterline QoS, with /healthz, /readyz, /metrics."""
    import asyncio
    import logging
    import signal

    from aiohttp import web

    from koordpy.agent.loop import Agent
    from koordpy.kube.client import ApiClient

    try:
        cfg = load_agent_config(config)
    except (InputError, ConfigError) as exc:
        raise fail(str(exc)) from None
    connection = require_connection(kubeconfig)
    logging.basicConfig(level=cfg.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with ApiClient(connection) as client:
            agent = Agent(cfg, node, client, cgroup_root=cgroup_root, proc_root=proc_root)
            runner = web.AppRunner(agent.app(), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, cfg.server.host, cfg.server.port)
            await site.start()
            try:
                await agent.run(stop)
            finally:
                await runner.cleanup()

    asyncio.run(main())
