"""CLI start-up benchmark (not a test): wall time of ``koordpy --version`` and ``koordpy --help``.

Each command runs N times as a fresh subprocess (the venv's ``koordpy`` console script); the median is
reported next to ``python -c pass`` (the interpreter's own floor) and the ratio to it. The goal is
under 0.5 s for both on a quiet machine; sub-command help (which imports the command's module) is shown too.

Run: ``.venv/bin/python bench/cli_startup.py [--runs N]``. Prints a table and writes
``bench/results/cli_startup.json``.

Not guaranteed: stable figures on a shared machine (the median damps, not removes, the noise); the
first run after an install also compiles byte code, so one warm-up run of each is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
OUT = ROOT / "bench" / "results" / "cli_startup.json"
GOAL_S = 0.5

CASES: list[tuple[str, list[str]]] = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("koordpy --version", [str(BIN / "koordpy"), "--version"]),
    ("koordpy --help", [str(BIN / "koordpy"), "--help"]),
    ("koordpy (bare)", [str(BIN / "koordpy")]),
    ("python -m koordpy --version", [sys.executable, "-m", "koordpy", "--version"]),
    ("koordpy scheduler explain -h", [str(BIN / "koordpy"), "scheduler", "explain", "-h"]),
    ("koordpy agent run -h", [str(BIN / "koordpy"), "agent", "run", "-h"]),
    ("koordpy extender -h", [str(BIN / "koordpy"), "extender", "-h"]),
]


def time_once(argv: list[str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, check=False, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per command (median reported)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name, argv in CASES:
        time_once(argv)  # warm-up: page cache, byte code
        samples = [time_once(argv) for _ in range(args.runs)]
        rows.append({"command": name, "median_s": statistics.median(samples), "min_s": min(samples)})
    floor = rows[0]["median_s"]
    for row in rows:
        row["ratio_to_python"] = row["median_s"] / floor
    print(f"{'command':<30} {'median':>8} {'min':>8} {'x python':>9}")
    for row in rows:
        print(f"{row['command']:<30} {row['median_s']:>7.3f}s {row['min_s']:>7.3f}s {row['ratio_to_python']:>8.1f}x")
    goal = {
        r["command"]: r["median_s"] < GOAL_S for r in rows if r["command"] in ("koordpy --version", "koordpy --help")
    }
    print(f"\ngoal (< {GOAL_S} s): " + ", ".join(f"{k}: {'met' if v else 'MISSED'}" for k, v in goal.items()))
    document = {
        "benchmark": "cli_startup",
        "runs": args.runs,
        "goal_s": GOAL_S,
        "goal_met": goal,
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]},
        "results": rows,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
