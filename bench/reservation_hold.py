"""A starving job against a second scheduler, on a real control plane (benchmark, not a test).

The story of a Reservation that must hold against every scheduler: ``--nodes`` kwok nodes of
``--node-cpu`` cpu; the stock default scheduler places a stream of small pods (1 cpu, lifetimes drawn
between ``--life-min`` and ``--life-max`` seconds, deleted by this script when their time is up, arriving
faster than they leave so a few are always pending); after ``--big-after`` seconds one big pod (the
whole node, priority 1000, ``schedulerName: koordpy-scheduler``) arrives. koordpy runs as it ships:
kube-scheduler with the koordpy profile and its extender (filter, prioritize, bind), and the manager
with starving-job reservations on (``starvingJobTimeThreshold`` 1 s, ``intervalSeconds`` 1).

Measured, per ``--mode``:

* whether and when the big pod bound (seconds after it was created);
* preemptions, read from each kube-scheduler's own ``/metrics``: attempts
  (``scheduler_preemption_attempts_total``: every PostFilter run, including those where no candidate
  was left), preemptions carried out and their victims (``scheduler_preemption_victims`` count and
  sum), and the pods each scheduler's identity deleted (the audit log);
* small pods bound by the default scheduler onto the node the Reservation holds while it holds;
* small pods created, bound, and their pending time (p50, p95, max).

Modes (every process started afresh per mode, the chart rendered with the mode's values):

* ``baseline``: ``scheduler.extender.verbs.preempt=""`` (kube-scheduler preempts without asking the
  extender) and no taint: Reservations hold against the koordpy profile only;
* ``preempt``: the chart's defaults: the extender's preempt verb (owners preempt only on their reserved
  node; a pod that lost a node to another scheduler preempts nowhere for ``preemptionBackoffSeconds``),
  no taint;
* ``taint``: the preempt verb and ``manager.config.reservation.taintNodes=true``: the held node is tainted
  ``koordpy.io/reserved:NoSchedule``, the owner tolerates it.

Run: ``.venv/bin/python bench/reservation_hold.py [--mode baseline preempt taint] [--repeat 3]``
(about 1 to 2.5 minutes per run). Prints one JSON line per run and a table, and writes
``bench/results/reservation_hold.json``. Needs the pinned Kubernetes binaries
(``tools/build.sh``; built once per machine) and helm at ``.venv/bin/helm``.

Not guaranteed: stable figures on a shared machine (the small pods' arrivals are seeded, the
schedulers' timing is not). The components run as host processes on ServiceAccount tokens bound to
cluster-admin, not on the chart's RBAC (the real-cluster test tier checks that).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from koordpy_testkit.controlplane import ControlPlane, fake_node
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "reservation_hold.json"
HELM = Path(sys.executable).parent / "helm"
KOORDPY = Path(sys.executable).parent / "koordpy"
NAMESPACE = "story"
PROFILE = "koordpy-scheduler"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
Raw = dict[str, Any]
MODES: dict[str, tuple[str, ...]] = {
    "baseline": ("--set", "scheduler.extender.verbs.preempt="),
    "preempt": (),
    "taint": ("--set", "manager.config.reservation.taintNodes=true"),
}
GRACE = 3
"""Small pods' terminationGracePeriodSeconds: a preemption victim takes this long to go (kwok honours it)."""


