"""The ``starving`` simulation: a few big jobs among a steady stream of small short pods.

Nearly full nodes keep a little room free at every moment, and each time room frees up a small pod
takes it before a big job (a gang of whole-node pods, or one big pod with a priority class) can ever
fit. The same stream is run twice:

* **baseline**: the stock kube-scheduler model of ``koordpy.sim.kubescheduler``: ``NodeResourcesFit``
  on requests (the shared rule in ``koordpy.scheduler.framework.fit``), ``LeastAllocated`` score;
* **koordpy**: the same, plus every ``reservation.intervalSeconds`` the manager's
  :func:`koordpy.scheduler.plugins.reservation.controller.decide` on the simulated cluster (its
  creates, status updates and deletes are applied to the in-memory Reservations as the manager
  writes them), the extender's :func:`~koordpy.scheduler.plugins.reservation.ledger.reserved_verdict`
  on every node holding a Reservation in the filter, and the extender's owner preference
  (:func:`~koordpy.scheduler.plugins.reservation.enforcement.owner_prefers`) in the score; a pod bound
  on a held node allocates what the extender's bind would record
  (:func:`~koordpy.scheduler.plugins.reservation.ledger.to_allocate`).

Event order at one instant: completions, arrivals, the reservation controller (koordpy), then one
scheduling cycle over the whole queue, highest priority first, then first queued (every instant
retries every pending pod: kube-scheduler's requeue on a pod deletion, simplified). Within a cycle,
a pod whose identical siblings (same requests, priority and job) already failed is not retried.

Jobs: a gang (``members`` > 1) carries Koordinator's gang annotations (``gang.scheduling.koordinator.sh/
name`` and ``min-available``); its members bind one by one as they fit (in both runs: the extender's
bind barrier is not modelled here) and the job *starts* when ``minMember`` members are bound; bound
members of a job that has not started occupy their node and do nothing. A started job runs for its
``lifetimeSeconds``; then every member ends (members still pending are dropped). A single big pod
starts when it binds.

Measured (see :meth:`StarvingRun.summary`): big jobs' start latency (arrival to start) and how many
never started within ``durationSeconds``; small pods' pending time (bind − arrival; still pending at
the end: the time waited so far); idle held capacity: at each moment, on each node holding
Reservations, ``min(free cpu, Σ cpu the holdings keep from pods that are not their owners)``,
integrated over time (cpu·s); capacity bound to jobs that have not started (same integral over the
requests of their bound members); the cluster's requested CPU over allocatable.

The extender's per-node accounts (``holdings_on_node``) are recomputed after every controller pass
and every bind or completion on a held node; a reservation expiring between two such moments keeps
holding until the next one (at most ``intervalSeconds``).

Not modelled (not guaranteed): preemption (as if the priority classes had ``preemptionPolicy:
Never``; with preemption kube-scheduler would evict small pods for a big pod of higher priority), the
gang bind barrier, load-aware placement (requests only: no usage model), scheduling and API latency.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from koordpy.config.reservation import ReservationSettings
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import NodeInfo, PodInfo, node_from_dict, pod_from_dict
from koordpy.model.quantity import QuantityError
from koordpy.model.resources import ResourceList, parse_resource_list
from koordpy.scheduler.plugins.gang.keys import ANNOTATION_MIN_AVAILABLE, ANNOTATION_NAME
from koordpy.scheduler.plugins.reservation.controller import ReservationInputs, decide
from koordpy.scheduler.plugins.reservation.enforcement import OWNER_SCORE, owner_prefers
from koordpy.scheduler.plugins.reservation.ledger import Holding, holdings_on_node, reserved_verdict, to_allocate
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, allocated_annotations, reservation_from_dict
from koordpy.sim.kubescheduler import RequestsFit

__all__ = [
    "MODES",
    "BigJob",
    "JobRecord",
    "StarvingRun",
    "StarvingScenario",
    "StarvingTrace",
    "build_starving_trace",
    "compare_starving",
    "run_starving",
]

MODES = ("koordpy", "baseline")
T0 = 1795255200.0
"""The simulated start as epoch seconds (creation timestamps and ``now`` given to the controller)."""
NAMESPACE = "batch"
EXTENDER_SCALE = 10
"""kube-scheduler multiplies an extender's priority (0..10) by MaxNodeScore / MaxExtenderPriority."""
COMPLETE, ARRIVE, CONTROL = 0, 1, 2
NOT_ARRIVED, PENDING, RUNNING, DONE = 0, 1, 2, 3
I64 = npt.NDArray[np.int64]

