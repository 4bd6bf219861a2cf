"""Gang bench on the real control plane (not a test): late members, the options for waking them, large gangs.

A real control plane (``koordpy_testkit.controlplane``: etcd, kube-apiserver with RBAC and an audit log,
kube-controller-manager, kwok; Kubernetes v1.37.2 built by ``tools/build.sh``), the chart installed by the
real helm, the extender as a host process on the chart's scheduler ServiceAccount token, and kube-scheduler
v1.37.2 with the chart's KubeSchedulerConfiguration. Nodes are kwok nodes with a NodeMetric (usage 5 %):
4 of 16 cpu (pool ``small``) for the small gangs, 8 of 64 cpu and 500 pods (pool ``big``) for ``big``.

Scenarios (``--scenarios``, comma-separated):

* ``late``: PodGroup minMember 2, member a, b created 2 s later (a is refused and parked by then);
  seconds from b's creation to both bound, ``--samples`` times, with the extender's requeue (the default:
  one update of its requeue signal, a CSIStorageCapacity);
* ``podpatch``: ``late`` with the requeue written as a patch of each parked member's annotation instead (the
  other way to make kube-scheduler retry a pod; this variant runs the extender on an admin token, the
  chart's role does not allow it), the samples interleaved with ``late``'s in the same run; with ``big``,
  the big gang once more that way after the signal's;
* ``hold``: the same with the option of not refusing at ``/filter`` and holding at ``/bind`` only (the
  extender run with its quorum test disabled, for this measurement only), plus what it costs: a gang of 4
  whose fourth member never comes holds three members' cpu; seconds until a plain pod that needs that
  room binds (gang wait time 30 s), against the same with the requeue;
* ``baseline``: ``late`` with ``gang.requeueQPS: 0`` (kube-scheduler's own retry only; about 5.5 minutes);
* ``native``: ``late`` for Kubernetes' own PodGroup (``scheduling.k8s.io/v1beta1``, gang minCount 2, members
  joined by ``spec.schedulingGroup``): the plane then runs with the ``GenericWorkload`` gate on every
  component (``late`` in the same run too), so kube-scheduler's ``GangScheduling`` holds a at its PreEnqueue
  and b's creation moves it; the extender refuses nothing and binds the two together;
* ``big``: a gang of ``--members`` (default 1,000) 100-millicpu members created by 8 threads as fast as the
  API server takes them, minMember = all of them; from the last member's creation to all bound, and what
  it cost: requeue writes (of the signal object; pod patches with ``podpatch``), kube-scheduler attempts
  (``scheduler_schedule_attempts_total``), PodScheduled writes by kube-scheduler and the peak requeue
  writes in any one second (from the audit log).

Run: ``.venv/bin/python bench/gang_real_scheduler.py [--scenarios late,podpatch,hold,big,native] [--members N]``. Prints and
adds this run to ``bench/results/gang_real_scheduler.json`` (a run of the same scenarios replaces the earlier
one). Several minutes (``baseline`` adds 5.5); the first run
on a machine builds the Kubernetes binaries.

Not guaranteed: stable figures on a shared machine (the load average is recorded with them).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from koordpy.model.durations import format_rfc3339
from koordpy_testkit.controlplane import GENERIC_WORKLOAD, ControlPlane, fake_node
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "gang_real_scheduler.json"
BIN = Path(sys.executable).parent
NS = "koordpy-system"
LABEL = "pod-group.scheduling.sigs.k8s.io"
GANG = "gang.scheduling.koordinator.sh/"


def serve_extender(config: str, kubeconfig: str, variant: str) -> None:
    """The extender as ``koordpy extender`` runs it; ``hold`` turns its quorum test off (every member
    passes ``/filter`` and is held at ``/bind``), the option measured against the requeue; ``podpatch``
    asks for each parked member with a patch of its own annotation instead of one write of the signal."""
    import asyncio

    import uvloop

    from koordpy.config import SchedulerConfiguration, validate
    from koordpy.kube.client import ApiClient
    from koordpy.kube.connection import load_connection
    from koordpy.scheduler.extender.server import build_extender, build_servers, listener_limits, serve_all
    from koordpy.scheduler.plugins.gang import Admission

    cfg = validate(SchedulerConfiguration, yaml.safe_load(Path(config).read_text()))
    client = ApiClient(load_connection(kubeconfig=kubeconfig))
    extender = build_extender(cfg, client)
    gangs = extender.gangs
    assert gangs is not None
    if variant == "hold":

        def admit_everyone(pod: Any) -> Admission:
            gangs.cache.observe(pod)
            return Admission(True, "quorum test off (bench)", "", "quorum test off (bench)")

        gangs.admit = admit_everyone  # type: ignore[method-assign]
    if variant == "podpatch":
        from koordpy.kube.resources import PODS
        from koordpy.scheduler.extender.requeue import REQUEUE_ANNOTATION
        from koordpy.scheduler.plugins.gang import Wakeup

        requeuer = gangs.requeuer

        async def patch_each(batch: list[Wakeup]) -> str:
            stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            body = {"metadata": {"annotations": {REQUEUE_ANNOTATION: stamp}}}
            for wakeup in batch:
                namespace, _, name = wakeup.pod.partition("/")
                await client.patch(PODS, name, body, namespace=namespace)
            requeuer.writes += 1
            return "patched"

        requeuer._write = patch_each  # type: ignore[method-assign]
    servers = build_servers(
        extender,
        cfg.extender.host,
        cfg.extender.port,
        metrics_host=cfg.extender.metrics_host,
        metrics_port=cfg.extender.metrics_port,
        limits=listener_limits(cfg),
    )
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve_all(servers))


class Bench:
    def __init__(self, workdir: Path, *, generic_workload: bool = False) -> None:
        self.workdir = workdir
        gates: dict[str, Any] = GENERIC_WORKLOAD if generic_workload else {}
        self.plane = ControlPlane(workdir=workdir / "cp", default_scheduler=False, allow_privileged=True, **gates)
        self.procs: list[Proc] = []
        self.api: httpx.Client | None = None
        self.extender_url = ""
        self.ops_url = ""
        self.scheduler: Proc | None = None
        self.namespace_seq = 0
        self.nodes: list[tuple[str, str]] = []
        self.stopped = threading.Event()

    def start(self) -> None:
        self.plane.start()
        self.api = self.plane.client(timeout=120.0)
        env = {**os.environ, "KUBECONFIG": str(self.plane.admin_kubeconfig)}
        subprocess.run(
            [str(BIN / "helm"), "install", "koordpy", str(ROOT / "charts/koordpy"), "-n", NS, "--create-namespace"],
            check=True,
            capture_output=True,
            env=env,
        )
        self.create_nodes()
        self.refresh_metrics()
        threading.Thread(target=self._keep_metrics_fresh, daemon=True).start()

    def refresh_metrics(self) -> None:
        """Each node's NodeMetric, updated now (koordlet or koordpy's agent would report every minute; a
        NodeMetric older than the load-aware expiry filters its node)."""
        now = format_rfc3339(time.time())
        for name, cpu in self.nodes:
            usage = {"cpu": f"{int(cpu) * 50}m", "memory": "4Gi"}
            status = {"updateTime": now, "nodeMetric": {"nodeUsage": {"resources": usage}}}
            with contextlib.suppress(httpx.HTTPError):
                self.client.patch(
                    f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{name}/status",
                    json={"status": status},
                    headers={"Content-Type": "application/merge-patch+json"},
                )

    def _keep_metrics_fresh(self) -> None:
        while not self.stopped.wait(30.0):
            self.refresh_metrics()

    def create_nodes(self) -> None:
        pools = [(f"small-{i}", "small", "16", "110") for i in range(4)] + [
            (f"big-{i}", "big", "64", "500") for i in range(8)
        ]
        for name, pool, cpu, pods in pools:
            self.post("/api/v1/nodes", fake_node(name, cpu=cpu, memory="256Gi", pods=pods, labels={"pool": pool}))
            self.post(
                "/apis/slo.koordinator.sh/v1alpha1/nodemetrics",
                {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name}},
            )
            self.nodes.append((name, cpu))

    @property
    def client(self) -> httpx.Client:
        assert self.api is not None
        return self.api

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.client.post(path, json=body)
        if resp.status_code not in (200, 201):
            raise RuntimeError(f"POST {path}: {resp.status_code} {resp.text[:300]}")
        result: dict[str, Any] = resp.json()
        return result

    def configmap(self) -> dict[str, str]:
        data: dict[str, str] = self.client.get(f"/api/v1/namespaces/{NS}/configmaps/koordpy-scheduler").json()["data"]
        return data

    def start_components(self, variant: str = "requeue", gang: dict[str, Any] | None = None) -> None:
        self.stop_components()
        data = self.configmap()
        config = yaml.safe_load(data["config.yaml"])
        port, ops = free_port(), free_port()
        config["extender"].update({"host": LOOPBACK, "port": port, "metricsHost": LOOPBACK, "metricsPort": ops})
        config["gang"] = {**(config.get("gang") or {}), **(gang or {})}
        path = self.workdir / f"extender-{variant}.yaml"
        path.write_text(yaml.safe_dump(config))
        token = self.plane.token(NS, "koordpy-scheduler")
        # podpatch writes on pods, which the chart's role no longer lets the extender do: an admin token
        kubeconfig = (
            self.plane.admin_kubeconfig
            if variant == "podpatch"
            else self.plane.kubeconfig(f"extender-{variant}", token)
        )
        proc = Proc(
            f"extender-{variant}",
            [sys.executable, __file__, "--serve-extender", str(path), str(kubeconfig), variant],
            self.workdir / f"extender-{variant}.log",
        ).start()
        self.procs.append(proc)
        self.extender_url, self.ops_url = f"http://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{ops}"
        wait_http(self.extender_url + "/readyz", 120, proc)
        ks = yaml.safe_load(data["kube-scheduler.yaml"])
        ks["leaderElection"] = {"leaderElect": False}
        for entry in ks["extenders"]:
            entry["urlPrefix"] = self.extender_url
        self.scheduler = self.plane.start_scheduler(f"koordpy-scheduler-{variant}-{len(self.procs)}", ks, token)
        self.procs.append(self.scheduler)

    def stop_components(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs = []

    def namespace(self) -> str:
        self.namespace_seq += 1
        name = f"b{self.namespace_seq}"
        self.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    def podgroup(self, ns: str, name: str, min_member: int, timeout: int = 600) -> None:
        self.post(
            f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{ns}/podgroups",
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout},
            },
        )

    def native_podgroup(self, ns: str, name: str, min_count: int) -> None:
        self.post(
            f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
            },
        )

    def pod(
        self,
        ns: str,
        name: str,
        group: str | None = None,
        cpu: str = "100m",
        client: Any = None,
        pool: str = "small",
        native_group: str | None = None,
    ) -> None:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {LABEL: group} if group else {}},
            "spec": {
                "schedulerName": "koordpy-scheduler",
                "terminationGracePeriodSeconds": 0,
                "nodeSelector": {"pool": pool},
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
            },
        }
        if native_group is not None:
            body["spec"]["schedulingGroup"] = {"podGroupName": native_group}
        resp = (client or self.client).post(f"/api/v1/namespaces/{ns}/pods", json=body)
        if resp.status_code != 201:
            raise RuntimeError(f"pod {name}: {resp.status_code} {resp.text[:300]}")

    def unbound(self, ns: str) -> set[str] | None:
        """The namespace's pods without a node (a field selector: cheap once they are all bound); None when
        the API server did not answer the list (an overloaded one answers 429 or times out)."""
        try:
            resp = self.client.get(f"/api/v1/namespaces/{ns}/pods", params={"fieldSelector": "spec.nodeName="})
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        return {p["metadata"]["name"] for p in resp.json()["items"]}

    def wait_bound(self, ns: str, names: set[str], timeout: float) -> float | None:
        """When every pod of ``names`` is bound; polled every 20 ms for a few pods, every second for many
        (listing a thousand pods 50 times a second would load the API server being measured)."""
        interval = 0.02 if len(names) <= 20 else 1.0
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            unbound = self.unbound(ns)
            if unbound is not None and not names & unbound:
                return time.monotonic()
            time.sleep(interval)
        return None

    def scheduler_attempts(self) -> float:
        assert self.scheduler is not None
        for _ in range(5):  # kube-scheduler's delegated authentication can time out on a loaded machine (401)
            try:
                text = self.plane.metrics(self.scheduler.name)
                break
            except httpx.HTTPStatusError:
                time.sleep(2.0)
        else:
            text = self.plane.metrics(self.scheduler.name)
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("scheduler_schedule_attempts_total{")
        )

    def audit(self, ns: str, since: float) -> dict[str, Any]:
        """Requeue writes since ``since`` (epoch seconds): patches of the signal object, or of ``ns``'s pods
        themselves (``podpatch``); and kube-scheduler's PodScheduled writes in ``ns``."""
        writes: list[float] = []
        status_writes = 0
        for event in self.plane.audit_events():
            ref = event.get("objectRef") or {}
            stamp = dt.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
            if stamp < since or event.get("verb") != "patch":
                continue
            if ref.get("resource") == "csistoragecapacities" or (
                ref.get("namespace") == ns and ref.get("resource") == "pods" and not ref.get("subresource")
            ):
                writes.append(stamp)
            elif (
                ref.get("namespace") == ns
                and ref.get("subresource") == "status"
                and "koordpy-scheduler" in event["user"]["username"]
            ):
                status_writes += 1
        per_second = collections.Counter(int(t) for t in writes)
        return {
            "requeueWrites": len(writes),
            "peakRequeueWritesPerSecond": max(per_second.values()) if per_second else 0,
            "podScheduledWrites": status_writes,
        }

    def close(self) -> None:
        self.stopped.set()
        self.stop_components()
        if self.api is not None:
            self.api.close()
        self.plane.stop()


