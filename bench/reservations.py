"""Reservation decision benchmark (not a test): wall time of one ``decide`` pass by cluster size.

Setup per size (100, 500, 1,000, 2,000 and 5,000 nodes of 8 cpu / 32Gi, each 7/8 busy with one running pod): 20 Pending
user Reservations (500m each: every node fits them, so every node is filtered and scored for each),
50 pending pods of higher priority that fit nowhere (each is checked for placeability against every
node), and one starving 8-cpu pod that gets a preAllocation reservation. That is the burst case: in a
steady cluster most reservations are already placed and a pass does far less.

Run: ``.venv/bin/python bench/reservations.py [--rounds N]``. Prints a table and writes
``bench/results/reservations.json``.

Not guaranteed: stable figures on a shared machine (the load average is recorded with them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from koordpy.scheduler.plugins.reservation.controller import ReservationInputs, decide
from koordpy_testkit.reservations import T0, node, pod, reservation, settings

RESULTS = Path(__file__).resolve().parent / "results" / "reservations.json"
SIZES = (100, 500, 1000, 2000, 5000)


def inputs(size: int) -> ReservationInputs:
    nodes = [node(f"n{i}", cpu="8", memory="32Gi") for i in range(size)]
    pods = [pod(f"f{i}", "7", "1Gi", node=f"n{i}", created=T0 - 10) for i in range(size)]
    pods += [pod(f"hp{j}", "4", "1Gi", priority=500, created=T0 + 3500) for j in range(50)]
    pods.append(pod("big", "8", "8Gi", priority=100))
    users = [reservation(f"u{k}", cpu="500m", created=T0 + k) for k in range(20)]
    return ReservationInputs(nodes, pods, [], users)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    config = settings()
    rows = []
    for size in SIZES:
        data = inputs(size)
        times = []
        for _ in range(opts.rounds):
            start = time.perf_counter()
            decision = decide(data, config, T0 + 3600)
            times.append((time.perf_counter() - start) * 1000)
        assert len(decision.creates) == 1 and len(decision.statuses) == 20, "the setup must exercise every step"
        rows.append({"nodes": size, "median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)})
    with open("/proc/loadavg", encoding="ascii") as fh:
        load = float(fh.read().split()[0])
    report = {"pending_user_reservations": 20, "higher_priority_pending": 50, "rows": rows, "loadavg_1m": load}
    print(f"{'NODES':>6} {'MEDIAN ms':>10} {'MAX ms':>8}   (load average {load})")
    for row in rows:
        print(f"{row['nodes']:>6} {row['median_ms']:>10} {row['max_ms']:>8}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
