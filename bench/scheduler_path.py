"""Scheduler-path benchmark (not a test): the time per pod kube-scheduler sees, with and without the extender.

Plays kube-scheduler's side over real HTTP against the extender and the project's API emulator
(``koordpy_testkit.apiserver``), each in its own process, with TCP_NODELAY as Go's client sets it. In-tree
plugin work, the scheduling queue, events and the pod watch are the same in both modes and left out. Two
views, both in one run:

- **Serial (latency).** One pod at a time, each waiting for the one before: *with* the extender
  ``/filter`` (``nodeCacheCapable``: the pod and every node name), ``/prioritize`` (the names the filter
  let through), ``/bind`` (the extender creates the ``pods/binding``); *without*, the binding goes
  straight to the emulator, as the stock profile's binder does. One kept-alive connection per server.
  Pods alternate between the modes in rounds of ``--round``.
- **Burst (what kube-scheduler's own run measures).** ``--burst-pods`` pods pending at once. The driver runs
  the scheduling cycles (``/filter``, ``/prioritize``) back to back and hands each bind to a worker
  thread as soon as the cycle ends, as kube-scheduler starts one binding goroutine per pod, unbounded,
  and goes on with the next pod. *Without* the extender the workers POST ``pods/binding`` to the emulator.
  Time per pod = wall time from the first request to the last bind answered, divided by the pods; after
  each burst every pod is read back from the emulator and must be bound to the chosen node. Bursts
  alternate the modes (ABBA) for ``--burst-rounds`` rounds; medians are reported.

Connections follow Go's ``net/http`` transport over plain HTTP/1.1: a request takes the most recently
idled connection to the host or dials a new one (no limit on connections), and a finished one is kept
only while fewer than ``MaxIdleConnsPerHost`` are idle, otherwise closed. kube-scheduler's extender client
builds its transport with ``utilnet.SetTransportDefaults(&http.Transport{})``, which leaves
``MaxIdleConnsPerHost`` at 0, so Go's ``DefaultMaxIdleConnsPerHost`` (2) applies, shared by all verbs of
the extender (``--extender-max-idle``). client-go's transport for a TLS config keeps 25 idle per host
(``--api-max-idle``); over TLS it also negotiates HTTP/2, which this emulator does not speak.

Run: ``.venv/bin/python bench/scheduler_path.py`` (``--nodes 20 --pods 200 --burst-pods 100
--burst-rounds 7``). Prints tables and writes ``bench/results/scheduler_path.json``.

Not guaranteed: stable figures on a shared machine (read the load average beside them); the emulator
answers from one asyncio loop in one process, so concurrent bindings are served one after another and
there is no storage latency for concurrency to hide, unlike a real API server with etcd.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import queue
import re
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from koordpy.kube.connection import write_kubeconfig
from koordpy_testkit import NodeBuilder, PodBuilder

RESULTS = Path(__file__).resolve().parent / "results" / "scheduler_path.json"
BIN = Path(sys.executable).parent
LOOPBACK = "127.0.0.1"
NAMESPACE = "bench"
# Go's net/http DefaultMaxIdleConnsPerHost: what kube-scheduler's extender transport ends up with.
EXTENDER_MAX_IDLE = 2
# client-go's transport cache (k8s.io/client-go/transport/cache.go, idleConnsPerHost) for a TLS config.
API_MAX_IDLE = 25
MAX_PODS_PER_NODE = 110


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def make_pod(name: str) -> dict[str, Any]:
    pod = PodBuilder(name, NAMESPACE).requests(cpu="100m", memory="128Mi").build()
    pod["spec"]["schedulerName"] = "koordpy-scheduler"
    return pod


def seed_objects(nodes: int, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for i in range(nodes):
        allocatable = {"cpu": "32", "memory": "128Gi", "pods": str(MAX_PODS_PER_NODE)}
        objects.append(NodeBuilder(f"node-{i:02d}").allocatable(**allocatable).build())
    return objects + pods


class Keepalive:
    """One kept-alive HTTP/1.1 connection written the way Go's transport writes it.

    Go's ``net/http`` client (kube-scheduler's ``HTTPExtender`` and its API client) sets TCP_NODELAY,
    writes the request head and a small body in one buffered write and reads the response by its
    ``Content-Length`` (or chunks); its own cost per request is tens of microseconds. ``http.client`` costs
    ~0.3 ms per request here (its header parser), which the *with* mode would pay three times and the
    *without* mode once, so the driver speaks HTTP/1.1 on the socket itself. One thread at a time.
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

    def usable(self) -> bool:
        """False when the server closed the idle connection (Go's read loop notices the EOF and drops it)."""
        if self.buffer:
            return False
        readable, _, _ = select.select([self.sock], [], [], 0)
        return not readable

    def close(self) -> None:
        self.sock.close()

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