def late(bench: Bench, samples: int) -> list[float]:
    out: list[float] = []
    for _ in range(samples):
        ns = bench.namespace()
        bench.podgroup(ns, "late", 2)
        bench.pod(ns, "a", "late")
        time.sleep(2.0)
        t_b = time.monotonic()
        bench.pod(ns, "b", "late")
        done = bench.wait_bound(ns, {"a", "b"}, 420)
        out.append(round(done - t_b, 3) if done is not None else float("nan"))
    return out


def native_late(bench: Bench, samples: int) -> list[float]:
    """``late`` for a native PodGroup (gang minCount 2)."""
    out: list[float] = []
    for _ in range(samples):
        ns = bench.namespace()
        bench.native_podgroup(ns, "late", 2)
        bench.pod(ns, "a", native_group="late")
        time.sleep(2.0)
        t_b = time.monotonic()
        bench.pod(ns, "b", native_group="late")
        done = bench.wait_bound(ns, {"a", "b"}, 420)
        out.append(round(done - t_b, 3) if done is not None else float("nan"))
    return out


def capacity(bench: Bench) -> float | None:
    """A gang of 4 (wait 30 s) whose 4th member never comes: 3 members of 10 cpu, one per 16-cpu node (a
    second would take the node's estimate over the 65 % load threshold). 3 s later, 4 plain pods of 10 cpu,
    which need the 4 nodes: seconds from their creation until all 4 are bound."""
    ns = bench.namespace()
    bench.podgroup(ns, "stuck", 4, timeout=30)
    for i in range(3):
        bench.pod(ns, f"stuck-{i}", "stuck", cpu="10")
    time.sleep(3.0)
    t0 = time.monotonic()
    for i in range(4):
        bench.pod(ns, f"plain-{i}", None, cpu="10")
    done = bench.wait_bound(ns, {f"plain-{i}" for i in range(4)}, 300)
    return None if done is None else round(done - t0, 3)


