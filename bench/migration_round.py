"""One migration round of the manager in one process, without an API server: the same 10,000 jobs as
``bench/manager_jobs.py`` (half finished, a tenth for missing pods, the rest waiting for pods on 50 nodes)
in the manager's caches, the writes answered in memory. Times the first round (every job and pod read
for the first time, the failures and passes written) and the steady rounds after (nothing changes: the
waiting jobs are arbitrated again), with the arbitration apart, in wall and CPU time.

Writes ``bench/results/migration_round.json``; prints it.

Usage: ``.venv/bin/python bench/migration_round.py [--jobs N] [--rounds N]``
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.decisions import JobEvent
from koordpy.manager.arbitrate import make_arbitrate
from koordpy.manager.cache import ManagerCache
from koordpy.manager.migration import controller_from_args

sys.path.insert(0, str(Path(__file__).resolve().parent))
from manager_jobs import seed

ROOT = Path(__file__).resolve().parent.parent
Raw = dict[str, Any]


class MemoryApi:
    """Answers every write as the API server would, with a new resourceVersion, from the cache's copy."""

    def __init__(self, cache: ManagerCache) -> None:
        self.cache = cache
        self.version = 10_000_000
        self.writes = 0

    def _next(self, raw: Raw, **changes: Any) -> Raw:
        self.version += 1
        self.writes += 1
        out = {**raw, **changes}
        out["metadata"] = {**raw["metadata"], "resourceVersion": str(self.version), **changes.get("metadata", {})}
        return out

    def _job(self, name: str) -> Raw:
        found = self.cache.jobs.get(name)
        assert found is not None, name
        return found

    async def annotate_job(self, job: str, key: str, value: str) -> Raw:
        raw = self._job(job)
        annotations = {**(raw["metadata"].get("annotations") or {}), key: value}
        return self._next(raw, metadata={"annotations": annotations})

    async def get_owner(self, namespace: str, ref: Mapping[str, Any]) -> Raw | None:
        return None

    async def set_pod_uid(self, job: str, uid: str) -> Raw:
        raw = self._job(job)
        return self._next(raw, spec={**raw["spec"], "podRef": {**raw["spec"]["podRef"], "uid": uid}})

    async def write_status(self, job: str, status: dict[str, Any]) -> Raw:
        return self._next(self._job(job), status=status)

    async def delete_job(self, job: str) -> None:
        self.writes += 1

    async def evict_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None:
        self.writes += 1

    async def delete_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None:
        self.writes += 1

    async def annotate_pod(self, namespace: str, name: str, key: str, value: str) -> Raw:
        self.writes += 1
        return {}

    async def post_event(self, job: Mapping[str, Any], event: JobEvent) -> None:
        self.writes += 1

    async def create_reservation(self, body: Mapping[str, Any]) -> Raw:
        return dict(body)

    async def delete_reservation(self, name: str, uid: str) -> None:
        return None

    async def set_reservation_ref(self, job: str, ref: Mapping[str, Any]) -> Raw:
        return self._job(job)


async def run(jobs: int, rounds: int) -> dict[str, Any]:
    now = time.time()
    objects, mix = seed(jobs, now)
    cache = ManagerCache(object(), ("pods", "podmigrationjobs"))  # type: ignore[arg-type] - never asked
    for index, obj in enumerate(objects):
        obj = copy.deepcopy(obj)
        obj["metadata"] |= {"resourceVersion": str(index + 1), "uid": f"uid-{index}"}
        if obj["kind"] == "Pod":
            cache.pods.handle("ADDED", obj)
        elif obj["kind"] == "PodMigrationJob":
            cache.jobs.handle("ADDED", obj)
    args = MigrationControllerArgs.model_validate({"defaultJobMode": "EvictDirectly", "evictAllBarePods": True})
    api = MemoryApi(cache)
    clock = [now]
    controller = controller_from_args(api, args, cache, clock=lambda: clock[0])
    arbitrate = make_arbitrate(api, args, controller)
    walls: list[float] = []
    cpus: list[float] = []
    arbitrations: list[float] = []
    writes: list[int] = []
    for _ in range(rounds):
        before = api.writes
        wall, cpu = time.perf_counter(), time.process_time()
        await controller.run_round(arbitrate)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        arbitrations.append(controller.last_round_seconds)
        writes.append(api.writes - before)
        clock[0] += 0.5
    settled = next((i for i in range(len(writes)) if all(w == 0 for w in writes[i:])), len(writes))
    steady = slice(settled, None)

    def ms(values: list[float]) -> float | None:
        return round(statistics.median(values) * 1000, 1) if values else None

    return {
        "jobs": jobs,
        "mix": mix,
        "phases_after": controller.phases,
        "load_average": os.getloadavg(),
        "first_round": {"wall_ms": ms(walls[:1]), "cpu_ms": ms(cpus[:1]), "writes": writes[0]},
        "rounds_until_no_write": settled,
        "steady_rounds": len(walls[steady]),
        "steady_round_wall_ms_median": ms(walls[steady]),
        "steady_round_cpu_ms_median": ms(cpus[steady]),
        "steady_round_wall_ms_max": round(max(walls[steady]) * 1000, 1) if walls[steady] else None,
        "steady_arbitration_ms_median": ms(arbitrations[steady]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=300, help="rounds of 0.5 s of simulated time")
    args = parser.parse_args()
    result = asyncio.run(run(args.jobs, args.rounds))
    text = json.dumps(result, indent=2)
    print(text)
    out = ROOT / "bench" / "results" / "migration_round.json"
    out.write_text(text + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
