"""Placement quality at ``percentageOfNodesToScore`` 100 against kube-scheduler's adaptive sample (not a test).

The bundled default scenario of ``koordpy simulate`` (100 nodes, 6 simulated hours) scaled up: the node count
and every workload's pod count times ``size / 100``; at 2,000 nodes and more the run is cut to
``--long-hours`` simulated hours (the default scenario's arrivals then come within them: a busier cluster).
Each size and seed runs the koordpy profile with ``kubeScheduler.percentageOfNodesToScore`` 100 and 0 over
the same trace, and the stock baseline (always kube-scheduler's default, 0) once. Quality figures are the
simulator's own (``summary.json``): node-minutes above the hot threshold, the spread of cpu utilisation
across nodes, pending time, pods still pending.

Run: ``.venv/bin/python bench/sampling_quality.py --sizes 1000,5000`` (a 5,000-node run takes several
minutes of CPU per setting). Writes ``bench/results/sampling_quality.json`` and prints a table.

Not guaranteed: more than the simulator models (see ``koordpy.sim.kubescheduler``: no in-tree score
plugins besides the extender's, no zone-interleaved node order).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "sampling_quality.json"
KOORDPY = Path(sys.executable).parent / "koordpy"
DEFAULT = ROOT / "src" / "koordpy" / "sim" / "scenarios" / "default.yaml"
FIGURES = (
    "hotNodeMinutes",
    "cpuUtilisationMean",
    "cpuUtilisationStd",
    "pendingP99Seconds",
    "pendingMaxSeconds",
    "pendingAtEnd",
    "schedulingAttempts",
)


def scaled(size: int, percentage: int, long_hours: float) -> dict[str, Any]:
    scenario: dict[str, Any] = yaml.safe_load(DEFAULT.read_text())
    factor = size / 100
    scenario["name"] = f"default-x{size}-pct{percentage}"
    scenario["nodePools"][0]["count"] = size
    for workload in scenario["workloads"]:
        workload["arrivals"]["count"] = round(workload["arrivals"]["count"] * factor)
    if size >= 2000:
        scenario["duration"] = f"{long_hours:g}h"
    scenario["kubeScheduler"] = {"percentageOfNodesToScore": percentage}
    return scenario


def simulate(scenario: dict[str, Any], seed: int, compare: bool, workdir: Path) -> dict[str, Any]:
    path = workdir / f"{scenario['name']}-s{seed}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    out = workdir / f"{scenario['name']}-s{seed}"
    args = [str(KOORDPY), "simulate", str(path), "--seed", str(seed), "--out", str(out)]
    if compare:
        args += ["--compare", "baseline"]
    started = time.monotonic()
    subprocess.run(args, check=True, capture_output=True, text=True)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    summary["wallSeconds"] = round(time.monotonic() - started, 1)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000", help="node counts (default 1000,5000)")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds (default 1)")
    parser.add_argument("--long-hours", type=float, default=2.0, help="simulated hours at 2,000 nodes and more")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {
        "bench": "sampling_quality",
        "command": "python bench/sampling_quality.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="koordpy-sampling-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            for seed in (int(s) for s in args.seeds.split(",")):
                for percentage in (100, 0):
                    summary = simulate(scaled(size, percentage, args.long_hours), seed, percentage == 0, Path(tmp))
                    for policy, figures in summary["policies"].items():
                        row = {
                            "nodes": size,
                            "pods": summary["pods"],
                            "simulated_hours": summary["simulatedSeconds"] / 3600,
                            "seed": seed,
                            "policy": policy,
                            "percentage_of_nodes_to_score": percentage if policy == "koordpy" else 0,
                            "wall_seconds": summary["wallSeconds"],
                            **{k: figures[k] for k in FIGURES},
                        }
                        results["runs"].append(row)
                        print(
                            f"{size:>5} nodes seed {seed} {policy:<8} pct {row['percentage_of_nodes_to_score']:>3}: "
                            + "  ".join(f"{k} {row[k]}" for k in FIGURES),
                            flush=True,
                        )
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
