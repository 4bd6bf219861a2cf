"""Probe benchmark (not a test): how long each component's health endpoints take to answer while it is busy,
the figure the chart's probe ``timeoutSeconds`` is set from.

Setup: the API emulator (a process) seeded with 1,000 nodes and their NodeMetrics, 10 pods per node (110 on
the agent's node, the kubelet's default maximum), and 300 PodMigrationJobs (EvictDirectly); then the three
components as processes with the configuration the chart renders (``helm template``; only listen addresses,
ports and paths changed): the manager (lists everything, arbitrates and evicts the jobs), the extender
(lists everything; a client sends it ``/filter`` + ``/prioritize`` pairs over all 1,000 nodes back to back,
as kube-scheduler does with ``percentageOfNodesToScore: 100``) and the agent (110 pods on a fabricated
cgroup tree, one tick a second). From the moment each component starts, every health endpoint the chart
probes is asked every 0.25 s, as a kubelet would (10 s client timeout), until ``--seconds`` have passed;
latencies count from each endpoint's first answer (the start-up lists included).

Run: ``.venv/bin/python bench/probes.py [--seconds 60]``. Prints a table and writes
``bench/results/probes.json``.

Not guaranteed: stable figures on a shared machine (the emulator, the components, the load client and the
prober share its cores, as on a busy node); a real kube-apiserver answers lists at another pace.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from koordpy_testkit.builders import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.cgroupfs import FakeCgroupTree, write_procfs
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RESULTS = ROOT / "bench" / "results" / "probes.json"
NODES, PODS_PER_NODE, AGENT_PODS, JOBS = 1000, 10, 110, 300
AGENT_NODE = "node-0000"


def rendered_configs() -> dict[str, dict[str, Any]]:
    """Each component's configuration file as the chart renders it with its defaults."""
    out = subprocess.run(
        [str(BIN / "helm"), "template", "koordpy", str(ROOT / "charts" / "koordpy")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    configs = {}
    for doc in yaml.safe_load_all(out):
        if doc and doc["kind"] == "ConfigMap" and "config.yaml" in doc.get("data", {}):
            configs[doc["metadata"]["name"].removeprefix("koordpy-")] = yaml.safe_load(doc["data"]["config.yaml"])
    return configs


def seed_objects() -> tuple[list[dict[str, Any]], list[str]]:
    """The emulator's objects, and the UIDs of the pods on the agent's node."""
    objects: list[dict[str, Any]] = []
    agent_uids: list[str] = []
    for n in range(NODES):
        node = f"node-{n:04d}"
        objects.append(NodeBuilder(node).allocatable(cpu="32", memory="128Gi", pods=110).build())
        objects.append(NodeMetricBuilder(node).usage(cpu="8", memory="32Gi").updated(time.time()).build())
        for p in range(AGENT_PODS if node == AGENT_NODE else PODS_PER_NODE):
            raw = (
                PodBuilder(f"app-{n:04d}-{p:03d}", "apps")
                .uid(str(uuid.uuid4()))
                .node(node)
                .phase("Running")
                .requests(cpu="500m", memory="1Gi")
                .build()
            )
            if node == AGENT_NODE:
                agent_uids.append(raw["metadata"]["uid"])
            objects.append(raw)
    for j in range(JOBS):
        n, p = 1 + j % (NODES - 1), j // (NODES - 1)
        objects.append(
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": f"job-{j:03d}"},
                "spec": {"podRef": {"namespace": "apps", "name": f"app-{n:04d}-{p:03d}"}, "mode": "EvictDirectly"},
            }
        )
    return objects, agent_uids


def kubeconfig(path: Path, url: str, user: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": url}}],
        "users": [{"name": user, "user": {"token": user}}],
        "contexts": [{"name": user, "context": {"cluster": "bench", "user": user}}],
        "current-context": user,
    }
    path.write_text(json.dumps(config))
    return path


def filter_load(port: int, stop: threading.Event, counter: list[int]) -> None:
    """kube-scheduler's calls: /filter over every node, then /prioritize over what passed, back to back."""
    names = [f"node-{n:04d}" for n in range(NODES)]
    pod = PodBuilder("incoming", "apps").requests(cpu="1", memory="2Gi").build()
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=30)
    while not stop.is_set():
        try:
            conn.request("POST", "/filter", body, {"Content-Type": "application/json"})
            passed = orjson.loads(conn.getresponse().read()).get("NodeNames") or []
            conn.request("POST", "/prioritize", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": passed}))
            conn.getresponse().read()
            counter[0] += 1
        except (OSError, http.client.HTTPException):
            conn.close()
            time.sleep(0.1)
            conn = http.client.HTTPConnection(LOOPBACK, port, timeout=30)


async def probe(name: str, url: str, seconds: float, proc: Proc, out: dict[str, Any]) -> None:
    """Ask ``url`` every 0.25 s for ``seconds`` from now; latencies of the answers after the first."""
    latencies: list[float] = []
    later: list[float] = []  # answers from 30 s after the first on (the start-up lists are done by then)
    failures: list[str] = []
    started = time.monotonic()
    first: float | None = None
    async with httpx.AsyncClient(timeout=10.0) as client:
        while time.monotonic() - started < seconds:
            t0 = time.perf_counter()
            try:
                resp = await client.get(url)
                elapsed = time.perf_counter() - t0
                if first is None:
                    if resp.status_code < 500:
                        first = time.monotonic() - started
                elif resp.status_code == 200:
                    latencies.append(elapsed)
                    if time.monotonic() - started > first + 30:
                        later.append(elapsed)
                else:
                    failures.append(f"{resp.status_code} after {elapsed:.2f}s")
            except httpx.HTTPError as exc:
                if first is not None:
                    failures.append(f"{type(exc).__name__} after {time.perf_counter() - t0:.2f}s")
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
            await asyncio.sleep(max(0.0, 0.25 - (time.perf_counter() - t0)))
    ordered = sorted(latencies)
    out[name] = {
        "first_answer_seconds": None if first is None else round(first, 2),
        "samples": len(latencies),
        "p50_ms": round(1000 * statistics.median(ordered), 1) if ordered else None,
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1) if ordered else None,
        "max_ms": round(1000 * ordered[-1], 1) if ordered else None,
        "max_after_30s_ms": round(1000 * max(later), 1) if later else None,
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0, help="probing time per component (default 60)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="koordpy-bench-probes-"))
    configs = rendered_configs()
    objects, agent_uids = seed_objects()
    seed = work / "seed.json"
    seed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    procs: list[Proc] = []
    stop = threading.Event()
    try:
        emulator = Proc(
            "apiserver",
            [str(BIN / "python"), "-m", "koordpy_testkit.apiserver", "--seed", str(seed)],
            work / "apiserver.log",
        ).start()
        procs.append(emulator)
        line = emulator.wait_for_log("http://", 300)
        url = re.search(r"http://[0-9.]+:\d+", line).group(0)  # type: ignore[union-attr]

        manager_port = free_port()
        manager_cfg = {
            **configs["manager"],
            "health": {**configs["manager"].get("health", {}), "host": LOOPBACK, "port": manager_port},
        }
        (work / "manager.yaml").write_text(yaml.safe_dump(manager_cfg))
        scheduler_cfg = configs["scheduler"]
        verbs, ops = free_port(), free_port()
        scheduler_cfg["extender"] = {**scheduler_cfg["extender"], "port": verbs, "metricsPort": ops}
        (work / "scheduler.yaml").write_text(yaml.safe_dump(scheduler_cfg))
        agent_port = free_port()
        tree = FakeCgroupTree(work / "cgroup", version=2, driver="systemd")
        for uid in agent_uids:
            tree.add_pod(uid, qos="burstable", containers=[uuid.uuid4().hex + uuid.uuid4().hex])
        write_procfs(
            work / "proc",
            cpus=32,
            busy_jiffies=1000,
            total_jiffies=4000,
            mem_total_kib=128 << 20,
            mem_avail_kib=64 << 20,
        )
        agent_cfg = {
            **configs["agent"],
            "collectIntervalSeconds": 1,
            "stateDir": str(work / "agent-state"),
            "server": {**configs["agent"].get("server", {}), "host": LOOPBACK, "port": agent_port},
        }
        (work / "agent.yaml").write_text(yaml.safe_dump(agent_cfg))

        started = {
            "manager": Proc(
                "manager",
                [
                    str(BIN / "koordpy"),
                    "manager",
                    "--config",
                    str(work / "manager.yaml"),
                    "--kubeconfig",
                    str(kubeconfig(work / "km.json", url, "manager")),
                ],
                work / "manager.log",
            ),
            "extender": Proc(
                "extender",
                [
                    str(BIN / "koordpy"),
                    "extender",
                    "--config",
                    str(work / "scheduler.yaml"),
                    "--kubeconfig",
                    str(kubeconfig(work / "ke.json", url, "extender")),
                ],
                work / "extender.log",
            ),
            "agent": Proc(
                "agent",
                [
                    str(BIN / "koordpy"),
                    "agent",
                    "run",
                    "--config",
                    str(work / "agent.yaml"),
                    "--node",
                    AGENT_NODE,
                    "--kubeconfig",
                    str(kubeconfig(work / "ka.json", url, "agent")),
                    "--cgroup-root",
                    str(tree.root),
                    "--proc-root",
                    str(work / "proc"),
                ],
                work / "agent.log",
            ),
        }
        endpoints = {
            "manager /healthz (liveness)": ("manager", f"http://{LOOPBACK}:{manager_port}/healthz"),
            "extender /healthz (liveness)": ("extender", f"http://{LOOPBACK}:{ops}/healthz"),
            "extender /readyz (readiness)": ("extender", f"http://{LOOPBACK}:{ops}/readyz"),
            "agent /healthz (liveness)": ("agent", f"http://{LOOPBACK}:{agent_port}/healthz"),
            "agent /readyz (readiness)": ("agent", f"http://{LOOPBACK}:{agent_port}/readyz"),
        }
        for proc in started.values():
            procs.append(proc.start())
        pairs = [0]
        loader = threading.Thread(target=filter_load, args=(verbs, stop, pairs), daemon=True)

        async def load_when_ready() -> None:
            await asyncio.to_thread(wait_http, f"http://{LOOPBACK}:{verbs}/readyz", 300, started["extender"])
            loader.start()

        async def measure() -> dict[str, Any]:
            out: dict[str, Any] = {}
            probes = (probe(name, u, args.seconds, started[c], out) for name, (c, u) in endpoints.items())
            await asyncio.gather(load_when_ready(), *probes)
            return out

        results = asyncio.run(measure())
    finally:
        stop.set()
        for proc in reversed(procs):
            proc.stop()
    print(
        f"{'ENDPOINT':<30} {'FIRST s':>8} {'N':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'max>30s':>8}  FAILURES"
    )
    for name, r in results.items():
        print(
            f"{name:<30} {r['first_answer_seconds']!s:>8} {r['samples']:>5} {r['p50_ms']!s:>8} {r['p99_ms']!s:>8} {r['max_ms']!s:>8} {r['max_after_30s_ms']!s:>8}  {len(r['failures'])}"
        )
    print(f"extender load: {pairs[0]} filter+prioritize pairs over {NODES} nodes")
    document = {
        "benchmark": "health endpoint latency of busy components",
        "command": f".venv/bin/python bench/probes.py --seconds {args.seconds:g}",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": {
            "nodes": NODES,
            "pods": (NODES - 1) * PODS_PER_NODE + AGENT_PODS,
            "podmigrationjobs": JOBS,
            "agent_pods": AGENT_PODS,
            "extender_pairs": pairs[0],
        },
        "results": results,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