def rendered_chart(*extra: str) -> list[Raw]:
    out = subprocess.run(
        [str(HELM), "template", "koordpy", str(ROOT / "charts" / "koordpy"), "--namespace", "koordpy-system", *extra],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return [d for d in yaml.safe_load_all(out.stdout) if isinstance(d, dict)]


def configmap(docs: list[Raw], suffix: str) -> dict[str, str]:
    for doc in docs:
        if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"].endswith(suffix):
            data: dict[str, str] = doc["data"]
            return data
    raise LookupError(suffix)


def merge(base: Raw, override: Raw) -> Raw:
    out = dict(base)
    for key, value in override.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def admin_token(plane: ControlPlane, name: str) -> str:
    """A ServiceAccount ``kube-system/<name>`` bound to cluster-admin: its own identity in the audit log."""
    with plane.client() as api:
        api.post("/api/v1/namespaces/kube-system/serviceaccounts", json={"metadata": {"name": name}})
        binding = {
            "metadata": {"name": f"bench-{name}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}],
        }
        api.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=binding)
    return plane.token("kube-system", name)


def victims(plane: ControlPlane) -> dict[str, int]:
    """Pods deleted by each kube-scheduler (its preemption victims), from the audit log."""
    out = {"koordpy-scheduler": 0, "default-scheduler": 0}
    for event in plane.audit_events():
        user = event.get("user", {}).get("username", "")
        ref = event.get("objectRef") or {}
        if event.get("verb") == "delete" and ref.get("resource") == "pods" and not ref.get("subresource"):
            if user == "system:serviceaccount:kube-system:koordpy-scheduler":
                out["koordpy-scheduler"] += 1
            elif user == "system:kube-scheduler":
                out["default-scheduler"] += 1
    return out


@dataclass
class Story:
    plane: ControlPlane
    api: httpx.Client
    procs: list[Proc] = field(default_factory=list)
    scheduler_port: int = 0

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.api.close()
        self.plane.stop()


def start(workdir: Path, args: argparse.Namespace, mode: str, manager_overrides: Raw | None = None) -> Story:
    """The control plane, the CRDs, ``args.nodes`` kwok nodes, and koordpy (extender, its kube-scheduler,
    the manager with ``manager_overrides`` merged into its configuration) as ``mode`` renders it."""
    plane = ControlPlane(workdir=workdir).start()
    api = plane.client()
    story = Story(plane, api)
    docs = rendered_chart(*MODES[mode])
    for doc in docs:
        if doc.get("kind") == "CustomResourceDefinition":
            api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=doc).raise_for_status()
    for index in range(args.nodes):
        api.post(
            "/api/v1/nodes", json=fake_node(f"node-{index}", cpu=str(args.node_cpu), memory="64Gi")
        ).raise_for_status()
    api.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}).raise_for_status()
    for name, value in (("big", 1000), ("small", 0)):
        pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        api.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=pc).raise_for_status()
    plane.wait_for("CRDs established", lambda: api.get(RESERVATIONS).status_code == 200)
    plane.wait_for(
        "nodes Ready",
        lambda: (
            sum(
                1
                for n in api.get("/api/v1/nodes").json()["items"]
                if not any(t["key"].startswith("node.kubernetes.io/") for t in (n["spec"].get("taints") or []))
            )
            == args.nodes
        ),
    )
    kubeconfig = plane.kubeconfig("koordpy", admin_token(plane, "koordpy"))

    # the extender, as the chart configures it, on loopback
    ext_port, ops_port = free_port(), free_port()
    ext_config = merge(
        yaml.safe_load(configmap(docs, "-scheduler")["config.yaml"]),
        {"extender": {"host": LOOPBACK, "port": ext_port, "metricsHost": LOOPBACK, "metricsPort": ops_port}},
    )
    path = workdir / "extender.yaml"
    path.write_text(yaml.safe_dump(ext_config))
    ext = Proc(
        "extender",
        [str(KOORDPY), "extender", "--config", str(path), "--kubeconfig", str(kubeconfig)],
        workdir / "logs" / "extender.log",
    ).start()
    story.procs.append(ext)
    wait_http(f"http://{LOOPBACK}:{ext_port}/readyz", 120, ext)

    # kube-scheduler with the koordpy profile, the chart's configuration pointed at that extender
    ks = yaml.safe_load(configmap(docs, "-scheduler")["kube-scheduler.yaml"])
    ks["leaderElection"] = {"leaderElect": False}
    for entry in ks["extenders"]:
        entry["urlPrefix"] = f"http://{LOOPBACK}:{ext_port}"
    plane.start_scheduler(PROFILE, ks, admin_token(plane, "koordpy-scheduler"), user="koordpy-scheduler")

    # the manager with starving-job reservations
    manager = yaml.safe_load(configmap(docs, "-manager")["config.yaml"])
    health = free_port()
    reservation: Raw = {
        "enabled": True,
        "starvingJobTimeThreshold": 1,
        "intervalSeconds": 1,
        "reservedNodePercent": 100,
        "priorityThreshold": 1000,  # the API server gives every pod a priority: only the big one is a job
    }
    manager = merge(
        manager,
        {"health": {"host": LOOPBACK, "port": health}, "reservation": reservation, "nodeMetric": {"enabled": False}},
    )
    manager = merge(manager, manager_overrides or {})
    path = workdir / "manager.yaml"
    path.write_text(yaml.safe_dump(manager))
    mgr = Proc(
        "manager",
        [str(KOORDPY), "manager", "--config", str(path), "--kubeconfig", str(kubeconfig)],
        workdir / "logs" / "manager.log",
    ).start()
    story.procs.append(mgr)
    wait_http(f"http://{LOOPBACK}:{health}/healthz", 120, mgr)
    return story


