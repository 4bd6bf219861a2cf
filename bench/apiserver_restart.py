"""kube-apiserver and etcd restarted under running schedulers (not a test): how long after the API server is
ready again the last of 20 pods is bound, for the koordpy profile and the stock profile side by side.

A real control plane (``koordpy_testkit.controlplane``, Kubernetes v1.37.2 built by ``tools/build.sh``) with
four kwok nodes and the stock ``default-scheduler``; the chart installed by the real helm; ``koordpy
extender`` on the chart's scheduler ServiceAccount token with the chart's configuration, and a second
kube-scheduler (the same binary) with the chart's KubeSchedulerConfiguration in front of it. Both
kube-schedulers run without leader election (the stock one is started so; with it, a kube-scheduler exits
when it cannot renew its Lease for 10 s and its kubelet restarts it, which this bench would then measure).

Each run: SIGKILL kube-apiserver and etcd, wait ``--outage`` seconds (20), start them again on the same data
(same ports, same etcd directory) and, ``--delay`` seconds after ``/readyz`` first answers 200 (0: at
once), create 20 pods of each profile in a namespace of its own, made before the outage (the order of the
two profiles alternates between runs). The time of each profile is from the API server's readiness to the last of its 20
bindings, read from the API server's audit log (the request's receive time). Beside it: when the
extender's ``/readyz`` (503 while its watches fail) answered 200 again, koordpy's own part of the wait,
and when each kube-scheduler's Pod informer was populated again (its log's ``Caches populated`` line for
``*v1.Pod``): two kube-scheduler processes of the same binary back off independently (client-go's
reflector: 0.8 s doubling to 30 s, with jitter), so their raw times differ by tens of seconds either way.
Each profile's time after its own kube-scheduler could see pods again is what the profile adds; the two
are compared too. The processes are never restarted between runs.

Run: ``.venv/bin/python bench/apiserver_restart.py [--runs 5] [--outage 20] [--delay 0]``. Prints and writes
``bench/results/apiserver_restart.json`` (a run with another ``--delay`` is kept beside it). About two
minutes per run.

Not guaranteed: stable figures on a shared machine (the load average is recorded with them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from cluster_kit import Components, Kube, Release  # noqa: E402

from koordpy_testkit.controlplane import ControlPlane, fake_node  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "apiserver_restart.json"
PODS = 20
PROFILES = {"koordpy": "koordpy-scheduler", "stock": "default-scheduler"}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pod(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"bench": "restart"},
            "containers": [
                {
                    "name": "c",
                    "image": "registry.invalid/x",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


def create(client: httpx.Client, path: str, body: dict[str, Any]) -> None:
    """POST until the API server takes it: a server just back may refuse a request while its caches fill."""
    while True:
        try:
            resp = client.post(path, json=body)
        except httpx.HTTPError:
            time.sleep(0.05)
            continue
        if resp.status_code in (200, 201, 409):
            return
        time.sleep(0.05)


def bindings(plane: ControlPlane, namespace: str) -> dict[str, float]:
    """Pod name -> receive time (epoch seconds) of its successful binding, from the audit log."""
    out: dict[str, float] = {}
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        if (
            ref.get("subresource") == "binding"
            and ref.get("namespace") == namespace
            and event.get("verb") == "create"
            and (event.get("responseStatus") or {}).get("code") == 201
        ):
            stamp = dt.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
            out[ref["name"]] = stamp.timestamp()
    return out


def pods_informer_back(log: Path, after: float) -> float | None:
    """When the kube-scheduler writing ``log`` had its Pod informer populated again after ``after`` (epoch
    seconds): client-go logs ``Caches populated`` with ``type="*v1.Pod"`` once a relist of pods succeeded.
    Before that, that kube-scheduler cannot see a new pod, whichever profile it runs."""
    year = dt.datetime.now(dt.UTC).year
    for line in log.read_text(errors="replace").splitlines():
        if "Caches populated" not in line or 'type="*v1.Pod"' not in line:
            continue
        head = line.split()  # I1206 23:26:21.948999 ...
        stamp = dt.datetime.strptime(f"{year}{head[0][1:]} {head[1]}", "%Y%m%d %H:%M:%S.%f").replace(tzinfo=dt.UTC)
        if stamp.timestamp() > after:
            return stamp.timestamp()
    return None


def watch_ready(url: str, out: list[float]) -> None:
    """Wait until the extender's ``/readyz`` has failed and then answers 200 again; that moment into ``out``."""
    failed = False
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            ok = httpx.get(url, timeout=5.0).status_code == 200
        except httpx.HTTPError:
            ok = False
        if not ok:
            failed = True
        elif failed:
            out.append(time.time())
            return
        time.sleep(0.05)


