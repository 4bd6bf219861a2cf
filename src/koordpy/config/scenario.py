"""The ``koordpy simulate`` scenario file: a cluster, a workload trace recipe and the policies' settings.

.. code-block:: yaml

    apiVersion: koordpy.io/v1alpha1
    kind: Scenario
    name: small
    duration: 2h
    nodePools:
      - {name: general, count: 10, allocatable: {cpu: "32", memory: 128Gi, pods: "110"}}
    workloads:
      - name: web
        priority: 9500
        arrivals: {count: 40}
        requests: {cpu: "2", memory: 4Gi}
        usage: {pattern: diurnal, cpu: {mean: "1500m"}, memory: {mean: 3Gi}}

Every field is documented in ``docs/simulate.md``. Unknown keys are errors; errors name the field
path (``workloads[1].usage.cpu.mean: ...``). Durations are Go strings (``"90s"``, ``"1h30m"``) or
seconds; quantities are Kubernetes quantities (``"500m"``, ``"4Gi"``).

Numbers are strict (a boolean or a string is not a number; NaN and infinity are refused),
quantities are at most :data:`MAX_AMOUNT` base units, durations are bounded like Go's and
timestamps lie in years 1970-9999.

Not guaranteed: that a scenario is *realistic*; validation only rejects what the simulator
cannot run or what is certainly a typo.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from koordpy.config.errors import field_problems
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.durations import DurationError, parse_duration, parse_rfc3339
from koordpy.model.quantity import QuantityError
from koordpy.model.resources import ResourceList, parse_resource_list

__all__ = [
    "API_VERSION",
    "GANG_ANNOTATION_PREFIX",
    "Arrivals",
    "GangJob",
    "Lifetime",
    "NodeMetricSettings",
    "NodePool",
    "QosPressure",
    "QosSettings",
    "ReportSettings",
    "ResourceUsage",
    "Scenario",
    "UsageCurve",
    "Workload",
]

API_VERSION = "koordpy.io/v1alpha1"
MAX_AMOUNT = 2**53
"""Largest quantity in base units (millicores, bytes): exact in the simulator's float arithmetic."""
MAX_INSTANT = 253_402_300_799.0
"""9999-12-31T23:59:59Z in epoch seconds."""
_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def _seconds(value: Any) -> float:
    if value is None:
        raise ValueError("a duration is required")
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"not a duration: {str(value)[:40]!r} ({exc})") from None


