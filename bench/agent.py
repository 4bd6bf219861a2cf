"""Agent benchmark (not a test): CPU time of one collection + decision tick, and RSS at 500 pods.

Setup per size (50, 200, 500 pods): a fabricated cgroup tree with the real file layout (v2 by
default, systemd driver, containerd scopes, two containers per pod; every tick reads each pod's
``cpu.stat``, ``memory.current`` and ``memory.stat``; every 5th tick also lists and reads the
containers, as the agent does once per report interval), a fabricated ``/proc``, and a
waterline policy that fires every tick (throttle and evict rules, cool-down 1 s), so the tick does
the whole job: list the tree, read every file, join pods by UID, detect, sort, plan precisely.
The counters advance between ticks like a busy node's. The tick is exactly what the agent loop
runs before acting (``Collector.collect`` + ``policy.plan``); cgroup writes and API calls are not
included.

Run: ``.venv/bin/python bench/agent.py [--ticks N] [--cgroup-version 1|2] [--no-containers]``.
Prints a table and writes ``bench/results/agent.json``.

Not guaranteed: stable figures on a shared machine; the fabricated tree lives in the page cache
(tmpfs-like), as /sys/fs/cgroup does.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from koordpy.agent.loop import Collector
from koordpy.agent.policy import AgentState, plan
from koordpy.agent.policy.report import UsageHistory
from koordpy.agent.sources.cgroups import CgroupReader
from koordpy.agent.sources.procfs import ProcReader
from koordpy.model.objects import pod_from_dict
from koordpy_testkit.agent import evict_action, qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder
from koordpy_testkit.cgroupfs import FakeCgroupTree, write_procfs

RESULTS = Path(__file__).resolve().parent / "results" / "agent.json"
SIZES = (50, 200, 500)
CPUS = 64
GiB = 1 << 30


def rss_mib() -> float:
    """Current resident set size (VmRSS) in MiB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def build(root: Path, pods: int, version: int, containers: bool) -> tuple[FakeCgroupTree, list[Any], dict[str, str]]:
    tree = FakeCgroupTree(root / "cgroup", version=version, driver="systemd")
    infos = []
    rels = {}
    for i in range(pods):
        qos = ("besteffort", "burstable", "guaranteed")[i % 3]
        builder = PodBuilder(f"pod-{i}", f"ns-{i % 7}").node("node-1").phase("Running").priority(i % 5)
        if qos != "besteffort":
            builder.requests(cpu="100m", memory="128Mi")
        if qos == "guaranteed":
            builder.limits(cpu="100m", memory="128Mi")
        raw = builder.uid(str(uuid.UUID(int=i + 1))).build()
        info = pod_from_dict(raw)
        infos.append(info)
        ids = [f"{i:08x}{j:056x}" for j in range(2)] if containers else []
        rels[info.uid] = tree.add_pod(info.uid, qos=qos, containers=ids, memory=(i % 50 + 1) << 24)
    return tree, infos, rels


def advance(tree: FakeCgroupTree, rels: dict[str, str], proc: Path, tick: int) -> None:
    for i, rel in enumerate(rels.values()):
        tree.advance_cpu(rel, 10 * (0.05 + (i % 10) * 0.01))  # 0.05-0.14 cores over a 10 s tick
    busy = (tick + 1) * 1000 * CPUS // 2
    write_procfs(
        proc,
        cpus=CPUS,
        busy_jiffies=busy,
        total_jiffies=(tick + 1) * 1000 * CPUS,
        mem_total_kib=256 << 20,
        mem_avail_kib=64 << 20,
    )


