"""The discrete-event loop: a fake clock, an event heap, and an in-memory cluster that applies decisions.

Events (same instant: completions, metric deliveries, arrivals, then the sampling tick):

* arrival: the pod joins the scheduling queue;
* completion: the pod leaves its node (the scheduler state forgets it);
* metric delivery: the NodeMetrics reported ``lag`` seconds earlier become visible;
* tick, every ``step``: demand is sampled, cut at limits and throttles and shared out on
  over-committed nodes; statistics are recorded; every ``reportInterval`` a NodeMetric report is
  taken; every ``qos.interval`` the agent's QoS planner runs on every node.

After each instant's events a scheduling cycle runs over the queue, highest priority first (then
first queued). Pods that fail wait until a pod leaves a node, a NodeMetric arrives (load-aware
placement only: kube-scheduler requeues on NodeMetric events for it) or five minutes pass (the
unschedulable-queue flush). Within one cycle a failed pod's identical siblings (same workload)
are not retried: binds only add load, so they would fail too.

The decisions are never made here: placement comes from ``koordpy.sim.kubescheduler`` (the
extender's ``ClusterState`` for koordpy), QoS from the planner in ``koordpy.sim.qos``, gang
verdicts from the gang model's ``GangCache`` (koordpy only).

Gang jobs under koordpy (the extender as binder, as ``koordpy.scheduler.plugins.gang`` describes):
a member that fails the model's admission (quorum, or a yield after deadlock resolution) waits
unschedulable until another member of its GangGroup arrives or the model wakes it (``take_wakeups``,
the extender's requeue); a member kube-scheduler places is *held*: its requests stay reserved on the node
(kube-scheduler's assumed pod, also recorded in ``ClusterState``) and it is bound only when the
model hands it out with ``take_ready``. A member that finds no node is reported with
``scheduling_failed`` (Strict: the group's holds are released). Released holds (Strict cascade,
wait-time expiry, the binder-timeout renewal, NonStrict deadlock resolution) are un-assumed: the
node is freed, unschedulable pods are requeued (kube-scheduler's move on a binding failure) and the
pod goes back to the queue after kube-scheduler's backoff (1 s doubling to 10 s per release). The
model's ``next_deadline`` is a timer event. The baseline has no gang awareness: members bind as
they fit. Not modelled: the bind barrier's HTTP round trips (a held bind costs no time).

Not guaranteed: NodeMetric objects are handed to the scheduler lazily, just before the next
scheduling cycle (only the newest report matters, since a NodeMetric replaces the previous one);
inspecting ``state`` between cycles may show an older metric.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.config.scenario import Scenario
from koordpy.model.objects import AggregatedUsage, NodeInfo, NodeMetricInfo, PodInfo, PodMetricInfo, node_from_dict
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.plugins.gang import Admission, GangCache, Release
from koordpy.scheduler.profile import build_plugins
from koordpy.sim.descheduling import SimDescheduler
from koordpy.sim.kubescheduler import (
    LeastAllocatedPlacement,
    LoadAwarePlacement,
    NodeSampler,
    Placement,
    RequestsFit,
)
from koordpy.sim.qos import ClusterView, PodUsage, QosAction, QosPlanner
from koordpy.sim.stats import RunStats
from koordpy.sim.trace import Trace
from koordpy.sim.usage import UsageModel

__all__ = ["BASELINE", "KOORDPY", "Policy", "Simulation", "scenario_nodes"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

COMPLETE, DELIVER, ARRIVE, TICK, BACKOFF, GANG_TIMER = 0, 1, 2, 3, 4, 5
NOT_ARRIVED, PENDING, RUNNING, DONE, HELD = 0, 1, 2, 3, 4
UNSCHEDULABLE_FLUSH_SECONDS = 300.0
INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 10.0
"""kube-scheduler's ``podInitialBackoffSeconds`` and ``podMaxBackoffSeconds`` defaults."""
SETTLE_ROUNDS = 3
YOUNG_COLLECTION_THRESHOLD = 20_000
"""Allocations (net) between two young-generation collections while a run is in progress (see
``_fewer_young_collections``)."""


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    placement: Literal["load-aware", "least-allocated"]
    qos: Literal["waterline", "naive"]
    low_node_load: Literal["", "scenario", "compare"] = ""
    """Which of the scenario's ``descheduler`` arguments the balance loop runs with ("": no descheduler)."""


KOORDPY = Policy("koordpy", "load-aware", "waterline", "scenario")
BASELINE = Policy("baseline", "least-allocated", "naive")
COMPARED = Policy("koordpy-compared", "load-aware", "waterline", "compare")
"""koordpy with the scenario's ``descheduler.compareLowNodeLoad`` (``--compare lowNodeLoad``)."""