def small_pod(name: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "small"}},
        "spec": {
            "priorityClassName": "small",
            "terminationGracePeriodSeconds": GRACE,
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
    }


def big_pod(cpu: int) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "big", "namespace": NAMESPACE, "labels": {"app": "big"}},
        "spec": {
            "schedulerName": PROFILE,
            "priorityClassName": "big",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}}}
            ],
        },
    }


METRIC = re.compile(r"^(?P<name>[a-z_:]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def scheduler_metrics(text: str) -> dict[str, float]:
    wanted = (
        "scheduler_preemption_attempts_total",
        "scheduler_preemption_victims_count",
        "scheduler_preemption_victims_sum",
    )
    out = {name: 0.0 for name in wanted}
    for line in text.splitlines():
        match = METRIC.match(line)
        if match and match["name"] in wanted:
            out[match["name"]] += float(match["value"])
    return out


def run(story: Story, args: argparse.Namespace, mode: str) -> Raw:
    api, plane = story.api, story.plane
    rng = random.Random(args.seed)
    pods_url = f"/api/v1/namespaces/{NAMESPACE}/pods"
    t0 = time.monotonic()
    created: dict[str, float] = {}
    deadline_of: dict[str, float] = {}
    bound_at: dict[str, float] = {}
    bound_node: dict[str, str] = {}
    next_arrival = t0
    index = 0
    big_created: float | None = None
    big_bound: float | None = None
    big_node = ""
    held: dict[str, float] = {}  # reservation name -> node while it held
    onto_held = 0
    seen_on_held: set[str] = set()
    while time.monotonic() - t0 < args.seconds:
        now = time.monotonic()
        while next_arrival <= now:
            name = f"small-{index}"
            index += 1
            api.post(pods_url, json=small_pod(name)).raise_for_status()
            created[name] = next_arrival
            deadline_of[name] = float("inf")
            next_arrival += rng.expovariate(args.rate)
        if big_created is None and now - t0 >= args.big_after:
            api.post(pods_url, json=big_pod(args.node_cpu)).raise_for_status()
            big_created = now
        items = api.get(pods_url).json()["items"]
        reservations = api.get(RESERVATIONS).json()["items"]
        nodes_held = {
            r["status"]["nodeName"]
            for r in reservations
            if r.get("status", {}).get("phase") in ("Available", "Waiting") and r["status"].get("nodeName")
        }
        for pod in items:
            name = pod["metadata"]["name"]
            node = pod["spec"].get("nodeName")
            if node and name not in bound_at:
                bound_at[name] = now
                bound_node[name] = node
                if name in deadline_of:
                    deadline_of[name] = now + rng.uniform(args.life_min, args.life_max)
                    if node in nodes_held and name not in seen_on_held:
                        seen_on_held.add(name)
                        onto_held += 1
                if name == "big":
                    big_bound, big_node = now, node
        for name, due in list(deadline_of.items()):
            if due <= now:
                with contextlib.suppress(httpx.HTTPError):
                    api.delete(f"{pods_url}/{name}", params={"gracePeriodSeconds": "0"})
                del deadline_of[name]
        for res in reservations:
            if res.get("status", {}).get("nodeName"):
                held.setdefault(res["metadata"]["name"], now - t0)
        if big_bound is not None and now - big_bound > 5:
            break
        time.sleep(0.2)
    deleted = victims(plane)
    ours = scheduler_metrics(plane.metrics(PROFILE))
    default = scheduler_metrics(plane.metrics("default-scheduler"))
    waits = [bound_at[n] - created[n] for n in created if n in bound_at]
    pending = [time.monotonic() - created[n] for n in created if n not in bound_at]
    all_waits = sorted(waits + pending)
    taints_seen = [
        t
        for n in api.get("/api/v1/nodes").json()["items"]
        for t in (n["spec"].get("taints") or [])
        if t["key"].startswith("koordpy.io/")
    ]
    return {
        "mode": mode,
        "bigBound": big_bound is not None,
        "bigBindSeconds": round(big_bound - big_created, 1)
        if big_bound is not None and big_created is not None
        else None,
        "bigNode": big_node,
        "preemptionAttemptsKoordpyProfile": ours["scheduler_preemption_attempts_total"],
        "preemptionsKoordpyProfile": ours["scheduler_preemption_victims_count"],
        "preemptionVictimsKoordpyProfile": ours["scheduler_preemption_victims_sum"],
        "preemptionAttemptsDefaultScheduler": default["scheduler_preemption_attempts_total"],
        "podsDeletedByKoordpyScheduler": deleted["koordpy-scheduler"],
        "podsDeletedByDefaultScheduler": deleted["default-scheduler"],
        "smallPodsCreated": len(created),
        "smallPodsBound": len(waits),
        "smallPodsBoundOntoHeldNode": onto_held,
        "smallPendingP50Seconds": round(statistics.median(all_waits), 1) if all_waits else 0.0,
        "smallPendingP95Seconds": round(all_waits[int(0.95 * (len(all_waits) - 1))], 1) if all_waits else 0.0,
        "smallPendingMaxSeconds": round(all_waits[-1], 1) if all_waits else 0.0,
        "reservations": held,
        "koordpyTaintsLeft": taints_seen,
        "elapsedSeconds": round(time.monotonic() - t0, 1),
    }


TABLE = (
    ("mode", "mode", "{}"),
    ("seed", "seed", "{}"),
    ("big bound after (s)", "bigBindSeconds", "{}"),
    ("preemption attempts", "preemptionAttemptsKoordpyProfile", "{:.0f}"),
    ("preemptions", "preemptionsKoordpyProfile", "{:.0f}"),
    ("victims", "preemptionVictimsKoordpyProfile", "{:.0f}"),
    ("small pods onto the held node", "smallPodsBoundOntoHeldNode", "{}"),
    ("small pending p95 (s)", "smallPendingP95Seconds", "{}"),
)


def table(results: list[Raw]) -> str:
    rows = [[title for title, _, _ in TABLE]]
    for result in results:
        rows.append(["never" if result[key] is None else fmt.format(result[key]) for _, key, fmt in TABLE])
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--node-cpu", type=int, default=4)
    parser.add_argument("--rate", type=float, default=4.0, help="small pods per second")
    parser.add_argument("--life-min", type=float, default=6.0)
    parser.add_argument("--life-max", type=float, default=12.0)
    parser.add_argument("--big-after", type=float, default=15.0)
    parser.add_argument("--seconds", type=float, default=120.0, help="each run's length at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode, seeds seed, seed+1, ...")
    parser.add_argument("--keep", action="store_true", help="keep the working directories")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    results = []
    for mode in args.mode:
        for seed in range(args.seed, args.seed + args.repeat):
            workdir = Path(tempfile.mkdtemp(prefix=f"koordpy-hold-{mode}-"))
            story = start(workdir, args, mode)
            try:
                result = run(story, argparse.Namespace(**{**vars(args), "seed": seed}), mode)
            finally:
                story.stop()
            result["seed"] = seed
            result["workdir"] = str(workdir) if args.keep else None
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
            results.append(result)
            print(json.dumps(result), flush=True)
    print(table(results))
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            json.dumps(
                {
                    "settings": {k: v for k, v in vars(args).items() if k not in ("keep", "no_save")},
                    "machine": platform.platform(),
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
