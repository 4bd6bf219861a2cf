"""Manager reservation round benchmark (not a test): wall time of one round without the API server.

Per size (nodes, pods): 16-cpu nodes, each with 15 running 1-cpu pods (no priority: not jobs), plus 5
pending 12-cpu pods of priority 100 created long ago (starving), ``reservedNodePercent`` 20. A round is
exactly what the manager runs every ``intervalSeconds`` after its lists arrive: read every object
(``inputs_from_snapshot``), ``decide``, and carry the decision out against an in-memory API that keeps
what was written (creates appear in the next round's list, with their status). Each round reserves for
the first starving job in order, so the first 5 rounds create one Reservation each; the steady rounds
after them adopt all five and write nothing. The API calls themselves
(listing thousands of pods over HTTP) are not included. Objects carry a uid and resourceVersion as the
API server gives them, so the round's conversion cache reads each one once; every size also runs
with a cache that reads every object every round (``cache: false``), for comparison.

Run: ``.venv/bin/python bench/reservation_round.py [--rounds N]``. Prints a table and writes
``bench/results/reservation_round.json``.

Not guaranteed: stable figures on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from koordpy.config.reservation import ReservationSettings
from koordpy.manager.reservations import ClusterSnapshot, ConversionCache, ReservationController
from koordpy.model.durations import format_rfc3339
from koordpy.scheduler.plugins.reservation.controller import EventDecision
from koordpy_testkit.builders import NodeBuilder, PodBuilder

RESULTS = Path(__file__).resolve().parent / "results" / "reservation_round.json"
SIZES = ((50, 750), (200, 3000), (500, 7500))
STARVING = 5
CREATED = 1_800_000_000.0
NOW = CREATED + 3600  # every big pod waited an hour; creates are stamped now (held 0 s)
Raw = dict[str, Any]


class MemoryApi:
    """Keeps the Reservations written; everything else is the fixed snapshot."""

    def __init__(self, nodes: list[Raw], pods: list[Raw]) -> None:
        self.nodes, self.pods = nodes, pods
        self.reservations: dict[str, Raw] = {}
        self.writes = 0

    def _store(self, name: str, raw: Raw) -> Raw:
        self.writes += 1
        self.reservations[name] = {**raw, "metadata": {**raw["metadata"], "resourceVersion": str(self.writes)}}
        return self.reservations[name]

    async def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(self.nodes, self.pods, [], list(self.reservations.values()))

    async def create_reservation(self, body: Mapping[str, Any]) -> Raw:
        name = str(body["metadata"]["name"])
        meta = {**body["metadata"], "uid": f"uid-{name}", "creationTimestamp": format_rfc3339(NOW)}
        return self._store(name, {**body, "metadata": meta})

    async def patch_reservation_status(self, name: str, status: Mapping[str, Any]) -> Raw:
        return self._store(name, {**self.reservations[name], "status": dict(status)})

    async def delete_reservation(self, name: str, uid: str | None) -> None:
        self.writes += 1
        self.reservations.pop(name, None)

    async def post_event(self, involved: Mapping[str, Any], event: EventDecision) -> None:
        return None


def cluster(nodes: int, pods: int) -> tuple[list[Raw], list[Raw]]:
    node_raws = [NodeBuilder(f"n{i}").allocatable(cpu="16", memory="64Gi", pods="110").build() for i in range(nodes)]
    pod_raws = []
    for i in range(pods):
        raw = PodBuilder(f"small-{i}").requests(cpu="1", memory="1Gi").node(f"n{i % nodes}").phase("Running").build()
        raw["metadata"]["creationTimestamp"] = format_rfc3339(CREATED)
        pod_raws.append(raw)
    for i in range(STARVING):
        raw = PodBuilder(f"big-{i}").requests(cpu="12", memory="8Gi").priority(100).build()
        raw["metadata"]["creationTimestamp"] = format_rfc3339(CREATED + i)
        pod_raws.append(raw)
    for raw in (*node_raws, *pod_raws):
        raw["metadata"]["resourceVersion"] = "1"  # as listed from the API server (unchanged between rounds)
    return node_raws, pod_raws


class UncachedReads(ConversionCache):
    def read(self, kind: str, raw: Raw, read: Callable[[Raw], Any]) -> Any:
        return read(raw)


async def measure(nodes: int, pods: int, rounds: int, cached: bool) -> dict[str, Any]:
    settings = ReservationSettings.model_validate({"enabled": True, "reservedNodePercent": 20})
    api = MemoryApi(*cluster(nodes, pods))
    controller = ReservationController(api, settings, clock=lambda: NOW)
    if not cached:
        controller.cache = UncachedReads()
    created: list[str] = []
    settle: list[float] = []
    for _ in range(STARVING + 2):  # one starving job gets its reservation per round (the first in order)
        started = time.perf_counter()
        result = await controller.run_round()
        settle.append(time.perf_counter() - started)
        created.extend(c.name for c in result.decision.creates)
        if not result.decision.creates:
            break
    assert len(created) == len(set(created)) == STARVING, created  # one per job, never a duplicate
    writes_settled = api.writes
    steady = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = await controller.run_round()
        steady.append(time.perf_counter() - started)
        assert not result.decision.creates, "a steady round created a duplicate"
    return {
        "cache": cached,
        "nodes": nodes,
        "pods": pods + STARVING,
        "rounds_to_reserve_all": len(settle) - 1,
        "reserving_round_ms_max": round(max(settle) * 1000, 1),
        "steady_round_ms_median": round(statistics.median(steady) * 1000, 1),
        "steady_round_ms_max": round(max(steady) * 1000, 1),
        "steady_round_writes": api.writes - writes_settled,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = [asyncio.run(measure(n, p, args.rounds, cached)) for cached in (True, False) for n, p in SIZES]
    header = list(rows[0])
    print(" ".join(f"{h:>24}" for h in header))
    for row in rows:
        print(" ".join(f"{row[h]!s:>24}" for h in header))
    RESULTS.parent.mkdir(exist_ok=True)
    document = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "rounds": args.rounds,
        "results": rows,
    }
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
