"""Cost of the shared NodeResourcesFit rule on the simulator's hot path, and of one explain.

* ``feasible + bind + unbind`` on a ``RequestsTable`` of ``--nodes`` nodes (cpu, memory, pods): what
  the simulator does per placed pod (best of ``--repeat`` rounds of ``--calls`` calls, µs per call).
* ``explain`` on the bundled example dump (best of ``--repeat``, ms), in-tree filters on and off.

Prints and writes bench/results/fit.json with the load average (the development machine is shared:
compare figures taken at similar load only).

    .venv/bin/python bench/fit.py [--nodes 1000] [--calls 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import yaml

from koordpy.cli.main import EXAMPLES
from koordpy.config.errors import validate
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.durations import parse_rfc3339
from koordpy.model.objects import node_from_dict
from koordpy.scheduler.explain import explain
from koordpy.sim.kubescheduler import RequestsFit
from koordpy_testkit.builders import make_node


def fit_hot_path(nodes: int, calls: int, repeat: int) -> float:
    infos = [node_from_dict(make_node(f"n{i}")) for i in range(nodes)]
    fit = RequestsFit(infos, ["cpu", "memory", "pods"])
    vec = fit.vector({"cpu": 2000, "memory": 4 << 30})
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(calls):
            fit.feasible(vec)
            fit.bind(i % nodes, vec)
            fit.unbind(i % nodes, vec)
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def explain_ms(repeat: int, in_tree: bool) -> float:
    path = EXAMPLES / "cluster-dump.yaml"
    documents = [(str(path), doc) for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))]
    config = validate(SchedulerConfiguration, {})
    now = parse_rfc3339("2026-11-21T10:01:00Z")
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        explain(documents, "default/web-new", config, now, in_tree=in_tree)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results = {
        "nodes": args.nodes,
        "calls": args.calls,
        "fitHotPathMicrosPerCall": round(fit_hot_path(args.nodes, args.calls, args.repeat), 2),
        "explainExampleMillis": round(explain_ms(args.repeat, in_tree=True), 2),
        "explainExampleWithoutInTreeMillis": round(explain_ms(args.repeat, in_tree=False), 2),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
    }
    target = Path(__file__).resolve().parent / "results" / "fit.json"
    target.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
