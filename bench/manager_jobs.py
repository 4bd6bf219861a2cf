"""The real ``koordpy manager`` process with 10,000 PodMigrationJobs: round time, ``/healthz`` latency, log
lines per minute, CPU and memory, and how long a new job takes. Against the API server emulator process
(default) or, with ``--real``, a real control plane (``koordpy_testkit.controlplane``: etcd,
kube-apiserver, kube-controller-manager, kwok nodes; the chart's CRDs applied with kubectl).

The cluster, seeded before the manager starts (``--jobs``, default 10,000):

* half the jobs finished (Succeeded, created a minute ago, ttl 1h: the scavenger leaves them alone);
* a tenth for pods that do not exist (they pass arbitration and fail ``MissingPod`` at once);
* the rest waiting for pods on 50 nodes (``maxMigratingPerNode`` 2, the default): on each node the first
  two pass and are evicted; a finalizer keeps their pods terminating, so every other job stays waiting,
  requeued by ``MaxMigratingPerNode``, and is arbitrated again every 500 ms round
  (``arbitrationArgs.interval`` default). The pods have no owner (``evictAllBarePods: true``): no
  per-workload limit applies, and no garbage collector removes them.

Phases, from the manager's own metrics: **startup** (process start until its caches are listed and the
first round ran), **busy** (until every missing-pod job failed and the 100 evictions happened at
``evictQPS`` 10 with ``evictBurst`` 1, the waits of all waiting jobs named meanwhile, then 10 s more) and
**steady** (``--steady`` seconds, default 60: nothing changes, every round arbitrates the waiting jobs
again). ``/healthz`` is polled every 50 ms throughout, and so is a bare aiohttp server in a process of
its own (``health_of_a_bare_server``: what the machine's load alone costs an answer). Then a job for a
pod on a node where nothing migrates is created and timed until Succeeded.

Writes ``bench/results/manager_jobs.json`` (``--out``; ``manager_jobs_real.json`` with ``--real``) and
prints it. The manager authenticates as the API server's admin (the chart's RBAC is the cluster tier's
subject, not this bench's).

Usage: ``.venv/bin/python bench/manager_jobs.py [--real] [--jobs N] [--steady S] [--out FILE]``
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from koordpy.kube.connection import write_kubeconfig
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
NODES = 50
PMJ = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob"}
PMJS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"


def _rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


HOLD = "koordpy.io/bench-hold"
"""Finalizer on the waiting jobs' pods: an evicted one stays terminating for the whole run."""


def pod(name: str, node: str, *, hold: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop", "labels": {"app": name}}
    if hold:
        meta["finalizers"] = [HOLD]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "registry.invalid/app:1"}],
            "terminationGracePeriodSeconds": 0,
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def job(name: str, pod_name: str, *, created: float, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        **PMJ,
        "metadata": {"name": name, "creationTimestamp": _rfc3339(created)},
        "spec": {"podRef": {"namespace": "shop", "name": pod_name}, "ttl": "1h", "mode": "EvictDirectly"},
    }
    if status is not None:
        body["status"] = status
    return body


def seed(jobs: int, now: float) -> tuple[list[dict[str, Any]], dict[str, int]]:
    finished = jobs // 2
    missing = jobs // 10
    waiting = jobs - finished - missing
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}]
    for i in range(waiting):
        objects.append(pod(f"w-{i}", f"n{i % NODES}", hold=True))
        objects.append(job(f"wait-{i}", f"w-{i}", created=now - 30))
    for i in range(missing):
        objects.append(job(f"missing-{i}", f"gone-{i}", created=now - 30))
    done = {"phase": "Succeeded", "status": "Complete"}
    for i in range(finished):
        objects.append(job(f"done-{i}", f"old-{i}", created=now - 60, status=done))
    return objects, {"finished": finished, "missing_pod": missing, "waiting": waiting}


def metric(text: str, name: str, labels: str = "") -> float | None:
    prefix = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return None


def buckets(text: str, name: str) -> list[tuple[float, float]]:
    out = []
    for line in text.splitlines():
        if line.startswith(f'{name}_bucket{{le="'):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            out.append((float("inf") if bound == "+Inf" else float(bound), float(line.rsplit(" ", 1)[1])))
    return out


