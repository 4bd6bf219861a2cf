"""``koordpy agent ...``: the node agent and its offline planner."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from koordpy.cli.connection import require_connection
from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_mapping
from koordpy.cli.options import DumpFiles, Kubeconfig, KubeContext, LogFormatOption, Output, log_format
from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.model.durations import DurationError, parse_rfc3339

app = typer.Typer(help="Node agent: usage collection, NodeMetric reporting, waterline QoS.", no_args_is_help=True)


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def load_agent_config(path: Path | None) -> AgentConfiguration:
    """The agent configuration file, or the defaults. Raises InputError/ConfigError."""
    if path is None:
        return validate(AgentConfiguration, {})
    return validate(AgentConfiguration, read_mapping(path), str(path))


def _amount(metric: str, value: float | None) -> str:
    """Memory metrics in Gi, cpu in cores, utilisations in percent; two decimals at most."""
    from koordpy.scheduler.framework.fit import format_amount

    if value is None:
        return "-"
    if "memory" in metric and "utilization" not in metric:
        return format_amount("memory", int(value))
    return format_amount("cpu", round(value * 1000))


def _pod_facts(documents: list[tuple[str, Any]], node: str) -> dict[str, tuple[str, str, str, str]]:
    """Per pod key on ``node``: QoS class, priority, cpu and memory usage as the node's NodeMetric reports them."""
    from koordpy.model.dumps import iter_objects
    from koordpy.model.objects import ObjectError, nodemetric_from_dict, pod_from_dict

    usage: dict[str, dict[str, int]] = {}
    pods: dict[str, tuple[str, str]] = {}
    for where, document in documents:
        for _, obj in iter_objects(where, document):
            try:
                if obj.get("kind") == "NodeMetric" and (obj.get("metadata") or {}).get("name") == node:
                    metric = nodemetric_from_dict(obj)
                    usage.update({f"{p.namespace}/{p.name}": p.usage for p in metric.pods})
                elif obj.get("kind") == "Pod":
                    pod = pod_from_dict(obj)
                    if pod.node_name == node:
                        pods[pod.key] = (str(pod.qos.value), "-" if pod.priority is None else str(pod.priority))
            except ObjectError:
                continue  # the planner has already reported bad objects
    out = {}
    for key, (qos, priority) in pods.items():
        used = usage.get(key, {})
        cpu = _amount("cpu", used["cpu"] / 1000) if "cpu" in used else "-"
        memory = _amount("memory", used["memory"]) if "memory" in used else "-"
        out[key] = (qos, priority, cpu, memory)
    return out


def render_plan_table(plan: dict[str, Any], facts: dict[str, tuple[str, str, str, str]]) -> str:
    """Waterlines and gaps, each candidate's usage, QoS class and priority, then the actions."""
    lines = [f"node {plan['node']}", f"{'RULE':<10} {'METRIC':<24} {'WATERLINE':>10} {'GAP':>8}"]
    for rule, metrics in plan["waterlines"].items():
        for metric, line in metrics.items():
            gap = plan["gaps"].get(rule, {}).get(metric)
            lines.append(f"{rule:<10} {metric:<24} {_amount(metric, line):>10} {_amount(metric, gap):>8}")
    lines.append("")
    lines.append(f"{'CANDIDATE':<28} {'QOS':<10} {'PRIORITY':>10} {'CPU':>6} {'MEMORY':>8}  FOR")
    rules_of: dict[str, list[str]] = {}
    for rule, keys in plan["candidates"].items():
        for key in keys:
            rules_of.setdefault(key, []).append(rule)
    for key, rules in rules_of.items():
        qos, priority, cpu, memory = facts.get(key, ("-", "-", "-", "-"))
        lines.append(f"{key:<28} {qos:<10} {priority:>10} {cpu:>6} {memory:>8}  {','.join(rules)}")
    if not rules_of:
        lines.append("<none>")
    lines.append("")
    lines.append(f"{'ACTION':<10} {'POD':<28} {'METRIC':<24} {'RELEASED':>9}")
    for action in plan["actions"]:
        metric = action["metric"] or ""
        released = _amount(metric, action["released"])
        lines.append(f"{action['action']:<10} {action['pod'] or '-':<28} {metric or '-':<24} {released:>9}")
    if not plan["actions"]:
        lines.append("<none>")
    return "\n".join(lines)


