"""Soak (not a test): koordpy's components under churn on the real control plane for half an hour and more,
sampled every minute: each component's RSS, its open connections to the API server and its open watches.

A real control plane (``koordpy_testkit.controlplane``: Kubernetes v1.37.2 built by ``tools/build.sh``, kwok
for nodes, every request of koordpy's ServiceAccounts audited), the chart installed by the real helm, and
koordpy's processes as the cluster tier runs them (``tests/cluster/cluster_kit.py``): the extender and the
koordpy-scheduler kube-scheduler in front of it, the manager (leader election on), and one agent on each of
two kwok nodes (fabricated ``/proc`` and cgroup trees, reports every 10 s).

Churn, all the time: pods of the koordpy profile created and deleted (about 100 live), kwok nodes added and
removed (a new one every 30 s, at most 4 at once; their NodeMetrics written as an agent would), gangs (a
PodGroup of 3 and its members every 20 s, deleted after a minute), PodMigrationJobs on a Deployment's pods
(one every 30 s, ttl 2 min: the manager deletes them 5 min after they end) and Reservations (one every
minute, deleted after 3 minutes).

Each minute: per component, RSS (``/proc``), established TCP connections to the API server's port, and open
watches (the API server's audit log: a watch's ``ResponseStarted`` without its ``ResponseComplete``, by
identity: the extender is the scheduler ServiceAccount with koordpy's user agent, the manager its own
ServiceAccount, each agent its node's bound token). After ``--warmup`` minutes the RSS of each component is
fitted with a line (least squares); its slope is reported as percent of its mean RSS per 10 minutes.

Run: ``.venv/bin/python bench/soak.py [--minutes 35] [--warmup 5]``. Prints a line a minute and writes
``bench/results/soak.json`` (every sample, the fits and the verdict: RSS growth at most 1 % per 10 minutes,
connections and watches flat).

Not guaranteed: stable figures on a shared machine (the load average is recorded with the samples).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from cluster_kit import Components, Kube, Release  # noqa: E402

from koordpy.model.durations import format_rfc3339  # noqa: E402
from koordpy_testkit.cgroupfs import BusyProc, FakeCgroupTree  # noqa: E402
from koordpy_testkit.controlplane import ControlPlane, fake_node  # noqa: E402
from koordpy_testkit.processes import Proc  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "soak.json"
NS = "koordpy-system"
PROFILE = "koordpy-scheduler"
SCHEDULER_SA = f"system:serviceaccount:{NS}:koordpy-scheduler"
MANAGER_SA = f"system:serviceaccount:{NS}:koordpy-manager"
AGENT_SA = f"system:serviceaccount:{NS}:koordpy-agent"
NODE_NAME = "authentication.kubernetes.io/node-name"
AGENT_NODES = ("agent-0", "agent-1")
NODE_LABEL = {"soak": "yes"}
GROWTH_LIMIT_PERCENT = 1.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def stamp() -> str:
    return format_rfc3339(time.time())


class Api:
    """The admin's calls of the churn, each tolerant of a failure (logged, counted, never fatal)."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.failures: collections.Counter[str] = collections.Counter()

    def call(self, method: str, path: str, body: Any = None, *, merge: bool = False) -> httpx.Response | None:
        headers = {"Content-Type": "application/merge-patch+json"} if merge else None
        try:
            resp = self.client.request(method, path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            self.failures[type(exc).__name__] += 1
            return None
        if resp.status_code >= 400 and resp.status_code != 404:
            self.failures[f"{method} {resp.status_code}"] += 1
        return resp


def pod(name: str, labels: dict[str, str] | None = None, cpu: str = "10m") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedulerName": PROFILE,
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": NODE_LABEL,
            "containers": [
                {"name": "c", "image": "registry.invalid/x", "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}}}
            ],
        },
    }