def bucket_quantile(before: list[tuple[float, float]], after: list[tuple[float, float]], q: float) -> float | None:
    """The upper bound of the histogram bucket holding quantile ``q`` of the observations in between."""
    deltas = [(bound, a - b) for (bound, a), (_, b) in zip(after, before, strict=True)]
    total = deltas[-1][1] if deltas else 0
    if total <= 0:
        return None
    for bound, count in deltas:
        if count >= q * total:
            return bound
    return None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(p99 * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


CONTROL_SERVER = """
import asyncio, sys
from aiohttp import web
async def health(_): return web.json_response({})
async def main():
    app = web.Application(); app.router.add_get("/healthz", health)
    runner = web.AppRunner(app); await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(sys.argv[1])).start()
    print("serving", flush=True); await asyncio.Event().wait()
asyncio.run(main())
"""
"""A bare aiohttp /healthz in a process of its own, polled alongside the manager's: what the machine's load
alone costs an answer (the manager's figures are read against it)."""


class HealthPoller:
    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: list[tuple[float, float, int]] = []

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            while True:
                started = time.perf_counter()
                try:
                    status = (await http.get(self.url)).status_code
                except httpx.HTTPError:
                    status = 0
                took = time.perf_counter() - started
                self.samples.append((time.monotonic(), took, status))
                await asyncio.sleep(max(0.0, 0.05 - took))

    def between(self, start: float, end: float) -> list[float]:
        return [took for at, took, status in self.samples if start <= at < end and status == 200]


@dataclass
class Target:
    """The API server the manager talks to: its URL, the manager's kubeconfig and an admin client."""

    name: str
    url: str
    kubeconfig: Path
    client: Callable[[], httpx.AsyncClient]
    stop: Callable[[], None]


def start_emulator(work: Path, objects: list[dict[str, Any]]) -> Target:
    seed_file = work / "seed.yaml"
    seed_file.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False))
    emulator = Proc(
        "emulator",
        [
            str(VENV_BIN / "python"),
            "-m",
            "koordpy_testkit.apiserver",
            "--port",
            "0",
            "--seed",
            str(seed_file),
            "--history-size",
            "200000",
        ],
        work / "emulator.log",
    ).start()
    try:
        url = emulator.wait_for_log("http://", 300).strip().split()[-1]
    except BaseException:
        emulator.stop()
        raise
    kubeconfig = write_kubeconfig(work / "kubeconfig", url, "manager")
    return Target(
        "koordpy_testkit.apiserver (emulator process)",
        url,
        kubeconfig,
        lambda: httpx.AsyncClient(base_url=url, timeout=60),
        emulator.stop,
    )


