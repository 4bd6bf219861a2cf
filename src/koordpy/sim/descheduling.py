"""The manager's LowNodeLoad balance loop inside the simulator: the same round, the same ledger, the same repeat count.

Every ``descheduler.deschedulingInterval`` the engine asks :class:`SimDescheduler` for a round. It keeps what the
manager's :class:`koordpy.manager.balance.BalanceController` keeps between rounds, fed from the simulated cluster
instead of watches:

* the descheduler's view, :class:`~koordpy.descheduler.lownodeload.BalanceState` (nodes once, each NodeMetric as the
  extender receives it, each pod when it starts running and when it leaves);
* the anomaly state (the previous round's), the ledger of recent moves (pruned by
  :func:`~koordpy.descheduler.lownodeload.prune`) and :class:`~koordpy.descheduler.repeats.MoveHistory`.

The round is :func:`~koordpy.descheduler.lownodeload.plan_round` over that view and the extender's ``ClusterState``
the engine schedules with; the rules (classes, anomaly condition, pod order, capacity, the destination check, the
evictor's filters of ``migrationController``, a repeat move) are the manager's, called here, never copied.

Each pod is owned by a ReplicaSet named after its workload (``Job`` for a workload with a ``lifetime``), so the
evictor's filters and the repeat count see a controller; a replacement is created when the engine re-queues it.

Not modelled (not guaranteed): arbitration and the PodMigrationJob lifecycle (a planned move evicts its pod at once
and the engine re-queues it, as ``defaultJobMode: EvictDirectly`` with no arbitration limits would); the
per-round eviction limits of the manager's configuration (none here); Events and metrics.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.scenario import DeschedulerSettings
from koordpy.descheduler.lownodeload import (
    AnomalyState,
    BalancePod,
    BalanceState,
    PlannedMove,
    RecentMove,
    plan_round,
    prune,
)
from koordpy.descheduler.lownodeload.result import AnomalyKey
from koordpy.descheduler.repeats import MoveHistory, WorkloadMove, evicted_after_placement
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import ControllerRef, NodeInfo, NodeMetricInfo, PodInfo
from koordpy.scheduler.framework.cluster import ClusterState

__all__ = ["DeschedulingStats", "SimDescheduler", "owner_uid", "pod_object"]

_NO_DESTINATION = frozenset({"noDestination", "destinationUnknown", "destinationHot"})
LEDGER_HORIZON_SECONDS = 1800.0
"""How long a ledger entry may count at most (the manager: the job ttl, 30 min by default, plus the NodeMetric
expiration)."""


def owner_uid(namespace: str, workload: str) -> str:
    """The uid of the simulated controller of a workload's pods."""
    return f"sim-owner/{namespace}/{workload}"


def _quantities(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: f"{amount}m" if name == "cpu" else str(amount) for name, amount in resources.items()}