class Churn:
    """The objects the soak keeps coming and going (see the module docstring)."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.pods: collections.deque[tuple[float, str, str]] = collections.deque()
        self.nodes: collections.deque[str] = collections.deque()
        self.gangs: collections.deque[tuple[float, str]] = collections.deque()
        self.reservations: collections.deque[tuple[float, str]] = collections.deque()
        self.counts: collections.Counter[str] = collections.Counter()
        self.seq = 0
        self.last: dict[str, float] = collections.defaultdict(float)

    def _due(self, what: str, every: float, now: float) -> bool:
        if now - self.last[what] >= every:
            self.last[what] = now
            return True
        return False

    def step(self, now: float) -> None:
        self.seq += 1
        ns = f"churn-{self.seq // 60 % 3}"
        for i in range(5):
            name = f"p-{self.seq}-{i}"
            self.api.call("POST", f"/api/v1/namespaces/{ns}/pods", pod(name))
            self.pods.append((now, ns, name))
            self.counts["pods"] += 1
        while self.pods and now - self.pods[0][0] > 60:
            _, old_ns, old = self.pods.popleft()
            self.api.call("DELETE", f"/api/v1/namespaces/{old_ns}/pods/{old}")
        if self._due("node", 30, now):
            name = f"churn-{uuid.uuid4().hex[:6]}"
            self.api.call("POST", "/api/v1/nodes", fake_node(name, labels=NODE_LABEL))
            self.nodes.append(name)
            self.counts["nodes"] += 1
            while len(self.nodes) > 4:
                self.api.call("DELETE", f"/api/v1/nodes/{self.nodes.popleft()}")
        if self._due("nodemetrics", 10, now):
            for name in self.nodes:  # what an agent would report for the churn nodes
                status = {
                    "updateTime": stamp(),
                    "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "2Gi"}}},
                }
                self.api.call(
                    "PATCH",
                    f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{name}/status",
                    {"status": status},
                    merge=True,
                )
        if self._due("gang", 20, now):
            name = f"g-{self.seq}"
            body = {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": 3},
            }
            self.api.call("POST", "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/gangs/podgroups", body)
            for i in range(3):
                labels = {"pod-group.scheduling.sigs.k8s.io": name}
                self.api.call("POST", "/api/v1/namespaces/gangs/pods", pod(f"{name}-{i}", labels))
            self.gangs.append((now, name))
            self.counts["gangs"] += 1
        while self.gangs and now - self.gangs[0][0] > 60:
            _, old = self.gangs.popleft()
            for i in range(3):
                self.api.call("DELETE", f"/api/v1/namespaces/gangs/pods/{old}-{i}")
            self.api.call("DELETE", f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/gangs/podgroups/{old}")
        if self._due("migration", 30, now):
            resp = self.api.call("GET", "/api/v1/namespaces/migrations/pods", None)
            running = [
                p["metadata"]["name"]
                for p in (resp.json()["items"] if resp is not None and resp.status_code == 200 else [])
                if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            ]
            if running:
                job = {
                    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                    "kind": "PodMigrationJob",
                    "metadata": {"name": f"m-{self.seq}"},
                    "spec": {
                        "mode": "EvictDirectly",
                        "ttl": "2m",
                        "podRef": {"namespace": "migrations", "name": running[0]},
                    },
                }
                self.api.call("POST", "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs", job)
                self.counts["migrations"] += 1
        if self._due("reservation", 60, now):
            name = f"r-{self.seq}"
            body = {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Reservation",
                "metadata": {"name": name},
                "spec": {
                    "template": {"spec": pod("x", cpu="100m")["spec"]},
                    "owners": [{"labelSelector": {"matchLabels": {"soak-owner": name}}}],
                    "ttl": "5m",
                },
            }
            self.api.call("POST", "/apis/scheduling.koordinator.sh/v1alpha1/reservations", body)
            self.reservations.append((now, name))
            self.counts["reservations"] += 1
        while self.reservations and now - self.reservations[0][0] > 180:
            _, old = self.reservations.popleft()
            self.api.call("DELETE", f"/apis/scheduling.koordinator.sh/v1alpha1/reservations/{old}")


class Watches:
    """Open watches per component, from the audit log read incrementally (ResponseStarted minus
    ResponseComplete, by audit ID)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.open: dict[str, str] = {}

    @staticmethod
    def component(event: dict[str, Any]) -> str | None:
        user = event.get("user") or {}
        name = user.get("username")
        if name == SCHEDULER_SA:
            return "extender" if str(event.get("userAgent", "")).startswith("koordpy") else "kube-scheduler"
        if name == MANAGER_SA:
            return "manager"
        if name == AGENT_SA:
            nodes = (user.get("extra") or {}).get(NODE_NAME) or ["?"]
            return f"agent-{nodes[0]}"
        return None

    def read(self) -> dict[str, int]:
        with self.path.open("rb") as stream:
            stream.seek(self.offset)
            data = stream.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            if b'"verb":"watch"' not in line:
                continue
            event = json.loads(line)
            audit_id, stage = event.get("auditID"), event.get("stage")
            if stage == "ResponseStarted":
                who = self.component(event)
                if who is not None:
                    self.open[audit_id] = who
            elif stage == "ResponseComplete":
                self.open.pop(audit_id, None)
        return dict(collections.Counter(self.open.values()))


