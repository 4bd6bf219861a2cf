"""LowNodeLoad benchmark (not a test): one balance round at 5,000 nodes and 100,000 pods.

Setup: ``--nodes`` nodes (32 cpu, 128Gi, 110 pods) in one pool with the shipped example thresholds (low cpu 45 /
memory 55, high cpu 75 / memory 80), 20 pods per node of 40 workloads (ReplicaSets, 1 cpu / 4Gi requests,
scheduled by the koordpy profile), a NodeMetric per node 10 s old with each pod's usage. Usage: 5 % of the nodes
hot (~85 % cpu), 25 % idle (~25 %), the rest between. Every hot node is abnormal already (the anomaly state given),
so each acts this round. The extender's ``ClusterState`` (the default ``loadAware`` args) and the descheduler's
``BalanceState`` are fed with every object before the clock starts: the manager keeps both current from its
watches, so feeding them is not the round.

Timed (CPU time, ``time.process_time``), ``plan_round``:

* ``cold``: the first round, every row recomputed from its pods and NodeMetric (as after a start);
* ``burst``: the same state again (the round takes its own additions back out of the extender's view): every hot
  node (5 %) acts at once with nothing moved yet, about 640 moves, one pick by the extender each; the worst case;
* ``steady``: 10 s later, the burst's moves in the ledger (the NodeMetrics not yet newer: the burst's nodes are
  no longer hot), a sixth of the other NodeMetrics replaced (agents report every 60 s, rounds run every 10 s)
  and ``--new-hot`` normal nodes (25, 0.5 %) turned hot and abnormal: the round a running manager makes.

Burst and steady: the median of ``--rounds`` rounds each, beside the calibration loop (one million dict
insertions) measured in the same run, and the ratio. Also reported: the moves and the time to feed the views.

Run: ``.venv/bin/python bench/lownodeload_round.py [--nodes N] [--pods-per-node N] [--rounds N] [--new-hot N]``.
Prints a table and writes ``bench/results/lownodeload_round.json``.

Not guaranteed: stable figures on a shared machine (the median, the load average and the calibration loop are
reported to compare runs).
"""

from __future__ import annotations

import argparse
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

from koordpy.config.errors import validate
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.descheduler.lownodeload import AnomalyState, BalancePod, BalanceState, plan_round
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.profile import build_plugins

RESULTS = Path(__file__).resolve().parent / "results" / "lownodeload_round.json"
BUDGET_MS = 200.0
NOW = 1_800_000_000.0
GIB = 1024**3


def _node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    }


def _pod(name: str, node: str, workload: int) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"ns-{workload % 10}",
            "uid": f"uid-{name}",
            "labels": {"app": f"w{workload}"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"w{workload}",
                    "uid": f"rs-{workload}",
                    "controller": True,
                }
            ],
            "creationTimestamp": format_rfc3339(NOW - 3600 - workload),
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "koordpy-scheduler",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_rfc3339(NOW - 3600)},
            ],
        },
    }


def _metric(name: str, pods: list[dict[str, Any]], level: float, rng: random.Random, at: float) -> dict[str, Any]:
    entries = []
    total_cpu, total_memory = 500, GIB
    for pod in pods:
        cpu = max(1, int(32000 * level / len(pods) * rng.uniform(0.5, 1.5)))
        memory = int(128 * GIB * level * 0.9 / len(pods) * rng.uniform(0.5, 1.5))
        total_cpu += cpu
        total_memory += memory
        meta = pod["metadata"]
        entries.append(
            {
                "namespace": meta["namespace"],
                "name": meta["name"],
                "priority": "koord-prod",
                "qos": "LS",
                "podUsage": {"resources": {"cpu": f"{cpu}m", "memory": str(memory)}},
            }
        )
    return {
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": format_rfc3339(at),
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": f"{total_cpu}m", "memory": str(total_memory)}},
                "systemUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}},
            },
            "podsMetric": entries,
        },
    }


