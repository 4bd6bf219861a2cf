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
    """One kept-alive HTTP/1.1 connection written the way Go's transport writes it.

    Go's ``net/http`` client (kube-scheduler's ``HTTPExtender`` and its API client) keeps one connection per
    host, sets TCP_NODELAY, writes the request head and a small body in one buffered write and reads the
    response by its ``Content-Length`` (or chunks); its own cost per request is tens of microseconds.
    ``http.client`` costs ~0.3 ms per request here (its header parser), which the *with* mode would pay
    three times and the *without* mode once, so the driver speaks HTTP/1.1 on the socket itself.
    Not guaranteed: anything beyond what these two servers answer (no 1xx, no trailers, no compression).
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((LOOPBACK, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"{LOOPBACK}:{port}".encode()
        self.buffer = b""

    def post(self, path: str, body: bytes) -> tuple[float, bytes]:
        head = (
            b"POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: kube-scheduler/v1.30.0\r\nContent-Length: %d\r\n"
            b"Content-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n" % (path.encode(), self.host, len(body))
        )
        t0 = time.perf_counter()
        self.sock.sendall(head + body)
        status, data = self._response()
        elapsed = time.perf_counter() - t0
        if status not in (200, 201):
            raise RuntimeError(f"{path}: HTTP {status}: {data[:300]!r}")
        return elapsed, data

    def get(self, path: str) -> tuple[int, bytes]:
        self.sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), self.host))
        return self._response()

    def _fill(self) -> None:
        chunk = self.sock.recv(262144)
        if not chunk:
            raise RuntimeError("server closed the connection")
        self.buffer += chunk

    def _line(self) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            self._fill()
        line, self.buffer = self.buffer[:end], self.buffer[end + 2 :]
        return line

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def _response(self) -> tuple[int, bytes]:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._fill()
        head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts = []
            while size := int(self._line().split(b";")[0], 16):
                parts.append(self._take(size))
                self._line()
            while self._line():  # trailers, then the blank line
                pass
            return status, b"".join(parts)
        return status, self._take(int(headers.get(b"content-length", b"0")))


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


def service_seconds(conn: Keepalive) -> dict[str, tuple[float, float]]:
    """(sum, count) of ``koordpy_extender_request_duration_seconds`` per verb: the extender's own time for a
    request, from its parser seeing the head to the reply being ready (bind: including the API call)."""
    status, text = conn.get("/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics: HTTP {status}")
    found: dict[str, list[float]] = {}
    for line in text.decode().splitlines():
        match = re.match(r'koordpy_extender_request_duration_seconds_(sum|count)\{verb="(\w+)"\} (\S+)', line)
        if match:
            found.setdefault(match.group(2), [0.0, 0.0])[match.group(1) == "count"] = float(match.group(3))
    return {verb: (pair[0], pair[1]) for verb, pair in found.items()}


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
        ext, api, scrape = Keepalive(port), Keepalive(api_port), Keepalive(port)
        service_before = service_seconds(scrape)
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
        service_after = service_seconds(scrape)
        breakdown: dict[str, dict[str, float]] = {}
        for verb in ("filter", "prioritize", "bind"):
            total = service_after[verb][0] - service_before[verb][0]
            count = service_after[verb][1] - service_before[verb][1]
            inside = total / count if count else 0.0
            seen = statistics.fmean(with_ext[verb])
            breakdown[verb] = {
                "client_mean_ms": round(seen * 1e3, 3),
                "extender_mean_ms": round(inside * 1e3, 3),
                "http_and_loopback_mean_ms": round((seen - inside) * 1e3, 3),
            }
        direct = statistics.fmean(without["bind"])
        breakdown["bind"]["api_call_mean_ms_as_measured_without"] = round(direct * 1e3, 3)
        breakdown["bind"]["extender_own_mean_ms"] = round(
            (breakdown["bind"]["extender_mean_ms"] / 1e3 - direct) * 1e3, 3
        )
        return {
            "nodes": nodes,
            "pods_with_extender": len(with_ext["pod"]),
            "pods_without_extender": len(without["pod"]),
            "with_extender": {key: summary(values) for key, values in with_ext.items()},
            "without_extender": {key: summary(values) for key, values in without.items()},
            "ratio_pod_p50_with_over_without": round(with_pod / without_pod, 2),
            "breakdown": breakdown,
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
    w, wo, b = result["with_extender"], result["without_extender"], result["breakdown"]
    print(
        f"{args.nodes} nodes: per pod p50 with extender {w['pod']['p50_ms']:.3f} ms "
        f"(filter {w['filter']['p50_ms']:.3f} + prioritize {w['prioritize']['p50_ms']:.3f} + "
        f"bind {w['bind']['p50_ms']:.3f}), without {wo['pod']['p50_ms']:.3f} ms (bind straight to the API): "
        f"{result['ratio_pod_p50_with_over_without']}x"
    )
    for verb, row in b.items():
        print(
            f"  {verb:<10} mean {row['client_mean_ms']:.3f} ms seen by the driver = {row['extender_mean_ms']:.3f} ms in "
            f"the extender + {row['http_and_loopback_mean_ms']:.3f} ms HTTP and loopback"
            + (
                f"; of the extender's, the API call ≈ {row['api_call_mean_ms_as_measured_without']:.3f} ms "
                f"(the direct bind), its own work ≈ {row['extender_own_mean_ms']:.3f} ms"
                if verb == "bind"
                else ""
            )
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
