"""Gang-rule benchmark (not a test): the arbitration round of ``bench/arbitration.py`` with its batch Jobs
made gangs, against the same round without gangs, measured in the same run.

Setup: ``bench/arbitration.py``'s cluster (100,000 pods, 10,000 waiting jobs, 500 Running); each of its
200 batch Jobs (50 pods) is a Strict gang of ``scheduling.sigs.k8s.io`` with minimum ``--min`` (default
50: every member's job must wait for all 50; 45: five may go alone first). About 1,000 of the waiting
jobs name a gang member. Timed: ``arbitrate`` with the gang table (built outside the round, as the manager
builds it from its caches) and without it, alternately, median of ``--rounds``; the ratio of the two is
the figure that carries over between machines.

Run: ``.venv/bin/python bench/arbitration_gangs.py [--rounds N] [--min N]``. Prints a table and writes
``bench/results/arbitration_gangs.json``.

Not guaranteed: stable absolute figures on a shared machine (the load average is recorded).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from arbitration import build

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import GANG_FILTERS, arbitrate
from koordpy.descheduler.objects import MigrationPod
from koordpy.scheduler.plugins.gang.disruption import GangTable, gang_table_from_specs
from koordpy.scheduler.plugins.gang.spec import API_SIGS, GangRef, GangSpec

RESULTS = Path(__file__).resolve().parent / "results" / "arbitration_gangs.json"


def gangs_of(pods: Mapping[str, MigrationPod], minimum: int) -> GangTable:
    members: dict[str, list[str]] = {}
    for key, pod in pods.items():
        owner = pod.controller
        if owner is not None and owner.kind == "Job":
            members.setdefault(f"{pod.namespace}/{owner.name}", []).append(key)
    specs = []
    for gid, keys in members.items():
        namespace, name = gid.split("/")
        ref = GangRef(namespace, name, API_SIGS)
        spec = GangSpec(
            ref=ref,
            initialised=True,
            min_member=minimum,
            total_number=minimum,
            mode="Strict",
            match_policy="once-satisfied",
            wait_seconds=600.0,
            group=(ref.id,),
            create_time=None,
        )
        specs.append((spec, keys))
    return gang_table_from_specs(specs, lambda key: pods[key].phase == "Running")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min", type=int, default=50)
    opts = parser.parse_args()
    args = MigrationControllerArgs.model_validate({"maxMigratingPerNamespace": 100})
    jobs, pods, workloads = build(100_000, 10_000)
    start = time.perf_counter()
    table = gangs_of(pods, opts.min)
    table_ms = (time.perf_counter() - start) * 1000
    now = 1_800_003_600.0
    arbitrate(jobs, pods, workloads, args, now, gangs=table)  # warm-up
    arbitrate(jobs, pods, workloads, args, now)
    plain: list[float] = []
    ganged: list[float] = []
    result = None
    gc.collect()
    for _ in range(opts.rounds):
        start = time.perf_counter()
        arbitrate(jobs, pods, workloads, args, now)
        plain.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        result = arbitrate(jobs, pods, workloads, args, now, gangs=table)
        ganged.append((time.perf_counter() - start) * 1000)
    assert result is not None
    member_jobs = sum(1 for job in jobs if job.waiting and job.pod_key in table.pod_gang)
    held = {f: sum(1 for v in result.verdicts.values() if v.filter == f) for f in GANG_FILTERS}
    together = len({v.gang for v in result.verdicts.values() if v.gang})
    with open("/proc/loadavg", encoding="ascii") as fh:
        load = float(fh.read().split()[0])
    report = {
        "pods": len(pods),
        "waiting_jobs": sum(1 for job in jobs if job.waiting),
        "gangs": len(table.gangs),
        "gang_minimum": opts.min,
        "waiting_jobs_of_gang_members": member_jobs,
        "rounds": opts.rounds,
        "round_ms_median_without_gangs": round(statistics.median(plain), 2),
        "round_ms_median_with_gangs": round(statistics.median(ganged), 2),
        "with_to_without_median": round(statistics.median(g / p for g, p in zip(ganged, plain, strict=True)), 3),
        "gang_table_build_ms": round(table_ms, 2),
        "held_by_gang_rule": held,
        "gangs_moving_together": together,
        "load_average_1m": load,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    for key, value in report.items():
        print(f"{key:<36} {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
