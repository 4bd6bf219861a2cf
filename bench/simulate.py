"""Scale figure for `koordpy simulate`: 1,000 nodes, 20,000 pods, 24 simulated hours.

Runs the koordpy policy (load-aware placement + the agent's QoS) and then the baseline over the
same trace, prints the wall time of each and writes bench/results/simulate.json. Target: the
koordpy run in <= 120 s on the development machine. ``--profile`` adds a cProfile of the koordpy
policy over the first ``--profile-hours`` simulated hours at full scale (a separate, shorter run,
so the timed runs are not slowed by the profiler). The load average is recorded because the
development machine is shared.

    .venv/bin/python bench/simulate.py [--profile] [--profile-hours 2] [--policy koordpy|baseline|both]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from koordpy.cli.files import read_mapping
from koordpy.cli.simulate import qos_factory
from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.sim.engine import BASELINE, KOORDPY
from koordpy.sim.run import DEFAULT_SCENARIO, simulate

NODES = 1000
PODS = 20_000
HOURS = 24


def bench_scenario() -> Scenario:
    """The bundled default, scaled: 10x the nodes, 24 h, workload counts scaled to 20,000 pods."""
    raw: dict[str, Any] = read_mapping(DEFAULT_SCENARIO)
    raw["name"] = "bench"
    raw["duration"] = f"{HOURS}h"
    raw["nodePools"][0]["count"] = NODES
    services = [w for w in raw["workloads"] if "lifetime" not in w]
    batch = [w for w in raw["workloads"] if "lifetime" in w]
    for w in services:
        w["arrivals"]["count"] *= 10
    service_pods = sum(w["arrivals"]["count"] for w in services)
    batch_pods = sum(w["arrivals"]["count"] for w in batch)
    left = PODS - service_pods
    for i, w in enumerate(batch):
        share = round(left * w["arrivals"]["count"] / batch_pods)
        w["arrivals"]["count"] = share if i < len(batch) - 1 else left - sum(b["arrivals"]["count"] for b in batch[:-1])
    scenario = validate(Scenario, raw, "bench")
    assert sum(w.arrivals.count for w in scenario.workloads) == PODS
    return scenario


def shortened(scenario: Scenario, hours: float) -> Scenario:
    """The scenario over its first ``hours``: every node, the services, the batch at the same arrival rate."""
    raw = scenario.model_dump(by_alias=True)
    raw["duration"] = hours * 3600
    for workload in raw["workloads"]:
        if workload["lifetime"] is not None:  # batch: keep the arrival rate, cut the window
            workload["arrivals"]["count"] = round(workload["arrivals"]["count"] * hours / HOURS)
            workload["arrivals"]["end"] = None
    return validate(Scenario, raw, "bench-short")


def _profile(scenario: Scenario, hours: float) -> dict[str, Any]:
    short = shortened(scenario, hours)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    simulate(short, short.seed, [KOORDPY], qos_factory)
    profiler.disable()
    seconds = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values())
    rows = []
    for (path, line, func), (_, calls, own, cumulative, _) in stats.stats.items():
        rows.append((cumulative, own, calls, f"{Path(path).name}:{line}({func})"))
    top_cumulative = sorted(rows, reverse=True)[:25]
    top_own = sorted(rows, key=lambda r: r[1], reverse=True)[:15]
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
    print(out.getvalue(), file=sys.stderr)
    return {
        "simulatedHours": hours,
        "wallSecondsUnderProfiler": round(seconds, 2),
        "byCumulative": [
            {"function": name, "calls": calls, "cumulativeSeconds": round(cum, 2), "share": round(cum / total, 3)}
            for cum, _, calls, name in top_cumulative
        ],
        "byOwnTime": [
            {"function": name, "calls": calls, "ownSeconds": round(own, 2), "share": round(own / total, 3)}
            for _, own, calls, name in top_own
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", action="store_true", help="also profile a shorter koordpy run")
    parser.add_argument("--profile-hours", type=float, default=2.0)
    parser.add_argument("--policy", choices=("koordpy", "baseline", "both"), default="both")
    args = parser.parse_args()
    scenario = bench_scenario()
    policies = {"koordpy": [KOORDPY], "baseline": [BASELINE], "both": [KOORDPY, BASELINE]}[args.policy]
    results: dict[str, Any] = {
        "benchmark": "simulate",
        "command": "python bench/simulate.py " + " ".join(sys.argv[1:]),
        "nodes": NODES,
        "pods": PODS,
        "simulatedHours": HOURS,
        "targetSeconds": 120,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadAverageBefore": [round(x, 2) for x in os.getloadavg()],
        "runs": {},
    }
    for policy in policies:
        started = time.perf_counter()
        (run,) = simulate(scenario, scenario.seed, [policy], qos_factory)
        seconds = time.perf_counter() - started
        results["runs"][policy.name] = {"wallSeconds": round(seconds, 2), "summary": run.summary}
        print(f"{policy.name}: {seconds:.1f} s wall", file=sys.stderr)
    results["loadAverageAfter"] = [round(x, 2) for x in os.getloadavg()]
    koordpy = results["runs"].get("koordpy")
    if koordpy is not None:
        results["meetsTarget"] = koordpy["wallSeconds"] <= results["targetSeconds"]
    if args.profile:
        results["profile"] = _profile(scenario, args.profile_hours)
    target = Path(__file__).resolve().parent / "results" / "simulate.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in results.items() if k not in ("runs", "profile")}, indent=2))
    for name, run in results["runs"].items():
        print(name, run["wallSeconds"], "s", json.dumps(run["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
