"""The manager's balance views benchmark (not a test): what feeding LowNodeLoad's two views from the manager's watch
caches costs, at start-up and per watch event, at 5,000 nodes and 100,000 pods.

The objects are those of ``bench/lownodeload_round.py`` (nodes of 32 cpu, 20 pods each of 40 ReplicaSets, a
NodeMetric per node listing its pods). The manager's stores (:class:`koordpy.manager.cache.ManagerCache`) are
filled as their first lists fill them, then :class:`koordpy.manager.balance.BalanceViews` is attached (it replays
what the stores hold, as a manager whose caches listed first). Then watch events go through the stores, with and
without the views attached:

* ``pod``: a pod's status changes (a new ``resourceVersion``): the kubelet's most frequent write;
* ``nodemetric``: a node's NodeMetric is reported again (its 20 pods' usage): one per node per report interval,
  83 a second at 5,000 nodes and 60 s.

Timed: CPU time (``time.process_time``); the resident memory (``/proc/self/statm``) before and after the views are
built. The per-event figures are the medians of ``--repeats`` runs of ``--events`` events each, beside the
calibration loop (one million dict insertions) of the same run.

Run: ``.venv/bin/python bench/manager_balance_feed.py [--nodes N] [--pods-per-node N] [--events N]``. Prints a
table and writes ``bench/results/manager_balance_feed.json``.

Not guaranteed: stable figures on a shared machine (compare the ratios).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import lownodeload_round as scene

from koordpy.config.errors import validate
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.manager.balance import BalanceViews
from koordpy.manager.cache import ManagerCache

RESULTS = Path(__file__).resolve().parent / "results" / "manager_balance_feed.json"


def rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def objects(nodes_n: int, per_node: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(11)
    nodes, pods, metrics = [], [], []
    for i in range(nodes_n):
        name = f"node-{i:05d}"
        node = scene._node(name)
        node["metadata"]["resourceVersion"] = "1"
        nodes.append(node)
        on_node = [scene._pod(f"p-{i}-{j}", name, (i * per_node + j) % 40) for j in range(per_node)]
        for pod in on_node:
            pod["metadata"]["resourceVersion"] = "1"
        pods.extend(on_node)
        metric = scene._metric(name, on_node, rng.uniform(0.15, 0.9), rng, scene.NOW - 10)
        metric["metadata"]["resourceVersion"] = "1"
        metrics.append(metric)
    return nodes, pods, metrics


def cpu_ms(work: Any) -> float:
    gc.collect()
    started = time.process_time()
    work()
    return (time.process_time() - started) * 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", type=Path, default=RESULTS)
    opts = parser.parse_args(argv)
    gc.collect()
    rss_empty = rss_mib()
    nodes, pods, metrics = objects(opts.nodes, opts.pods_per_node)
    client = ApiClient(ConnectionInfo.for_url("http://127.0.0.1:1", token="bench"))  # never called
    cache = ManagerCache(client, ("pods", "nodes", "nodemetrics", "podmigrationjobs", "workloads"))

    def lists() -> None:
        cache.nodes.replace_all(nodes)
        cache.pods.replace_all(pods)
        cache.nodemetrics.replace_all(metrics)

    lists_ms = cpu_ms(lists)
    gc.collect()
    rss_stores = rss_mib()
    args = validate(
        LowNodeLoadArgs, {"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80}}
    )
    scheduler = validate(SchedulerConfiguration, {})
    views: list[BalanceViews] = []
    views_ms = cpu_ms(lambda: views.append(BalanceViews(cache, args, scheduler, clock=lambda: scene.NOW)))
    gc.collect()
    rss_views = rss_mib()

    rng = random.Random(5)
    pod_keys = list(cache.pods.objects)
    metric_keys = list(cache.nodemetrics.objects)
    version = [10]

    def pod_events(count: int) -> list[dict[str, Any]]:
        out = []
        for key in rng.sample(pod_keys, count):
            pod = copy.deepcopy(cache.pods.objects[key])
            version[0] += 1
            pod["metadata"]["resourceVersion"] = str(version[0])
            pod["status"]["conditions"][0]["lastProbeTime"] = str(version[0])
            out.append(pod)
        return out

    def metric_events(count: int) -> list[dict[str, Any]]:
        out = []
        for key in rng.sample(metric_keys, min(count, len(metric_keys))):
            metric = copy.deepcopy(cache.nodemetrics.objects[key])
            version[0] += 1
            metric["metadata"]["resourceVersion"] = str(version[0])
            metric["status"]["updateTime"] = scene.format_rfc3339(scene.NOW)
            out.append(metric)
        return out

    def per_event(store: Any, events: list[dict[str, Any]]) -> float:
        return cpu_ms(lambda: [store.handle("MODIFIED", obj) for obj in events]) * 1000 / len(events)

    figures_events: dict[str, dict[str, list[float]]] = {"pod": {"with": [], "without": []}, "nodemetric": {}}
    figures_events["nodemetric"] = {"with": [], "without": []}
    calibration: list[float] = []
    listeners = {
        name: list(store._listeners) for name, store in (("pod", cache.pods), ("nodemetric", cache.nodemetrics))
    }
    for _ in range(opts.repeats):
        for kind, store, make in (
            ("pod", cache.pods, pod_events),
            ("nodemetric", cache.nodemetrics, metric_events),
        ):
            store._listeners[:] = listeners[kind]
            figures_events[kind]["with"].append(per_event(store, make(opts.events)))
            store._listeners[:] = []
            figures_events[kind]["without"].append(per_event(store, make(opts.events)))
            store._listeners[:] = listeners[kind]
        calibration.append(cpu_ms(scene._calibration))
    median = statistics.median
    cal = median(calibration)
    figures: dict[str, Any] = {
        "nodes": opts.nodes,
        "pods": opts.nodes * opts.pods_per_node,
        "stores_first_lists_cpu_ms": round(lists_ms, 1),
        "views_from_the_stores_cpu_ms": round(views_ms, 1),
        "rss_stores_mib": round(rss_stores - rss_empty, 1),
        "rss_views_mib": round(rss_views - rss_stores, 1),
    }
    for kind, runs in figures_events.items():
        with_us, without_us = median(runs["with"]), median(runs["without"])
        figures[f"{kind}_event_cpu_us_with_views"] = round(with_us, 1)
        figures[f"{kind}_event_cpu_us_store_only"] = round(without_us, 1)
        figures[f"{kind}_event_views_share_us"] = round(with_us - without_us, 1)
    metric_rate = opts.nodes / 60
    figures["nodemetric_events_per_second_at_60s_reports"] = round(metric_rate, 1)
    figures["views_cpu_share_of_one_core_for_nodemetrics"] = round(
        metric_rate * figures["nodemetric_event_views_share_us"] / 1e6, 4
    )
    figures["calibration_ms_median"] = round(cal, 1)
    figures["views_start_to_calibration"] = round(views_ms / cal, 2)
    figures["load_average"] = os.getloadavg()
    figures["python"] = platform.python_version()
    figures["machine"] = platform.machine()
    print(f"{'figure':<48} value")
    for key, value in figures.items():
        print(f"{key:<48} {value}")
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {opts.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
