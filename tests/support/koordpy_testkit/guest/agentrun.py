"""Runs inside the test guest: the agent's own tick (:meth:`koordpy.agent.loop.Agent.tick`: collect, plan,
write the cgroups, save its state) on the guest's real cgroup v2 tree and PSI, every ``interval`` seconds.

The pods and the QoS objects reach the agent through its watch handlers, as if listed from an API server;
there is none in the guest tier, so the agent's client is never opened and its Events are recorded here
instead of posted (the cluster tier posts them to a real API server). Everything else is the agent's.

The ticks run in the runner's process (the guest's root cgroup). Under TCG a tick costs about a hundred times
what it costs on a real CPU, so callers tick every 2 s or more and count the agent's own CPU as part of the
node's load.

Not guaranteed: tick spacing under TCG (a tick takes tens of milliseconds of the guest's one CPU).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

__all__ = ["agent_ticks", "load"]

ROOT = Path("/sys/fs/cgroup")


def _avg10(root: Path, rel: str) -> float:
    line = (root / rel / "cpu.pressure").read_text().splitlines()[0]
    return float(line.split()[1].partition("=")[2])


def load() -> float:
    """Import the agent's modules (tens of seconds under TCG, once per boot): call before starting load, so the
    import does not compete with it. Returns the seconds it took."""
    started = time.monotonic()
    import koordpy.agent.loop  # noqa: F401

    return time.monotonic() - started


def agent_ticks(
    pods: list[dict[str, Any]],
    objects: list[dict[str, Any]],
    watch: dict[str, str],
    seconds: float,
    state_dir: str,
    interval: float = 1.0,
    stop_after_restore: bool = False,
    root: str = str(ROOT),
    proc: str = "/proc",
) -> dict[str, Any]:
    """Tick the agent for ``seconds`` (or until one tick after its first restore, with ``stop_after_restore``).

    ``watch``: pod name -> its cgroup (relative to the mount), whose ``cpu.max``, ``cpu.stat``
    ``throttled_usec`` and ``cpu.pressure`` avg10 are recorded each tick beside the agent's actions, Events
    and rule counters."""
    return asyncio.run(_ticks(pods, objects, watch, seconds, state_dir, interval, stop_after_restore, Path(root), proc))


async def _ticks(
    pods: list[dict[str, Any]],
    objects: list[dict[str, Any]],
    watch: dict[str, str],
    seconds: float,
    state_dir: str,
    interval: float,
    stop_after_restore: bool,
    root: Path,
    proc: str,
) -> dict[str, Any]:
    from koordpy.agent.loop import Agent
    from koordpy.config.agent import AgentConfiguration
    from koordpy.kube.client import ApiClient
    from koordpy.kube.connection import ConnectionInfo

    events: list[dict[str, str]] = []

    async def record(involved: Any, *, reason: str, message: str, **_: Any) -> None:
        events.append({"reason": reason, "message": message, "object": str(involved["metadata"].get("name"))})

    cfg = AgentConfiguration.model_validate(
        {"collectIntervalSeconds": interval, "stateDir": state_dir, "nodeMetric": {"enabled": False}}
    )
    client = ApiClient(ConnectionInfo("https://127.0.0.1:1"))
    setattr(client, "create_event", record)  # noqa: B010  # recorded, not posted: no API server here
    agent = Agent(cfg, "guest", client, cgroup_root=str(root), proc_root=proc)
    for raw in pods:
        agent._on_pod("ADDED", raw)
    handlers = {
        "NodeQOSEnsurancePolicy": agent._on_policy,
        "NodeQOS": agent._on_node_qos,
        "PodQOS": agent._on_pod_qos,
        "AvoidanceAction": agent._on_action,
    }
    for obj in objects:
        handlers[obj["kind"]]("ADDED", obj)
    ticks: list[dict[str, Any]] = []
    started = time.monotonic()
    restored_at: int | None = None
    while time.monotonic() - started < seconds:
        due = time.monotonic() + interval
        plan = await agent.tick()
        await asyncio.sleep(0)  # let the recorded Events land
        ticks.append(
            {
                "t": round(time.monotonic() - started, 3),
                "actions": [
                    {"kind": str(a.kind), "pod": a.pod.split("/")[1], "cap": a.cpu_cap, "metric": a.metric}
                    for a in plan.actions
                ],
                "rules": {k: [r.above, r.below, r.fired] for k, r in agent.state.rules.items()},
                "pods": {
                    name: {
                        "cpu_max": (root / rel / "cpu.max").read_text().strip(),
                        "avg10": _avg10(root, rel),
                        "throttled_usec": int(
                            next(
                                line.split()[1]
                                for line in (root / rel / "cpu.stat").read_text().splitlines()
                                if line.startswith("throttled_usec ")
                            )
                        ),
                    }
                    for name, rel in watch.items()
                },
            }
        )
        if restored_at is None and any(a.kind == "restore" for a in plan.actions):
            restored_at = len(ticks) - 1
        if stop_after_restore and restored_at is not None and len(ticks) > restored_at + 1:
            break
        await asyncio.sleep(max(0.0, due - time.monotonic()))
    await agent.shutdown()
    # What is still capped goes back (as restoreOnExit would): the next test starts from the kubelet's values.
    agent.writer.restore_all()
    return {"ticks": ticks, "events": events, "restored_at": restored_at}