def connections(proc: psutil.Process, port: int) -> int:
    try:
        found = proc.net_connections(kind="tcp")
    except psutil.Error:
        return -1
    return sum(1 for c in found if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def fit(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def analyse(samples: list[dict[str, Any]], warmup: float) -> dict[str, Any]:
    after = [s for s in samples if s["minute"] >= warmup]
    out: dict[str, Any] = {}
    for name in samples[0]["components"]:
        rss = [(s["minute"], s["components"][name]["rss_mib"]) for s in after]
        conns = [s["components"][name]["connections"] for s in after]
        watches = [s["watches"].get(name, 0) for s in after]
        mean = statistics.fmean(v for _, v in rss)
        slope = fit(rss)  # MiB per minute
        growth = 100.0 * slope * 10 / mean
        conn_slope = fit([(s["minute"], s["components"][name]["connections"]) for s in after])
        out[name] = {
            "rss_mib_first_last": [rss[0][1], rss[-1][1]],
            "rss_mib_mean": round(mean, 2),
            "rss_growth_percent_per_10min": round(growth, 3),
            "connections_min_max": [min(conns), max(conns)],
            "connections_trend_per_10min": round(conn_slope * 10, 3),
            "watches_min_max": [min(watches), max(watches)],
            "rss_ok": growth <= GROWTH_LIMIT_PERCENT,
            # flat: the open watches never change; the connections (watches plus the pool of idle ones,
            # which comes and goes with the requests) show no trend of a connection or more per 10 minutes
            "flat": min(watches) == max(watches) and abs(conn_slope * 10) < 1.0,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=35.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the control plane on the way out
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    plane = ControlPlane(workdir=workdir / "cp", audited_groups=(f"system:serviceaccounts:{NS}",))
    plane.start()
    stop = threading.Event()
    samples: list[dict[str, Any]] = []
    try:
        with plane.client(timeout=30.0) as client:
            kube = Kube(client)
            api = Api(client)
            for name in ("system-0", *AGENT_NODES):
                api.call("POST", "/api/v1/nodes", fake_node(name, labels=NODE_LABEL))
            for ns in ("churn-0", "churn-1", "churn-2", "gangs", "migrations"):
                api.call(
                    "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                )
            release = Release(plane, kube)
            release.install("--set", "manager.config.nodeMetric.reportIntervalSeconds=10")
            components = Components(plane, release, workdir)
            try:
                procs: dict[str, Proc] = {}
                procs["manager"] = components.start_manager()
                for node in AGENT_NODES:
                    busy = BusyProc(workdir / node / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
                    tree = FakeCgroupTree(workdir / node / "cgroup", version=2, driver="systemd")

                    def tick(busy: BusyProc = busy) -> None:
                        while not stop.wait(0.5):
                            busy.tick()

                    threading.Thread(target=tick, daemon=True).start()
                    agent, _ = components.start_ready_agent(node, tree.root, busy.root, workdir / node / "state")
                    procs[f"agent-{node}"] = agent
                procs["extender"] = components.start_extender()
                procs["kube-scheduler"] = components.start_scheduler()
                deployment = {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "mig", "namespace": "migrations"},
                    "spec": {
                        "replicas": 4,
                        "selector": {"matchLabels": {"app": "mig"}},
                        "template": {"metadata": {"labels": {"app": "mig"}}, "spec": pod("x")["spec"]},
                    },
                }
                api.call("POST", "/apis/apps/v1/namespaces/migrations/deployments", deployment)
                port = int(plane.url.rsplit(":", 1)[1])
                watches = Watches(plane.audit_log)
                churn = Churn(api)
                started = time.monotonic()
                next_sample = started
                load_start = os.getloadavg()
                while (elapsed := time.monotonic() - started) < args.minutes * 60:
                    churn.step(time.monotonic())
                    if time.monotonic() >= next_sample:
                        next_sample += 60
                        open_watches = watches.read()
                        sample: dict[str, Any] = {
                            "minute": round(elapsed / 60, 2),
                            "load": round(os.getloadavg()[0], 2),
                            "components": {},
                            "watches": open_watches,
                            "churned": dict(churn.counts),
                            "failures": dict(api.failures),
                        }
                        for name, proc in procs.items():
                            assert proc.alive(), f"{name} exited:\n{proc.tail()}"
                            ps = psutil.Process(proc.pid)
                            sample["components"][name] = {
                                "rss_mib": round(ps.memory_info().rss / 2**20, 2),
                                "connections": connections(ps, port),
                                "threads": ps.num_threads(),
                            }
                        samples.append(sample)
                        log(
                            f"minute {sample['minute']:5.1f} load {sample['load']:5.2f} "
                            + " ".join(
                                f"{n}={c['rss_mib']:.1f}MiB/{c['connections']}c/{open_watches.get(n, 0)}w"
                                for n, c in sample["components"].items()
                            )
                        )
                    time.sleep(2.0)
                restarted = [n for n, p in procs.items() if p.starts != 1]
                assert not restarted, restarted
            finally:
                stop.set()
                components.close()
    finally:
        plane.stop()
    verdict = analyse(samples, args.warmup)
    koordpy = {n: v for n, v in verdict.items() if n != "kube-scheduler"}
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["bench/soak.py", *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_at_start": [round(x, 2) for x in load_start],
        "minutes": args.minutes,
        "warmup_minutes": args.warmup,
        "growth_limit_percent_per_10min": GROWTH_LIMIT_PERCENT,
        "verdict": verdict,
        "all_koordpy_rss_ok": all(v["rss_ok"] for v in koordpy.values()),
        "all_koordpy_flat": all(v["flat"] for v in koordpy.values()),
        "samples": samples,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("verdict", "all_koordpy_rss_ok", "all_koordpy_flat")}, indent=1))


if __name__ == "__main__":
    main()