Quantities = dict[str, str | int | float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def _resources(raw: Mapping[str, Any]) -> ResourceList:
    try:
        return parse_resource_list({k: str(v) for k, v in raw.items()})
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


class NodePool(_Strict):
    count: int = Field(ge=1, le=1000)
    allocatable: Quantities

    @field_validator("allocatable")
    @classmethod
    def _quantities(cls, value: Quantities) -> Quantities:
        if "cpu" not in value:
            raise ValueError("cpu: required")
        _resources(value)
        return value


class SmallShape(_Strict):
    requests: Quantities
    weight: float = Field(1.0, gt=0, description="Relative share of the stream.")

    @field_validator("requests")
    @classmethod
    def _quantities(cls, value: Quantities) -> Quantities:
        _resources(value)
        return value


class SmallPods(_Strict):
    """The steady stream of small short pods."""

    pattern: Literal["poisson", "regular"] = "poisson"
    rate_per_second: float = Field(alias="ratePerSecond", gt=0, le=1000)
    start_seconds: float = Field(0.0, alias="startSeconds", ge=0)
    end_seconds: float | None = Field(None, alias="endSeconds", gt=0, description="Default: durationSeconds.")
    lifetime_seconds: tuple[float, float] = Field(
        alias="lifetimeSeconds", description="[min, max]: each pod runs a uniform random time in it."
    )
    shapes: list[SmallShape] = Field(min_length=1)
    priority: int | None = None

    @field_validator("lifetime_seconds")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not 0 < value[0] <= value[1]:
            raise ValueError("expected [min, max] with 0 < min <= max")
        return value


class BigJob(_Strict):
    """A gang of ``members`` pods (``members`` > 1) or one pod with a priority class."""

    name: str = Field(min_length=1, max_length=50, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    arrival_seconds: float = Field(alias="arrivalSeconds", ge=0)
    members: int = Field(1, ge=1, le=100)
    min_member: int | None = Field(None, alias="minMember", ge=1)
    requests: Quantities
    lifetime_seconds: float = Field(alias="lifetimeSeconds", gt=0)
    priority: int | None = None
    priority_class_name: str | None = Field(None, alias="priorityClassName")

    @field_validator("requests")
    @classmethod
    def _quantities(cls, value: Quantities) -> Quantities:
        _resources(value)
        return value

    @model_validator(mode="after")
    def _job(self) -> BigJob:
        if self.min_member is not None and self.min_member > self.members:
            raise ValueError("minMember: must not exceed members")
        if self.members == 1 and (self.priority is None or not self.priority_class_name):
            raise ValueError("a single-pod job needs priority and priorityClassName (the seed's job definition)")
        return self

    @property
    def gang(self) -> bool:
        return self.members > 1

    @property
    def quorum(self) -> int:
        return self.min_member if self.min_member is not None else self.members


class StarvingScenario(_Strict):
    """``kind: StarvingScenario``: the nodes, the stream, the big jobs and the ``reservation:`` settings."""

    api_version: Literal["koordpy.io/v1alpha1"] = Field("koordpy.io/v1alpha1", alias="apiVersion")
    kind: Literal["StarvingScenario"]
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(0, ge=0)
    duration_seconds: float = Field(alias="durationSeconds", gt=0, le=7 * 86400)
    sample_seconds: float = Field(30.0, alias="sampleSeconds", gt=0, description="Time step of the plotted series.")
    nodes: NodePool
    small_pods: SmallPods = Field(alias="smallPods")
    big_jobs: list[BigJob] = Field(alias="bigJobs", min_length=1)
    reservation: dict[str, Any] = Field(
        default_factory=dict, description="The manager's reservation: section; enabled defaults to true here."
    )

    @model_validator(mode="after")
    def _consistent(self) -> StarvingScenario:
        names = [job.name for job in self.big_jobs]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"bigJobs: repeated names {', '.join(repeated)}")
        alloc = _resources(self.nodes.allocatable)
        for i, job in enumerate(self.big_jobs):
            over = [r for r, v in _resources(job.requests).items() if v > alloc.get(r, 0)]
            if over:
                raise ValueError(f"bigJobs[{i}].requests: {', '.join(over)} above a node's allocatable (fits no node)")
        for i, shape in enumerate(self.small_pods.shapes):
            over = [r for r, v in _resources(shape.requests).items() if v > alloc.get(r, 0)]
            if over:
                raise ValueError(f"smallPods.shapes[{i}].requests: {', '.join(over)} above a node's allocatable")
        self.settings()
        return self

    def settings(self) -> ReservationSettings:
        """The ``reservation:`` section as the manager validates it (``enabled`` true unless set)."""
        return ReservationSettings.model_validate({"enabled": True, **self.reservation})


# ---- the trace: one stream shared by both runs ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    arrival: float
    members: int
    quorum: int
    lifetime: float
    gang: bool


@dataclass(frozen=True, slots=True)
class StarvingTrace:
    """Every pod of the run: arrival (s after the start), lifetime (small pods; job members use their
    job's), job (-1 for a small pod), shape (identical pods share one), and the pending pod view."""

    arrival: tuple[float, ...]
    lifetime: tuple[float, ...]
    job: tuple[int, ...]
    shape: tuple[int, ...]
    pods: tuple[PodInfo, ...]
    jobs: tuple[JobSpec, ...]

    def __len__(self) -> int:
        return len(self.arrival)


def _pod_template(name: str, requests: Quantities, priority: int | None, priority_class: str | None) -> PodInfo:
    spec: dict[str, Any] = {
        "schedulerName": "koordpy-scheduler",
        "containers": [
            {"name": "main", "image": "sim", "resources": {"requests": {k: str(v) for k, v in requests.items()}}}
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    raw = {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec, "status": {"phase": "Pending"}}
    return pod_from_dict(raw)


def build_starving_trace(scenario: StarvingScenario, seed: int) -> StarvingTrace:
    """The stream and the jobs, deterministic for a seed (both runs replay the same trace)."""
    rng = np.random.default_rng([seed, 11])
    small = scenario.small_pods
    end = min(
        small.end_seconds if small.end_seconds is not None else scenario.duration_seconds, scenario.duration_seconds
    )
    times: list[float] = []
    t = small.start_seconds
    if small.pattern == "regular":
        step = 1.0 / small.rate_per_second
        while t < end:
            times.append(round(t, 6))
            t += step
    else:
        while True:
            t += float(rng.exponential(1.0 / small.rate_per_second))
            if t >= end:
                break
            times.append(round(t, 3))
    weights = np.array([s.weight for s in small.shapes])
    shapes = rng.choice(len(small.shapes), size=len(times), p=weights / weights.sum()).tolist() if times else []
    low, high = small.lifetime_seconds
    lifetimes = [round(float(x), 3) for x in rng.uniform(low, high, size=len(times))]
    templates = [_pod_template("small", s.requests, small.priority, None) for s in small.shapes]
    entries: list[tuple[float, int, float, int, int, PodInfo]] = []
    for i, (at, shape, life) in enumerate(zip(times, shapes, lifetimes, strict=True)):
        name = f"small-{i}"
        pod = dataclasses.replace(templates[shape], uid=f"{NAMESPACE}/{name}", name=name, creation_time=T0 + at)
        entries.append((at, 1, life, -1, shape, pod))
    jobs: list[JobSpec] = []
    for j, job in enumerate(scenario.big_jobs):
        jobs.append(JobSpec(job.name, job.arrival_seconds, job.members, job.quorum, job.lifetime_seconds, job.gang))
        template = _pod_template(job.name, job.requests, job.priority, job.priority_class_name)
        annotations = {ANNOTATION_NAME: job.name, ANNOTATION_MIN_AVAILABLE: str(job.quorum)} if job.gang else {}
        for m in range(job.members):
            name = f"{job.name}-{m}" if job.gang else job.name
            pod = dataclasses.replace(
                template,
                uid=f"{NAMESPACE}/{name}",
                name=name,
                annotations=annotations,
                labels={"job": job.name},
                creation_time=T0 + job.arrival_seconds,
            )
            entries.append((job.arrival_seconds, 0, job.lifetime_seconds, j, len(small.shapes) + j, pod))
    entries.sort(key=lambda e: (e[0], e[1]))
    return StarvingTrace(
        arrival=tuple(e[0] for e in entries),
        lifetime=tuple(e[2] for e in entries),
        job=tuple(e[3] for e in entries),
        shape=tuple(e[4] for e in entries),
        pods=tuple(e[5] for e in entries),
        jobs=tuple(jobs),
    )


# ---- results -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRecord:
    name: str
    kind: str
    """``gang`` or ``pod``."""
    members: int
    min_member: int
    arrival: float
    start: float | None
    """Seconds after the simulated start; None when it never started within the run."""
    nodes: tuple[str, ...]

    @property
    def latency(self) -> float | None:
        return None if self.start is None else self.start - self.arrival


@dataclass(slots=True)
class StarvingRun:
    """One mode's outcome over the shared trace."""

    mode: str
    duration: float
    jobs: list[JobRecord]
    small_pods: int
    small_bound: int
    small_waits: list[float]
    """Bind − arrival of every bound small pod, then the time waited so far by those pending at the end."""
    small_pending_at_end: int
    idle_held_cpu_seconds: float
    partial_job_cpu_seconds: float
    requested_cpu_seconds: float
    capacity_cpu_seconds: float
    reservations_created: int
    reservations_deleted: int
    max_nodes_held: int
    held_node_seconds: float
    times: list[float] = field(default_factory=list)
    jobs_started: list[int] = field(default_factory=list)
    small_pending: list[int] = field(default_factory=list)
    idle_held_cpu: list[float] = field(default_factory=list)
    nodes_held: list[int] = field(default_factory=list)
    requested_cpu_percent: list[float] = field(default_factory=list)
    controller_passes: int = 0

    def latencies(self) -> list[float]:
        return [lat for job in self.jobs if (lat := job.latency) is not None]

    def summary(self) -> dict[str, Any]:
        latency = np.asarray(self.latencies(), np.float64)
        waits = np.asarray(self.small_waits, np.float64)

        def pct(values: npt.NDArray[np.float64], q: float) -> float | None:
            return round(float(np.percentile(values, q)), 1) if values.size else None

        capacity = self.capacity_cpu_seconds or 1.0
        return {
            "policy": self.mode,
            "bigJobs": len(self.jobs),
            "bigJobsStarted": int(latency.size),
            "bigJobsNeverStarted": len(self.jobs) - int(latency.size),
            "bigJobStartLatencyP50Seconds": pct(latency, 50),
            "bigJobStartLatencyMaxSeconds": round(float(latency.max()), 1) if latency.size else None,
            "smallPods": self.small_pods,
            "smallPodsBound": self.small_bound,
            "smallPodsPendingAtEnd": self.small_pending_at_end,
            "smallPendingP50Seconds": pct(waits, 50),
            "smallPendingP95Seconds": pct(waits, 95),
            "smallPendingMaxSeconds": round(float(waits.max()), 1) if waits.size else None,
            "idleHeldCpuSeconds": round(self.idle_held_cpu_seconds / 1000.0, 1),
            "idleHeldCpuPercent": round(100.0 * self.idle_held_cpu_seconds / capacity, 2),
            "heldNodeSeconds": round(self.held_node_seconds, 1),
            "maxNodesHeld": self.max_nodes_held,
            "partialJobCpuSeconds": round(self.partial_job_cpu_seconds / 1000.0, 1),
            "requestedCpuPercentMean": round(100.0 * self.requested_cpu_seconds / capacity, 2),
            "reservationsCreated": self.reservations_created,
            "reservationsDeleted": self.reservations_deleted,
            "controllerPasses": self.controller_passes,
        }

    def job_table(self) -> list[dict[str, Any]]:
        return [
            {
                "job": job.name,
                "kind": job.kind,
                "members": job.members,
                "minMember": job.min_member,
                "arrivalSeconds": round(job.arrival, 1),
                "startSeconds": None if job.start is None else round(job.start, 1),
                "latencySeconds": None if job.latency is None else round(job.latency, 1),
                "nodes": list(job.nodes),
            }
            for job in self.jobs
        ]


# ---- the simulation ----------------------------------------------------------------------------------


def scenario_nodes(scenario: StarvingScenario) -> list[NodeInfo]:
    allocatable = {k: str(v) for k, v in scenario.nodes.allocatable.items()}
    return [
        node_from_dict(
            {
                "metadata": {"name": f"node-{i:02d}", "labels": {"kubernetes.io/hostname": f"node-{i:02d}"}},
                "status": {"allocatable": allocatable, "capacity": allocatable},
            }
        )
        for i in range(scenario.nodes.count)
    ]


class _Simulation:
    def __init__(self, scenario: StarvingScenario, trace: StarvingTrace, mode: str, seed: int) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        self.scenario = scenario
        self.trace = trace
        self.mode = mode
        self.reserving = mode == "koordpy"
        self.settings = scenario.settings()
        self.nodes = scenario_nodes(scenario)
        self.node_names = [n.name for n in self.nodes]
        resources = {r for n in self.nodes for r in n.allocatable} | {r for p in trace.pods for r in p.requests}
        self.fit = RequestsFit(self.nodes, sorted(resources))
        self.cpu = self.fit.position["cpu"]
        self.rng = np.random.default_rng([seed, 12])
        count = len(trace)
        self.state = [NOT_ARRIVED] * count
        self.info: list[PodInfo] = list(trace.pods)
        self.node_of = [-1] * count
        self.bound_at = [0.0] * count
        self.vectors = [self.fit.vector(p.requests) for p in trace.pods]
        self.priority = [p.priority or 0 for p in trace.pods]
        self.queue: list[tuple[int, float, int]] = []
        self.shapes_queued: Counter[int] = Counter()
        self.on_node: list[set[int]] = [set() for _ in self.nodes]
        self.events: list[tuple[float, int, int, int]] = []
        self.seq = 0
        jobs = trace.jobs
        self.job_bound = [0] * len(jobs)
        self.job_start: list[float | None] = [None] * len(jobs)
        self.job_end: list[float | None] = [None] * len(jobs)
        self.job_members: list[list[int]] = [[] for _ in jobs]
        for pod, job in enumerate(trace.job):
            if job >= 0:
                self.job_members[job].append(pod)
        self.raw_reservations: dict[str, dict[str, Any]] = {}
        self.reservations: dict[str, ReservationInfo] = {}
        self.holdings: dict[int, list[Holding]] = {}
        self.created = 0
        self.deleted = 0
        self.passes = 0
        # integrals (milli-cpu · s) and the rates they integrate
        self.last = 0.0
        self.idle_held = 0.0
        self.partial = 0.0
        self.requested = 0.0
        self.held_nodes = 0
        self.idle_held_integral = 0.0
        self.partial_integral = 0.0
        self.requested_integral = 0.0
        self.held_node_seconds = 0.0
        self.max_nodes_held = 0
        self.small_pending = 0
        self.jobs_started = 0
        self.samples: list[tuple[float, int, int, float, int, float]] = []
        self.next_sample = 0.0
        self.capacity_cpu = float(self.fit.alloc[:, self.cpu].sum())

    # ---- plumbing --------------------------------------------------------------------------------

    def _push(self, at: float, kind: int, pod: int = -1) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, kind, self.seq, pod))

    def run(self) -> StarvingRun:
        end = self.scenario.duration_seconds
        for pod, at in enumerate(self.trace.arrival):
            self._push(at, ARRIVE, pod)
        if self.reserving:
            self._push(0.0, CONTROL)
        while self.events and self.events[0][0] <= end:
            now = self.events[0][0]
            self._advance(now)
            control = False
            while self.events and self.events[0][0] == now:
                _, kind, _, pod = heapq.heappop(self.events)
                if kind == COMPLETE:
                    self._complete(pod, now)
                elif kind == ARRIVE:
                    self._arrive(pod, now)
                else:
                    control = True
                    self._push(now + self.settings.interval_seconds, CONTROL)
            if control:
                self._control(now)
            if self.queue:
                self._cycle(now)
            self._rates(now)
        self._advance(end)
        return self._result(end)

    def _advance(self, now: float) -> None:
        """Integrate the rates over [last, now) and record the samples that fall in it."""
        while self.next_sample <= now and self.next_sample <= self.scenario.duration_seconds:
            self.samples.append(
                (
                    self.next_sample,
                    self.jobs_started,
                    self.small_pending,
                    self.idle_held / 1000.0,
                    self.held_nodes,
                    100.0 * self.requested / self.capacity_cpu,
                )
            )
            self.next_sample += self.scenario.sample_seconds
        span = now - self.last
        if span > 0:
            self.idle_held_integral += self.idle_held * span
            self.partial_integral += self.partial * span
            self.requested_integral += self.requested * span
            self.held_node_seconds += self.held_nodes * span
        self.last = now

    # ---- pods ------------------------------------------------------------------------------------

    def _arrive(self, pod: int, now: float) -> None:
        job = self.trace.job[pod]
        ended = self.job_end[job] if job >= 0 else None
        if ended is not None and ended <= now:
            self.state[pod] = DONE  # the job already ran and ended
            return
        self.state[pod] = PENDING
        heapq.heappush(self.queue, (-self.priority[pod], now, pod))
        self.shapes_queued[self.trace.shape[pod]] += 1
        if job < 0:
            self.small_pending += 1

    def _bind(self, pod: int, row: int, now: float) -> None:
        self.state[pod] = RUNNING
        self.node_of[pod] = row
        self.bound_at[pod] = now
        self.fit.bind(row, self.vectors[pod])
        self.on_node[row].add(pod)
        info = dataclasses.replace(self.info[pod], node_name=self.node_names[row], phase="Running")
        chosen = to_allocate(info, self.holdings[row]) if row in self.holdings else None
        if chosen is not None:  # the extender's bind records the Reservation the pod allocates
            info = dataclasses.replace(info, annotations={**info.annotations, **allocated_annotations(chosen)})
        self.info[pod] = info
        self.shapes_queued[self.trace.shape[pod]] -= 1
        job = self.trace.job[pod]
        if job < 0:
            self.small_pending -= 1
            self._push(now + self.trace.lifetime[pod], COMPLETE, pod)
            return
        self.job_bound[job] += 1
        started = self.job_start[job]
        if started is None and self.job_bound[job] >= self.trace.jobs[job].quorum:
            self.job_start[job] = now
            self.job_end[job] = now + self.trace.jobs[job].lifetime
            self.jobs_started += 1
            for member in self.job_members[job]:
                if self.state[member] == RUNNING:
                    self._push(now + self.trace.jobs[job].lifetime, COMPLETE, member)
        elif started is not None:
            end = self.job_end[job]
            assert end is not None
            self._push(max(end, now), COMPLETE, pod)
        if row in self.holdings:
            self._refresh_holdings(row, now)

    def _complete(self, pod: int, now: float) -> None:
        if self.state[pod] != RUNNING:
            return
        row = self.node_of[pod]
        self.fit.unbind(row, self.vectors[pod])
        self.on_node[row].discard(pod)
        self.state[pod] = DONE
        self.info[pod] = dataclasses.replace(self.info[pod], phase="Succeeded")
        job = self.trace.job[pod]
        if job >= 0:
            for member in self.job_members[job]:  # the job is over: its pending members are dropped
                if self.state[member] == PENDING:
                    self.state[member] = DONE
                    self.shapes_queued[self.trace.shape[member]] -= 1
        if row in self.holdings:
            self._refresh_holdings(row, now)

    # ---- scheduling ------------------------------------------------------------------------------

    def _cycle(self, now: float) -> None:
        failed: set[int] = set()
        shapes = sum(1 for c in self.shapes_queued.values() if c > 0)
        kept: list[tuple[int, float, int]] = []
        queue = sorted(self.queue)
        for position, entry in enumerate(queue):
            pod = entry[2]
            if self.state[pod] != PENDING:
                continue
            shape = self.trace.shape[pod]
            if shape in failed:
                kept.append(entry)
                continue
            row = self._choose(pod, now)
            if row is None:
                failed.add(shape)
                kept.append(entry)
                if len(failed) >= shapes:
                    kept.extend(e for e in queue[position + 1 :] if self.state[e[2]] == PENDING)
                    break
                continue
            self._bind(pod, row, now)
        self.queue = kept
        heapq.heapify(self.queue)

    def _choose(self, pod: int, now: float) -> int | None:
        """kube-scheduler with the extender: NodeResourcesFit, then (koordpy) the ledger's reserved
        verdict on the nodes holding Reservations; LeastAllocated plus (koordpy) the extender's
        priority: ``OWNER_SCORE`` where ``owner_prefers``, 0 elsewhere (requests only: no load-aware
        score), scaled ×10 as kube-scheduler scales extender priorities (weight 1)."""
        fits = self.fit.feasible(self.vectors[pod])
        info = self.info[pod]
        preferred: list[int] = []
        for row, holdings in self.holdings.items():
            if not fits[row]:
                continue
            alloc = dict(zip(self.fit.resources, self.fit.alloc[row].tolist(), strict=True))
            used = dict(zip(self.fit.resources, self.fit.requested[row].tolist(), strict=True))
            if not reserved_verdict(info, alloc, used, holdings).is_success:
                fits[row] = False
            elif owner_prefers(info, holdings):
                preferred.append(row)
        candidates: I64 = np.flatnonzero(fits)
        if candidates.size == 0:
            return None
        scores = self.fit.least_allocated(info, candidates)
        if preferred:
            scores = scores + EXTENDER_SCALE * OWNER_SCORE * np.isin(candidates, preferred)
        best = np.flatnonzero(scores == scores.max())
        pick = int(best[0]) if best.size == 1 else int(best[int(self.rng.integers(best.size))])
        return int(candidates[pick])

    # ---- reservations (koordpy) ------------------------------------------------------------------

    def _control(self, now: float) -> None:
        """One manager pass: ``decide`` on the cluster as it is, its writes applied."""
        self.passes += 1
        live = [self.info[p] for p, s in enumerate(self.state) if s in (PENDING, RUNNING)]
        inputs = ReservationInputs(
            nodes=self.nodes,
            pods=live,
            podgroups=(),
            reservations=tuple(self.reservations.values()),
            metrics={},
        )
        decision = decide(inputs, self.settings, T0 + now)
        for create in decision.creates:
            raw = copy.deepcopy(dict(create.manifest))
            meta = raw.setdefault("metadata", {})
            meta.setdefault("uid", f"uid-{create.name}")
            meta["creationTimestamp"] = format_rfc3339(T0 + now)
            raw["status"] = copy.deepcopy(dict(create.status))
            self.raw_reservations[create.name] = raw
            self.created += 1
        for update in decision.statuses:
            found = self.raw_reservations.get(update.name)
            if found is not None:
                found["status"] = copy.deepcopy(dict(update.status))
        for deletion in decision.deletes:
            if self.raw_reservations.pop(deletion.name, None) is not None:
                self.deleted += 1
        self.reservations = {name: reservation_from_dict(raw) for name, raw in self.raw_reservations.items()}
        self.holdings = {}
        rows = {name: row for row, name in enumerate(self.node_names)}
        for res in self.reservations.values():
            row = rows.get(res.node_name)
            if row is not None:
                self.holdings.setdefault(row, [])
        for row in list(self.holdings):
            self._refresh_holdings(row, now)

    def _refresh_holdings(self, row: int, now: float) -> None:
        name = self.node_names[row]
        mine = [r for r in self.reservations.values() if r.node_name == name]
        pods = [self.info[p] for p in self.on_node[row]]
        holdings = holdings_on_node(mine, pods, T0 + now)
        if holdings:
            self.holdings[row] = holdings
        else:
            self.holdings.pop(row, None)

    # ---- figures ---------------------------------------------------------------------------------

    def _rates(self, now: float) -> None:
        cpu = self.cpu
        self.requested = float(self.fit.requested[:, cpu].sum())
        idle = 0.0
        held = 0
        for row, holdings in self.holdings.items():
            kept = sum(h.remaining.get("cpu", 0) for h in holdings)
            if kept > 0:
                held += 1
                idle += min(max(int(self.fit.free[row, cpu]), 0), kept)
        self.idle_held = idle
        self.held_nodes = held
        self.max_nodes_held = max(self.max_nodes_held, held)
        partial = 0.0
        for job, start in enumerate(self.job_start):
            if start is None and self.job_bound[job]:
                partial += sum(float(self.vectors[m][cpu]) for m in self.job_members[job] if self.state[m] == RUNNING)
        self.partial = partial

    def _result(self, end: float) -> StarvingRun:
        records = []
        for j, spec in enumerate(self.trace.jobs):
            nodes = sorted({self.node_names[self.node_of[m]] for m in self.job_members[j] if self.node_of[m] >= 0})
            records.append(
                JobRecord(
                    spec.name,
                    "gang" if spec.gang else "pod",
                    spec.members,
                    spec.quorum,
                    spec.arrival,
                    self.job_start[j],
                    tuple(nodes),
                )
            )
        waits: list[float] = []
        pending_at_end = 0
        bound = 0
        small = 0
        for pod, job in enumerate(self.trace.job):
            if job >= 0:
                continue
            small += 1
            state = self.state[pod]
            if state in (RUNNING, DONE):
                bound += 1
                waits.append(self.bound_at[pod] - self.trace.arrival[pod])
            elif state == PENDING:
                pending_at_end += 1
                waits.append(end - self.trace.arrival[pod])
        samples = self.samples
        return StarvingRun(
            mode=self.mode,
            duration=end,
            jobs=records,
            small_pods=small,
            small_bound=bound,
            small_waits=waits,
            small_pending_at_end=pending_at_end,
            idle_held_cpu_seconds=self.idle_held_integral,
            partial_job_cpu_seconds=self.partial_integral,
            requested_cpu_seconds=self.requested_integral,
            capacity_cpu_seconds=self.capacity_cpu * end,
            reservations_created=self.created,
            reservations_deleted=self.deleted,
            max_nodes_held=self.max_nodes_held,
            held_node_seconds=self.held_node_seconds,
            times=[s[0] for s in samples],
            jobs_started=[s[1] for s in samples],
            small_pending=[s[2] for s in samples],
            idle_held_cpu=[round(s[3], 3) for s in samples],
            nodes_held=[s[4] for s in samples],
            requested_cpu_percent=[round(s[5], 2) for s in samples],
            controller_passes=self.passes,
        )


def run_starving(scenario: StarvingScenario, seed: int, mode: str, trace: StarvingTrace | None = None) -> StarvingRun:
    """One mode over the scenario's trace for ``seed`` (or the given one); deterministic for a seed."""
    used = trace if trace is not None else build_starving_trace(scenario, seed)
    return _Simulation(scenario, used, mode, seed).run()


def compare_starving(scenario: StarvingScenario, seed: int, modes: Sequence[str] = MODES) -> list[StarvingRun]:
    """Every mode over one shared trace."""
    trace = build_starving_trace(scenario, seed)
    return [run_starving(scenario, seed, mode, trace) for mode in modes]