def _amounts(value: Any) -> ResourceList:
    """Parsed quantities; raises ``ValueError`` whose message starts with the resource name."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of resource quantities, got {type(value).__name__}")
    try:
        parsed = parse_resource_list(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    for name, amount in parsed.items():
        if amount < 0:
            raise ValueError(f"{name}: negative quantity")
        if amount > MAX_AMOUNT:
            raise ValueError(f"{name}: quantity out of range (at most {MAX_AMOUNT} base units)")
    return parsed


def _resources(value: Any) -> ResourceList:
    try:
        return _amounts(value)
    except ValueError as exc:
        name, sep, problem = str(exc).partition(": ")
        if sep and isinstance(value, dict) and name in map(str, value):
            raise field_problems([f"{name}: {problem}"]) from None  # names the resource in the field path
        raise


def _cpu_millis(value: Any) -> int:
    try:
        return _amounts({"cpu": value})["cpu"]
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix("cpu: ")) from None


def _memory_bytes(value: Any) -> int:
    try:
        return _amounts({"memory": value})["memory"]
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix("memory: ")) from None


def _instant(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value) if abs(value) <= MAX_INSTANT else math.inf
    elif isinstance(value, str):
        try:
            seconds = parse_rfc3339(value)
        except (DurationError, OverflowError) as exc:
            raise ValueError(str(exc)) from None
    else:
        raise ValueError("expected an RFC 3339 timestamp")
    if not 0 <= seconds <= MAX_INSTANT:
        raise ValueError("timestamp out of range (1970-01-01 to 9999-12-31)")
    return seconds


Seconds = Annotated[float, BeforeValidator(_seconds)]
Resources = Annotated[ResourceList, BeforeValidator(_resources)]
CpuMillis = Annotated[int, BeforeValidator(_cpu_millis)]
MemoryBytes = Annotated[int, BeforeValidator(_memory_bytes)]
Instant = Annotated[float, BeforeValidator(_instant)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class NodePool(_Model):
    """``count`` identical nodes named ``<name>-<i>``."""

    name: str = Field(pattern=_NAME_PATTERN, max_length=40)
    count: int = Field(strict=True, ge=1, le=100_000)
    allocatable: Resources
    system_usage: Resources = Field(default_factory=dict, alias="systemUsage")
    """Usage of system daemons outside pods; reported as NodeMetric ``systemUsage``."""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> NodePool:
        problems = [
            f"allocatable.{name}: required and > 0" for name in ("cpu", "memory") if self.allocatable.get(name, 0) <= 0
        ]
        if problems:
            raise field_problems(problems)
        return self


class Arrivals(_Model):
    """``count`` pods arrive at uniformly random instants in ``[start, end)`` (offsets from the start).

    ``end`` defaults to the scenario's duration; ``start == end`` makes them all arrive at once.
    """

    count: int = Field(strict=True, ge=0, le=1_000_000)
    start: Seconds = 0.0
    end: Seconds | None = None


class Lifetime(_Model):
    """Run time of each pod, log-uniform in ``[min, max]``. No lifetime: runs until the end."""

    min: Seconds
    max: Seconds

    @model_validator(mode="after")
    def _check(self) -> Lifetime:
        if self.min <= 0:
            raise field_problems(["min: must be greater than 0"])
        if self.max < self.min:
            raise field_problems(["max: must be >= min"])
        return self


class ResourceUsage(_Model):
    """Mean usage of one resource and how it varies between pods and between samples."""

    mean: float = Field(ge=0, le=MAX_AMOUNT, strict=True, allow_inf_nan=False)
    """Per-pod mean, in millicores for cpu and bytes for memory (quantity strings accepted)."""
    spread: float = Field(0.0, ge=0, le=3, strict=True, allow_inf_nan=False)
    """Sigma of a per-pod log-normal factor (mean 1): 0 = every pod alike."""
    noise: float = Field(0.0, ge=0, le=3, strict=True, allow_inf_nan=False)
    """Sigma of a per-sample log-normal factor (mean 1)."""


class _CpuUsage(ResourceUsage):
    mean: CpuMillis = Field(ge=0)


class _MemoryUsage(ResourceUsage):
    mean: MemoryBytes = Field(ge=0)


class UsageCurve(_Model):
    """What a pod would use if nothing limited it (its *demand*), as a function of time.

    * ``steady``: the per-pod mean.
    * ``diurnal``: ``mean × (1 + amplitude × cos(2π (hourOfDay − peakHour) / 24))``, UTC.
    * ``bursty``: the mean, times ``burstFactor`` for ``burstLength`` out of every ``burstEvery``
      (each pod at its own random phase).

    CPU demand is cut at the pod's CPU limit (CFS quota) and at any throttle the agent applies;
    memory is never cut.
    """

    pattern: Literal["steady", "diurnal", "bursty"] = "steady"
    cpu: _CpuUsage
    memory: _MemoryUsage
    amplitude: float = Field(0.5, ge=0, le=1, strict=True, allow_inf_nan=False)
    peak_hour: float = Field(14.0, ge=0, lt=24, alias="peakHour", strict=True, allow_inf_nan=False)
    burst_every: Seconds = Field(1800.0, alias="burstEvery")
    burst_length: Seconds = Field(300.0, alias="burstLength")
    burst_factor: float = Field(3.0, ge=1, le=100, alias="burstFactor", strict=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check(self) -> UsageCurve:
        problems = []
        if self.burst_every <= 0:
            problems.append("burstEvery: must be greater than 0")
        if not 0 <= self.burst_length <= self.burst_every:
            problems.append("burstLength: must be in 0..burstEvery")
        if problems:
            raise field_problems(problems)
        return self


GANG_ANNOTATION_PREFIX = "gang.scheduling.koordinator.sh/"


class GangJob(_Model):
    """The workload is a set of gang jobs: ``arrivals.count`` jobs of ``members`` pods each.

    Each job is one gang, expressed with Koordinator's ``gang.scheduling.koordinator.sh/*``
    annotations on its pods (``name`` ``<workload>-<job>``, ``min-available``, ``total-number``,
    ``mode``, ``waiting-time`` and, with ``groupWith``, ``groups``), so the gang model resolves the
    membership itself. Member ``m`` of job ``j`` is pod ``<workload>-<j>-<m>``; it arrives in
    ``[job arrival, job arrival + memberSpread)`` (cut at the scenario's end). Every member of a job
    runs for the job's lifetime.
    """

    members: int = Field(strict=True, ge=1, le=10_000)
    min_member: int | None = Field(None, alias="minMember", strict=True, ge=1, le=10_000)
    """``min-available``; default: ``members``."""
    mode: Literal["Strict", "NonStrict"] = "Strict"
    wait_time: Seconds | None = Field(None, alias="waitTime")
    """``waiting-time``; default: the scheduler's ``gang.defaultTimeout``."""
    member_spread: Seconds = Field(0.0, alias="memberSpread")
    group_with: list[str] = Field(default_factory=list, alias="groupWith")
    """Other gang workloads: job ``j`` of each forms one GangGroup with job ``j`` of this one (links are
    mutual and transitive). The group's jobs arrive together: at the arrival drawn for the first of
    its workloads in the file; each keeps its own ``memberSpread`` and lifetime."""

    @model_validator(mode="after")
    def _check(self) -> GangJob:
        problems = []
        if self.min_member is not None and self.min_member > self.members:
            problems.append("minMember: must be <= members")
        if self.wait_time is not None and not 0 < self.wait_time <= 86_400 * 365:
            problems.append("waitTime: must be greater than 0 and at most a year")
        if not 0 <= self.member_spread <= 86_400 * 365:
            problems.append("memberSpread: must be in 0..1 year")
        if problems:
            raise field_problems(problems)
        return self

    @property
    def min_available(self) -> int:
        return self.members if self.min_member is None else self.min_member


class Workload(_Model):
    """A family of identical pods (one Deployment or Job) with a usage curve; with ``gang``, a set of
    gang jobs (``arrivals.count`` jobs of ``gang.members`` pods)."""

    name: str = Field(pattern=_NAME_PATTERN, max_length=40)
    namespace: str = Field("default", pattern=_NAME_PATTERN)
    arrivals: Arrivals
    lifetime: Lifetime | None = None
    priority: int | None = Field(None, strict=True, ge=-(2**31), le=2**31 - 1)
    """``spec.priority`` (an int32); Koordinator bands: prod 9000-9999, batch 5000-5999 (see the model docs)."""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    requests: Resources = Field(default_factory=dict)
    limits: Resources = Field(default_factory=dict)
    usage: UsageCurve
    restart_on_eviction: bool = Field(True, alias="restartOnEviction", strict=True)
    """An evicted pod is recreated (by its controller) and scheduled again from scratch."""
    gang: GangJob | None = None

    @model_validator(mode="after")
    def _check(self) -> Workload:
        problems = [
            f"limits.{name}: must be >= requests.{name}"
            for name, limit in self.limits.items()
            if limit < self.requests.get(name, 0)
        ]
        if self.gang is not None:
            problems += [
                f"annotations.{key}: set by gang (remove it here)"
                for key in self.annotations
                if key.startswith(GANG_ANNOTATION_PREFIX)
            ]
        if problems:
            raise field_problems(problems)
        return self

    @property
    def pods(self) -> int:
        """Pods the workload submits (jobs × members for a gang workload)."""
        return self.arrivals.count * (self.gang.members if self.gang is not None else 1)


class NodeMetricSettings(_Model):
    """How the simulated agent reports NodeMetric (``slo.koordinator.sh/v1alpha1``)."""

    report_interval: Seconds = Field(60.0, alias="reportInterval")
    """Seconds between reports; ``nodeUsage`` is the mean over the interval."""
    lag: Seconds = 0.0
    """Delay between a report's ``updateTime`` and the scheduler seeing it (watch latency)."""
    aggregated_durations: list[Seconds] = Field(default_factory=list, alias="aggregatedDurations")
    """Windows for ``aggregatedNodeUsages`` (avg/p50/p90/p95/p99); empty = none reported."""


class QosPressure(_Model):
    """How the simulated nodes produce the CPU pressure (PSI) the agent's pressure rules read
    (``koordpy.sim.qospressure`` states the model)."""

    cpu_contention: float = Field(1.0, gt=0, le=100, alias="cpuContention", strict=True, allow_inf_nan=False)
    """Scale of a pod's contention pressure: 1 = the CPU share its competitors hold, each weighted by how much
    the kernel favours it over the pod; calibrate it on a measured node (``bench/colocation.py`` does)."""


class QosSettings(_Model):
    """The agent's waterline QoS on every node (Crane's objects, read by the agent's own models)."""

    enabled: bool = Field(True, strict=True)
    interval: Seconds = 30.0
    """Seconds between the agent's QoS evaluations (Crane's collect interval)."""
    policies: list[dict[str, Any]] = Field(default_factory=list)
    """``ensurance.crane.io/v1alpha1`` NodeQOSEnsurancePolicy or (Crane v0.8+) NodeQOS objects."""
    actions: list[dict[str, Any]] = Field(default_factory=list)
    """``ensurance.crane.io/v1alpha1`` AvoidanceAction objects the rules name."""
    pod_qos: list[dict[str, Any]] = Field(default_factory=list, alias="podQOS")
    """``ensurance.crane.io/v1alpha1`` PodQOS objects: NodeQOS rules act only on pods they allow."""
    pressure: QosPressure = Field(default_factory=QosPressure)
    """The pressure model, for rules on koordpy's ``*_pressure_*`` metrics."""


CHART_PERCENTAGE_OF_NODES_TO_SCORE = 0
"""The chart's ``scheduler.kubeScheduler.percentageOfNodesToScore`` (a chart test keeps them equal)."""


class KubeSchedulerSettings(_Model):
    """The koordpy profile's kube-scheduler (``KubeSchedulerConfiguration``) as far as the simulator models it."""

    percentage_of_nodes_to_score: int = Field(
        CHART_PERCENTAGE_OF_NODES_TO_SCORE, ge=0, le=100, alias="percentageOfNodesToScore", strict=True
    )
    """Share of the fitting nodes each cycle sends to the extender, kube-scheduler's rule: 0 = adaptive
    (``50 - nodes/125`` percent, at least 5 %, at least 100 nodes); with fewer than 100 nodes, all of them.
    The default is the chart's. The ``--compare baseline`` run always uses kube-scheduler's own default (0)."""


class DeschedulerSettings(_Model):
    """The manager's LowNodeLoad balance loop (koordpy policies only; the baseline has no descheduler)."""

    descheduling_interval: Seconds = Field(60.0, alias="deschedulingInterval")
    """Seconds between balance rounds (a multiple of ``step``)."""
    repeat_move_window_seconds: Seconds = Field(600.0, alias="repeatMoveWindowSeconds")
    """A pod of a workload moved again within this many seconds of its last move (or evicted by the agent this
    soon after it was placed) is a repeat move (the manager's ``repeatMoveWindowSeconds``)."""
    low_node_load: LowNodeLoadArgs = Field(alias="lowNodeLoad")
    """Koordinator's ``LowNodeLoadArgs``, field names unchanged, run as policy ``koordpy``."""
    compare_low_node_load: LowNodeLoadArgs | None = Field(None, alias="compareLowNodeLoad")
    """Another ``LowNodeLoadArgs``, run as policy ``koordpy-compared`` by ``--compare lowNodeLoad`` (the rest of
    the scenario unchanged)."""
    migration_controller: MigrationControllerArgs = Field(
        default_factory=lambda: MigrationControllerArgs.model_validate({}), alias="migrationController"
    )
    """Koordinator's ``MigrationControllerArgs``: its evictor filters decide which pods may move."""


class ReportSettings(_Model):
    hot_threshold: int | None = Field(None, ge=1, le=100, alias="hotThreshold", strict=True)
    """CPU usage percent above which a node counts as hot; default: the load-aware cpu threshold."""


class Scenario(_Model):
    api_version: Literal["koordpy.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Scenario"]
    name: str = Field(pattern=_NAME_PATTERN, max_length=63)
    description: str = ""
    seed: int = Field(1, ge=0, le=2**63 - 1, strict=True)
    start: Instant = Field(default_factory=lambda: parse_rfc3339("2026-11-21T06:00:00Z"))
    duration: Seconds
    step: Seconds = 30.0
    """Simulation step: usage is sampled and statistics recorded every ``step`` seconds."""
    node_pools: list[NodePool] = Field(min_length=1, alias="nodePools")
    workloads: list[Workload] = Field(min_length=1)
    node_metric: NodeMetricSettings = Field(default_factory=NodeMetricSettings, alias="nodeMetric")
    scheduler: SchedulerConfiguration = Field(default_factory=lambda: SchedulerConfiguration.model_validate({}))
    kube_scheduler: KubeSchedulerSettings = Field(default_factory=KubeSchedulerSettings, alias="kubeScheduler")
    qos: QosSettings = Field(default_factory=QosSettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    descheduler: DeschedulerSettings | None = None

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        problems: list[str] = []
        if self.duration <= 0:
            problems.append("duration: must be greater than 0")
        if self.step <= 0:
            problems.append("step: must be greater than 0")
        elif self.duration > 0 and self.duration / self.step > 1_000_000:
            problems.append("step: too small for the duration (more than 1,000,000 steps)")
        else:
            for path, value in (
                ("nodeMetric.reportInterval", self.node_metric.report_interval),
                ("qos.interval", self.qos.interval),
                *(
                    [("descheduler.deschedulingInterval", self.descheduler.descheduling_interval)]
                    if self.descheduler is not None
                    else []
                ),
            ):
                if value <= 0 or not _multiple(value, self.step):
                    problems.append(f"{path}: must be a positive multiple of step ({self.step:g}s)")
        if self.node_metric.lag < 0:
            problems.append("nodeMetric.lag: must not be negative")
        for i, window in enumerate(self.node_metric.aggregated_durations):
            if window < self.node_metric.report_interval:
                problems.append(f"nodeMetric.aggregatedDurations[{i}]: must be >= reportInterval")
        seen: set[str] = set()
        for i, pool in enumerate(self.node_pools):
            if pool.name in seen:
                problems.append(f"nodePools[{i}].name: duplicate name {pool.name!r}")
            seen.add(pool.name)
        seen = set()
        for i, workload in enumerate(self.workloads):
            if workload.name in seen:
                problems.append(f"workloads[{i}].name: duplicate name {workload.name!r}")
            seen.add(workload.name)
            end = workload.arrivals.end if workload.arrivals.end is not None else self.duration
            if not 0 <= workload.arrivals.start <= end <= self.duration:
                problems.append(f"workloads[{i}].arrivals: need 0 <= start <= end <= duration")
        problems += self._gang_groups()
        if problems:
            raise field_problems(problems)
        return self

    def _gang_groups(self) -> list[str]:
        by_name = {w.name: w for w in self.workloads}
        problems = []
        for i, workload in enumerate(self.workloads):
            if workload.gang is None:
                continue
            if workload.pods > 1_000_000:
                problems.append(f"workloads[{i}].gang.members: arrivals.count × members must be at most 1,000,000")
            for k, other_name in enumerate(workload.gang.group_with):
                path = f"workloads[{i}].gang.groupWith[{k}]"
                other = by_name.get(other_name)
                if other is None:
                    problems.append(f"{path}: no workload named {other_name!r}")
                elif other is workload:
                    problems.append(f"{path}: a workload is always in its own GangGroup")
                elif other.gang is None:
                    problems.append(f"{path}: workload {other_name!r} has no gang")
                elif other.arrivals.count != workload.arrivals.count:
                    problems.append(f"{path}: workload {other_name!r} must have as many jobs (arrivals.count)")
        return problems

    @property
    def hot_threshold(self) -> int:
        """CPU percent above which a node is hot (``report.hotThreshold`` or the load-aware threshold)."""
        if self.report.hot_threshold is not None:
            return self.report.hot_threshold
        return self.scheduler.load_aware.usage_thresholds.get("cpu", 65) or 65


def _multiple(value: float, step: float) -> bool:
    ratio = value / step
    return abs(ratio - round(ratio)) < 1e-9 and round(ratio) >= 1