def pod_object(pod: PodInfo, workload: str, batch: bool, created: float) -> dict[str, Any]:
    """The core/v1 Pod a simulated pod stands for (running on ``pod.node_name``), as the evictor's filters read it."""
    kind = "Job" if batch else "ReplicaSet"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
            "annotations": dict(pod.annotations),
            "creationTimestamp": format_rfc3339(math.floor(created)),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1" if batch else "apps/v1",
                    "kind": kind,
                    "name": workload,
                    "uid": owner_uid(pod.namespace, workload),
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": pod.node_name,
            "schedulerName": pod.scheduler_name,
            "priority": pod.priority,
            "containers": [
                {
                    "name": "main",
                    "resources": {"requests": _quantities(pod.requests), "limits": _quantities(pod.limits)},
                }
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


@dataclass
class DeschedulingStats:
    """What the balance loop did in one run."""

    rounds: int = 0
    moves: int = 0
    """Pods moved (each a PodMigrationJob the manager would file)."""
    repeat_moves: int = 0
    """Moves that repeat a recent move of the same workload (``moved_again``)."""
    agent_repeats: int = 0
    """Agent evictions of pods placed less than the window before (``agent_eviction``)."""
    kept_no_destination: int = 0
    """Pods of acted-on hot nodes left in place because the scheduler's pick would not stay cool with them (or
    there is none): causes ``noDestination``, ``destinationUnknown``, ``destinationHot``."""


class SimDescheduler:
    """The balance loop of one simulated run; times are seconds since the epoch (the scenario's clock)."""

    def __init__(self, settings: DeschedulerSettings, args: LowNodeLoadArgs, nodes: list[NodeInfo]) -> None:
        self.settings = settings
        self.args = args
        self.state = BalanceState(args)
        for node in nodes:
            self.state.upsert_node(node)
        self.anomalies: dict[AnomalyKey, AnomalyState] = {}
        self.ledger: dict[str, RecentMove] = {}
        """Job name -> its move, while it counts."""
        self.history = MoveHistory(settings.repeat_move_window_seconds)
        self.stats = DeschedulingStats()
        self._jobs = 0

    def metric(self, metric: NodeMetricInfo) -> None:
        self.state.upsert_metric(metric)

    def running(self, pod: PodInfo, workload: str, batch: bool, created: float, job: str | None) -> None:
        """``pod`` (placed, ``node_name`` set) runs, created at ``created``; ``job``: the move whose replacement it
        is, if any."""
        kind, api_version = ("Job", "batch/v1") if batch else ("ReplicaSet", "apps/v1")
        info = dataclasses.replace(
            pod,
            creation_time=float(math.floor(created)),
            controller=ControllerRef(kind, workload, owner_uid(pod.namespace, workload), api_version),
            owner_kinds=(kind,),
        )
        self.state.upsert_pod(BalancePod(info, pod_object(info, workload, batch, created)))
        if job is not None:
            self.history.landed(job, pod.node_name)

    def gone(self, uid: str) -> None:
        self.state.remove_pod(uid)

    def agent_evicted(self, placed_at: float | None, now: float) -> None:
        """The agent evicted a pod placed at ``placed_at``: a repeat move when that was within the window."""
        if evicted_after_placement(placed_at, now, self.history.window):
            self.stats.agent_repeats += 1

    def round(self, cluster: ClusterState, now: float) -> list[tuple[PlannedMove, str]]:
        """One round at ``now``: the moves to carry out, each with its job's name (recorded in the ledger and the
        history already)."""
        state = self.state
        moves = list(self.ledger.values())
        nodes = {m.source for m in moves} | {m.destination for m in moves if m.destination is not None}
        update_time = {}
        for name in nodes:
            row = state.row(name)
            if row is not None:
                update_time[name] = float(state.update_time[row])
        listed = {(m.source, m.pod) for m in moves if state.listed(m.source, m.pod)}
        kept = set(prune(moves, update_time, listed, now, LEDGER_HORIZON_SECONDS))
        self.ledger = {job: move for job, move in self.ledger.items() if move in kept}
        self.history.prune(now)
        result = plan_round(
            state,
            cluster,
            self.args,
            self.settings.migration_controller,
            now=now,
            anomalies=self.anomalies,
            ledger=list(self.ledger.values()),
        )
        self.anomalies = dict(result.anomalies)
        self.stats.rounds += 1
        self.stats.kept_no_destination += sum(1 for k in result.kept if k.cause in _NO_DESTINATION)
        if result.paused or self.args.dry_run:
            return []
        out = []
        for move in result.moves:
            self._jobs += 1
            job = f"lownodeload-{self._jobs}"
            self.ledger[job] = move.recent(now)
            self.stats.moves += 1
            out.append((move, job))
            pod = next((p for p in state.pods_on(move.node) if p.key == move.pod), None)
            if pod is None or pod.info.controller is None:
                continue
            workload = pod.info.controller.uid
            if self.history.repeat_of(workload, pod.info.creation_time, move.node, now) is not None:
                self.stats.repeat_moves += 1
            self.history.record(WorkloadMove(workload, job, move.pod, move.node, None, now))
        return out