async def _create_all(client: httpx.AsyncClient, objects: list[dict[str, Any]]) -> None:
    """Create ``objects`` 32 at a time (namespaces and nodes first); status is written for finished jobs."""
    gate = asyncio.Semaphore(32)

    async def create(obj: dict[str, Any]) -> None:
        kind, meta = obj["kind"], obj["metadata"]
        body = {k: v for k, v in obj.items() if k != "status"}
        body["metadata"] = {k: v for k, v in meta.items() if k != "creationTimestamp"}
        if kind == "Pod":
            path = f"/api/v1/namespaces/{meta['namespace']}/pods"
        elif kind == "Namespace":
            path = "/api/v1/namespaces"
        elif kind == "Node":
            path = "/api/v1/nodes"
        else:
            path = PMJS
        async with gate:
            resp = await client.post(path, json=body)
            if resp.status_code not in (200, 201):
                raise SystemExit(f"create {kind} {meta['name']}: {resp.status_code} {resp.text[:300]}")
            if kind == "PodMigrationJob" and obj.get("status"):
                resp = await client.patch(
                    f"{PMJS}/{meta['name']}/status",
                    json={"status": obj["status"]},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                if resp.status_code != 200:
                    raise SystemExit(f"status of {meta['name']}: {resp.status_code} {resp.text[:300]}")

    first = [o for o in objects if o["kind"] in ("Namespace", "Node")]
    for obj in first:
        await create(obj)
    await asyncio.gather(*(create(o) for o in objects if o["kind"] not in ("Namespace", "Node")))


async def start_real(work: Path, objects: list[dict[str, Any]]) -> Target:
    from koordpy_testkit.controlplane import ControlPlane, fake_node

    plane = ControlPlane(workdir=work / "controlplane", default_scheduler=False)
    plane.start()
    try:
        kubectl = plane.bin_dir / "kubectl" if plane.bin_dir is not None else Path("kubectl")
        crds = str(ROOT / "deploy" / "crds.yaml")
        subprocess.run(
            [str(kubectl), "--kubeconfig", str(plane.admin_kubeconfig), "apply", "--server-side", "-f", crds],
            check=True,
            capture_output=True,
            timeout=300,
        )
        nodes = [fake_node(f"n{i}", cpu="64", memory="256Gi", pods="500") for i in range(NODES)]
        nodes.append(fake_node("n-free"))

        def client() -> httpx.AsyncClient:
            return httpx.AsyncClient(
                base_url=plane.url,
                verify=plane.tls(),
                headers={"Authorization": f"Bearer {plane.admin_token}"},
                timeout=60,
            )

        async with client() as admin:
            deadline = time.monotonic() + 120
            while (await admin.get(PMJS)).status_code != 200:  # the CRD established
                if time.monotonic() > deadline:
                    raise SystemExit("the PodMigrationJob CRD was not served after 120 s")
                await asyncio.sleep(0.5)
            await _create_all(admin, [objects[0], *nodes, *objects[1:]])
    except BaseException:
        plane.stop()
        raise
    return Target(
        "real control plane (koordpy_testkit.controlplane: etcd, kube-apiserver, kube-controller-manager, kwok)",
        plane.url,
        plane.admin_kubeconfig,
        client,
        plane.stop,
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="koordpy-bench-manager-"))
    load_at_start = os.getloadavg()
    now = time.time()
    objects, mix = seed(args.jobs, now)
    procs: list[Proc] = []
    seeding = time.monotonic()
    target = await start_real(work, objects) if args.real else start_emulator(work, objects)
    seed_seconds = time.monotonic() - seeding
    kubeconfig = target.kubeconfig
    try:
        health_port = free_port()
        config = {
            "apiVersion": "koordpy.io/v1alpha1",
            "kind": "ManagerConfiguration",
            "nodeMetric": {"enabled": False},
            "health": {"host": LOOPBACK, "port": health_port},
            "migrationController": {"defaultJobMode": "EvictDirectly", "evictAllBarePods": True},
        }
        (work / "manager.yaml").write_text(yaml.safe_dump(config))
        base = f"http://{LOOPBACK}:{health_port}"
        started = time.monotonic()
        manager = Proc(
            "manager",
            [
                str(VENV_BIN / "koordpy"),
                "manager",
                "--config",
                str(work / "manager.yaml"),
                "--kubeconfig",
                str(kubeconfig),
            ],
            work / "manager.log",
        ).start()
        procs.append(manager)
        wait_http(base + "/healthz", 120, manager)
        control_port = free_port()
        control = Proc(
            "control", [str(VENV_BIN / "python"), "-c", CONTROL_SERVER, str(control_port)], work / "control.log"
        ).start()
        procs.append(control)
        wait_http(f"http://{LOOPBACK}:{control_port}/healthz", 60, control)
        poller = HealthPoller(base + "/healthz")
        baseline = HealthPoller(f"http://{LOOPBACK}:{control_port}/healthz")
        polling = asyncio.create_task(poller.run())
        polling_control = asyncio.create_task(baseline.run())
        waiting_running = NODES * 2
        async with httpx.AsyncClient(base_url=base, timeout=10) as scrape:
            deadline = time.monotonic() + args.startup_timeout

            async def until(check: Any, what: str) -> str:
                while True:
                    text = (await scrape.get("/metrics")).text
                    if check(text):
                        return text
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{what} not reached after {args.startup_timeout}s")
                    await asyncio.sleep(0.25)

            # startup: until the caches are listed and the first round ran
            first = await until(lambda t: (metric(t, "koordpy_migration_round_seconds_count") or 0) >= 1, "a round")
            busy_from = time.monotonic()
            startup_cpu = cpu_seconds(manager.pid)
            # busy: missing-pod jobs failed, two jobs per node evicted (evictQPS 10, burst 1: about two a
            # second), every other waiting job's wait named (at most 100 writes a round), then 10 s more
            await until(
                lambda t: (
                    (metric(t, "koordpy_migration_jobs", 'phase="Failed"') or 0) >= mix["missing_pod"]
                    and (metric(t, "koordpy_migration_evictions_total", 'evictor="Eviction",outcome="evicted"') or 0)
                    >= waiting_running
                ),
                "the steady state",
            )
            await asyncio.sleep(10)
            steady_from = time.monotonic()
            busy_lines = len(manager.log.read_text(errors="replace").splitlines())
            before = (await scrape.get("/metrics")).text
            cpu_before = cpu_seconds(manager.pid)
            last_rounds: list[float] = []
            while time.monotonic() - steady_from < args.steady:
                await asyncio.sleep(0.25)
                sample = metric((await scrape.get("/metrics")).text, "koordpy_migration_last_round_seconds")
                if sample is not None:
                    last_rounds.append(sample)
            steady_to = time.monotonic()
            after = (await scrape.get("/metrics")).text
            cpu_after = cpu_seconds(manager.pid)
            lines_after = len(manager.log.read_text(errors="replace").splitlines())
            rss = rss_mib(manager.pid)
            # a new job on a node where nothing migrates: how long until it is done
            async with target.client() as admin:
                fresh = pod("fresh", "n-free", hold=False)
                assert (await admin.post("/api/v1/namespaces/shop/pods", json=fresh)).status_code == 201
                created = time.monotonic()
                body = job("fresh", "fresh", created=time.time())
                body["metadata"].pop("creationTimestamp")
                assert (await admin.post(PMJS, json=body)).status_code == 201
                while True:
                    found = (await admin.get(f"{PMJS}/fresh")).json()
                    if (found.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                        break
                    if time.monotonic() - created > 120:
                        raise SystemExit("the new job did not finish within 120 s")
                    await asyncio.sleep(0.1)
                new_job_seconds = time.monotonic() - created
                new_job_phase = found["status"]["phase"]
        polling.cancel()
        polling_control.cancel()
        minutes = (steady_to - steady_from) / 60
        busy_minutes = (steady_from - busy_from) / 60

        def delta(name: str, a: str, b: str) -> float:
            return (metric(b, name) or 0) - (metric(a, name) or 0)

        rounds = delta("koordpy_migration_round_seconds_count", before, after)
        arb_count = delta("koordpy_migration_arbitration_seconds_count", before, after)
        busy_rounds = delta("koordpy_migration_round_seconds_count", first, before)
        result = {
            "jobs": args.jobs,
            "mix": mix,
            "nodes": NODES,
            "api_server": target.name,
            "seed_seconds": round(seed_seconds, 1),
            "load_average_at_start": load_at_start,
            "load_average_at_end": os.getloadavg(),
            "cpus": os.cpu_count(),
            "startup": {
                "seconds": round(busy_from - started, 1),
                "manager_cpu_seconds": round(startup_cpu, 1),
                "health": percentiles(poller.between(started, busy_from)),
                "health_of_a_bare_server": percentiles(baseline.between(started, busy_from)),
            },
            "busy": {
                "what": "missing-pod jobs failed, 100 evictions at evictQPS, every waiting job's wait named",
                "seconds": round(steady_from - busy_from, 1),
                "rounds": int(busy_rounds),
                "round_mean_ms": _ms(delta("koordpy_migration_round_seconds_sum", first, before) / busy_rounds)
                if busy_rounds
                else None,
                "health": percentiles(poller.between(busy_from, steady_from)),
                "health_of_a_bare_server": percentiles(baseline.between(busy_from, steady_from)),
                "log_lines_per_minute": round(busy_lines / busy_minutes, 1) if busy_minutes else None,
            },
            "steady": {
                "what": "nothing changes: every round arbitrates the waiting jobs again",
                "seconds": round(steady_to - steady_from, 1),
                "rounds": int(rounds),
                "rounds_per_second": round(rounds / (steady_to - steady_from), 2),
                "round_mean_ms": _ms(delta("koordpy_migration_round_seconds_sum", before, after) / rounds)
                if rounds
                else None,
                "round_p50_bucket_ms": _ms(
                    bucket_quantile(
                        buckets(before, "koordpy_migration_round_seconds"),
                        buckets(after, "koordpy_migration_round_seconds"),
                        0.5,
                    )
                ),
                "round_p99_bucket_ms": _ms(
                    bucket_quantile(
                        buckets(before, "koordpy_migration_round_seconds"),
                        buckets(after, "koordpy_migration_round_seconds"),
                        0.99,
                    )
                ),
                "round_max_sampled_ms": round(max(last_rounds) * 1000, 1) if last_rounds else None,
                "arbitration_mean_ms": _ms(
                    delta("koordpy_migration_arbitration_seconds_sum", before, after) / arb_count
                )
                if arb_count
                else None,
                "health": percentiles(poller.between(steady_from, steady_to)),
                "health_of_a_bare_server": percentiles(baseline.between(steady_from, steady_to)),
                "log_lines_per_minute": round((lines_after - busy_lines) / minutes, 1),
                "manager_cpu_share": round((cpu_after - cpu_before) / (steady_to - steady_from), 3),
                "manager_rss_mib": round(rss, 1),
            },
            "new_job": {"seconds_to_finish": round(new_job_seconds, 2), "phase": new_job_phase},
        }
        return result
    finally:
        for proc in reversed(procs):
            proc.stop()
        target.stop()


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--steady", type=float, default=60.0, help="seconds of steady state measured")
    parser.add_argument("--startup-timeout", type=float, default=600.0)
    parser.add_argument("--real", action="store_true", help="a real control plane instead of the emulator")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.out is None:
        args.out = ROOT / "bench" / "results" / ("manager_jobs_real.json" if args.real else "manager_jobs.json")
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=2)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