def one_run(
    plane: ControlPlane,
    client: httpx.Client,
    index: int,
    outage: float,
    delay: float,
    extender_url: str,
    scheduler_logs: dict[str, Path],
) -> dict[str, Any]:
    order = list(PROFILES) if index % 2 == 0 else list(reversed(PROFILES))
    namespaces = {name: f"r{index}-{name}" for name in order}
    # the namespaces exist before the outage: a pod in a new one waits for its default ServiceAccount,
    # which kube-controller-manager creates once it has reconnected (that would be measured instead)
    for name in order:
        create(
            client,
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespaces[name]}},
        )
    for name in order:
        while client.get(f"/api/v1/namespaces/{namespaces[name]}/serviceaccounts/default").status_code != 200:
            time.sleep(0.1)
    plane.kill_apiserver_and_etcd()
    time.sleep(outage)
    extender_ready: list[float] = []
    watcher = threading.Thread(target=watch_ready, args=(extender_url, extender_ready), daemon=True)
    watcher.start()  # the extender answers /readyz 503 while its watches fail
    plane.restart_apiserver_and_etcd()
    ready = time.time()
    log(f"run {index}: the API server is ready")
    if delay:
        time.sleep(delay)
    order = list(PROFILES) if index % 2 == 0 else list(reversed(PROFILES))
    namespaces = {name: f"r{index}-{name}" for name in order}
    for name in order:
        create(
            client,
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespaces[name]}},
        )
    for i in range(PODS):
        for name in order:
            create(client, f"/api/v1/namespaces/{namespaces[name]}/pods", pod(f"p{i}", PROFILES[name]))
    created = time.time()
    watcher.join()
    result: dict[str, Any] = {
        "run": index,
        "order": order,
        "created_all_after_s": round(created - ready, 3),
        "extender_ready_after_s": round(extender_ready[0] - ready, 3) if extender_ready else None,
    }
    deadline = time.monotonic() + 600
    for name in order:
        while True:
            found = bindings(plane, namespaces[name])
            if len(found) == PODS or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        result[name] = round(max(found.values()) - ready, 3) if len(found) == PODS else None
        result[f"{name}_bound"] = len(found)
        back = pods_informer_back(scheduler_logs[name], ready)
        result[f"{name}_kube_scheduler_pods_back_s"] = round(back - ready, 3) if back is not None else None
        if back is not None and result[name] is not None:
            # what the profile took once its own kube-scheduler could see pods again (or once they existed)
            result[f"{name}_after_its_kube_scheduler_s"] = round(result[name] - (max(back, created) - ready), 3)
    if result["koordpy"] is not None and result["stock"] is not None:
        result["koordpy_minus_stock_s"] = round(result["koordpy"] - result["stock"], 3)
    if "koordpy_after_its_kube_scheduler_s" in result and "stock_after_its_kube_scheduler_s" in result:
        result["koordpy_minus_stock_after_kube_scheduler_s"] = round(
            result["koordpy_after_its_kube_scheduler_s"] - result["stock_after_its_kube_scheduler_s"], 3
        )
    log(f"run {index}: {result}")
    for name in order:
        client.delete(f"/api/v1/namespaces/{namespaces[name]}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--outage", type=float, default=20.0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds after readiness before the pods are created")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the control plane on the way out
    load_start = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="apiserver-restart-"))
    plane = ControlPlane(workdir=workdir / "cp", default_scheduler_args=("--v=2",))  # as the koordpy one
    plane.start()
    runs: list[dict[str, Any]] = []
    try:
        with plane.client(timeout=30.0) as client:
            kube = Kube(client)
            for i in range(4):
                create(client, "/api/v1/nodes", fake_node(f"node-{i}", labels={"bench": "restart"}))
            release = Release(plane, kube)
            release.install()
            components = Components(plane, release, workdir)
            try:
                components.start_extender()
                config = components.kube_scheduler_config()
                config["leaderElection"] = {"leaderElect": False}  # as the stock one (see the module docstring)
                components.start_scheduler(config)
                processes = list(components.procs)
                for index in range(args.runs):
                    ready_url = components.extender_base + "/readyz"
                    assert components.scheduler_proc is not None
                    logs = {"koordpy": components.scheduler_proc.log, "stock": plane.logs()["default-scheduler"]}
                    runs.append(one_run(plane, client, index, args.outage, args.delay, ready_url, logs))
                restarted = [p.name for p in processes if not p.alive() or p.starts != 1]
                assert not restarted, f"restarted or dead: {restarted}"
            finally:
                components.close()
    finally:
        plane.stop()
    differences = [r["koordpy_minus_stock_s"] for r in runs if "koordpy_minus_stock_s" in r]
    added = [
        r["koordpy_minus_stock_after_kube_scheduler_s"]
        for r in runs
        if "koordpy_minus_stock_after_kube_scheduler_s" in r
    ]
    summary = {
        "runs": len(runs),
        "extender_ready_after_s": [r["extender_ready_after_s"] for r in runs],
        "koordpy_kube_scheduler_pods_back_s": [r.get("koordpy_kube_scheduler_pods_back_s") for r in runs],
        "stock_kube_scheduler_pods_back_s": [r.get("stock_kube_scheduler_pods_back_s") for r in runs],
        "koordpy_after_its_kube_scheduler_s": [r.get("koordpy_after_its_kube_scheduler_s") for r in runs],
        "stock_after_its_kube_scheduler_s": [r.get("stock_after_its_kube_scheduler_s") for r in runs],
        "koordpy_minus_stock_after_kube_scheduler_max_s": max(added) if added else None,
        "koordpy_s": [r["koordpy"] for r in runs],
        "stock_s": [r["stock"] for r in runs],
        "koordpy_minus_stock_max_s": max(differences) if differences else None,
        "koordpy_never_later_by_more_than_2s": bool(differences) and max(differences) <= 2.0,
    }
    key = f"delay_{args.delay:g}s"
    existing: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    existing[key] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["bench/apiserver_restart.py", *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "outage_s": args.outage,
        "pods_per_profile": PODS,
        "summary": summary,
        "runs": runs,
    }
    args.out.write_text(json.dumps(existing, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