class ConnectionPool:
    """Go's ``http.Transport`` for one HTTP/1.1 host, as far as reuse goes: thread-safe.

    A request takes the most recently idled usable connection (Go keeps idle connections in a list and
    reuses the newest) or dials a new one, with no limit on open connections (``MaxConnsPerHost`` 0). A
    finished connection goes back to the idle list while it holds fewer than ``max_idle``; otherwise it
    is closed. Not modelled: Go handing a connection that goes idle to a request still waiting for its
    dial, and the 90 s idle timeout (runs are shorter).
    """

    def __init__(self, port: int, max_idle: int) -> None:
        self.port = port
        self.max_idle = max_idle
        self.idle: list[Keepalive] = []
        self.lock = threading.Lock()
        self.dials = 0
        self.closed_over_max_idle = 0

    def post(self, path: str, body: bytes) -> tuple[float, bytes]:
        """(seconds from asking for a connection to the body read, body); a dial is part of the time."""
        t0 = time.perf_counter()
        conn = self._acquire()
        try:
            _, data = conn.post(path, body)
        except BaseException:
            conn.close()
            raise
        self._release(conn)
        return time.perf_counter() - t0, data

    def _acquire(self) -> Keepalive:
        with self.lock:
            while self.idle:
                conn = self.idle.pop()
                if conn.usable():
                    return conn
                conn.close()
            self.dials += 1
        return Keepalive(self.port)

    def _release(self, conn: Keepalive) -> None:
        with self.lock:
            if len(self.idle) < self.max_idle:
                self.idle.append(conn)
                return
            self.closed_over_max_idle += 1
        conn.close()

    def close(self) -> None:
        with self.lock:
            for conn in self.idle:
                conn.close()
            self.idle.clear()


class BindWorkers:
    """Threads started before any timing that run the binds handed to them, one per pod in flight.

    kube-scheduler starts a goroutine per binding cycle with no limit; with at least as many idle workers
    as pods in a burst, no bind waits for a worker. Not guaranteed: a thread's wake-up is as prompt as a
    goroutine's (the GIL hands over at the next blocking call).
    """

    def __init__(self, count: int) -> None:
        self.tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(count)]
        for thread in self.threads:
            thread.start()

    def _run(self) -> None:
        while (task := self.tasks.get()) is not None:
            task()

    def submit(self, task: Callable[[], None]) -> None:
        self.tasks.put(task)

    def stop(self) -> None:
        for _ in self.threads:
            self.tasks.put(None)
        for thread in self.threads:
            thread.join(10)


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


def binding_body(meta: dict[str, Any], node: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": NAMESPACE, "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
    )


def binding_path(name: str) -> str:
    return f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding"


