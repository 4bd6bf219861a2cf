"""Gang model benchmark (not a test): cost of the GangCache events the bind barrier will call.

Setup: 1,000 gangs of 8 annotation-way members (NonStrict, min 8), i.e. 8,000 pods. Measured with
``time.process_time`` (CPU, not wall clock):

* ``upsert_pod`` of every member;
* ``hold`` of 7 members of every gang (7,000 holds; each returns the group's permit);
* one idle round with 7,000 holds: ``take_ready`` + ``take_releases`` + ``next_deadline`` (what the
  extender runs after an unrelated event or on its timer);
* the 8th hold of every gang followed by ``take_ready`` (which hands out the batch of 8);
* ``resolve_deadlock`` over 1,000 waiting groups on 100 nodes with no free capacity (a deadlock: the
  scan finds a victim and releases its 7 holds). A full scan; the extender would run it on a slow
  timer, not per event.

Run: ``.venv/bin/python bench/gang_model.py [--gangs N]``. Prints a table and writes
``bench/results/gang_model.json``.

Not guaranteed: stable figures on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache
from koordpy_testkit.gangs import T0, annotated, member

RESULTS = Path(__file__).resolve().parent / "results" / "gang_model.json"
SIZE = 8


def _timed(label: str, count: int, work: Any, rows: list[dict[str, Any]]) -> None:
    start = time.process_time()
    work()
    seconds = time.process_time() - start
    rows.append(
        {
            "step": label,
            "count": count,
            "cpu_ms_total": round(seconds * 1e3, 2),
            "cpu_us_each": round(seconds / count * 1e6, 2),
        }
    )


def run(gangs: int) -> list[dict[str, Any]]:
    cache = GangCache(CoschedulingArgs.model_validate({}))
    pods = [
        member(f"g{g}-{i}", annotations=annotated(f"g{g}", SIZE, mode="NonStrict"))
        for g in range(gangs)
        for i in range(SIZE)
    ]
    rows: list[dict[str, Any]] = []

    def upsert() -> None:
        for pod in pods:
            cache.upsert_pod(pod)

    def hold_seven() -> None:
        for g in range(gangs):
            for i in range(SIZE - 1):
                cache.hold(f"default/g{g}-{i}", f"u{g}-{i}", f"n{(g * SIZE + i) % 100}", T0)

    def idle_round() -> None:
        assert cache.take_ready(T0) == []
        assert cache.take_releases(T0) == []
        assert cache.next_deadline() is not None

    def deadlock_scan() -> None:
        free = {f"n{n}": {"cpu": 0, "memory": 0, "pods": 0} for n in range(100)}
        cache.resolve_deadlock(free, T0)

    def last_holds() -> None:
        for g in range(gangs):
            cache.hold(f"default/g{g}-{SIZE - 1}", f"u{g}-last", "n0", T0)
            (batch,) = cache.take_ready(T0)
            assert len(batch.holds) == SIZE

    _timed("upsert_pod", len(pods), upsert, rows)
    _timed("hold (7 of 8 per gang)", gangs * (SIZE - 1), hold_seven, rows)
    cache.take_ready(T0)
    _timed("idle take_ready+take_releases+next_deadline", 1, idle_round, rows)
    _timed("8th hold + take_ready (batch of 8)", gangs, last_holds, rows)
    # A deadlock over every gang: a fresh cache with 7 of 8 held per gang and no free capacity anywhere;
    # releasing any group frees room for another's pending member, so the scan finds one and releases it.
    cache = GangCache(CoschedulingArgs.model_validate({}))
    upsert()
    hold_seven()
    _timed(f"resolve_deadlock ({gangs} waiting groups, 100 nodes)", 1, deadlock_scan, rows)
    assert len(cache.take_releases(T0)) == SIZE - 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gangs", type=int, default=1000)
    args = parser.parse_args()
    rows = run(args.gangs)
    out = {
        "benchmark": "gang model events",
        "command": " ".join([".venv/bin/python", "bench/gang_model.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "gangs": args.gangs,
        "members_per_gang": SIZE,
        "results": rows,
    }
    print(f"{'STEP':<52} {'COUNT':>6} {'CPU ms':>9} {'us each':>9}")
    for row in rows:
        print(f"{row['step']:<52} {row['count']:>6} {row['cpu_ms_total']:>9.2f} {row['cpu_us_each']:>9.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