@dataclass(frozen=True, slots=True)
class _Report:
    """One NodeMetric report for every node, as arrays (materialised into NodeMetricInfo lazily)."""

    update_time: float
    node_cpu: I64
    node_memory: I64
    pod_ids: I64
    """Pods running at report time, grouped by node (``offsets`` delimit each node's slice)."""
    pod_names: list[str]
    pod_cpu: I64
    pod_memory: I64
    offsets: I64
    aggregated: list[tuple[float, dict[str, tuple[I64, I64]]]]


def _koord_qos(pod: PodInfo) -> str:
    label = pod.labels.get("koordinator.sh/qosClass")
    if label:
        return label
    return {"Guaranteed": "LSR", "Burstable": "LS"}.get(pod.qos.value, "BE")


def scenario_nodes(scenario: Scenario) -> list[NodeInfo]:
    """The scenario's nodes, pool by pool (``<pool>-<i>``), as the simulated cluster holds them."""
    nodes = []
    for pool in scenario.node_pools:
        allocatable = {k: str(v) if k != "cpu" else f"{v}m" for k, v in pool.allocatable.items()}
        for i in range(pool.count):
            raw = {
                "metadata": {
                    "name": f"{pool.name}-{i}",
                    "labels": {"kubernetes.io/hostname": f"{pool.name}-{i}", **pool.labels},
                    "annotations": dict(pool.annotations),
                },
                "status": {"allocatable": allocatable, "capacity": allocatable},
            }
            nodes.append(node_from_dict(raw))
    return nodes


