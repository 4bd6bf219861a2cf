"""What a run measured: per-sample cluster figures, pending times and QoS actions, and the summary.

Utilisation is CPU usage (pods + system) over allocatable, per node. The cluster-wide ratio at a
sample is Σ usage / Σ allocatable over all nodes (a big node weighs more than a small one); with
identical nodes it equals the mean of the nodes' utilisations. "Hot" means strictly above
the scenario's hot threshold (percent). Pending time is bind time minus the time the pod (or its
recreation after an eviction) entered the queue; pods still pending at the end count with the
time they have waited so far, so a policy cannot look better by never placing a pod.

Gang jobs (only in a scenario that has them; the keys are absent otherwise): a job is *fully
running* while at least its ``minMember`` members run (all of them unless ``minMember`` says
fewer: the job can work); ``gangJobsFullyRunning`` counts the jobs that were at some point.
Partial placement is measured in nodes' worth of CPU requests: each pod of a job that has not
started yet (never fully running so far) and that occupies a node (bound, or held at the bind
barrier) counts its CPU request over that node's allocatable CPU; ``partialPlacementNodeMinutes``
sums that over the samples times ``step``, ``partialBoundNodeMinutes`` the same for bound pods
only (held binds excluded). Job start latency runs from the job's first member's arrival to the
moment its ``minMember``-th member is bound (jobs that never fully ran are left out; ``gangJobs``
minus ``gangJobsFullyRunning`` says how many).

Not guaranteed: figures are rounded (summary values to 4 decimals) so that equal seeds give
byte-identical output across platforms with the same numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.sim.descheduling import DeschedulingStats

__all__ = ["HEATMAP_BUCKET_SECONDS", "RunStats"]

F64 = npt.NDArray[np.float64]
HEATMAP_BUCKET_SECONDS = 300.0


@dataclass(slots=True)
class RunStats:
    policy: str
    nodes: int
    step: float
    hot_threshold: int
    times: list[float] = field(default_factory=list)
    spread: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    """Mean over nodes of each node's utilisation (every node weighs the same)."""
    cluster: list[float] = field(default_factory=list)
    """Σ CPU usage / Σ allocatable CPU over all nodes."""
    hot: list[int] = field(default_factory=list)
    pending_queue: list[int] = field(default_factory=list)
    pending_seconds: list[float] = field(default_factory=list)
    throttle_times: list[float] = field(default_factory=list)
    eviction_times: list[float] = field(default_factory=list)
    throttled_pods: set[int] = field(default_factory=set)
    evicted_pods: set[int] = field(default_factory=set)
    restored: int = 0
    submitted: int = 0
    binds: int = 0
    completed: int = 0
    attempts: int = 0
    qos_plans: int = 0
    gang_jobs: int = 0
    jobs_running: list[int] = field(default_factory=list)
    partial_nodes: list[float] = field(default_factory=list)
    """Nodes' worth of CPU requests held by pods of jobs not fully running, per sample."""
    partial_bound_nodes: list[float] = field(default_factory=list)
    """The same for bound pods only."""
    job_start_seconds: list[float] = field(default_factory=list)
    holds: int = 0
    releases: dict[str, int] = field(default_factory=dict)
    deadlocks: int = 0
    descheduler_configured: bool = False
    """The scenario has a ``descheduler`` (the summary then has the descheduling figures, null without one)."""
    descheduling: DeschedulingStats | None = None
    """The balance loop's figures (None: this policy runs no descheduler)."""
    _heat_sum: list[F64] = field(default_factory=list)
    _heat_count: list[int] = field(default_factory=list)

    def sample(self, offset: float, utilisation: F64, pending: int, capacity: F64) -> None:
        """``utilisation`` and ``capacity`` (allocatable CPU, any unit) per node."""
        self.times.append(offset)
        self.spread.append(float(utilisation.std()))
        self.mean.append(float(utilisation.mean()))
        total = float(capacity.sum())
        self.cluster.append(float((utilisation * capacity).sum()) / total if total > 0 else 0.0)
        self.hot.append(int(np.count_nonzero(utilisation * 100.0 > self.hot_threshold)))
        self.pending_queue.append(pending)
        bucket = int(offset // HEATMAP_BUCKET_SECONDS)
        while len(self._heat_sum) <= bucket:
            self._heat_sum.append(np.zeros(self.nodes))
            self._heat_count.append(0)
        self._heat_sum[bucket] += utilisation
        self._heat_count[bucket] += 1

    def sample_jobs(self, fully_running: int, partial_nodes: float, partial_bound_nodes: float) -> None:
        """Gang figures at the sample just taken by ``sample``."""
        self.jobs_running.append(fully_running)
        self.partial_nodes.append(partial_nodes)
        self.partial_bound_nodes.append(partial_bound_nodes)

    def gang_summary(self) -> dict[str, Any]:
        """The gang figures (see the module docstring); empty without gang jobs."""
        if not self.gang_jobs:
            return {}
        latency = np.asarray(self.job_start_seconds, dtype=np.float64)
        return {
            "gangJobs": self.gang_jobs,
            "gangJobsFullyRunning": len(self.job_start_seconds),
            "gangJobsFullyRunningAtEnd": self.jobs_running[-1] if self.jobs_running else 0,
            "partialPlacementNodeMinutes": round(sum(self.partial_nodes) * self.step / 60.0, 1),
            "partialBoundNodeMinutes": round(sum(self.partial_bound_nodes) * self.step / 60.0, 1),
            "jobStartLatencyP50Seconds": round(float(np.percentile(latency, 50)), 1) if latency.size else 0.0,
            "jobStartLatencyMaxSeconds": round(float(latency.max()), 1) if latency.size else 0.0,
            "gangHolds": self.holds,
            "gangReleases": dict(sorted(self.releases.items())),
            "gangDeadlocksResolved": self.deadlocks,
        }

    def heatmap(self) -> F64:
        """Mean utilisation per node (rows) and 5-minute bucket (columns)."""
        if not self._heat_sum:
            return np.zeros((self.nodes, 0))
        columns = [s / max(c, 1) for s, c in zip(self._heat_sum, self._heat_count, strict=True)]
        out: F64 = np.stack(columns, axis=1)
        return out

    def summary(self, still_pending: list[float]) -> dict[str, Any]:
        waits = np.asarray(self.pending_seconds + still_pending, dtype=np.float64)

        def pct(q: float) -> float:
            return round(float(np.percentile(waits, q)), 1) if waits.size else 0.0

        spread = np.asarray(self.spread)
        touched = self.throttled_pods | self.evicted_pods
        return {
            "policy": self.policy,
            "nodes": self.nodes,
            "podsSubmitted": self.submitted,
            "binds": self.binds,
            "completed": self.completed,
            "pendingAtEnd": len(still_pending),
            "schedulingAttempts": self.attempts,
            "cpuUtilisationMean": round(float(np.mean(self.mean)) if self.mean else 0.0, 4),
            "cpuUtilisationClusterMean": round(float(np.mean(self.cluster)) if self.cluster else 0.0, 4),
            "cpuUtilisationStd": round(float(spread.mean()) if spread.size else 0.0, 4),
            "cpuUtilisationStdMax": round(float(spread.max()) if spread.size else 0.0, 4),
            "hotThresholdPercent": self.hot_threshold,
            "hotNodeMinutes": round(sum(self.hot) * self.step / 60.0, 1),
            "pendingP50Seconds": pct(50),
            "pendingP99Seconds": pct(99),
            "pendingMaxSeconds": round(float(waits.max()), 1) if waits.size else 0.0,
            "throttleActions": len(self.throttle_times),
            "podsThrottled": len(self.throttled_pods),
            "restoreActions": self.restored,
            "evictions": len(self.eviction_times),
            "podsEvicted": len(self.evicted_pods),
            "podsTouched": len(touched),
            "qosPlans": self.qos_plans,
            **self.gang_summary(),
            **self.descheduling_summary(),
        }

    def descheduling_summary(self) -> dict[str, Any]:
        """The balance loop's figures (null for a policy without it); empty when the scenario has no descheduler."""
        if not self.descheduler_configured:
            return {}
        d = self.descheduling
        return {
            "deschedulerRounds": d.rounds if d is not None else None,
            "deschedulerMoves": d.moves if d is not None else None,
            "repeatMoves": d.repeat_moves if d is not None else None,
            "agentRepeatEvictions": d.agent_repeats if d is not None else None,
            "podsKeptNoCoolDestination": d.kept_no_destination if d is not None else None,
        }
