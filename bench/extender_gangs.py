"""Gang bench (not a test): does holding gang binds cost other pods' ``/filter`` anything?

Setup: one extender process (uvicorn, uvloop + httptools) with 5,000 nodes (10 assigned pods and a
NodeMetric each) and 1,000 pending gangs of 8 members (Koordinator annotations, min-available 8). The
client (this process) measures ``/filter`` of a pod in no gang over every node name, then opens 7 bind
requests per gang (7,000 held binds, each on its own connection, never completed: the 8th member never
binds), waits until the extender reports them held (``koordpy_extender_gang_held_binds``), and measures
``/filter`` again in the same run, then once more after closing those connections (abandoned: dropped). Members request 10m cpu so the held placements barely move the
load-aware estimates (the filter's answer stays the same size).

Run: ``.venv/bin/python bench/extender_gangs.py`` (``--quick`` for a smoke run). Prints the figures and
writes ``bench/results/extender_gangs.json``. Kept apart from ``bench/extender.py`` on purpose.

Not guaranteed: stable figures on a shared machine (compare the two phases of one run, not runs).
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import multiprocessing as mp
import os
import platform
import random
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from koordpy.config import SchedulerConfiguration, validate
from koordpy.scheduler.extender.server import build_extender, uvicorn_config
from koordpy_testkit import FakeClock, NodeBuilder, NodeMetricBuilder, PodBuilder

RESULTS = Path(__file__).resolve().parent / "results" / "extender_gangs.json"
CONFIG = {"loadAware": {"usageThresholds": {"cpu": 65, "memory": 95}}}
NOW = FakeClock().now()
HELD_PER_GANG = 7


def names(count: int) -> list[str]:
    return [f"node-{i:05d}.eu-west-1.compute.internal" for i in range(count)]


def member(gang: int, j: int) -> dict[str, Any]:
    raw = PodBuilder(f"job-{gang}-w{j}", "train").requests(cpu="10m", memory="16Mi").build()
    raw["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": f"job-{gang}",
        "gang.scheduling.koordinator.sh/min-available": "8",
    }
    return raw


def server_main(nodes: int, gangs: int, conn: Any) -> None:
    import asyncio

    import uvicorn
    import uvloop

    extender = build_extender(validate(SchedulerConfiguration, CONFIG), None, clock=FakeClock(NOW))
    cache = extender.cache
    on_node, on_pod, on_metric = cache.handler("nodes"), cache.handler("pods"), cache.handler("nodemetrics")
    for i, name in enumerate(names(nodes)):
        on_node("ADDED", NodeBuilder(name).allocatable(cpu="32", memory="128Gi", pods="110").build())
        metric = NodeMetricBuilder(name).updated(NOW - 20).report_interval(60)
        pods = [f"svc-{i}-{j}" for j in range(10)]
        for pod in pods:
            raw = PodBuilder(pod, "svc").requests(cpu="1500m", memory="3Gi").node(name).phase("Running").build()
            on_pod("ADDED", raw)
            metric.pod("svc", pod, cpu="700m", memory="2Gi")
        on_metric("ADDED", metric.usage(cpu=f"{8 + (i * 7) % 20}", memory=f"{40 + i % 50}Gi").build())
    for g in range(gangs):
        for j in range(8):
            on_pod("ADDED", member(g, j))
    gc.collect()
    gc.freeze()
    config = uvicorn_config(extender.app, "127.0.0.1", 0, service=extender.service)
    config.log_level = "warning"
    config.backlog = 8192
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        conn.send(server.servers[0].sockets[0].getsockname()[1])
        await task

    uvloop.run(run())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(port: int, node_names: list[str], requests: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pod = PodBuilder("web-new", "svc").requests(cpu="500m", memory="1Gi").build()
    rng = random.Random(3)
    bodies = []
    for _ in range(16):
        shuffled = list(node_names)
        rng.shuffle(shuffled)
        bodies.append(orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": shuffled}))
    latencies: list[float] = []
    for i in range(requests + 20):
        t0 = time.perf_counter()
        conn.request("POST", "/filter", bodies[i % len(bodies)], {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200 or orjson.loads(data)["Error"]:
            raise RuntimeError(f"filter: HTTP {resp.status}: {data[:200]!r}")
        if i >= 20:
            latencies.append(time.perf_counter() - t0)
    conn.close()
    return {
        "requests": requests,
        "p50_ms": round(percentile(latencies, 0.5) * 1e3, 3),
        "p90_ms": round(percentile(latencies, 0.9) * 1e3, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1e3, 3),
        "mean_ms": round(sum(latencies) / len(latencies) * 1e3, 3),
    }


def held(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    found = re.search(r"^koordpy_extender_gang_held_binds ([0-9.e+]+)$", text, flags=re.M)
    return int(float(found.group(1))) if found else -1


def hold_binds(port: int, gangs: int, node_names: list[str]) -> list[socket.socket]:
    socks = []
    for g in range(gangs):
        for j in range(HELD_PER_GANG):
            raw = member(g, j)
            body = orjson.dumps(
                {
                    "PodName": raw["metadata"]["name"],
                    "PodNamespace": "train",
                    "PodUID": raw["metadata"]["uid"],
                    "Node": node_names[(g * 8 + j) % len(node_names)],
                }
            )
            head = (
                f"POST /bind HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(head + body)
            socks.append(sock)
    return socks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer gangs and requests (smoke run)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    nodes, gangs, requests = (500, 100, 100) if args.quick else (5000, 1000, 400)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=server_main, args=(nodes, gangs, child), daemon=True)
    proc.start()
    socks: list[socket.socket] = []
    try:
        if not parent.poll(900):
            raise RuntimeError("server did not start")
        port = parent.recv()
        node_names = names(nodes)
        before = measure(port, node_names, requests)
        before_again = measure(port, node_names, requests)  # drift control: the same phase twice
        started = time.perf_counter()
        socks = hold_binds(port, gangs, node_names)
        deadline = time.monotonic() + 300
        while (count := held(port)) < gangs * HELD_PER_GANG:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {count} binds held")
            time.sleep(0.2)
        hold_seconds = time.perf_counter() - started
        during = measure(port, node_names, requests)
        still = held(port)
        for sock in socks:
            sock.close()
        socks = []
        while held(port) > 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the abandoned binds were not dropped")
            time.sleep(0.2)
        after = measure(port, node_names, requests)
    finally:
        for sock in socks:
            sock.close()
        proc.terminate()
        proc.join(10)
    out = {
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
        },
        "nodes": nodes,
        "gangs": gangs,
        "members_per_gang": 8,
        "held_binds": gangs * HELD_PER_GANG,
        "held_during_measurement": still,
        "seconds_to_hold_all": round(hold_seconds, 2),
        "filter_with_0_held": before,
        "filter_with_0_held_again": before_again,
        "filter_with_all_held": during,
        "filter_after_release": after,
    }
    print(
        f"{nodes} nodes, {gangs} gangs of 8: filter p50/p99 {before['p50_ms']}/{before['p99_ms']} ms with 0 held, "
        f"{before_again['p50_ms']}/{before_again['p99_ms']} ms with 0 held again, "
        f"{during['p50_ms']}/{during['p99_ms']} ms with {still} held, {after['p50_ms']}/{after['p99_ms']} ms after the clients closed them "
        f"(holding took {hold_seconds:.1f} s)"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
