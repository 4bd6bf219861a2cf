"""Scheduler throughput on the real kube-scheduler (not a test): the koordpy profile against the stock one.

One real control plane (``koordpy_testkit.controlplane``: etcd, kube-apiserver, kube-controller-manager,
the pinned kube-scheduler), koordpy's chart installed with the real helm, and three kube-schedulers from
the same binary, all running at once with the chart's verbosity:

- **stock**: the default profile (``default-scheduler``), kube-scheduler's defaults;
- **koordpy**: the chart's rendered KubeSchedulerConfiguration (``koordpy-scheduler``, its two extender
  entries pointed at ``koordpy extender``, which runs with the chart's rendered configuration);
- **noop**: the same configuration with the extender entries pointed at a no-op extender
  (``koordpy_testkit.noop_extender``: every node passes, no scores, one API call per bind, no watches).
  koordpy ÷ noop is what koordpy adds; noop ÷ stock is what the extender protocol itself costs.

Every process authenticates with a token of the chart's scheduler ServiceAccount (the same API
priority level for all three). Leader election is off for all three.

Nodes are plain Node objects (16 cpu, 64 GiB, 110 pods), Ready at creation, with no kubelet and no kwok:
at 5,000 nodes kwok's heartbeats cost more CPU than the schedulers under test. The API server runs without
the ``TaintNodesByCondition`` admission plugin (nothing would lift its not-ready taint) and without an
audit log; kube-controller-manager without the node-lifecycle controller (nothing heartbeats). Each node
has a NodeMetric whose report is refreshed between rounds before it is 90 s old (the load-aware default
expiry is 180 s). Reported cpu usage is 5..85 % (node ``i``: ``5 + 37 i mod 81``), so about a quarter
of the nodes are over the default 65 % threshold; memory 30 %.

**Burst method.** Per round and profile: the profile's kube-scheduler is stopped (SIGSTOP), ``--pods``
pods of 100m / 128Mi are created for it, it is resumed (SIGCONT) and the time until the last pod is
seen bound (a watch on ``spec.nodeName!=``) gives pods/s. Then the pods are deleted (grace 0) and the
bench waits for the processes to go quiet. Profiles rotate their order each round (ABC, BCA, CAB, ...),
so a drift in machine load hits them alike; ratios are taken per round, then the median.

**Variants** (each restarts the three kube-schedulers): ``raised`` (client QPS 5000 / burst 5000 for
all three: the stock profile's binds go through its own client, QPS 50 / burst 100 by default, while
koordpy's go through the extender's client), ``chart`` (kube-scheduler's client defaults),
``raised-pct100`` and ``raised-adaptive`` (QPS raised; koordpy and noop with
``percentageOfNodesToScore`` 100 or 0 = kube-scheduler's adaptive sample, whatever the chart says).

Per round it records wall time, pods/s, CPU seconds per pod of every process (``/proc/<pid>/stat``),
the extender's handler time per verb (its ``koordpy_extender_request_duration_seconds``), kube-scheduler's
own extension-point and attempt histograms (sum and count deltas from its ``/metrics``), and placement
quality (share of pods on nodes reported over 65 % cpu, mean reported cpu of the chosen nodes, most pods on
one node). After the rounds of a size it sends one filter and one prioritize request of every candidate
name to each extender and records the answer bytes.

``--pin`` pins every kube-scheduler to cpu 0 and both extenders to cpu 1 (``taskset``); the rest of the
control plane and this script are left to the scheduler of the OS.

Run (from a fresh clone: ``make .venv/.installed`` first; the Kubernetes binaries are built on first use):

    .venv/bin/python bench/scheduler_throughput.py --nodes 100,1000,5000 --rounds 3

Writes ``bench/results/scheduler_throughput.json`` (``--out``) and prints a table per variant.

Not guaranteed: stable figures on a shared machine (the load average is recorded at every round);
kubelet-side costs (there is none); anything about HTTP/2 to the API server beyond what Go's and
aiohttp's clients do by themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from cluster_kit import Components, Kube, Release  # noqa: E402

from koordpy.model.durations import format_rfc3339  # noqa: E402
from koordpy_testkit.controlplane import ControlPlane  # noqa: E402
from koordpy_testkit.controlplane.binaries import ensure_binaries  # noqa: E402
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "scheduler_throughput.json"
NAMESPACE = "bench"
NODE_CPU_CORES = 16
NODE_MEMORY_GI = 64
HOT_PERCENT = 65
"""The chart's (Koordinator's) default cpu usage threshold."""
METRIC_REFRESH_AFTER = 90.0
RAISED_QPS = 5000
PROFILES = ("stock", "koordpy", "noop")
BEFORE = "before"
"""With ``--before SRC``: a fourth profile, the koordpy profile in front of the extender of another source tree."""
SCHEDULER_NAMES = {
    "stock": "default-scheduler",
    "koordpy": "koordpy-scheduler",
    "noop": "bench-noop",
    BEFORE: "koordpy-before",
}
EXTENDER_OF = {"koordpy": "extender/koordpy", "noop": "extender/noop", BEFORE: "extender/before"}
VARIANTS: dict[str, tuple[bool, int | None]] = {
    # name: (client QPS raised, percentageOfNodesToScore for koordpy and noop; None = the chart's)
    "raised": (True, None),
    "chart": (False, None),
    "raised-pct100": (True, 100),
    "raised-adaptive": (True, 0),
}
CONTROLLERS = (
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "clusterrole-aggregation-controller",
)
SCHEDULER_HISTOGRAMS = (
    "scheduler_framework_extension_point_duration_seconds",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds",
    "scheduler_pod_scheduling_sli_duration_seconds",
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- objects ------------------------------------------------------------------------------------


def cpu_percent_of(index: int) -> int:
    return 5 + (37 * index) % 81


def node_name(index: int) -> str:
    return f"node-{index:05d}"


def plain_node(index: int) -> dict[str, Any]:
    """A Ready node with no kubelet behind it (nothing heartbeats: node-lifecycle is off)."""
    name = node_name(index)
    resources = {"cpu": str(NODE_CPU_CORES), "memory": f"{NODE_MEMORY_GI}Gi", "pods": "110"}
    now = format_rfc3339(time.time())
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "bench node",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "v1.37.2"},
        },
    }


def node_metric_status(index: int, at: float) -> dict[str, Any]:
    cpu_millis = NODE_CPU_CORES * 10 * cpu_percent_of(index)
    memory_mi = NODE_MEMORY_GI * 1024 * 30 // 100
    return {
        "status": {
            "updateTime": format_rfc3339(at),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu_millis}m", "memory": f"{memory_mi}Mi"}}},
        }
    }


def bench_pod(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/bench:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


# ---- processes and their counters ---------------------------------------------------------------


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def taskset(pid: int, cpus: str) -> None:
    subprocess.run(["taskset", "-a", "-c", "-p", cpus, str(pid)], check=True, capture_output=True)


HistogramKey = tuple[str, str]  # (metric name, sorted labels)


def histogram_sums(text: str, names: Sequence[str], keep: Mapping[str, str] | None = None) -> dict[str, list[float]]:
    """``{"name{labels}": [sum, count]}`` for the histograms ``names`` in a Prometheus text page, only the
    series whose labels include every ``keep`` pair."""
    out: dict[str, list[float]] = {}
    wanted = tuple(names)
    for line in text.splitlines():
        if not line.startswith(wanted):
            continue
        match = re.match(r"([a-zA-Z_:][\w:]*?)_(sum|count)(\{[^}]*\})? ([^ ]+)", line)
        if match is None or match.group(1) not in wanted:
            continue
        labels = match.group(3) or "{}"
        if keep and not all(f'{k}="{v}"' in labels for k, v in keep.items()):
            continue
        key = match.group(1) + labels
        slot = out.setdefault(key, [0.0, 0.0])
        slot[0 if match.group(2) == "sum" else 1] = float(match.group(4))
    return out


def histogram_delta(before: dict[str, list[float]], after: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for key, (total, count) in after.items():
        old = before.get(key, [0.0, 0.0])
        if count - old[1] > 0:
            out[key] = {"count": count - old[1], "mean_ms": round((total - old[0]) * 1000 / (count - old[1]), 4)}
    return out


# ---- the bench ----------------------------------------------------------------------------------


@dataclass
class Bench:
    plane: ControlPlane
    kube: Kube
    release: Release
    workdir: Path
    pods: int
    pin: bool
    py_spy: str | None = None
    perf: bool = False
    before_src: Path | None = None
    shortlist: int = 0
    before: Proc | None = None
    before_base: str = ""
    components: Components | None = None
    noop: Proc | None = None
    noop_base: str = ""
    schedulers: dict[str, Proc] = field(default_factory=dict)

    @property
    def profiles(self) -> tuple[str, ...]:
        return (*PROFILES, BEFORE) if self.before_src is not None else PROFILES

    nodes: int = 0
    metrics_at: float = 0.0
    round_serial: int = 0

    # -- cluster objects --

    def _parallel(self, calls: Sequence[Any], workers: int = 6) -> None:
        token = self.plane.admin_token

        def run(chunk: Sequence[Any]) -> None:
            with self.plane.client(token) as api:
                for call in chunk:
                    call(api)

        chunks = [calls[i::workers] for i in range(workers)]
        with ThreadPoolExecutor(workers) as pool:
            for future in [pool.submit(run, chunk) for chunk in chunks if chunk]:
                future.result()

    def grow_nodes(self, count: int) -> None:
        """Create nodes ``self.nodes .. count - 1`` and their NodeMetrics (with a fresh report)."""
        start = self.nodes
        if count <= start:
            return
        log(f"creating nodes {start}..{count - 1} and their NodeMetrics")
        now = time.time()

        def create(index: int) -> Any:
            def call(api: httpx.Client) -> None:
                api.post("/api/v1/nodes", json=plain_node(index)).raise_for_status()
                metric = {
                    "apiVersion": "slo.koordinator.sh/v1alpha1",
                    "kind": "NodeMetric",
                    "metadata": {"name": node_name(index)},
                    "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
                }
                api.post("/apis/slo.koordinator.sh/v1alpha1/nodemetrics", json=metric).raise_for_status()
                self._report(api, index, now)

            return call

        self._parallel([create(i) for i in range(start, count)])
        self.nodes = count
        self.metrics_at = now

    def _report(self, api: httpx.Client, index: int, at: float) -> None:
        resp = api.patch(
            f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{node_name(index)}/status",
            content=orjson.dumps(node_metric_status(index, at)),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        resp.raise_for_status()

    def refresh_metrics(self, force: bool = False) -> None:
        if not force and time.time() - self.metrics_at < METRIC_REFRESH_AFTER:
            return
        now = time.time()
        log(f"refreshing {self.nodes} NodeMetric reports")
        self._parallel([lambda api, i=i: self._report(api, i, now) for i in range(self.nodes)])
        self.metrics_at = now

    # -- processes --

    def start_extenders(self) -> None:
        (self.workdir / "koordpy").mkdir(parents=True, exist_ok=True)
        self.components = Components(self.plane, self.release, self.workdir / "koordpy")
        overrides = {"extender": {"shortlistNodes": self.shortlist}} if self.shortlist else None
        extender = self.components.start_extender(overrides, timeout=600)
        if self.pin:
            taskset(extender.pid, "1")
        token = self.release.token("scheduler")
        kubeconfig = self.plane.kubeconfig("noop-extender", token, "noop-extender")
        port = free_port()
        self.noop = Proc(
            "noop-extender",
            [
                sys.executable,
                "-m",
                "koordpy_testkit.noop_extender",
                "--port",
                str(port),
                "--kubeconfig",
                str(kubeconfig),
            ],
            self.workdir / "noop-extender.log",
            cwd=ROOT,
        ).start()
        self.noop_base = f"http://{LOOPBACK}:{port}"
        wait_http(self.noop_base + "/healthz", 120, self.noop)
        if self.pin:
            taskset(self.noop.pid, "1")
        if self.before_src is not None:
            self._start_before(token)

    def _start_before(self, token: str) -> None:
        """``koordpy extender`` of ``before_src`` (its ``src`` directory first on the path), chart config."""
        assert self.before_src is not None
        port, ops = free_port(), free_port()
        config = self.release.component_config("scheduler")
        config["extender"] = {
            **config.get("extender", {}),
            "host": LOOPBACK,
            "port": port,
            "metricsHost": LOOPBACK,
            "metricsPort": ops,
            "schedulerName": SCHEDULER_NAMES[BEFORE],
        }
        path = self.workdir / "before-extender-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        kubeconfig = self.plane.kubeconfig("before-extender", token, "before-extender")
        self.before = Proc(
            "before-extender",
            [sys.executable, "-m", "koordpy", "extender", "--config", str(path), "--kubeconfig", str(kubeconfig)],
            self.workdir / "before-extender.log",
            env={"PYTHONPATH": str(self.before_src / "src")},
            cwd=self.before_src,
        ).start()
        self.before_base = f"http://{LOOPBACK}:{port}"
        wait_http(self.before_base + "/readyz", 600, self.before)
        if self.pin:
            taskset(self.before.pid, "1")

    def wait_extender_synced(self) -> None:
        """Until the koordpy extender's cache holds every node and NodeMetric."""
        assert self.components is not None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            text = self.components.extender_metrics()
            sizes = {
                kind: float(value)
                for kind, value in re.findall(r'koordpy_extender_cache_objects\{kind="(\w+)"\} ([0-9.e+]+)', text)
            }
            if sizes.get("nodes", 0) >= self.nodes and sizes.get("nodemetrics", 0) >= self.nodes:
                return
            time.sleep(0.5)
        raise TimeoutError("the koordpy extender did not see every node and NodeMetric within 600 s")

    def scheduler_config(self, profile: str, variant: str) -> dict[str, Any]:
        raised, percentage = VARIANTS[variant]
        config: dict[str, Any]
        if profile == "stock":
            config = {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": SCHEDULER_NAMES["stock"]}],
            }
        else:
            config = yaml.safe_load(self.release.configmap("scheduler")["kube-scheduler.yaml"])
            assert self.components is not None
            base = {"koordpy": self.components.extender_base, "noop": self.noop_base, BEFORE: self.before_base}[profile]
            for extender in config.get("extenders") or []:
                extender["urlPrefix"] = base
            config["profiles"][0]["schedulerName"] = SCHEDULER_NAMES[profile]
            if percentage is not None:
                config["percentageOfNodesToScore"] = percentage
        config["leaderElection"] = {"leaderElect": False}
        if raised:
            config["clientConnection"] = {"qps": RAISED_QPS, "burst": RAISED_QPS}
        return config

    def start_schedulers(self, variant: str) -> dict[str, Any]:
        token = self.release.token("scheduler")
        verbosity = self.release_values()["scheduler"]["kubeScheduler"]["verbosity"]
        configs = {}
        for profile in self.profiles:
            config = self.scheduler_config(profile, variant)
            configs[profile] = config
            name = f"sched-{profile}-{variant}-{self.nodes}"
            proc = self.plane.start_scheduler(
                name, config, token, user="koordpy-scheduler-sa", timeout=600, extra_args=[f"--v={verbosity}"]
            )
            if self.pin:
                taskset(proc.pid, "0")
            self.schedulers[profile] = proc
        return configs

    def stop_schedulers(self) -> None:
        for proc in self.schedulers.values():
            proc.stop()
        self.schedulers.clear()

    def release_values(self) -> dict[str, Any]:
        values: dict[str, Any] = yaml.safe_load((ROOT / "charts" / "koordpy" / "values.yaml").read_text())
        return values

    def measured(self) -> dict[str, int]:
        pids = {name: proc.pid for name, proc in self.plane.procs.items() if name in ("etcd", "kube-apiserver")}
        pids["kube-controller-manager"] = self.plane.procs["kube-controller-manager"].pid
        for profile, proc in self.schedulers.items():
            pids[f"kube-scheduler/{profile}"] = proc.pid
        assert self.components is not None and self.components.procs and self.noop is not None
        pids["extender/koordpy"] = self.components.procs[0].pid
        pids["extender/noop"] = self.noop.pid
        if self.before is not None:
            pids["extender/before"] = self.before.pid
        pids["bench"] = os.getpid()
        return pids

    def cpu(self) -> dict[str, tuple[float, float]]:
        return {name: cpu_seconds(pid) for name, pid in self.measured().items()}

    def wait_quiet(self, limit: float = 60.0) -> dict[str, float]:
        """Until no measured process used 10 % of a cpu over 0.5 s; then each one's idle CPU over 2 s
        (milliseconds per second: what it spends with nothing to schedule)."""
        names = [n for n in self.measured() if n != "bench"]
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            before = self.cpu()
            time.sleep(0.5)
            after = self.cpu()
            if max(sum(after[n]) - sum(before[n]) for n in names) < 0.05:
                break
        else:
            log("processes not quiet; going on")
        before, started = self.cpu(), time.monotonic()
        time.sleep(2.0)
        after, took = self.cpu(), time.monotonic() - started
        return {n: round((sum(after[n]) - sum(before[n])) * 1000 / took, 2) for n in after}

    # -- rounds --

    def scheduler_histograms(self, profile: str) -> dict[str, list[float]]:
        text = self.plane.metrics(self.schedulers[profile].name)
        return histogram_sums(text, SCHEDULER_HISTOGRAMS, {"profile": SCHEDULER_NAMES[profile]})

    def extender_histograms(self) -> tuple[dict[str, list[float]], dict[str, float]]:
        """The extender's handler histograms and its watch-event counters."""
        assert self.components is not None
        text = self.components.extender_metrics()
        events = {
            f"{resource}/{kind}": float(value)
            for resource, kind, value in re.findall(
                r'koordpy_extender_watch_events_total\{resource="(\w+)",type="(\w+)"\} ([0-9.e+]+)', text
            )
        }
        return histogram_sums(text, ("koordpy_extender_request_duration_seconds",)), events

    def _before_histograms(self) -> dict[str, list[float]]:
        text = httpx.get(
            self.before_base.rsplit(":", 1)[0] + ":" + self._before_ops_port() + "/metrics", timeout=30
        ).text
        return histogram_sums(text, ("koordpy_extender_request_duration_seconds",))

    def _before_ops_port(self) -> str:
        config = yaml.safe_load((self.workdir / "before-extender-config.yaml").read_text())
        return str(config["extender"]["metricsPort"])

    def create_pods(self, prefix: str, scheduler: str) -> None:
        """Create the round's pods."""
        names = [f"{prefix}-{i:04d}" for i in range(self.pods)]
        self._parallel(
            [
                lambda api, n=n: api.post(
                    f"/api/v1/namespaces/{NAMESPACE}/pods", content=orjson.dumps(bench_pod(n, scheduler))
                ).raise_for_status()
                for n in names
            ],
            workers=4,
        )

    def watch_bound(self, done: threading.Event, bound: dict[str, tuple[str, float]]) -> None:
        """Record each pod of the namespace the first time it is seen with a node, until ``self.pods`` are.

        No resourceVersion: the watch starts with the current state (pods already bound arrive as ADDED),
        so a watch that ends early (the API server's watch cache lagging behind a burst of creates
        answers "too large resource version") is simply opened again."""
        params = {"watch": "true", "fieldSelector": "spec.nodeName!=", "timeoutSeconds": "1800"}
        while not done.is_set():
            with (
                self.plane.client(timeout=1900) as api,
                api.stream("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params=params) as resp,
            ):
                resp.raise_for_status()
                for line in resp.iter_lines():
                    if not line:
                        continue
                    event = orjson.loads(line)
                    obj = event.get("object") or {}
                    node = (obj.get("spec") or {}).get("nodeName")
                    name = (obj.get("metadata") or {}).get("name")
                    if event.get("type") in ("ADDED", "MODIFIED") and node and name not in bound:
                        bound[name] = (node, time.monotonic())
                        if len(bound) >= self.pods:
                            done.set()
                            return

    def delete_pods(self) -> None:
        self.kube.client.request(
            "DELETE",
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            params={"gracePeriodSeconds": "0"},
        ).raise_for_status()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            resp = self.kube.client.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": "1"})
            if not resp.json()["items"]:
                return
            time.sleep(0.3)
        raise TimeoutError("the round's pods were not deleted within 600 s")

    def one_round(self, profile: str, variant: str) -> dict[str, Any]:
        self.refresh_metrics()
        idle = self.wait_quiet()
        self.round_serial += 1
        prefix = f"r{self.round_serial:03d}-{profile}"
        proc = self.schedulers[profile]
        ext_before = self.extender_histograms()
        before_handler = self._before_histograms() if profile == BEFORE else {}
        sched_before = self.scheduler_histograms(profile)
        load = os.getloadavg()[0]
        spy = self._start_py_spy(prefix) if self.py_spy else None
        perf = self._start_perf(prefix) if profile == "koordpy" and self.perf else None
        os.killpg(proc.pid, signal.SIGSTOP)
        try:
            cpu_before = self.cpu()
            self.create_pods(prefix, SCHEDULER_NAMES[profile])
            bound: dict[str, tuple[str, float]] = {}
            done = threading.Event()
            watcher = threading.Thread(target=self.watch_bound, args=(done, bound), daemon=True)
            watcher.start()
            time.sleep(0.3)  # the watch is open before the scheduler resumes
        finally:
            started = time.monotonic()
            os.killpg(proc.pid, signal.SIGCONT)
        if not done.wait(1800):
            raise TimeoutError(f"{profile}: only {len(bound)} of {self.pods} pods bound after 1800 s")
        finished = max(at for _, at in bound.values())
        cpu_after = self.cpu()
        for sampler in (spy, perf):
            if sampler is not None:
                sampler.send_signal(signal.SIGINT)
                sampler.wait(120)
        ext_after = self.extender_histograms()
        sched_after = self.scheduler_histograms(profile)
        wall = finished - started
        nodes = [node for node, _ in bound.values()]
        cpu_of = [cpu_percent_of(int(node.rsplit("-", 1)[1])) for node in nodes]
        per_node: dict[str, int] = {}
        for node in nodes:
            per_node[node] = per_node.get(node, 0) + 1
        row: dict[str, Any] = {
            "profile": profile,
            "variant": variant,
            "nodes": self.nodes,
            "pods": self.pods,
            "wall_seconds": round(wall, 3),
            "pods_per_second": round(self.pods / wall, 2),
            "ms_per_pod": round(wall * 1000 / self.pods, 3),
            "load_average_1m": round(load, 2),
            "cpu_ms_per_pod": {
                name: round((sum(cpu_after[name]) - sum(cpu_before[name])) * 1000 / self.pods, 3) for name in cpu_after
            },
            "system_cpu_ms_per_pod": {
                name: round((cpu_after[name][1] - cpu_before[name][1]) * 1000 / self.pods, 3) for name in cpu_after
            },
            "quality": {
                "share_on_hot_nodes": round(sum(c > HOT_PERCENT for c in cpu_of) / len(cpu_of), 4),
                "mean_reported_cpu_percent_of_chosen": round(statistics.fmean(cpu_of), 2),
                "most_pods_on_one_node": max(per_node.values()),
                "nodes_used": len(per_node),
            },
            "kube_scheduler": histogram_delta(sched_before, sched_after),
        }
        if profile == "koordpy":
            row["extender_handler"] = histogram_delta(ext_before[0], ext_after[0])
        if profile == BEFORE:
            row["extender_handler"] = histogram_delta(before_handler, self._before_histograms())
        row["extender_watch_events"] = {
            key: ext_after[1][key] - ext_before[1].get(key, 0.0)
            for key in ext_after[1]
            if ext_after[1][key] != ext_before[1].get(key, 0.0)
        }
        row["idle_cpu_ms_per_second"] = idle
        row["cpu_ms_per_pod_net"] = {
            name: round(max(row["cpu_ms_per_pod"][name] - idle[name] * wall / self.pods, 0.0), 3) for name in idle
        }
        self.delete_pods()
        return row

    def _start_py_spy(self, prefix: str) -> subprocess.Popen[bytes]:
        """py-spy sampling the koordpy extender for one round (collapsed stacks, for a profile by function)."""
        assert self.py_spy is not None and self.components is not None
        out = self.workdir / f"py-spy-{prefix}.txt"
        pid = str(self.components.procs[0].pid)
        args = [self.py_spy, "record", "--pid", pid, "--rate", "200", "--format", "raw", "--output", str(out)]
        spy = subprocess.Popen([*args, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached before the round starts
        return spy

    def _start_perf(self, prefix: str) -> subprocess.Popen[bytes]:
        """``perf record`` of the koordpy extender for one round (CPU time, native frames and the kernel)."""
        assert self.components is not None
        out = self.workdir / f"perf-{prefix}.data"
        pid = str(self.components.procs[0].pid)
        args = ["perf", "record", "-F", "499", "-g", "-p", pid, "-o", str(out)]
        sampler = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        return sampler

    # -- answer sizes --

    def answer_bytes(self, sample: int) -> dict[str, Any]:
        """One filter and one prioritize request with ``sample`` candidate names to each extender."""
        probe = bench_pod("answer-probe", "bench-nobody")
        created = self.kube.create(probe)
        names = [node_name(i) for i in range(sample)]
        body = orjson.dumps({"Pod": created, "Nodes": None, "NodeNames": names})
        out: dict[str, Any] = {"candidates": sample, "request_bytes": len(body)}
        assert self.components is not None
        for label, base in (("koordpy", self.components.extender_base), ("noop", self.noop_base)):
            with httpx.Client(base_url=base, timeout=60) as http:
                filtered = http.post("/filter", content=body, headers={"Content-Type": "application/json"})
                passed = orjson.loads(filtered.content).get("NodeNames") or []
                again = orjson.dumps({"Pod": created, "Nodes": None, "NodeNames": passed})
                scored = http.post("/prioritize", content=again, headers={"Content-Type": "application/json"})
            out[label] = {
                "filter_answer_bytes": len(filtered.content),
                "passed": len(passed),
                "prioritize_answer_bytes": len(scored.content),
                "scored": len(orjson.loads(scored.content)),
            }
        self.kube.delete("Pod", "answer-probe", NAMESPACE, grace=0)
        return out


def adaptive_sample(nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind with percentageOfNodesToScore 0 (pkg/scheduler/schedule_one.go)."""
    if nodes < 100:
        return nodes
    percentage = max(50 - nodes // 125, 5)
    return max(nodes * percentage // 100, 100)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per profile medians; per round ratios (koordpy/stock, koordpy/noop, noop/stock on ms per pod)."""
    by_round: dict[int, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_round.setdefault(row["round"], {})[row["profile"]] = row
    out: dict[str, Any] = {"profiles": {}, "ratios": {}}
    for profile in (*PROFILES, BEFORE):
        mine = [r for r in rows if r["profile"] == profile]
        if not mine:
            continue
        cpu_names = mine[0]["cpu_ms_per_pod"].keys()
        out["profiles"][profile] = {
            "ms_per_pod_median": round(statistics.median(r["ms_per_pod"] for r in mine), 3),
            "pods_per_second_median": round(statistics.median(r["pods_per_second"] for r in mine), 2),
            "cpu_ms_per_pod_median": {
                n: round(statistics.median(r["cpu_ms_per_pod"][n] for r in mine), 3) for n in cpu_names
            },
            "cpu_ms_per_pod_net_median": {
                n: round(statistics.median(r["cpu_ms_per_pod_net"][n] for r in mine), 3) for n in cpu_names
            },
            "share_on_hot_nodes_median": statistics.median(r["quality"]["share_on_hot_nodes"] for r in mine),
        }
        if profile in ("koordpy", BEFORE):
            verbs: dict[str, list[float]] = {}
            for r in mine:
                for key, value in r.get("extender_handler", {}).items():
                    verb = re.search(r'verb="(\w+)"', key)
                    if verb:
                        verbs.setdefault(verb.group(1), []).append(value["mean_ms"])
            out["profiles"][profile]["extender_handler_ms_median"] = {
                v: round(statistics.median(xs), 4) for v, xs in verbs.items()
            }
    for name, (a, b) in {
        "koordpy/stock": ("koordpy", "stock"),
        "koordpy/noop": ("koordpy", "noop"),
        "noop/stock": ("noop", "stock"),
        "koordpy/before": ("koordpy", BEFORE),
        "before/stock": (BEFORE, "stock"),
    }.items():
        ratios = [rnd[a]["ms_per_pod"] / rnd[b]["ms_per_pod"] for rnd in by_round.values() if a in rnd and b in rnd]
        if ratios:
            out["ratios"][name] = {
                "median": round(statistics.median(ratios), 3),
                "per_round": [round(x, 3) for x in ratios],
            }
    return out


def print_table(size: int, variant: str, summary: dict[str, Any]) -> None:
    profiles = summary["profiles"]
    cells = [f"{p} {profiles[p]['ms_per_pod_median']:.2f}" for p in PROFILES if p in profiles]
    ratios = ", ".join(f"{k} {v['median']:.2f}" for k, v in summary["ratios"].items())
    ext = profiles.get("koordpy", {}).get("cpu_ms_per_pod_median", {}).get("extender/koordpy")
    print(f"{size:>5} nodes  {variant:<16} ms/pod: {'  '.join(cells)}  |  {ratios}  |  extender cpu ms/pod {ext}")


def markdown_report(results: Mapping[str, Any]) -> str:
    """The tables of docs/performance.md from a results file (``--report FILE``)."""
    before_lines = [
        "| nodes | variant | koordpy ms/pod | before ms/pod | koordpy ÷ before | extender CPU ms/pod, koordpy "
        "| extender CPU ms/pod, before | load (1 min) |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    lines = [
        "| nodes | variant | % scored (koordpy) | stock ms/pod | koordpy ms/pod | no-op ms/pod "
        "| koordpy ÷ stock | koordpy ÷ no-op | no-op ÷ stock | extender CPU ms/pod | load (1 min) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    cpu_lines = [
        "| nodes | variant | profile | kube-scheduler | extender | kube-apiserver | etcd | handler filter / prioritize / bind (ms) |",
        "|---:|---|---|---:|---:|---:|---:|---|",
    ]
    quality_lines = [
        "| nodes | variant | profile | pods on nodes over 65 % cpu | mean reported cpu of the chosen nodes | most pods on one node |",
        "|---:|---|---|---:|---:|---:|",
    ]
    for size, size_out in results["sizes"].items():
        for variant, out in size_out["variants"].items():
            summary = out["summary"]
            profiles, ratios = summary["profiles"], summary["ratios"]
            loads = [r["load_average_1m"] for r in out["rounds"]]
            pct = out["percentage_of_nodes_to_score"]["koordpy"]
            if BEFORE in profiles:
                before_lines.append(
                    f"| {int(size):,} | {variant} | {profiles['koordpy']['ms_per_pod_median']:.2f} "
                    f"| {profiles[BEFORE]['ms_per_pod_median']:.2f} | {ratios['koordpy/before']['median']:.2f} "
                    f"| {profiles['koordpy']['cpu_ms_per_pod_median']['extender/koordpy']:.2f} "
                    f"| {profiles[BEFORE]['cpu_ms_per_pod_median']['extender/before']:.2f} "
                    f"| {min(loads):.1f}–{max(loads):.1f} |"
                )
            ext = profiles["koordpy"]["cpu_ms_per_pod_median"]["extender/koordpy"]
            lines.append(
                f"| {int(size):,} | {variant} | {'adaptive' if pct in (0, None) else pct} "
                + "".join(f"| {profiles[p]['ms_per_pod_median']:.2f} " for p in PROFILES)
                + "".join(f"| {ratios[k]['median']:.2f} " for k in ("koordpy/stock", "koordpy/noop", "noop/stock"))
                + f"| {ext:.2f} | {min(loads):.1f}–{max(loads):.1f} |"
            )
            for profile in (p for p in (*PROFILES, BEFORE) if p in profiles):
                cpu = profiles[profile]["cpu_ms_per_pod_median"]
                extender = EXTENDER_OF.get(profile)
                handler = profiles[profile].get("extender_handler_ms_median", {})
                verbs = " / ".join(f"{handler[v]:.2f}" for v in ("filter", "prioritize", "bind") if v in handler)
                extender_cpu = f"{cpu[extender]:.2f}" if extender else "–"
                cpu_lines.append(
                    f"| {int(size):,} | {variant} | {profile} | {cpu[f'kube-scheduler/{profile}']:.2f} "
                    f"| {extender_cpu} | {cpu['kube-apiserver']:.2f} | {cpu['etcd']:.2f} | {verbs or '–'} |"
                )
                rows = [r for r in out["rounds"] if r["profile"] == profile]
                quality = [r["quality"] for r in rows]
                quality_lines.append(
                    f"| {int(size):,} | {variant} | {profile} "
                    f"| {statistics.median(q['share_on_hot_nodes'] for q in quality):.1%} "
                    f"| {statistics.median(q['mean_reported_cpu_percent_of_chosen'] for q in quality):.1f} % "
                    f"| {statistics.median(q['most_pods_on_one_node'] for q in quality):.0f} |"
                )
    sizes = [
        "| nodes | profile | filter answer (bytes) | prioritize answer (bytes) | candidates sent |",
        "|---:|---|---:|---:|---:|",
    ]
    for size, size_out in results["sizes"].items():
        for sample, answer in size_out.get("answer_bytes", {}).items():
            for label in ("koordpy", "noop"):
                a = answer[label]
                sizes.append(
                    f"| {int(size):,} ({sample.replace('_', ' ')}) | {label} | {a['filter_answer_bytes']:,} "
                    f"| {a['prioritize_answer_bytes']:,} | {answer['candidates']:,} |"
                )
    tables = [lines, cpu_lines, quality_lines, sizes] + ([before_lines] if len(before_lines) > 2 else [])
    return "\n\n".join("\n".join(table) for table in tables) + "\n"


@contextlib.contextmanager
def control_plane(workdir: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(
        workdir=workdir / "controlplane",
        default_scheduler=False,
        kwok=False,
        controllers=CONTROLLERS,
        apiserver_args=("--audit-log-path=", "--disable-admission-plugins=TaintNodesByCondition"),
    )
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="100,1000,5000", help="comma-separated node counts, ascending")
    parser.add_argument("--pods", type=int, default=500, help="pods per round and profile (default 500)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per variant and size (default 3)")
    parser.add_argument(
        "--variants", default="raised,chart", help=f"comma-separated, of {', '.join(VARIANTS)} (default raised,chart)"
    )
    parser.add_argument("--pin", action="store_true", help="kube-schedulers on cpu 0, extenders on cpu 1")
    parser.add_argument(
        "--shortlist", type=int, default=0, metavar="K", help="the koordpy extender's extender.shortlistNodes (0: off)"
    )
    parser.add_argument("--py-spy", metavar="BINARY", help="sample the koordpy extender with py-spy in every round")
    parser.add_argument("--perf", action="store_true", help="perf record the koordpy extender during its rounds")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="TREE",
        help="also run the koordpy profile in front of the extender of this source tree (its src/ first on the path)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--workdir", type=Path, help="keep the control plane's files here (default: a temp dir)")
    parser.add_argument("--report", type=Path, metavar="FILE", help="print the markdown tables of a results file")
    args = parser.parse_args(argv)
    if args.report is not None:
        print(markdown_report(json.loads(args.report.read_text())), end="")
        return 0
    sizes = [int(n) for n in args.nodes.split(",")]
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or sizes != sorted(sizes):
        parser.error(f"unknown variants {unknown}" if unknown else "--nodes must be ascending")

    ensure_binaries()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="koordpy-throughput-"))).resolve()
    log(f"files in {workdir}")
    started = time.time()
    load_start = os.getloadavg()
    results: dict[str, Any] = {
        "bench": "scheduler_throughput",
        "command": "python bench/scheduler_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "kubernetes": (ensure_binaries(quiet=True) / "VERSION").read_text().strip(),
        },
        "pods_per_round": args.pods,
        "pinned": args.pin,
        "shortlistNodes": args.shortlist,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "sizes": {},
    }
    with control_plane(workdir) as plane, plane.client() as client:
        kube = Kube(client)
        release = Release(plane, kube)
        log("installing the chart")
        release.install()
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        bench = Bench(
            plane, kube, release, workdir, args.pods, args.pin, args.py_spy, args.perf, args.before, args.shortlist
        )
        try:
            bench.grow_nodes(sizes[0])
            bench.start_extenders()
            for size in sizes:
                bench.grow_nodes(size)
                bench.wait_extender_synced()
                size_out: dict[str, Any] = {"variants": {}}
                for variant in variants:
                    log(f"{size} nodes, variant {variant}: starting the kube-schedulers")
                    configs = bench.start_schedulers(variant)
                    rows: list[dict[str, Any]] = []
                    for rnd in range(args.rounds):
                        profiles = bench.profiles
                        order = profiles[rnd % len(profiles) :] + profiles[: rnd % len(profiles)]
                        for profile in order:
                            row = bench.one_round(profile, variant)
                            row["round"] = rnd
                            rows.append(row)
                            log(
                                f"{size} {variant} round {rnd} {profile}: {row['ms_per_pod']:.2f} ms/pod "
                                f"(load {row['load_average_1m']})"
                            )
                    bench.stop_schedulers()
                    summary = summarise(rows)
                    percentages = {p: configs[p].get("percentageOfNodesToScore") for p in bench.profiles}
                    size_out["variants"][variant] = {
                        "percentage_of_nodes_to_score": percentages,
                        "summary": summary,
                        "rounds": rows,
                    }
                    print_table(size, variant, summary)
                size_out["answer_bytes"] = {
                    "all_nodes": bench.answer_bytes(size),
                    "adaptive_sample": bench.answer_bytes(adaptive_sample(size)),
                }
                results["sizes"][str(size)] = size_out
                results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
                results["elapsed_seconds"] = round(time.time() - started, 1)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(results, indent=1) + "\n")
        finally:
            bench.stop_schedulers()
            for proc in (bench.noop, bench.before):
                if proc is not None:
                    proc.stop()
            if bench.components is not None:
                bench.components.close()
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