class Simulation:
    """One run of one policy over one trace. ``run`` may be called once."""

    def __init__(self, scenario: Scenario, trace: Trace, policy: Policy, seed: int, qos: QosPlanner | None) -> None:
        self.scenario = scenario
        self.trace = trace
        self.policy = policy
        self.usage = UsageModel(scenario, trace, seed)
        self.qos = qos if scenario.qos.enabled else None
        self.nodes = self._nodes(scenario)
        count = len(self.nodes)
        resources = {r for n in self.nodes for r in n.allocatable}
        for template in trace.templates:
            resources.update(r for r, v in template.requests.items() if v)
        self.fit = RequestsFit(self.nodes, sorted(resources))
        rng = np.random.default_rng([seed, 2])
        self.state: ClusterState | None = None
        self.placement: Placement
        self.sampler: NodeSampler
        if policy.placement == "load-aware":
            self.state = ClusterState(build_plugins(scenario.scheduler))
            for node in self.nodes:
                self.state.upsert_node(node)
            self.placement = LoadAwarePlacement(self.state, self.fit, rng)
            self.sampler = NodeSampler(scenario.kube_scheduler.percentage_of_nodes_to_score)
        else:
            self.placement = LeastAllocatedPlacement(self.fit, rng)
            self.sampler = NodeSampler(0)  # the stock kube-scheduler's default
        pools = [(pool, pool.count) for pool in scenario.node_pools]
        self.sys_cpu = np.concatenate([np.full(c, p.system_usage.get("cpu", 0), np.float64) for p, c in pools])
        self.sys_memory = np.concatenate([np.full(c, p.system_usage.get("memory", 0), np.float64) for p, c in pools])
        self.alloc_cpu = np.array([n.allocatable["cpu"] for n in self.nodes], np.float64)
        self.alloc_memory = np.array([n.allocatable["memory"] for n in self.nodes], np.float64)
        pods = len(trace)
        self.pod_state = np.zeros(pods, np.int8)
        self.node_of = np.full(pods, -1, np.int64)
        self.attempt = np.zeros(pods, np.int64)
        self.queued_at = np.zeros(pods)
        self.quota = np.full(pods, np.inf)
        self.cpu_used = np.zeros(pods)
        self.cpu_demand = np.zeros(pods)  # uncut, for the QoS pressure model
        self.memory_used = np.zeros(pods)
        limits = [t.limits.get("cpu", 0) for t in trace.templates]
        self.cpu_limit = np.array([limits[w] or np.inf for w in trace.workload.tolist()], np.float64)
        priorities = [t.priority or 0 for t in trace.templates]
        self.priority = np.array([priorities[w] for w in trace.workload.tolist()], np.int64)
        self.vectors = [self.fit.vector(t.requests) for t in trace.templates]
        self.current: list[PodInfo | None] = [None] * pods
        self.pod_names: list[str] = [""] * pods
        self.on_node: list[set[int]] = [set() for _ in range(count)]
        self.window_cpu = np.zeros(pods)
        self.window_memory = np.zeros(pods)
        self.window_count = np.zeros(pods)
        self.window_node_cpu = np.zeros(count)
        self.window_node_memory = np.zeros(count)
        self.window_samples = 0
        self.report_every = round(scenario.node_metric.report_interval / scenario.step)
        self.qos_every = round(scenario.qos.interval / scenario.step)
        windows = scenario.node_metric.aggregated_durations
        self.history = max((round(w / scenario.step) for w in windows), default=0)
        self.cpu_history = np.zeros((count, self.history))
        self.memory_history = np.zeros((count, self.history))
        self.samples = 0
        self.active: set[int] = set()
        self.unschedulable: dict[int, float] = {}
        self.unreported: _Report | None = None
        self.events: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.stats = RunStats(policy.name, count, scenario.step, scenario.hot_threshold)
        self.stats.gang_jobs = len(trace.gangs.names) if trace.gangs is not None else 0
        self.reports: list[_Report | None] = []
        kinds = [(t.namespace, t.priority_class.value, _koord_qos(t)) for t in trace.templates]
        self.pod_metric_kind = [kinds[w] for w in trace.workload.tolist()]
        self.started = np.zeros(pods)
        self.node_names = [n.name for n in self.nodes]
        self.system_usage = [
            {"cpu": int(c), "memory": int(m)}
            for c, m in zip(self.sys_cpu.tolist(), self.sys_memory.tolist(), strict=True)
        ]
        self.node_labels = [n.labels for n in self.nodes]
        gangs = trace.gangs
        self.job = gangs.job if gangs is not None else np.full(pods, -1, np.int32)
        self.job_size = gangs.members if gangs is not None else np.zeros(0, np.int32)
        self.job_quorum = gangs.quorum if gangs is not None else np.zeros(0, np.int32)
        self.job_running = np.zeros(self.job_size.size, np.int64)
        self.job_started = np.zeros(self.job_size.size, np.bool_)
        self.gangs: GangCache | None = None
        if gangs is not None and policy.placement == "load-aware":
            self.gangs = GangCache(scenario.scheduler.gang)
        self.pod_of_key: dict[str, int] = {}
        """Gang member ``namespace/name`` → pod id (koordpy only)."""
        self.failed_members: set[str] = set()
        """Members reported with ``scheduling_failed`` and not held since (the model keeps their failure)."""
        self.hold_of: dict[int, int] = {}
        """Held pod → the hold id the model gave its bind request."""
        self.releases = np.zeros(pods, np.int64)
        self.gang_failed_nonstrict = False
        self.timer_at = np.inf
        self.cpu_request = np.array([t.requests.get("cpu", 0) for t in trace.templates], np.float64)[trace.workload]
        self.descheduler: SimDescheduler | None = None
        self.deschedule_every = 0
        self.undescheduled: list[NodeMetricInfo] = []
        """The newest NodeMetrics published and not yet handed to the descheduler."""
        self.moved_by: dict[int, str] = {}
        """Pod moved by the balance loop and not running again yet -> the move's job."""
        settings = scenario.descheduler
        if settings is not None and self.state is not None and policy.low_node_load:
            args = settings.low_node_load if policy.low_node_load == "scenario" else settings.compare_low_node_load
            if args is None:
                raise ValueError(f"policy {policy.name}: the scenario has no descheduler.compareLowNodeLoad")
            self.descheduler = SimDescheduler(settings, args, self.nodes)
            self.deschedule_every = round(settings.descheduling_interval / scenario.step)
        self.stats.descheduler_configured = settings is not None
        self.stats.descheduling = self.descheduler.stats if self.descheduler is not None else None

    @staticmethod
    def _nodes(scenario: Scenario) -> list[NodeInfo]:
        return scenario_nodes(scenario)

    # ---- event plumbing ----------------------------------------------------------------

    def _push(self, at: float, kind: int, pod: int = -1, attempt: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, kind, self.seq, pod, attempt))

    def run(self, progress: Callable[[float], None] | None = None) -> RunStats:
        with _fewer_young_collections():
            return self._run(progress)

    def _run(self, progress: Callable[[float], None] | None) -> RunStats:
        end = self.scenario.duration
        for pod_id, at in enumerate(self.trace.arrival.tolist()):
            self._push(at, ARRIVE, pod_id)
        self._push(0.0, TICK)
        self.stats.submitted = len(self.trace)
        last_progress = -1
        while self.events and self.events[0][0] <= end:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                at, kind, _, pod_id, attempt = heapq.heappop(self.events)
                if kind == ARRIVE:
                    self._enqueue(pod_id, at)
                elif kind == COMPLETE:
                    if self.pod_state[pod_id] == RUNNING and self.attempt[pod_id] == attempt:
                        self._unbind(pod_id, at)
                        self.pod_state[pod_id] = DONE
                        self.stats.completed += 1
                elif kind == DELIVER:
                    self._deliver(pod_id)
                elif kind == TICK:
                    self._tick(at)
                elif kind == BACKOFF:
                    if self.pod_state[pod_id] == PENDING and pod_id not in self.unschedulable:
                        self.active.add(pod_id)
                elif at == self.timer_at:  # GANG_TIMER
                    self.timer_at = np.inf
            if self.active:
                self._schedule(now)
            if self.gangs is not None:
                self._settle_rounds(now)
            if progress is not None and int(100 * now / end) != last_progress:
                last_progress = int(100 * now / end)
                progress(now / end)
        if progress is not None:
            progress(1.0)
        if self.qos is not None:
            self.stats.qos_plans = self.qos.plans
        return self.stats

    def still_pending(self) -> list[float]:
        """Seconds waited so far by each pod still in the queue at the end."""
        end = self.scenario.duration
        waiting = np.flatnonzero((self.pod_state == PENDING) | (self.pod_state == HELD))
        return [round(end - float(self.queued_at[p]), 3) for p in waiting.tolist()]

    # ---- scheduling --------------------------------------------------------------------

    def _enqueue(self, pod_id: int, now: float) -> None:
        self.pod_state[pod_id] = PENDING
        self.queued_at[pod_id] = now
        pod = self.current[pod_id] = self.trace.pod(pod_id, int(self.attempt[pod_id]))
        self.pod_names[pod_id] = pod.name
        self.active.add(pod_id)
        if self.gangs is not None and self.job[pod_id] >= 0:
            self.pod_of_key[pod.key] = pod_id
            self.gangs.upsert_pod(pod)
            self._requeue_group(pod.key)

    def _requeue_group(self, pod_key: str) -> None:
        """A member arrived: its GangGroup's members parked by the quorum check are tried again
        (the extender's rejection is resolved by the pod-add event)."""
        assert self.gangs is not None
        own = self.gangs.gang_of(pod_key)
        view = self.gangs.view(own) if own is not None else None
        if view is None or not self.unschedulable:
            return
        group = set(view.spec.group) | {view.spec.id}
        for other in [p for p in self.unschedulable if self.job[p] >= 0]:
            pod = self.current[other]
            if pod is not None and self.gangs.gang_of(pod.key) in group:
                del self.unschedulable[other]
                self.active.add(other)

    def _requeue_unschedulable(self, older_than: float | None = None) -> None:
        if not self.unschedulable:
            return
        if older_than is None:
            self.active.update(self.unschedulable)
            self.unschedulable.clear()
            return
        due = [p for p, at in self.unschedulable.items() if at <= older_than]
        for pod_id in due:
            del self.unschedulable[pod_id]
            self.active.add(pod_id)

    def _schedule(self, now: float) -> None:
        if self.unreported is not None:
            self._publish(self.unreported)
            self.unreported = None
        epoch = self.scenario.start + now  # the scheduler's clock is wall time, like NodeMetric updateTime
        order = sorted(self.active, key=lambda p: (-int(self.priority[p]), float(self.queued_at[p]), p))
        self.active.clear()
        failed: set[int] = set()
        workload = self.trace.workload
        gangs = self.gangs
        for pod_id in order:
            w = int(workload[pod_id])
            pod = self.current[pod_id]
            assert pod is not None
            member = gangs is not None and self.job[pod_id] >= 0
            if member and gangs is not None and not _admitted(gangs.admit_request(pod)):
                self.unschedulable[pod_id] = now  # PreEnqueue: not a scheduling attempt, not a failure
                continue
            if w in failed:
                self.unschedulable[pod_id] = now
                if member:
                    self._gang_failed(pod.key)
                continue
            if member and gangs is not None and self._rejected_at_once(pod_id, pod.key, now):
                continue
            vec = self.vectors[w]
            candidates, every_node = self.sampler.sample(self.fit.feasible(vec))
            self.stats.attempts += 1
            node = self.placement.choose(pod, candidates, epoch) if candidates.size else None
            if node is None:
                if every_node:  # a sample that failed says nothing about the next pod's sample
                    failed.add(w)
                self.unschedulable[pod_id] = now
                if member:
                    self._gang_failed(pod.key)
                continue
            if member:
                self._hold(pod_id, pod, node, now)
            else:
                self._bind(pod_id, pod, node, now)

    def _place(self, pod_id: int, pod: PodInfo, node: int, now: float, phase: str) -> PodInfo:
        """Reserve the pod's requests on ``node`` (kube-scheduler's assume) and tell ``ClusterState``."""
        self.fit.bind(node, self.vectors[int(self.trace.workload[pod_id])])
        epoch = self.scenario.start + now
        placed = dataclasses.replace(pod, node_name=self.node_names[node], phase=phase, scheduled_time=epoch)
        self.current[pod_id] = placed
        if self.state is not None:
            self.state.upsert_pod(placed, epoch)
        self.node_of[pod_id] = node
        return placed

    def _bind(self, pod_id: int, pod: PodInfo, node: int, now: float) -> None:
        self._place(pod_id, pod, node, now, "Running")
        self._start(pod_id, node, now)

    def _start(self, pod_id: int, node: int, now: float) -> None:
        self.on_node[node].add(pod_id)
        self.pod_state[pod_id] = RUNNING
        if self.descheduler is not None:
            pod = self.current[pod_id]
            assert pod is not None
            template = self.scenario.workloads[int(self.trace.workload[pod_id])]
            created = self.scenario.start + float(self.queued_at[pod_id])
            moved_by = self.moved_by.pop(pod_id, None)
            self.descheduler.running(pod, template.name, template.lifetime is not None, created, moved_by)
        job = int(self.job[pod_id])
        if job >= 0:
            self.job_running[job] += 1
            if self.job_running[job] == self.job_quorum[job] and not self.job_started[job]:
                self.job_started[job] = True
                assert self.trace.gangs is not None
                self.stats.job_start_seconds.append(round(now - float(self.trace.gangs.first_arrival[job]), 3))
        self.quota[pod_id] = np.inf
        self.started[pod_id] = now
        self.stats.binds += 1
        self.stats.pending_seconds.append(round(now - float(self.queued_at[pod_id]), 3))
        lifetime = float(self.trace.lifetime[pod_id])
        if np.isfinite(lifetime):
            self._push(now + lifetime, COMPLETE, pod_id, int(self.attempt[pod_id]))

    # ---- gangs (koordpy only) -----------------------------------------------------------

    def _hold(self, pod_id: int, pod: PodInfo, node: int, now: float) -> None:
        """kube-scheduler placed a gang member: it stays assumed on ``node`` while the bind is held."""
        assert self.gangs is not None
        placed = self._place(pod_id, pod, node, now, "Pending")
        self.pod_state[pod_id] = HELD
        self.failed_members.discard(placed.key)
        hold, _ = self.gangs.hold(placed.key, placed.uid, placed.node_name, now)
        assert hold is not None, "a gang member the model does not know"
        self.hold_of[pod_id] = hold.hold_id
        self.stats.holds += 1

    def _rejected_at_once(self, pod_id: int, pod_key: str, now: float) -> bool:
        """A member whose GangGroup's permit is ``reject`` (a Strict member's failure is outstanding)
        other than one of the failed members would be held and released at once: skip the placement,
        count the rejection, back off. (Saves
        the simulator a filter and score per retry; the node's room is not reserved for that instant.)"""
        assert self.gangs is not None
        if pod_key in self.failed_members:
            return False  # its own hold clears its failure (the model's rule), so it must be tried
        gang_id = self.gangs.gang_of(pod_key)
        if gang_id is None or self.gangs.permit(gang_id, now).verdict != "reject":
            return False
        self.stats.holds += 1
        self.stats.releases["rejected"] = self.stats.releases.get("rejected", 0) + 1
        self._backoff(pod_id, now)
        return True

    def _backoff(self, pod_id: int, now: float) -> None:
        self.releases[pod_id] += 1
        doublings = min(int(self.releases[pod_id]) - 1, 30)
        self._push(now + min(INITIAL_BACKOFF_SECONDS * 2.0**doublings, MAX_BACKOFF_SECONDS), BACKOFF, pod_id)

    def _gang_failed(self, pod_key: str) -> None:
        assert self.gangs is not None
        self.failed_members.add(pod_key)
        self.gangs.scheduling_failed(pod_key, "0 nodes fit")
        gang_id = self.gangs.gang_of(pod_key)
        view = self.gangs.view(gang_id) if gang_id is not None else None
        if view is not None and view.spec.mode == "NonStrict":
            self.gang_failed_nonstrict = True

    def _settle_rounds(self, now: float) -> None:
        """Settle, and while releases freed room for requeued pods, schedule again at the same instant
        (kube-scheduler moves them to the active queue at once; the released pods are in backoff).
        At most ``SETTLE_ROUNDS`` rounds per instant."""
        for _ in range(SETTLE_ROUNDS):
            if not self._settle_gangs(now) or not self.active:
                return
            self._schedule(now)
        self._settle_gangs(now)

    def _settle_gangs(self, now: float) -> int:
        """Bind what the model allows, resolve NonStrict deadlocks, release what it releases, arm the
        timer. Returns the number of holds released."""
        gangs = self.gangs
        assert gangs is not None
        for batch in gangs.take_ready(now):
            for hold in batch.holds:
                pod_id = self._held_pod(hold.pod, hold.hold_id)
                if pod_id is None or not gangs.is_current(hold):
                    continue
                node = int(self.node_of[pod_id])
                held = self.current[pod_id]
                assert held is not None
                placed = dataclasses.replace(held, phase="Running")
                self.current[pod_id] = placed
                if self.state is not None:
                    self.state.upsert_pod(placed, self.scenario.start + now)
                del self.hold_of[pod_id]
                gangs.bound(hold.pod, hold.node)
                self._start(pod_id, node, now)
        if self.gang_failed_nonstrict:
            self.gang_failed_nonstrict = False
            if gangs.holds():
                found = gangs.resolve_deadlock(self._free(), now)
                if found is not None:
                    self.stats.deadlocks += 1
        released = 0
        for release in gangs.take_releases(now):
            released += self._release(release, now)
        for wakeup in gangs.take_wakeups():  # the extender's requeue of members it refused at admission
            pod_id = self.pod_of_key.get(wakeup.pod)
            if pod_id is not None and self.unschedulable.pop(pod_id, None) is not None:
                self.active.add(pod_id)
                released += 1
        deadline = gangs.next_deadline()
        if deadline is not None and deadline < self.timer_at:
            self.timer_at = max(deadline, now)
            self._push(self.timer_at, GANG_TIMER)
        return released

    def _held_pod(self, pod_key: str, hold_id: int) -> int | None:
        """The held pod of that bind request (None when it is no longer held by that request)."""
        pod_id = self.pod_of_key.get(pod_key)
        if pod_id is None or self.pod_state[pod_id] != HELD or self.hold_of.get(pod_id) != hold_id:
            return None
        return pod_id

    def _release(self, release: Release, now: float) -> int:
        """The held bind is answered with an error: kube-scheduler un-assumes the pod and backs it off.
        Returns 1, or 0 when the pod is no longer held by that request."""
        pod_id = self._held_pod(release.hold.pod, release.hold.hold_id)
        if pod_id is None:
            return 0
        del self.hold_of[pod_id]
        self._unbind(pod_id, now)
        pod = self.current[pod_id]
        assert pod is not None
        self.current[pod_id] = dataclasses.replace(pod, node_name="", phase="Pending", scheduled_time=None)
        self.pod_state[pod_id] = PENDING
        self.stats.releases[release.cause] = self.stats.releases.get(release.cause, 0) + 1
        self._backoff(pod_id, now)
        return 1

    def _free(self) -> dict[str, dict[str, int]]:
        names = self.fit.resources
        return {
            node: {names[i]: int(v) for i, v in enumerate(row)}
            for node, row in zip(self.node_names, self.fit.free.tolist(), strict=True)
        }

    def _unbind(self, pod_id: int, now: float) -> None:
        node = int(self.node_of[pod_id])
        job = int(self.job[pod_id])
        if job >= 0 and self.pod_state[pod_id] == RUNNING:
            self.job_running[job] -= 1
        self.fit.unbind(node, self.vectors[int(self.trace.workload[pod_id])])
        pod = self.current[pod_id]
        if self.state is not None and pod is not None:
            self.state.remove_pod(pod.uid)
        if self.descheduler is not None and pod is not None:
            self.descheduler.gone(pod.uid)
        self.on_node[node].discard(pod_id)
        self.node_of[pod_id] = -1
        self.quota[pod_id] = np.inf
        self.cpu_used[pod_id] = 0.0
        self.cpu_demand[pod_id] = 0.0
        self.memory_used[pod_id] = 0.0
        self._requeue_unschedulable()

    # ---- usage, reports, QoS ------------------------------------------------------------

    def _tick(self, now: float) -> None:
        end = self.scenario.duration
        if now + self.scenario.step <= end:
            self._push(now + self.scenario.step, TICK)
        self._requeue_unschedulable(older_than=now - UNSCHEDULABLE_FLUSH_SECONDS)
        demand_cpu, demand_memory = self.usage.demand(now, self.samples)
        running = self.pod_state == RUNNING
        ids = np.flatnonzero(running)
        nodes = self.node_of[ids]
        count = len(self.nodes)
        cpu = np.minimum(np.minimum(demand_cpu[ids], self.cpu_limit[ids]), self.quota[ids])
        pods_cpu = np.bincount(nodes, weights=cpu, minlength=count)
        room = np.maximum(self.alloc_cpu - self.sys_cpu, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(pods_cpu > room, room / pods_cpu, 1.0)
        cpu = cpu * share[nodes]
        memory = demand_memory[ids]
        self.cpu_used[ids] = cpu
        self.cpu_demand[ids] = demand_cpu[ids]
        self.memory_used[ids] = memory
        node_cpu = np.bincount(nodes, weights=cpu, minlength=count) + self.sys_cpu
        node_memory = np.bincount(nodes, weights=memory, minlength=count) + self.sys_memory
        utilisation = node_cpu / self.alloc_cpu
        if self.gangs is None:
            pending = len(self.active) + len(self.unschedulable)
        else:  # pods in backoff and held binds wait too
            pending = int(np.count_nonzero((self.pod_state == PENDING) | (self.pod_state == HELD)))
        self.stats.sample(now, utilisation, pending, self.alloc_cpu)
        if self.trace.gangs is not None:
            self._sample_jobs()
        self.window_cpu[ids] += cpu
        self.window_memory[ids] += memory
        self.window_count[ids] += 1
        self.window_node_cpu += node_cpu
        self.window_node_memory += node_memory
        self.window_samples += 1
        if self.history:
            slot = self.samples % self.history
            self.cpu_history[:, slot] = node_cpu
            self.memory_history[:, slot] = node_memory
        if self.samples % self.report_every == 0:
            self._report(now, ids, nodes)
        if self.qos is not None and self.samples % self.qos_every == 0:
            self._run_qos(now, node_cpu, node_memory)
        if self.descheduler is not None and self.samples % self.deschedule_every == 0:
            self._deschedule(now)
        self.samples += 1

    def _sample_jobs(self) -> None:
        """Jobs running (at least ``minMember`` members running), and the CPU requests (in nodes' worth:
        request / the node's allocatable) that pods of jobs not started yet hold on nodes: bound, and held."""
        full = self.job_running >= self.job_quorum
        placed = np.flatnonzero((self.job >= 0) & (self.node_of >= 0))
        partial = placed[~self.job_started[self.job[placed]]]
        worth = self.cpu_request[partial] / self.alloc_cpu[self.node_of[partial]]
        bound = self.pod_state[partial] == RUNNING
        self.stats.sample_jobs(int(np.count_nonzero(full)), float(worth.sum()), float(worth[bound].sum()))

    def _report(self, now: float, ids: I64, nodes: I64) -> None:
        if self.state is None:  # the default kube-scheduler does not read NodeMetric
            self._reset_window()
            return
        samples = max(self.window_samples, 1)
        order = np.argsort(nodes, kind="stable")
        pod_ids = ids[order]
        counts = np.maximum(self.window_count[pod_ids], 1)
        offsets = np.searchsorted(nodes[order], np.arange(len(self.nodes) + 1))
        aggregated: list[tuple[float, dict[str, tuple[I64, I64]]]] = []
        filled = min(self.samples + 1, self.history)
        for window in sorted(set(self.scenario.node_metric.aggregated_durations)):
            width = round(window / self.scenario.step)
            if filled < width:
                continue
            slots = [(self.samples - i) % self.history for i in range(width)]
            cpu_hist, memory_hist = self.cpu_history[:, slots], self.memory_history[:, slots]
            kinds: dict[str, tuple[I64, I64]] = {
                "avg": (
                    cpu_hist.mean(axis=1).round().astype(np.int64),
                    memory_hist.mean(axis=1).round().astype(np.int64),
                )
            }
            for q in (50, 90, 95, 99):
                kinds[f"p{q}"] = (
                    np.percentile(cpu_hist, q, axis=1).round().astype(np.int64),
                    np.percentile(memory_hist, q, axis=1).round().astype(np.int64),
                )
            aggregated.append((window, kinds))
        names = self.pod_names
        report = _Report(
            update_time=self.scenario.start + now,
            node_cpu=(self.window_node_cpu / samples).round().astype(np.int64),
            node_memory=(self.window_node_memory / samples).round().astype(np.int64),
            pod_ids=pod_ids,
            pod_names=[names[p] for p in pod_ids.tolist()],
            pod_cpu=(self.window_cpu[pod_ids] / counts).round().astype(np.int64),
            pod_memory=(self.window_memory[pod_ids] / counts).round().astype(np.int64),
            offsets=offsets.astype(np.int64),
            aggregated=aggregated,
        )
        self._reset_window()
        self.reports.append(report)
        self._push(now + self.scenario.node_metric.lag, DELIVER, len(self.reports) - 1)

    def _reset_window(self) -> None:
        self.window_cpu[:] = 0
        self.window_memory[:] = 0
        self.window_count[:] = 0
        self.window_node_cpu[:] = 0
        self.window_node_memory[:] = 0
        self.window_samples = 0

    def _deliver(self, index: int) -> None:
        report = self.reports[index]
        self.reports[index] = None
        assert report is not None
        if self.unreported is None or report.update_time >= self.unreported.update_time:
            self.unreported = report
        self._requeue_unschedulable()

    def _publish(self, report: _Report) -> None:
        assert self.state is not None
        interval = self.scenario.node_metric.report_interval
        offsets = report.offsets.tolist()
        node_cpu, node_memory = report.node_cpu.tolist(), report.node_memory.tolist()
        kinds = self.pod_metric_kind
        entries = [
            PodMetricInfo(kind[0], name, {"cpu": cpu, "memory": memory}, kind[1], kind[2])
            for kind, name, cpu, memory in zip(
                [kinds[p] for p in report.pod_ids.tolist()],
                report.pod_names,
                report.pod_cpu.tolist(),
                report.pod_memory.tolist(),
                strict=True,
            )
        ]
        system = self.system_usage
        upsert = self.state.upsert_metric
        update_time = report.update_time
        windows = report.aggregated
        metrics: list[NodeMetricInfo] | None = [] if self.descheduler is not None else None
        for row, node in enumerate(self.node_names):
            aggregated = tuple(_aggregated(window, usage, row) for window, usage in windows) if windows else ()
            metric = NodeMetricInfo(
                node,
                update_time,
                interval,
                interval,
                {"cpu": node_cpu[row], "memory": node_memory[row]},
                system[row],
                aggregated,
                tuple(entries[offsets[row] : offsets[row + 1]]),
            )
            upsert(metric)
            if metrics is not None:
                metrics.append(metric)
        if metrics is not None:  # handed to the descheduler at its next round (only the newest matters)
            self.undescheduled = metrics

    def _run_qos(self, now: float, node_cpu: F64, node_memory: F64) -> None:
        assert self.qos is not None
        start = self.scenario.start

        def pods_of(row: int) -> list[PodUsage]:
            ids = sorted(self.on_node[row])
            caps = np.minimum(self.quota[ids], self.cpu_limit[ids]).tolist()  # the CFS quota in force
            current = self.current
            out = []
            for pod_id, cap, cpu, memory, started, demand in zip(
                ids,
                caps,
                self.cpu_used[ids].tolist(),
                self.memory_used[ids].tolist(),
                self.started[ids].tolist(),
                self.cpu_demand[ids].tolist(),
                strict=True,
            ):
                pod = current[pod_id]
                assert pod is not None
                out.append(
                    PodUsage(
                        pod_id=pod_id,
                        pod=pod,
                        cpu_millis=cpu,
                        memory_bytes=memory,
                        cap_millis=cap if cap != math.inf else None,
                        started=start + started,
                        demand_millis=demand,
                    )
                )
            return out

        view = ClusterView(
            time=start + now,
            names=self.node_names,
            labels=self.node_labels,
            cpu_millis=node_cpu,
            cpu_capacity_millis=self.alloc_cpu,
            memory_bytes=node_memory,
            memory_capacity_bytes=self.alloc_memory,
            pods_of=pods_of,
        )
        for action in self.qos.step(view):
            self._apply(action, now)

    def _deschedule(self, now: float) -> None:
        """One balance round; each move evicts its pod, which is re-queued (its replacement)."""
        assert self.descheduler is not None and self.state is not None
        if self.unreported is not None:  # the NodeMetrics delivered so far, as the manager's watch has them
            self._publish(self.unreported)
            self.unreported = None
        if self.undescheduled:
            for metric in self.undescheduled:
                self.descheduler.metric(metric)
            self.undescheduled = []
        moves = self.descheduler.round(self.state, self.scenario.start + now)
        if not moves:
            return
        current = self.current
        pod_of = {pod.uid: p for p in np.flatnonzero(self.pod_state == RUNNING).tolist() if (pod := current[p])}
        for move, job in moves:
            pod_id = pod_of.get(move.uid)
            if pod_id is None or self.pod_state[pod_id] != RUNNING:
                continue
            self._evict(pod_id, now)
            self.moved_by[pod_id] = job

    def _evict(self, pod_id: int, now: float) -> None:
        """Take a running pod off its node; its controller re-creates it unless the workload says otherwise."""
        self._unbind(pod_id, now)
        pod = self.current[pod_id]
        if self.gangs is not None and self.job[pod_id] >= 0 and pod is not None:
            self.gangs.delete_pod(pod.namespace, pod.name)
            self.pod_of_key.pop(pod.key, None)
        workload = self.scenario.workloads[int(self.trace.workload[pod_id])]
        if workload.restart_on_eviction:
            self.attempt[pod_id] += 1
            self._enqueue(pod_id, now)
        else:
            self.pod_state[pod_id] = DONE

    def _apply(self, action: QosAction, now: float) -> None:
        pod_id = action.pod
        if self.pod_state[pod_id] != RUNNING:
            return
        if action.kind == "evict":
            if self.descheduler is not None:
                pod = self.current[pod_id]
                placed = pod.scheduled_time if pod is not None else None
                self.descheduler.agent_evicted(placed, self.scenario.start + now)
            self.stats.eviction_times.append(now)
            self.stats.evicted_pods.add(pod_id)
            self._evict(pod_id, now)
        elif action.kind == "throttle":
            self.quota[pod_id] = action.cpu_millis
            self.stats.throttle_times.append(now)
            self.stats.throttled_pods.add(pod_id)
        else:  # restore
            self.quota[pod_id] = action.cpu_millis if action.cpu_millis is not None else np.inf
            self.stats.restored += 1


@contextlib.contextmanager
def _fewer_young_collections() -> Iterator[None]:
    """Python's cyclic collector with ``YOUNG_COLLECTION_THRESHOLD`` for its youngest generation while inside
    (then the previous thresholds). The loop allocates in bursts that reference counting frees (a report is
    a usage map and a ``podsMetric`` entry per pod, kept for one report interval): at the default (700) such
    a burst sets off young collections that free nothing, several percent of a run's CPU time."""
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_COLLECTION_THRESHOLD), *older)
    try:
        yield
    finally:
        gc.set_threshold(young, *older)


def _aggregated(window: float, kinds: dict[str, tuple[I64, I64]], row: int) -> AggregatedUsage:
    return AggregatedUsage(
        duration=window,
        usage={kind: {"cpu": int(cpu[row]), "memory": int(memory[row])} for kind, (cpu, memory) in kinds.items()},
    )


def _admitted(admission: Admission | None) -> bool:
    return admission is None or admission.ok
