"""Reservation enforcement's cost on the extender's hot path (not a test): in-process ``/filter`` and
``/prioritize`` (``ExtenderService`` on request bytes, no HTTP) over 5,000 nodes with 10 assigned pods
each and a NodeMetric per node, in three set-ups:

* ``no hook``: the service without a reservation tracker (what main had before reservations);
* ``no reservations``: the tracker attached, no Reservation exists (the common case);
* ``50 reservations``: 50 Available reservations on 50 nodes, for a pod that owns none of them.

Also ``refine`` alone (the reservation step of ``/filter``) with the 50 reservations, and the cost of one
pod watch event on a node with reservations and of one Reservation event (each with the recomputation).

The same request is repeated, so in the first two set-ups (every node passes) the service reuses the
node-index lookup of the previous answer, which it cannot when nodes fail: read the third row's extra
time against ``refine alone``, not as the reservation step's cost.

Run: ``.venv/bin/python bench/extender_reservations.py [--rounds N]``. Prints a table and writes
``bench/results/extender_reservations.json``. Not guaranteed: stable figures on a shared machine
(medians of interleaved rounds; read small differences as noise).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

from koordpy.config import SchedulerConfiguration, validate
from koordpy.model.objects import pod_from_dict
from koordpy.scheduler.extender.server import Extender, build_extender
from koordpy_testkit import FakeClock, NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.reservations import owner_pod, reservation_manifest

RESULTS = Path(__file__).resolve().parent / "results" / "extender_reservations.json"
NODES = 5000
PODS_PER_NODE = 10
CONFIG = {"loadAware": {"usageThresholds": {"cpu": 65, "memory": 95}}}


def build(reservations: int, hook: bool) -> tuple[Extender, list[str]]:
    clock = FakeClock()
    ext = build_extender(validate(SchedulerConfiguration, CONFIG), None, clock=clock, freeze_gc=False)
    names = [f"node-{i:05d}" for i in range(NODES)]
    cache = ext.cache
    for name in names:
        cache.handler("nodes")("ADDED", NodeBuilder(name).allocatable(cpu="64", memory="256Gi", pods="110").build())
        metric = NodeMetricBuilder(name).updated(clock.now() - 30).usage(cpu="8", memory="32Gi").build()
        cache.handler("nodemetrics")("ADDED", metric)
        for j in range(PODS_PER_NODE):
            pod = PodBuilder(f"{name}-p{j}").requests(cpu="1", memory="2Gi").node(name).phase("Running")
            cache.handler("pods")("ADDED", pod.scheduled_at(clock.now() - 3600).build())
    for i in range(reservations):
        owners = [owner_pod("default", f"owner-{i}")]
        raw = reservation_manifest(f"r{i}", node=names[i * 97], owners=owners, created=clock.now(), cpu="60")
        cache.handler("reservations")("ADDED", raw)
    if not hook:
        cache.reservations = None
    gc.collect()
    gc.freeze()
    return ext, names


def body(names: list[str]) -> bytes:
    raw = PodBuilder("incoming", "checkout").requests(cpu="2", memory="4Gi").build()
    raw["metadata"]["resourceVersion"] = "1"
    return orjson.dumps({"Pod": raw, "Nodes": None, "NodeNames": names})


def time_verbs(ext: Extender, request: bytes, repeat: int) -> tuple[float, float, dict[str, Any]]:
    filter_times, prio_times = [], []
    answer: dict[str, Any] = {}
    for _ in range(repeat):
        started = time.perf_counter()
        reply = ext.service.filter(request)
        filter_times.append(time.perf_counter() - started)
        answer = orjson.loads(reply.body)
        prio = orjson.dumps({"Pod": orjson.loads(request)["Pod"], "Nodes": None, "NodeNames": answer["NodeNames"]})
        started = time.perf_counter()
        ext.service.prioritize(prio)
        prio_times.append(time.perf_counter() - started)
    return statistics.median(filter_times), statistics.median(prio_times), answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    setups = {"no hook": build(0, False), "no reservations": build(0, True), "50 reservations": build(50, True)}
    samples: dict[str, dict[str, list[float]]] = {k: {"filter": [], "prioritize": []} for k in setups}
    blocked = 0
    for _ in range(args.rounds):  # interleaved rounds: drift on a shared machine hits every set-up alike
        for label, (ext, names) in setups.items():
            f, p, answer = time_verbs(ext, body(names), args.repeat)
            samples[label]["filter"].append(f)
            samples[label]["prioritize"].append(p)
            if label == "50 reservations":
                blocked = len(answer["FailedNodes"])
    rows = {
        label: {verb: round(statistics.median(values) * 1000, 3) for verb, values in verbs.items()}
        for label, verbs in samples.items()
    }
    ext, names = setups["50 reservations"]
    cache, tracker, now = ext.cache, ext.cache.reservations, ext.service.clock.now()
    assert tracker is not None
    held = names[0]
    pod_event, res_event = [], []
    for i in range(200):
        raw = PodBuilder(f"churn-{i}").requests(cpu="1").node(held).phase("Running").build()
        started = time.perf_counter()
        cache.handler("pods")("ADDED", raw)
        tracker.account(held, now)
        pod_event.append(time.perf_counter() - started)
        raw_res = reservation_manifest("r0", node=held, owners=[owner_pod("default", "owner-0")], created=now, cpu="60")
        started = time.perf_counter()
        cache.handler("reservations")("MODIFIED", raw_res)
        tracker.account(held, now)
        res_event.append(time.perf_counter() - started)
    incoming = pod_from_dict(orjson.loads(body(names))["Pod"])
    outcome = ext.state.filter(incoming, names, now)
    refine = []
    for _ in range(200):
        started = time.perf_counter()
        tracker.refine(incoming, outcome, now)
        refine.append(time.perf_counter() - started)
    events = {
        "refine alone, 50 reserved nodes (ms)": round(statistics.median(refine) * 1000, 3),
        "pod event + recompute (ms)": round(statistics.median(pod_event) * 1000, 3),
        "reservation event + recompute (ms)": round(statistics.median(res_event) * 1000, 3),
    }
    print(f"{'setup':<18} {'filter ms':>10} {'prioritize ms':>14}   ({NODES} nodes, {PODS_PER_NODE} pods each)")
    for label, row in rows.items():
        print(f"{label:<18} {row['filter']:>10} {row['prioritize']:>14}")
    print(f"50 reservations: {blocked} nodes failed with the reserved reason for a 2-cpu pod")
    for label, value in events.items():
        print(f"{label}: {value}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps({"nodes": NODES, "medians_ms": rows, "blocked": blocked, "events_ms": events}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