def build(nodes_n: int, per_node: int, seed: int = 11) -> dict[str, Any]:
    rng = random.Random(seed)
    args = validate(
        LowNodeLoadArgs,
        {"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80}},
    )
    migration = validate(MigrationControllerArgs, {"schedulerNames": ["koordpy-scheduler"]})
    scheduler = validate(SchedulerConfiguration, {})
    started = time.process_time()
    state = BalanceState(args)
    cluster = ClusterState(build_plugins(scheduler))
    levels: dict[str, float] = {}
    pods_by_node: dict[str, list[dict[str, Any]]] = {}
    metrics: dict[str, dict[str, Any]] = {}
    anomalies: dict[tuple[str, str], AnomalyState] = {}
    for i in range(nodes_n):
        name = f"node-{i:05d}"
        draw = rng.random()
        level = (
            rng.uniform(0.82, 0.9) if draw < 0.05 else rng.uniform(0.15, 0.35) if draw < 0.30 else rng.uniform(0.5, 0.7)
        )
        levels[name] = level
        node = node_from_dict(_node(name))
        state.upsert_node(node)
        cluster.upsert_node(node)
        pods = [_pod(f"p-{i}-{j}", name, (i * per_node + j) % 40) for j in range(per_node)]
        pods_by_node[name] = pods
        for raw in pods:
            info = pod_from_dict(raw)
            state.upsert_pod(BalancePod(info, raw))
            cluster.upsert_pod(info, NOW)
        metrics[name] = _metric(name, pods, level, rng, NOW - 10)
        info_metric = nodemetric_from_dict(metrics[name])
        state.upsert_metric(info_metric)
        cluster.upsert_metric(info_metric)
        if draw < 0.05:
            anomalies[("node", name)] = AnomalyState(NOW + 60, 0, 0, NOW - 10)
    fed = time.process_time() - started
    return {
        "args": args,
        "migration": migration,
        "state": state,
        "cluster": cluster,
        "anomalies": anomalies,
        "levels": levels,
        "pods": pods_by_node,
        "rng": rng,
        "feed_s": fed,
    }


def _calibration() -> float:
    started = time.process_time()
    table: dict[int, int] = {}
    for i in range(1_000_000):
        table[i] = i
    return (time.process_time() - started) * 1000


def _round(setup: dict[str, Any]) -> tuple[float, Any]:
    gc.collect()
    started = time.process_time()
    result = plan_round(
        setup["state"], setup["cluster"], setup["args"], setup["migration"], now=NOW, anomalies=setup["anomalies"]
    )
    return (time.process_time() - started) * 1000, result


def _refresh(setup: dict[str, Any], names: list[str], at: float) -> None:
    """New NodeMetrics for ``names`` (new samples at their levels), as their agents report."""
    rng = setup["rng"]
    for name in names:
        metric = nodemetric_from_dict(_metric(name, setup["pods"][name], setup["levels"][name], rng, at))
        setup["state"].upsert_metric(metric)
        setup["cluster"].upsert_metric(metric)


def _steady_round(setup: dict[str, Any], ledger: list[Any], new_hot: int, fraction: float) -> tuple[float, Any]:
    """The round after a burst, 10 s later: the burst's moves in the ledger (their NodeMetrics not yet newer), a
    sixth of the other NodeMetrics replaced, ``new_hot`` normal nodes just turned hot (and abnormal)."""
    rng = setup["rng"]
    levels = setup["levels"]
    moved_nodes = {move.source for move in ledger} | {move.destination for move in ledger}
    normal = [name for name, level in sorted(levels.items()) if 0.5 <= level <= 0.7 and name not in moved_nodes]
    hot = rng.sample(normal, new_hot)
    for name in hot:
        levels[name] = rng.uniform(0.82, 0.9)
        setup["anomalies"][("node", name)] = AnomalyState(NOW + 60, 0, 0, NOW - 10)
    others = [n for n in sorted(levels) if n not in moved_nodes and n not in hot]
    _refresh(setup, hot + rng.sample(others, int(len(others) * fraction)), NOW - 5)
    gc.collect()
    started = time.process_time()
    result = plan_round(
        setup["state"],
        setup["cluster"],
        setup["args"],
        setup["migration"],
        now=NOW + 10,
        anomalies=setup["anomalies"],
        ledger=ledger,
    )
    return (time.process_time() - started) * 1000, result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--new-hot", type=int, default=25, help="nodes turning hot before each steady round")
    parser.add_argument("--output", type=Path, default=RESULTS)
    opts = parser.parse_args(argv)
    setup = build(opts.nodes, opts.pods_per_node)
    cold_ms, burst = _round(setup)
    burst_ms: list[float] = []
    steady_ms: list[float] = []
    calibration: list[float] = []
    for _ in range(opts.rounds):
        ms, burst = _round(setup)
        burst_ms.append(ms)
        calibration.append(_calibration())
    ledger = [move.recent(NOW) for move in burst.moves]
    steady = burst
    for _ in range(opts.rounds):
        ms, steady = _steady_round(setup, ledger, opts.new_hot, 1 / 6)
        ledger.extend(move.recent(NOW + 10) for move in steady.moves)  # as the manager records what it filed
        steady_ms.append(ms)
        calibration.append(_calibration())
    calibration_median = statistics.median(calibration)
    steady_median = statistics.median(steady_ms)
    burst_median = statistics.median(burst_ms)
    figures = {
        "nodes": opts.nodes,
        "pods": opts.nodes * opts.pods_per_node,
        "burst_hot_nodes_acted": sum(1 for pool in burst.pools for node in pool.nodes if node.acted),
        "burst_moves": len(burst.moves),
        "steady_new_hot_nodes": opts.new_hot,
        "steady_moves_last": len(steady.moves),
        "steady_ledger_entries": len(ledger),
        "feed_views_s": round(setup["feed_s"], 2),
        "round_cold_cpu_ms": round(cold_ms, 1),
        "round_burst_cpu_ms_median": round(burst_median, 1),
        "round_burst_cpu_ms_all": [round(v, 1) for v in burst_ms],
        "round_steady_cpu_ms_median": round(steady_median, 1),
        "round_steady_cpu_ms_all": [round(v, 1) for v in steady_ms],
        "calibration_ms_median": round(calibration_median, 1),
        "steady_to_calibration": round(steady_median / calibration_median, 3),
        "burst_to_calibration": round(burst_median / calibration_median, 3),
        "budget_ms": BUDGET_MS,
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(f"{'figure':<34} value")
    for key, value in figures.items():
        print(f"{key:<34} {value}")
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {opts.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