@app.command("plan")
def plan_command(  # noqa: PLR0917 - typer maps each parameter to an option
    node: Annotated[
        str, typer.Option("--node", metavar="NAME", help="Node to plan for (its NodeMetric must be in the input).")
    ],
    files: DumpFiles = None,
    kubeconfig: Kubeconfig = None,
    context: KubeContext = None,
    now: Annotated[str | None, typer.Option("--now", metavar="RFC3339", help="Evaluation instant, RFC 3339.")] = None,
    output: Output = "json",
    config: Annotated[
        Path | None, typer.Option("--config", metavar="FILE", help="Agent configuration (protected pods).")
    ] = None,
) -> None:
    """Waterlines, gaps, candidates and the precise actions for a node, assuming the rules fire now.

    Units: cpu in cores, memory in bytes, utilizations in percent (-o table: memory in Gi).
    """
    from koordpy.agent.policy.offline import OfflineError, offline_plan
    from koordpy.agent.policy.planner import PlanOptions
    from koordpy.cli.live import LiveError, read_input
    from koordpy.kube.resources import (
        AVOIDANCEACTIONS,
        NODEMETRICS,
        NODEQOSENSURANCEPOLICIES,
        NODEQOSS,
        NODES,
        PODQOSS,
        PODS,
    )

    if output not in ("json", "table"):
        raise fail(f"-o: expected json or table, got {output!r}")
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
        resources = (NODEQOSENSURANCEPOLICIES, NODEQOSS, PODQOSS, AVOIDANCEACTIONS, PODS, NODEMETRICS, NODES)
        documents, _live = read_input(files, kubeconfig, context, resources)
        result = offline_plan(documents, node, instant, options)
    except (InputError, ConfigError, OfflineError, LiveError) as exc:
        raise fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed object the converters did not attribute to a field
        source = ", ".join(map(str, files)) if files else "the cluster"
        raise fail(f"{source}: cannot evaluate: {type(exc).__name__}: {exc}") from None
    for event in result.events:
        where = f" {event.pod}" if event.pod else ""
        print(f"note: {event.reason}{where}: {event.message}", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if output == "json":
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        typer.echo(render_plan_table(result.to_json(), _pod_facts(documents, node)))


@app.command("run")
def run_command(  # noqa: PLR0917 - typer maps each parameter to an option
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
    proc_root: Annotated[
        str,
        typer.Option(
            "--proc-root",
            metavar="DIR",
            help="procfs mount; /proc/stat and /proc/meminfo are node-wide in any PID namespace.",
        ),
    ] = "/proc",
    host: Annotated[
        str | None,
        typer.Option(
            "--host", metavar="ADDRESS", help="Listen address of /healthz, /readyz, /metrics (overrides server.host)."
        ),
    ] = None,
    log_format_name: LogFormatOption = "json",
) -> None:
    """Run the node agent: collection, NodeMetric reporting and waterline QoS, with /healthz, /readyz, /metrics."""
    import asyncio
    import signal

    from aiohttp import web

    from koordpy.agent.loop import Agent
    from koordpy.kube.client import ApiClient
    from koordpy.runtime.listeners import listen_host

    fmt = log_format(log_format_name)
    try:
        cfg = load_agent_config(config)
        listen = cfg.server.host if host is None else listen_host(host, "--host")
    except (InputError, ConfigError, ValueError) as exc:
        raise fail(str(exc)) from None
    connection = require_connection(kubeconfig)
    from koordpy.runtime.logging import configure_logging

    configure_logging(cfg.log_level, fmt=fmt)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with ApiClient(connection) as client:
            agent = Agent(cfg, node, client, cgroup_root=cgroup_root, proc_root=proc_root)
            runner = web.AppRunner(agent.app(), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, listen, cfg.server.port)
            await site.start()
            try:
                await agent.run(stop)
            finally:
                await runner.cleanup()

    asyncio.run(main())
