"""What the koordpy extender spends on pod watch events from a real API server (not a test), beside a bare
watcher that only receives and decodes them.

A real control plane (etcd, kube-apiserver, kube-controller-manager; no scheduler, no kwok) with the chart
installed by the real helm and 100 plain nodes with NodeMetrics, as in ``bench/scheduler_throughput.py``.
Three processes watch pods on the chart's scheduler ServiceAccount token: ``koordpy extender`` (the chart's
configuration), the no-op extender (it watches nothing: its CPU is the harness's noise floor) and a bare
watcher, this script run with ``--bare``: koordpy's ``ApiClient.watch`` on uvloop, decoding each event and
nothing else. Per round, ``--pods`` pods for no scheduler are created (each an ``ADDED`` event), bound by the
admin (a ``MODIFIED`` event each) and deleted with grace 0 (``MODIFIED`` and ``DELETED``); after each phase
the script waits until every process is quiet and reads each one's CPU time from ``/proc``.

extender minus bare watcher is what koordpy does with an event (its reflector, cache and plugins); the bare
watcher is what receiving it costs (TLS, HTTP chunking, aiohttp's stream, JSON) in a Python process.

Run: ``.venv/bin/python bench/extender_watch_cost.py [--pods 500] [--rounds 3]``; writes
``bench/results/extender_watch_cost.json``. Not guaranteed: CPU time is read in clock ticks (10 ms: 0.02 ms
per pod at 500 pods) and includes each process's idle work while the phase and the quiet wait last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests" / "cluster")]

RESULTS = ROOT / "bench" / "results" / "extender_watch_cost.json"
WATCHERS = ("extender/koordpy", "bare-watcher", "extender/noop")
PHASES = ("created", "bound", "deleted")
NODES = 100


async def bare_watch(kubeconfig: str) -> None:
    from koordpy.kube.client import ApiClient
    from koordpy.kube.resources import PODS

    async with ApiClient.from_kubeconfig(kubeconfig) as api:
        version = (await api.list(PODS)).resource_version
        while True:
            async for _, obj in api.watch(PODS, resource_version=version, timeout_seconds=3600):
                version = (obj.get("metadata") or {}).get("resourceVersion", version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--bare", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(bare_watch(args.bare))
        return 0

    import scheduler_throughput as st
    from cluster_kit import Kube, Release

    from koordpy_testkit.processes import Proc

    workdir = Path(tempfile.mkdtemp(prefix="koordpy-watch-cost-"))
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with st.control_plane(workdir) as plane, plane.client() as client:
        kube = Kube(client)
        release = Release(plane, kube)
        st.log("installing the chart")
        release.install()
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": st.NAMESPACE}})
        bench = st.Bench(plane, kube, release, workdir, args.pods, False)
        bench.grow_nodes(NODES)
        bench.start_extenders()
        bench.wait_extender_synced()
        kubeconfig = plane.kubeconfig("bare-watcher", release.token("scheduler"), "bare-watcher")
        bare = Proc(
            "bare-watcher", [sys.executable, __file__, "--bare", str(kubeconfig)], workdir / "bare.log", cwd=ROOT
        ).start()
        try:
            pids = {**bench.measured(), "bare-watcher": bare.pid}

            def cpu() -> dict[str, float]:
                return {name: sum(st.cpu_seconds(pid)) for name, pid in pids.items()}

            def bind(api: Any, name: str, index: int) -> None:
                binding = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": st.node_name(index % NODES)},
                }
                url = f"/api/v1/namespaces/{st.NAMESPACE}/pods/{name}/binding"
                api.post(url, content=orjson.dumps(binding)).raise_for_status()

            time.sleep(2.0)  # the bare watcher has listed and is watching
            for rnd in range(args.rounds):
                bench.refresh_metrics()
                bench.wait_quiet()
                names = [f"w{rnd}-{i:04d}" for i in range(args.pods)]
                marks = [cpu()]
                bench.create_pods(f"w{rnd}", "no-scheduler")
                bench.wait_quiet()
                marks.append(cpu())
                bench._parallel([lambda api, n=n, i=i: bind(api, n, i) for i, n in enumerate(names)], workers=4)
                bench.wait_quiet()
                marks.append(cpu())
                bench.delete_pods()
                bench.wait_quiet()
                marks.append(cpu())
                row: dict[str, Any] = {"round": rnd, "load_average_1m": round(os.getloadavg()[0], 2)}
                for name in pids:
                    row[name] = {
                        phase: round((marks[i + 1][name] - marks[i][name]) * 1000 / args.pods, 3)
                        for i, phase in enumerate(PHASES)
                    }
                rows.append(row)
                st.log(
                    f"round {rnd}: "
                    + "; ".join(f"{w} {sum(row[w].values()):.2f} ms/pod" for w in WATCHERS)
                    + f" (load {row['load_average_1m']})"
                )
        finally:
            bare.stop()
            bench.stop_schedulers()
            if bench.noop is not None:
                bench.noop.stop()
            if bench.components is not None:
                for proc in bench.components.procs:
                    proc.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    medians = {
        name: {phase: round(statistics.median(r[name][phase] for r in rows), 3) for phase in PHASES}
        for name in [*WATCHERS, "kube-apiserver", "etcd"]
    }
    results = {
        "bench": "extender_watch_cost",
        "command": "python bench/extender_watch_cost.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "nodes": NODES,
        "pods_per_round": args.pods,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "cpu_ms_per_pod_median": medians,
        "rounds": rows,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"CPU ms per pod (medians of {args.rounds} rounds of {args.pods} pods; events per pod: 1 / 1 / 2)")
    print(f"{'process':20s} " + " ".join(f"{p:>8s}" for p in PHASES) + "    total")
    for name, values in medians.items():
        print(f"{name:20s} " + " ".join(f"{values[p]:8.3f}" for p in PHASES) + f" {sum(values.values()):8.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