def big(bench: Bench, members: int) -> dict[str, Any]:
    ns = bench.namespace()
    since = time.time()
    bench.podgroup(ns, "big", members)
    attempts0 = bench.scheduler_attempts()
    names = [f"w{i:05d}" for i in range(members)]
    chunks = [names[i::8] for i in range(8)]
    created_at: list[float] = []

    def create(chunk: list[str]) -> None:
        with bench.plane.client() as client:
            for name in chunk:
                bench.pod(ns, name, "big", client=client, pool="big")
                created_at.append(time.monotonic())

    t0 = time.monotonic()
    threads = [threading.Thread(target=create, args=(c,)) for c in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    last = max(created_at)
    done = bench.wait_bound(ns, set(names), 900)
    return {
        "members": members,
        "creationSeconds": round(last - t0, 3),
        "lastMemberToAllBoundSeconds": None if done is None else round(done - last, 3),
        "schedulerAttempts": bench.scheduler_attempts() - attempts0,
        **bench.audit(ns, since),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default="late,hold,big")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--serve-extender", nargs=3, metavar=("CONFIG", "KUBECONFIG", "VARIANT"))
    args = parser.parse_args()
    if args.serve_extender:
        serve_extender(*args.serve_extender)
        return 0
    scenarios = args.scenarios.split(",")
    results: dict[str, Any] = {
        "bench": "gang_real_scheduler",
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "loadavgStart": os.getloadavg()},
        "kubeScheduler": "v1.37.2 (tools/build.sh)",
        "genericWorkload": "native" in scenarios,
    }
    bench = Bench(Path(tempfile.mkdtemp(prefix="koordpy-gang-bench-")), generic_workload="native" in scenarios)
    try:
        bench.start()
        if "late" in scenarios or "big" in scenarios or "native" in scenarios:
            bench.start_components("requeue")
        if "late" in scenarios and "podpatch" in scenarios:
            # interleaved, one sample of each in turn: the same load for both
            signal: list[float] = []
            patched: list[float] = []
            for _ in range(args.samples):
                bench.start_components("requeue")
                signal += late(bench, 1)
                bench.start_components("podpatch")
                patched += late(bench, 1)
            results["late"] = {
                "requeue": {"seconds": signal, "median": statistics.median(signal)},
                "podpatch": {"seconds": patched, "median": statistics.median(patched)},
                "medianRatioSignalToPodPatch": round(statistics.median(signal) / statistics.median(patched), 3),
            }
            print(f"late member, requeue signal: {signal}; pod patch: {patched}", flush=True)
            bench.start_components("requeue")
        elif "late" in scenarios:
            samples = late(bench, args.samples)
            results["late"] = {"requeue": {"seconds": samples, "median": statistics.median(samples)}}
            print(f"late member, requeue: {samples}", flush=True)
        if "native" in scenarios:
            samples = native_late(bench, args.samples)
            results["native"] = {"lateSeconds": samples, "lateMedian": statistics.median(samples)}
            print(f"late member, native PodGroup: {samples}", flush=True)
        if "big" in scenarios:
            results["big"] = big(bench, args.members)
            print(f"big gang: {results['big']}", flush=True)
            if "podpatch" in scenarios:  # the same gang again, asked for by pod patches, in the same run
                bench.start_components("podpatch")
                results["bigPodpatch"] = big(bench, args.members)
                print(f"big gang, pod patches: {results['bigPodpatch']}", flush=True)
                bench.start_components("requeue")
        if "hold" in scenarios:
            bench.start_components("requeue", gang={"defaultTimeout": "30s"})
            requeue_capacity = capacity(bench)
            bench.start_components("hold", gang={"defaultTimeout": "30s"})
            hold_late = late(bench, args.samples)
            hold_capacity = capacity(bench)
            results["hold"] = {
                "lateSeconds": hold_late,
                "lateMedian": statistics.median(hold_late),
                "plainPodsBoundSeconds": {"holdAtBind": hold_capacity, "requeue": requeue_capacity},
            }
            print(f"hold at bind: late {hold_late}; plain pods bound after {hold_capacity} s", flush=True)
            print(f"requeue: plain pods bound after {requeue_capacity} s", flush=True)
        if "baseline" in scenarios:
            bench.start_components("off", gang={"requeueQPS": 0})
            samples = late(bench, 1)
            results["late"] = {**results.get("late", {}), "off": {"seconds": samples}}
            print(f"late member, requeue off: {samples}", flush=True)
    finally:
        results["machine"]["loadavgEnd"] = os.getloadavg()
        bench.close()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if RESULTS.exists():  # the scenarios not run this time keep their last figures (with their run's machine)
        previous = json.loads(RESULTS.read_text())
        runs = previous.get("runs", [])
        runs = [r for r in runs if not set(r.get("scenarios", [])) <= set(scenarios)]
    else:
        runs = []
    results["scenarios"] = scenarios
    RESULTS.write_text(json.dumps({"bench": "gang_real_scheduler", "runs": [*runs, results]}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
