"""The simulator's speed, one source tree against another in the same run: `make demo` and the scale run.

Runs, for each tree (``--before``: another checkout's root, e.g. ``git archive main src bench | tar -x -C DIR``;
``after``: this checkout), interleaved so both see the same machine load:

* **demo**: ``koordpy simulate --compare baseline --out TMP`` (what `make demo` runs), ``--repeats`` times after
  one untimed warm-up run per tree (bytecode written, files cached: the "warm" figure);
* **scale**: the koordpy policy over ``bench/simulate.py``'s scenario (the tree's default scenario scaled to
  1,000 nodes, 20,000 pods, 24 simulated hours; ``--scale-hours H``: its first H hours, every node, the batch at
  the same rate), once per tree (``--no-scale`` skips it).

Each run is a child process with ``PYTHONPATH`` set to the tree's ``src``; its wall time and CPU time (user +
system, the child's own resource usage) are recorded. ``--parallel`` starts every timed run at once (on a shared,
loaded machine a run then gets its share sooner; CPU time stays comparable between the trees, wall time does
not). Writes ``bench/results/simulate_speed.json`` with every
run, the median per tree and the ratio after / before (CPU time: the figure that the shared machine's load
disturbs least; wall time beside it). The load average is recorded before and after.

    .venv/bin/python bench/simulate_speed.py --before DIR [--repeats 3] [--warmups 1] [--no-scale] [--scale-hours 24]
    [--parallel] [--out bench/results/simulate_speed.json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
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

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path(sys.executable)
KOORDPY = PYTHON.parent / "koordpy"

SCALE = """
import json, sys, time
sys.path.insert(0, {bench!r})
from simulate import bench_scenario, shortened
from koordpy.cli.simulate import qos_factory
from koordpy.sim.engine import KOORDPY
from koordpy.sim.run import simulate
scenario = bench_scenario() if {hours} >= 24 else shortened(bench_scenario(), {hours})
(run,) = simulate(scenario, scenario.seed, [KOORDPY], qos_factory)
print(json.dumps({{k: run.summary.get(k) for k in ("binds", "hotNodeMinutes", "deschedulerMoves", "repeatMoves")}}))
"""


def _child(command: list[str], tree: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own resource usage (runs may overlap)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(command[:3])} in {tree}: exit {child.returncode}\n{err.read()[-2000:]}")
        stdout = out.read()
    cpu = usage.ru_utime + usage.ru_stime
    return {"wallSeconds": round(wall, 2), "cpuSeconds": round(cpu, 2), "stdout": stdout}


def _demo(tree: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        run = _child([str(KOORDPY), "simulate", "--compare", "baseline", "--out", out], tree)
    rows = [line for line in run.pop("stdout").splitlines() if "descheduler moves" in line]
    run["deschedulingRows"] = bool(rows)
    return run


def _scale(tree: Path, hours: float) -> dict[str, Any]:
    run = _child([str(PYTHON), "-c", SCALE.format(bench=str(ROOT / "bench"), hours=hours)], tree)
    run["summary"] = json.loads(run.pop("stdout").strip().splitlines()[-1])
    return run


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True, help="the other tree's root (with src/ and bench/)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument(
        "--scale-hours", type=float, default=24.0, help="simulated hours of the scale run (its first hours if < 24)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "simulate_speed.json")
    parser.add_argument("--warmups", type=int, default=1, help="untimed demo runs per tree first")
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="run the timed runs at the same time (on a loaded shared machine: CPU time stays comparable, wall time"
        " does not)",
    )
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": ROOT}
    for name, tree in trees.items():
        if not (tree / "src" / "koordpy").is_dir():
            raise SystemExit(f"--before: {tree} has no src/koordpy ({name})")
    results: dict[str, Any] = {
        "benchmark": "simulate_speed",
        "command": "python bench/simulate_speed.py " + " ".join(sys.argv[1:]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadAverageBefore": [round(x, 2) for x in os.getloadavg()],
        "demo": {name: [] for name in trees},
        "scale": {name: [] for name in trees},
    }
    for _ in range(args.warmups):  # bytecode and file cache
        for tree in trees.values():
            _demo(tree)
    target = args.out
    results["parallel"] = args.parallel
    results["scaleHours"] = args.scale_hours
    jobs = [("demo", name, tree) for _ in range(args.repeats) for name, tree in trees.items()]
    if not args.no_scale:
        jobs += [("scale", name, tree) for name, tree in trees.items()]
    lock = threading.Lock()

    def one(kind: str, name: str, tree: Path) -> None:
        run = _demo(tree) if kind == "demo" else _scale(tree, args.scale_hours)
        with lock:
            results[kind][name].append(run)
            print(f"{kind} {name}: {run['wallSeconds']} s wall, {run['cpuSeconds']} s CPU", file=sys.stderr)
            _write(target, results, trees)

    if args.parallel:
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            for future in [pool.submit(one, *job) for job in jobs]:
                future.result()
    else:
        for job in jobs:
            one(*job)
    print(json.dumps(results["medians"], indent=2))
    return 0


def _write(target: Path, results: dict[str, Any], trees: dict[str, Path]) -> None:
    """The results so far (written after every run, so a long run interrupted keeps what it measured)."""
    results["loadAverageAfter"] = [round(x, 2) for x in os.getloadavg()]
    medians: dict[str, Any] = {}
    for kind in ("demo", "scale"):
        runs = results[kind]
        if not runs["after"] or not runs["before"]:
            continue
        figures = {name: {k: _median(runs[name], k) for k in ("wallSeconds", "cpuSeconds")} for name in trees}
        figures["ratioAfterOverBefore"] = {
            k: round(figures["after"][k] / figures["before"][k], 3) for k in ("wallSeconds", "cpuSeconds")
        }
        medians[kind] = figures
    results["medians"] = medians
    target.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