def check_bound(api_port: int, chosen: dict[str, str]) -> None:
    """Every pod of ``chosen`` is bound to its node in the emulator, or RuntimeError naming the first few."""
    conn = Keepalive(api_port)
    wrong: list[str] = []
    try:
        for name, node in chosen.items():
            status, body = conn.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
            if status != 200:
                wrong.append(f"{name}: GET HTTP {status}")
                continue
            bound = (orjson.loads(body).get("spec") or {}).get("nodeName")
            if bound != node:
                wrong.append(f"{name}: spec.nodeName {bound!r}, expected {node!r}")
    finally:
        conn.close()
    if wrong:
        raise RuntimeError(f"{len(wrong)} of {len(chosen)} pods not bound as chosen: {wrong[:5]}")


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time of a process so far: this one by ``time.process_time``, another from the first field of
    ``/proc/PID/task/*/schedstat`` (nanoseconds on a CPU, per thread). Not guaranteed: threads that ended
    are no longer counted (the extender and the emulator keep theirs)."""
    if pid is None:
        return time.process_time()
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def extender_delta(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Mean seconds per request of each verb between two scrapes (0.0 when no request came)."""
    means: dict[str, float] = {}
    for verb in ("filter", "prioritize", "bind"):
        total = after.get(verb, (0.0, 0.0))[0] - before.get(verb, (0.0, 0.0))[0]
        count = after.get(verb, (0.0, 0.0))[1] - before.get(verb, (0.0, 0.0))[1]
        means[verb] = total / count if count else 0.0
    return means


class Cluster:
    """The emulator and the extender as processes, and the driver's connections to them."""

    def __init__(self, nodes: int, pods: list[dict[str, Any]], workdir: Path, max_idle: tuple[int, int]) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        seed = workdir / "seed.json"
        seed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": seed_objects(nodes, pods)}))
        command = [str(BIN / "python"), "-m", "koordpy_testkit.apiserver", "--host", LOOPBACK, "--port", "0"]
        emulator = subprocess.Popen(
            [*command, "--seed", str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(emulator)
        assert emulator.stdout is not None
        line = emulator.stdout.readline().decode()
        match = re.search(r"http://[0-9.]+:(\d+)", line)
        if match is None:
            self.close()
            raise RuntimeError(f"emulator printed no URL: {line!r}")
        self.api_port = int(match.group(1))
        kubeconfig = workdir / "kubeconfig.yaml"
        write_kubeconfig(kubeconfig, f"http://{LOOPBACK}:{self.api_port}")
        self.port = free_port()
        config = workdir / "extender.json"  # YAML is a superset of JSON
        config.write_text(json.dumps({"extender": {"host": LOOPBACK, "port": self.port}}))
        extender = subprocess.Popen(
            [str(BIN / "koordpy"), "extender", "--config", str(config), "--kubeconfig", str(kubeconfig)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(extender)
        self.pids: dict[str, int | None] = {"driver": None, "extender": extender.pid, "emulator": emulator.pid}
        try:
            wait_ready(self.port, extender)
        except RuntimeError:
            self.close()
            raise
        self.scrape = Keepalive(self.port)
        self.extender_pool = ConnectionPool(self.port, max_idle[0])
        self.api_pool = ConnectionPool(self.api_port, max_idle[1])

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far of the driver (all its threads), the extender and the emulator."""
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def schedule_cycle(
    post: Callable[[str, bytes], tuple[float, bytes]], pod: dict[str, Any], names: list[str]
) -> tuple[float, float, str]:
    """One scheduling cycle's extender calls: (filter seconds, prioritize seconds, chosen node)."""
    filter_s, answer = post("/filter", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}))
    passed = orjson.loads(answer)["NodeNames"]
    if not passed:
        raise RuntimeError(f"/filter let no node through for {pod['metadata']['name']}: {answer[:300]!r}")
    prio_s, scores = post("/prioritize", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": passed}))
    best: str = max(orjson.loads(scores), key=lambda row: row["Score"])["Host"]
    return filter_s, prio_s, best


def extender_bind_body(meta: dict[str, Any], node: str) -> bytes:
    return orjson.dumps({"PodName": meta["name"], "PodNamespace": NAMESPACE, "PodUID": meta["uid"], "Node": node})


def run_serial(cluster: Cluster, pods: list[dict[str, Any]], nodes: int, round_size: int) -> dict[str, Any]:
    """One pod at a time on one kept-alive connection per server; the modes alternate every ``round_size``."""
    ext, api = Keepalive(cluster.port), Keepalive(cluster.api_port)
    service_before = service_seconds(cluster.scrape)
    names = [f"node-{i:02d}" for i in range(nodes)]
    with_ext: dict[str, list[float]] = {"filter": [], "prioritize": [], "bind": [], "pod": []}
    without: dict[str, list[float]] = {"bind": [], "pod": []}
    chosen: dict[str, str] = {}
    for k, pod in enumerate(pods):
        meta = pod["metadata"]
        use_extender = (k // round_size) % 2 == 0
        t0 = time.perf_counter()
        if use_extender:
            rotated = names[k % nodes :] + names[: k % nodes]  # kube-scheduler starts where it stopped
            filter_s, prio_s, best = schedule_cycle(ext.post, pod, rotated)
            bind_s, result = ext.post("/bind", extender_bind_body(meta, best))
            if orjson.loads(result).get("Error"):
                raise RuntimeError(f"bind failed: {result!r}")
            with_ext["filter"].append(filter_s)
            with_ext["prioritize"].append(prio_s)
            with_ext["bind"].append(bind_s)
            with_ext["pod"].append(time.perf_counter() - t0)
            chosen[meta["name"]] = best
        else:
            node = names[k % nodes]
            bind_s, _ = api.post(binding_path(meta["name"]), binding_body(meta, node))
            without["bind"].append(bind_s)
            without["pod"].append(time.perf_counter() - t0)
            chosen[meta["name"]] = node
    service_after = service_seconds(cluster.scrape)
    ext.close()
    api.close()
    check_bound(cluster.api_port, chosen)
    with_pod, without_pod = statistics.median(with_ext["pod"]), statistics.median(without["pod"])
    inside = extender_delta(service_before, service_after)
    breakdown: dict[str, dict[str, float]] = {}
    for verb in ("filter", "prioritize", "bind"):
        seen = statistics.fmean(with_ext[verb])
        breakdown[verb] = {
            "client_mean_ms": round(seen * 1e3, 3),
            "extender_mean_ms": round(inside[verb] * 1e3, 3),
            "http_and_loopback_mean_ms": round((seen - inside[verb]) * 1e3, 3),
        }
    direct = statistics.fmean(without["bind"])
    breakdown["bind"]["api_call_mean_ms_as_measured_without"] = round(direct * 1e3, 3)
    breakdown["bind"]["extender_own_mean_ms"] = round((inside["bind"] - direct) * 1e3, 3)
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


class Burst:
    """One burst's record: per-pod timings, the chosen nodes, bind failures and binds in flight."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cycle: dict[str, list[float]] = {"filter": [], "prioritize": []}
        self.bind: list[float] = []
        self.last_answer = 0.0
        self.failures: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.done = threading.Semaphore(0)
        self.chosen: dict[str, str] = {}

    def start_bind(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def bind_task(
        self, post: Callable[[str, bytes], tuple[float, bytes]], path: str, body: bytes
    ) -> Callable[[], None]:
        """The binding goroutine: POST, check the answer, record when it came, count down."""

        def task() -> None:
            try:
                seconds, answer = post(path, body)
                if path == "/bind" and orjson.loads(answer).get("Error"):
                    raise RuntimeError(f"/bind answered {answer[:300]!r}")
                now = time.perf_counter()
                with self.lock:
                    self.bind.append(seconds)
                    self.last_answer = max(self.last_answer, now)
            except Exception as exc:  # recorded and raised by the driver after the burst
                with self.lock:
                    self.failures.append(f"{path}: {type(exc).__name__}: {exc}")
            finally:
                with self.lock:
                    self.in_flight -= 1
                self.done.release()

        return task


def run_burst(
    cluster: Cluster, workers: BindWorkers, pods: list[dict[str, Any]], nodes: int, use_extender: bool
) -> dict[str, Any]:
    """All ``pods`` pending at once: cycles back to back, each bind handed to a worker as its cycle ends."""
    names = [f"node-{i:02d}" for i in range(nodes)]
    record = Burst()
    pool = cluster.extender_pool if use_extender else cluster.api_pool
    dials_before, closed_before = pool.dials, pool.closed_over_max_idle
    service_before = service_seconds(cluster.scrape)
    cpu_before = cluster.cpu()
    t0 = time.perf_counter()
    for k, pod in enumerate(pods):
        meta = pod["metadata"]
        if use_extender:
            rotated = names[k % nodes :] + names[: k % nodes]
            filter_s, prio_s, node = schedule_cycle(pool.post, pod, rotated)
            record.cycle["filter"].append(filter_s)
            record.cycle["prioritize"].append(prio_s)
            path, body = "/bind", extender_bind_body(meta, node)
        else:
            node = names[k % nodes]
            path, body = binding_path(meta["name"]), binding_body(meta, node)
        record.chosen[meta["name"]] = node
        record.start_bind()
        workers.submit(record.bind_task(pool.post, path, body))
    cycles_done = time.perf_counter()
    for _ in pods:
        if not record.done.acquire(timeout=60):
            raise RuntimeError(f"binds still in flight after 60 s ({record.in_flight} of {len(pods)})")
    cpu_after = cluster.cpu()
    if record.failures:
        raise RuntimeError(f"{len(record.failures)} binds failed: {record.failures[:5]}")
    wall = record.last_answer - t0
    service_after = service_seconds(cluster.scrape)
    check_bound(cluster.api_port, record.chosen)
    out: dict[str, Any] = {
        "wall_ms": round(wall * 1e3, 3),
        "per_pod_ms": round(wall / len(pods) * 1e3, 4),
        "cycles_ms": round((cycles_done - t0) * 1e3, 3),
        "bind_seen_by_worker": summary(record.bind),
        "max_binds_in_flight": record.max_in_flight,
        "dials": pool.dials - dials_before,
        "closed_over_max_idle": pool.closed_over_max_idle - closed_before,
        "cpu_ms": {name: round((cpu_after[name] - cpu_before[name]) * 1e3, 3) for name in cpu_after},
    }
    if use_extender:
        inside = extender_delta(service_before, service_after)
        out["cycle_seen_by_driver"] = {verb: summary(values) for verb, values in record.cycle.items()}
        out["extender_mean_ms"] = {verb: round(value * 1e3, 3) for verb, value in inside.items()}
    return out


def cpu_per_pod(rows: list[dict[str, Any]], pods: int) -> dict[str, float]:
    """CPU milliseconds per pod of each process, over all bursts of one mode (finer than one burst's)."""
    names = rows[0]["cpu_ms"]
    return {name: round(sum(row["cpu_ms"][name] for row in rows) / (pods * len(rows)), 4) for name in names}


def median_of(rows: list[dict[str, Any]], *path: str) -> float:
    values = []
    for row in rows:
        value: Any = row
        for key in path:
            value = value[key]
        values.append(float(value))
    return round(statistics.median(values), 4)


def run_bursts(
    cluster: Cluster, batches: list[tuple[bool, list[dict[str, Any]]]], nodes: int, settle: float
) -> dict[str, Any]:
    workers = BindWorkers(max(len(pods) for _, pods in batches))
    rounds: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    try:
        for use_extender, pods in batches:
            time.sleep(settle)  # let the extender take in the previous burst's watch events
            row = run_burst(cluster, workers, pods, nodes, use_extender)
            row["load_average_1m"] = round(os.getloadavg()[0], 2)
            rounds[use_extender].append(row)
    finally:
        workers.stop()
    with_rows, without_rows = rounds[True], rounds[False]
    with_pod, without_pod = median_of(with_rows, "per_pod_ms"), median_of(without_rows, "per_pod_ms")
    return {
        "pods_per_burst": len(batches[0][1]),
        "rounds_per_mode": len(with_rows),
        "max_idle_per_host": {"extender": cluster.extender_pool.max_idle, "api": cluster.api_pool.max_idle},
        "with_extender": {
            "per_pod_ms_median": with_pod,
            "wall_ms_median": median_of(with_rows, "wall_ms"),
            "cycles_ms_median": median_of(with_rows, "cycles_ms"),
            "filter_p50_ms_median": median_of(with_rows, "cycle_seen_by_driver", "filter", "p50_ms"),
            "prioritize_p50_ms_median": median_of(with_rows, "cycle_seen_by_driver", "prioritize", "p50_ms"),
            "bind_p50_ms_median": median_of(with_rows, "bind_seen_by_worker", "p50_ms"),
            "extender_filter_mean_ms_median": median_of(with_rows, "extender_mean_ms", "filter"),
            "extender_prioritize_mean_ms_median": median_of(with_rows, "extender_mean_ms", "prioritize"),
            "extender_bind_mean_ms_median": median_of(with_rows, "extender_mean_ms", "bind"),
            "dials_median": median_of(with_rows, "dials"),
            "max_binds_in_flight_median": median_of(with_rows, "max_binds_in_flight"),
            "cpu_ms_per_pod": cpu_per_pod(with_rows, len(batches[0][1])),
        },
        "without_extender": {
            "per_pod_ms_median": without_pod,
            "wall_ms_median": median_of(without_rows, "wall_ms"),
            "bind_p50_ms_median": median_of(without_rows, "bind_seen_by_worker", "p50_ms"),
            "dials_median": median_of(without_rows, "dials"),
            "max_binds_in_flight_median": median_of(without_rows, "max_binds_in_flight"),
            "cpu_ms_per_pod": cpu_per_pod(without_rows, len(batches[0][1])),
        },
        "ratio_per_pod_with_over_without": round(with_pod / without_pod, 2),
        "rounds": {"with_extender": with_rows, "without_extender": without_rows},
    }


def burst_batches(rounds: int, size: int) -> list[tuple[bool, list[dict[str, Any]]]]:
    """Fresh pending pods per burst; the modes in ABBA order so a drift in load hits both alike."""
    batches: list[tuple[bool, list[dict[str, Any]]]] = []
    for r in range(rounds):
        for use_extender in (True, False) if r % 2 == 0 else (False, True):
            tag = "with" if use_extender else "without"
            batches.append((use_extender, [make_pod(f"burst-{r:02d}-{tag}-{k:04d}") for k in range(size)]))
    return batches


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    serial_pods = [make_pod(f"bench-{k:04d}") for k in range(args.pods)]
    batches = burst_batches(args.burst_rounds, args.burst_pods)
    total = len(serial_pods) + sum(len(pods) for _, pods in batches)
    if total > MAX_PODS_PER_NODE * args.nodes * 0.9:
        raise SystemExit(f"{total} pods do not fit {args.nodes} nodes of {MAX_PODS_PER_NODE} pods with room to spare")
    cluster = Cluster(args.nodes, serial_pods + [p for _, pods in batches for p in pods], workdir, args.max_idle)
    try:
        serial = run_serial(cluster, serial_pods, args.nodes, args.round)
        burst = run_bursts(cluster, batches, args.nodes, args.settle) if batches else None
    finally:
        cluster.close()
    return {**serial, "burst": burst}


def print_report(args: argparse.Namespace, result: dict[str, Any]) -> None:
    w, wo, b = result["with_extender"], result["without_extender"], result["breakdown"]
    print(
        f"serial, {args.nodes} nodes: per pod p50 with extender {w['pod']['p50_ms']:.3f} ms "
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
    burst = result["burst"]
    if burst is None:
        return
    bw, bwo = burst["with_extender"], burst["without_extender"]
    print(
        f"burst, {burst['pods_per_burst']} pods pending, {burst['rounds_per_mode']} rounds per mode (medians): "
        f"{bw['per_pod_ms_median']:.3f} ms per pod with the extender ({bw['wall_ms_median']:.1f} ms for all), "
        f"{bwo['per_pod_ms_median']:.3f} ms without ({bwo['wall_ms_median']:.1f} ms): "
        f"{burst['ratio_per_pod_with_over_without']}x"
    )
    print(
        f"  with: cycles done at {bw['cycles_ms_median']:.1f} ms; filter p50 {bw['filter_p50_ms_median']:.3f} ms "
        f"(extender {bw['extender_filter_mean_ms_median']:.3f} mean), prioritize p50 "
        f"{bw['prioritize_p50_ms_median']:.3f} ms (extender {bw['extender_prioritize_mean_ms_median']:.3f}), "
        f"bind p50 {bw['bind_p50_ms_median']:.3f} ms as the worker sees it (extender "
        f"{bw['extender_bind_mean_ms_median']:.3f}); up to {bw['max_binds_in_flight_median']:.0f} binds in flight, "
        f"{bw['dials_median']:.0f} dials"
    )
    print(
        f"  without: bind p50 {bwo['bind_p50_ms_median']:.3f} ms as the worker sees it; up to "
        f"{bwo['max_binds_in_flight_median']:.0f} binds in flight, {bwo['dials_median']:.0f} dials"
    )
    for label, row in (("with", bw), ("without", bwo)):
        cpu = row["cpu_ms_per_pod"]
        print(
            f"  CPU per pod {label}: driver {cpu['driver']:.3f} ms, extender {cpu['extender']:.3f} ms, "
            f"emulator {cpu['emulator']:.3f} ms ({os.cpu_count()} CPUs)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--pods", type=int, default=200, help="serial pods, both modes together")
    parser.add_argument("--round", type=int, default=10, help="serial pods per round; rounds alternate the modes")
    parser.add_argument("--burst-pods", type=int, default=100, help="pods pending at once in each burst")
    parser.add_argument("--burst-rounds", type=int, default=7, help="bursts per mode (0: serial only)")
    parser.add_argument("--settle", type=float, default=0.5, help="seconds of quiet before each burst")
    parser.add_argument("--extender-max-idle", type=int, default=EXTENDER_MAX_IDLE)
    parser.add_argument("--api-max-idle", type=int, default=API_MAX_IDLE)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.max_idle = (args.extender_max_idle, args.api_max_idle)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="koordpy-bench-") as tmp:
        result = run(args, Path(tmp))
    out = {
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_start": load_start,
            "load_average_at_end": os.getloadavg(),
        },
        "command": " ".join(["bench/scheduler_path.py", *sys.argv[1:]]),
        **result,
    }
    print_report(args, result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
