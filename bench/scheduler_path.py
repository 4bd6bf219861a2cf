"""Scheduler-path benchmark (not a test): the time per pod kube-scheduler sees, with and without the extender.

Plays kube-scheduler's side over real HTTP: one keep-alive connection to the extender and one to the
API server (the project's emulator, ``koordpy.testing.apiserver``, in its own process), both with
TCP_NODELAY as Go's client sets it. Per pod *with* the extender: ``/filter`` (``nodeCacheCapable``: the
pod and every node name), ``/prioritize`` (the names the filter let through), ``/bind`` (the extender
creates the ``pods/binding`` in the emulator). *Without*: the binding goes straight to the emulator,
which is what the stock profile's binder does. In-tree plugin work is the same in both and left out.
Pods alternate between the two modes in rounds so that load changes hit both alike.

Run: ``.venv/bin/python bench/scheduler_path.py`` (``--nodes 20 --pods 200``). Prints a table and
writes ``bench/results/scheduler_path.json``.

Not guaranteed: stable figures on a shared machine (read the load average beside them).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from koordpy.kube.connection import write_kubeconfig
from koordpy.testing import NodeBuilder, PodBuilder

RESULTS = Path(__file__).resolve().parent / "results" / "scheduler_path.json"
BIN = Path(sys.executable).parent
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def seed_objects(nodes: int, pods: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for i in range(nodes):
        objects.append(NodeBuilder(f"node-{i:02d}").allocatable(cpu="32", memory="128Gi", pods="110").build())
    for k in range(pods):
        pod = PodBuilder(f"bench-{k:04d}", "bench").requests(cpu="100m", memory="128Mi").build()
        pod["spec"]["schedulerName"] = "koordpy-scheduler"
        objects.append(pod)
    return objects


class Keepalive:
    """One kept-alive HTTP/1.1 connection, as Go's transport keeps one per host."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(LOOPBACK, port, timeout=30)
        self.conn.connect()
        assert self.conn.sock is not None
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def post(self, path: str, body: bytes) -> tuple[float, bytes]:
        t0 = time.perf_counter()
        self.conn.request("POST", path, body, {"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        elapsed = time.perf_counter() - t0
        if resp.status not in (200, 201):
            raise RuntimeError(f"{path}: HTTP {resp.status}: {data[:300]!r}")
        return elapsed, data


def wait_ready(url_port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"extender exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection(LOOPBACK, url_port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("extender not ready in time")


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(values) * 1e3, 3),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e3, 3),
        "mean_ms": round(statistics.fmean(values) * 1e3, 3),
    }


def run(nodes: int, pods: int, round_size: int, workdir: Path) -> dict[str, Any]:
    seed = workdir / "seed.json"
    seed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": seed_objects(nodes, pods)}))
    emulator = subprocess.Popen(
        [
            str(BIN / "python"),
            "-m",
            "koordpy.testing.apiserver",
            "--host",
            LOOPBACK,
            "--port",
            "0",
            "--seed",
            str(seed),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    procs: list[subprocess.Popen[bytes]] = [emulator]
    try:
        assert emulator.stdout is not None
        line = emulator.stdout.readline().decode()
        match = re.search(r"http://[0-9.]+:(\d+)", line)
        if match is None:
            raise RuntimeError(f"emulator printed no URL: {line!r}")
        api_port = int(match.group(1))
        kubeconfig = workdir / "kubeconfig.yaml"
        write_kubeconfig(kubeconfig, f"http://{LOOPBACK}:{api_port}")
        port = free_port()
        config = workdir / "extender.json"  # YAML is a superset of JSON
        config.write_text(json.dumps({"extender": {"host": LOOPBACK, "port": port}}))
        extender = subprocess.Popen(
            [str(BIN / "koordpy"), "extender", "--config", str(config), "--kubeconfig", str(kubeconfig)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(extender)
        wait_ready(port, extender)
        ext, api = Keepalive(port), Keepalive(api_port)
        names = [f"node-{i:02d}" for i in range(nodes)]
        raw_pods = [o for o in seed_objects(nodes, pods) if o["kind"] == "Pod"]
        with_ext: dict[str, list[float]] = {"filter": [], "prioritize": [], "bind": [], "pod": []}
        without: dict[str, list[float]] = {"bind": [], "pod": []}
        for k, pod in enumerate(raw_pods):
            meta = pod["metadata"]
            node = names[k % nodes]
            use_extender = (k // round_size) % 2 == 0
            t0 = time.perf_counter()
            if use_extender:
                rotated = names[k % nodes :] + names[: k % nodes]  # kube-scheduler starts where it stopped
                filter_s, answer = ext.post("/filter", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": rotated}))
                passed = orjson.loads(answer)["NodeNames"]
                prio_s, scores = ext.post("/prioritize", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": passed}))
                best = max(orjson.loads(scores), key=lambda row: row["Score"])["Host"]
                bind_args = {"PodName": meta["name"], "PodNamespace": "bench", "PodUID": meta["uid"], "Node": best}
                bind_s, result = ext.post("/bind", orjson.dumps(bind_args))
                if orjson.loads(result).get("Error"):
                    raise RuntimeError(f"bind failed: {result!r}")
                with_ext["filter"].append(filter_s)
                with_ext["prioritize"].append(prio_s)
                with_ext["bind"].append(bind_s)
                with_ext["pod"].append(time.perf_counter() - t0)
            else:
                binding = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": meta["name"], "namespace": "bench", "uid": meta["uid"]},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                }
                bind_s, _ = api.post(f"/api/v1/namespaces/bench/pods/{meta['name']}/binding", orjson.dumps(binding))
                without["bind"].append(bind_s)
                without["pod"].append(time.perf_counter() - t0)
        with_pod, without_pod = statistics.median(with_ext["pod"]), statistics.median(without["pod"])
        return {
            "nodes": nodes,
            "pods_with_extender": len(with_ext["pod"]),
            "pods_without_extender": len(without["pod"]),
            "with_extender": {key: summary(values) for key, values in with_ext.items()},
            "without_extender": {key: summary(values) for key, values in without.items()},
            "ratio_pod_p50_with_over_without": round(with_pod / without_pod, 2),
            "extender_bind_overhead_p50_ms": round(
                (statistics.median(with_ext["bind"]) - statistics.median(without["bind"])) * 1e3, 3
            ),
        }
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--round", type=int, default=10, help="pods per round; rounds alternate the two modes")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="koordpy-bench-") as tmp:
        result = run(args.nodes, args.pods, args.round, Path(tmp))
    out = {
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_start": load_start,
            "load_average_at_end": os.getloadavg(),
        },
        **result,
    }
    w, wo = result["with_extender"], result["without_extender"]
    print(
        f"{args.nodes} nodes: per pod p50 with extender {w['pod']['p50_ms']:.3f} ms "
        f"(filter {w['filter']['p50_ms']:.3f} + prioritize {w['prioritize']['p50_ms']:.3f} + "
        f"bind {w['bind']['p50_ms']:.3f}), without {wo['pod']['p50_ms']:.3f} ms (bind straight to the API): "
        f"{result['ratio_pod_p50_with_over_without']}x"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