def bench_size(pods: int, ticks: int, version: int, containers: bool) -> dict[str, Any]:
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # in memory, like cgroupfs
    with tempfile.TemporaryDirectory(prefix="koordpy-bench-agent-", dir=shm) as tmp:
        root = Path(tmp)
        tree, infos, rels = build(root, pods, version, containers)
        proc = root / "proc"
        advance(tree, rels, proc, 0)
        collector = Collector(
            CgroupReader(str(root / "cgroup"), collect_containers=containers), ProcReader(str(proc)), "node-1"
        )
        policies = [
            qos_policy(
                "waterline",
                rule("cpu", "cpu_total_usage", 1000, "throttle"),
                rule("mem", "memory_total_usage", 191 * GiB, "evict"),
            )
        ]
        actions = [throttle_action("throttle", step=10, cool_down=1), evict_action("evict", cool_down=1)]
        history = UsageHistory(horizon=1800)
        state = AgentState()
        samples_ms: list[float] = []
        container_ms: list[float] = []
        plan_ms: list[float] = []
        actions_per_tick: list[int] = []
        gc.collect()
        for tick in range(ticks + 2):
            advance(tree, rels, proc, tick + 1)
            now = 1_795_000_000.0 + 10 * tick
            start = time.process_time()
            with_containers = containers and tick % 5 == 4
            node, samples, _ = collector.collect(now, float(10 * tick), infos, {}, history, containers=with_containers)
            mid = time.process_time()
            result = plan(policies, actions, node, samples, state, now=now)
            elapsed = time.process_time() - start
            state = result.state
            history.prune(now)
            if with_containers and tick >= 5:
                container_ms.append(elapsed * 1000)
            elif tick >= 2:  # the first two ticks only prime the CPU counters
                samples_ms.append(elapsed * 1000)
                plan_ms.append((elapsed - (mid - start)) * 1000)
                actions_per_tick.append(len(result.actions))
        return {
            "pods": pods,
            "containers_per_pod": 2 if containers else 0,
            "ticks": len(samples_ms),
            "cpu_ms_per_tick_median": round(statistics.median(samples_ms), 3),
            "cpu_ms_per_tick_p90": round(sorted(samples_ms)[int(0.9 * (len(samples_ms) - 1))], 3),
            "cpu_ms_per_tick_mean": round(statistics.fmean(samples_ms), 3),
            "of_which_plan_ms_median": round(statistics.median(plan_ms), 3),
            "cpu_ms_per_container_tick_median": round(statistics.median(container_ms), 3) if container_ms else None,
            "actions_per_tick_mean": round(statistics.fmean(actions_per_tick), 2),
            "rss_mib_after": round(rss_mib(), 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--cgroup-version", type=int, choices=(1, 2), default=2)
    parser.add_argument("--no-containers", action="store_true")
    args = parser.parse_args()
    rows = [bench_size(n, args.ticks, args.cgroup_version, not args.no_containers) for n in SIZES]
    rss_500 = rows[-1]["rss_mib_after"]
    out = {
        "benchmark": "agent collection + decision tick",
        "command": " ".join([".venv/bin/python", "bench/agent.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cgroup_version": args.cgroup_version,
        "targets": {"cpu_ms_per_tick_at_200_pods": 10.0, "rss_mib_at_500_pods": 80.0},
        "results": rows,
        "rss_mib_at_500_pods": rss_500,
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "meets_targets": rows[1]["cpu_ms_per_tick_median"] <= 10.0 and rss_500 <= 80.0,
    }
    print(
        f"{'PODS':>5} {'CPU ms/tick (median)':>21} {'p90':>8} {'+containers':>12} {'plan':>6} {'actions':>8} {'RSS MiB':>8}"
    )
    for row in rows:
        print(
            f"{row['pods']:>5} {row['cpu_ms_per_tick_median']:>21.3f} {row['cpu_ms_per_tick_p90']:>8.3f} "
            f"{row['cpu_ms_per_container_tick_median'] or 0:>12.3f} {row['of_which_plan_ms_median']:>6.2f} "
            f"{row['actions_per_tick_mean']:>8.2f} {row['rss_mib_after']:>8.1f}"
        )
    print(f"targets: <= 10 ms at 200 pods, RSS <= 80 MiB at 500 pods -> {'met' if out['meets_targets'] else 'NOT met'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
