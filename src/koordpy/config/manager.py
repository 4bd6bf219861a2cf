"""The manager deployable's configuration file.

.. code-block:: yaml

    apiVersion: koordpy.io/v1alpha1
    kind: ManagerConfiguration
    nodeMetric:                       # Koordinator slo-controller's NodeMetric collect policy
      aggregateDurationSeconds: 300
      reportIntervalSeconds: 60
      nodeAggregateDurations: [5m0s, 10m0s, 30m0s]
      overrides:                      # first match wins, per node labels
        - nodeSelector: {pool: batch}
          reportIntervalSeconds: 30
    leaderElection:                   # component-base LeaderElectionConfiguration (a coordination.k8s.io Lease)
      {leaderElect: true, resourceName: koordpy-manager, resourceNamespace: koordpy-system,
       leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
    health: {host: 0.0.0.0, port: 8080}
    migrationController:              # Koordinator MigrationControllerArgs (see koordpy.config.migration)
      maxMigratingPerNode: 2
      arbitrationArgs: {enabled: true, interval: 500ms}
    deschedulingInterval: 10s         # Koordinator DeschedulerConfiguration: how often balance plugins run
    repeatMoveWindowSeconds: 600      # a workload's pod moved again within this long: a repeat move
    lowNodeLoad:                      # Koordinator LowNodeLoadArgs (see koordpy.config.lownodeload); unset: off
      lowThresholds: {cpu: 45, memory: 55}
      highThresholds: {cpu: 75, memory: 80}
    podGroup:                         # PodGroup status and gang Events
      {enabled: true, eventIntervalSeconds: 60, eventDelaySeconds: 2, podEventsPerGang: 10}
    reservation:                      # starving-job reservations (see koordpy.config.reservation)
      {enabled: false, starvingJobTimeThreshold: 600, reservedNodePercent: 20}

``migrationController`` and ``lowNodeLoad`` are the ``args`` of Koordinator's descheduler plugins of those
names (``profiles[].pluginConfig[].args`` in its DeschedulerConfiguration), ``deschedulingInterval`` its
top-level field of that name. Unknown keys are errors (a typo must not silently fall back to a default).
Numbers are strict (a boolean or a string is not a number) and bounded as each field says.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from koordpy.config.credentials import CredentialsSettings
from koordpy.config.errors import field_problems
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.reservation import ReservationSettings
from koordpy.model.durations import DURATION_PATTERN, DurationError, parse_duration

__all__ = [
    "JITTER_FACTOR",
    "HealthSettings",
    "LeaderElectionSettings",
    "ManagerConfiguration",
    "NodeMetricOverride",
    "NodeMetricSettings",
    "PeeringSettings",
    "deprecation_warnings",
    "leader_election_problems",
]

MemoryPolicy = Literal["usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache"]
JITTER_FACTOR = 1.2
"""client-go's ``JitterFactor``: each wait of ``retryPeriod`` is stretched by up to 1.2 times itself."""
DurationText = Annotated[str, WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN})]
"""A Go duration kept as written (``"5m0s"``); checked by ``_check_durations``, described by its pattern."""


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)


def _check_durations(values: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    seen: set[float] = set()
    for i, text in enumerate(values):
        try:
            seconds = parse_duration(text)
        except DurationError as exc:
            raise ValueError(f"[{i}]: {exc}") from None
        if seconds <= 0:
            raise ValueError(f"[{i}]: {text!r} must be positive")
        if seconds in seen:
            raise ValueError(f"[{i}]: {text!r} repeats an earlier window")
        seen.add(seconds)
    return values


class NodeMetricOverride(_Settings):
    """Collect-policy fields for the nodes whose labels include ``nodeSelector``; unset fields inherit."""

    node_selector: dict[str, str] = Field(alias="nodeSelector", min_length=1)
    """Labels a node must carry (all of them) for this override to apply."""
    aggregate_duration_seconds: int | None = Field(None, alias="aggregateDurationSeconds", strict=True, ge=1, le=86_400)
    report_interval_seconds: int | None = Field(None, alias="reportIntervalSeconds", strict=True, ge=1, le=86_400)
    node_aggregate_durations: tuple[DurationText, ...] | None = Field(None, alias="nodeAggregateDurations")
    node_memory_collect_policy: MemoryPolicy | None = Field(None, alias="nodeMemoryCollectPolicy")

    _durations = field_validator("node_aggregate_durations")(_check_durations)


class NodeMetricSettings(_Settings):
    """What Koordinator's slo-controller writes into every NodeMetric's ``spec.metricCollectPolicy``."""

    enabled: bool = Field(True, strict=True)
    """Keep one NodeMetric per node and delete those of deleted nodes."""
    aggregate_duration_seconds: int = Field(300, alias="aggregateDurationSeconds", strict=True, ge=1, le=86_400)
    """Window of ``status.nodeMetric.nodeUsage``; 1 s to 1 day."""
    report_interval_seconds: int = Field(60, alias="reportIntervalSeconds", strict=True, ge=1, le=86_400)
    """How often agents report, 1 s to 1 day. The extender treats a NodeMetric older than its own limit as stale."""
    node_aggregate_durations: tuple[DurationText, ...] = Field(
        ("5m0s", "10m0s", "30m0s"), alias="nodeAggregateDurations"
    )
    """Windows of ``status.nodeMetric.aggregatedNodeUsages`` (Go durations)."""
    node_memory_collect_policy: MemoryPolicy | None = Field(None, alias="nodeMemoryCollectPolicy")
    """Unset: the agent's default (``usageWithoutPageCache``); the field is then left out of the spec."""
    overrides: tuple[NodeMetricOverride, ...] = ()
    """Per-node-label exceptions; the first matching override wins."""

    _durations = field_validator("node_aggregate_durations")(_check_durations)


class PeeringSettings(_Settings):
    """Deprecated and ignored: kopf peering between replicas, replaced by :class:`LeaderElectionSettings`.

    Accepted so that existing configuration files keep loading (the manager logs a warning naming the
    field). ``name`` is still read: a manager does not take its Lease while replicas of an older version
    still keep alive in the ClusterKopfPeering of that name (an upgrade from a version that peered)."""

    enabled: bool = Field(False, strict=True)
    """Ignored (leader election is always on, see ``leaderElection``)."""
    name: str = Field("koordpy-manager", min_length=1, max_length=63)
    """The ClusterKopfPeering older versions shared; a new manager waits until no live keep-alive is left in it."""
    owner_cluster_role: str | None = Field(None, alias="ownerClusterRole", min_length=1, max_length=253)
    """Ignored (the manager no longer creates the peering object)."""
    lifetime_seconds: int = Field(60, alias="lifetimeSeconds", strict=True, ge=15, le=3600)
    """Ignored (``leaderElection.leaseDuration`` bounds failover now)."""


def leader_election_problems(lease_duration: float, renew_deadline: float, retry_period: float) -> list[str]:
    """client-go's ``NewLeaderElector`` checks (v0.37), as ``field: message`` lines (none: valid): each
    duration positive, ``leaseDuration > renewDeadline`` and ``renewDeadline > JitterFactor x retryPeriod``.
    The one rule for :class:`LeaderElectionSettings` and :class:`koordpy.kube.leaderelection.LeaseElector`."""
    problems = [
        f"{name}: must be greater than zero, got {value:g}s"
        for name, value in (
            ("leaseDuration", lease_duration),
            ("renewDeadline", renew_deadline),
            ("retryPeriod", retry_period),
        )
        if not value > 0
    ]
    if problems:
        return problems
    if not lease_duration > renew_deadline:
        problems.append(f"leaseDuration: {lease_duration:g}s must be longer than renewDeadline ({renew_deadline:g}s)")
    if not renew_deadline > JITTER_FACTOR * retry_period:
        problems.append(
            f"renewDeadline: {renew_deadline:g}s must be longer than {JITTER_FACTOR:g} x retryPeriod "
            f"({JITTER_FACTOR * retry_period:g}s)"
        )
    return problems


class LeaderElectionSettings(_Settings):
    """Which replica acts: the holder of a ``coordination.k8s.io`` Lease, elected as client-go's
    ``leaderelection`` package elects kube-scheduler and kube-controller-manager (same field names and
    defaults as component-base's ``LeaderElectionConfiguration``).

    Leadership is sticky: a replica takes the Lease only when it is free (released, or not renewed for
    ``leaseDuration`` as this replica observed it), never from a holder that renews, whatever the
    replicas' start order. A leader that stops (SIGTERM) releases the Lease, so a standby takes over
    within about ``retryPeriod``; one that dies without exiting is taken over ``leaseDuration`` after its
    last renewal. A leader that cannot renew for ``renewDeadline`` stops acting and stands by again in the
    same process (it competes for the Lease again when it can).

    Fencing: the leader sends no write from ``renewDeadline`` after the start of its last successful
    renewal on (:meth:`koordpy.kube.leaderelection.LeaseElector.admit`); a standby takes over no earlier
    than ``leaseDuration`` after that renewal. ``leaseDuration - renewDeadline`` is thus the time a write
    sent just before the deadline has to reach the API server.

    Validated as client-go's ``NewLeaderElector`` does (k8s.io/client-go/tools/leaderelection, v0.37):
    each positive, ``leaseDuration > renewDeadline > 1.2 x retryPeriod`` (1.2 is its ``JitterFactor``).
    The Lease's ``leaseDurationSeconds`` is an integer: ``leaseDuration`` is written rounded up to whole
    seconds, so the written lease never falls below the renew deadline (client-go truncates: 10.4 s with a
    10.2 s deadline would be written as 10 s).

    Not guaranteed: a leader whose process is frozen (SIGSTOP, a stalled VM) between the fence's check and
    the send may send that one write late; as with client-go."""

    leader_elect: bool = Field(True, alias="leaderElect", strict=True)
    """Elect a leader before acting. False: the process acts alone at once (a single process outside a
    cluster, or a test); never run two managers so."""
    resource_lock: Literal["leases"] = Field("leases", alias="resourceLock")
    """The lock kind; only ``leases`` (as client-go since 1.24)."""
    resource_name: str = Field("koordpy-manager", alias="resourceName", min_length=1, max_length=253)
    """The Lease's name (the chart: ``<release>-manager``)."""
    resource_namespace: str = Field("koordpy-system", alias="resourceNamespace", min_length=1, max_length=63)
    """The Lease's namespace (the chart: the release namespace)."""
    lease_duration: DurationText = Field("15s", alias="leaseDuration")
    """How long a standby waits, after it last saw the Lease renewed, before it takes it over."""
    renew_deadline: DurationText = Field("10s", alias="renewDeadline")
    """How long a leader keeps trying to renew before it gives up leading; shorter than ``leaseDuration``."""
    retry_period: DurationText = Field("2s", alias="retryPeriod")
    """How often a standby tries to take the Lease and a leader renews it (each wait jittered up to 1.2x)."""

    @field_validator("lease_duration", "renew_deadline", "retry_period")
    @classmethod
    def _positive(cls, value: str) -> str:
        try:
            seconds = parse_duration(value)
        except DurationError as exc:
            raise ValueError(str(exc)) from None
        if not 1 <= seconds <= 3600:
            raise ValueError(f"{value!r} must be between 1s and 1h")
        return value

    @property
    def lease_duration_seconds(self) -> float:
        return parse_duration(self.lease_duration)

    @property
    def renew_deadline_seconds(self) -> float:
        return parse_duration(self.renew_deadline)

    @property
    def retry_period_seconds(self) -> float:
        return parse_duration(self.retry_period)

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionSettings:
        problems = leader_election_problems(
            self.lease_duration_seconds, self.renew_deadline_seconds, self.retry_period_seconds
        )
        if problems:
            raise field_problems(problems)
        return self


class HealthSettings(_Settings):
    """The liveness endpoint, served at ``http://{host}:{port}/healthz`` (and ``/metrics``)."""

    host: str = "0.0.0.0"
    port: int = Field(8080, strict=True, ge=1, le=65535)
    max_header_bytes: int = Field(64 * 1024, alias="maxHeaderBytes", strict=True, ge=1024, le=16 * 1024 * 1024)
    """Bound on request heads. aiohttp serves this port and bounds lines, not the total: each request or
    header line may take min(8 KiB, this), a request at most 32 header lines; over that, 400 or 431 and a
    closed connection."""
    request_read_timeout_seconds: float = Field(
        10.0, alias="requestReadTimeoutSeconds", strict=True, allow_inf_nan=False, gt=0, le=3600
    )
    """A client must deliver a whole request within this many seconds of connecting (or of the previous
    response); slower connections are closed."""
    loop_stall_seconds: float = Field(30.0, alias="loopStallSeconds", strict=True, allow_inf_nan=False, ge=1, le=3600)
    """``/healthz`` is answered from its own thread, so a busy round never delays it; it answers 503 when
    the operator's event loop has not run for this many seconds (stuck), 200 otherwise."""


class PodGroupSettings(_Settings):
    """PodGroup status and gang Events (both PodGroup APIs); see ``koordpy.manager.gang_status``."""

    enabled: bool = Field(True, strict=True)
    """Write PodGroup ``status`` and post gang Events. False: PodGroups and pods are not even watched."""
    event_interval_seconds: float = Field(60.0, alias="eventIntervalSeconds", ge=1, le=86400)
    """At most one Event per object per interval, and only when its message changed."""
    event_delay_seconds: float = Field(2.0, alias="eventDelaySeconds", ge=0.1, le=600)
    """Events are posted from a pass every this many seconds, so a burst of pod events (the start-up
    list, a Job creating its workers) ends in one Event with the settled message, not one per step."""
    pod_events_per_gang: int = Field(10, alias="podEventsPerGang", strict=True, ge=0, le=1000)
    """At most this many waiting member pods get an Event per gang and per interval."""


class ManagerConfiguration(_Settings):
    api_version: Literal["koordpy.io/v1alpha1"] = Field("koordpy.io/v1alpha1", alias="apiVersion")
    kind: Literal["ManagerConfiguration"] = "ManagerConfiguration"
    node_metric: NodeMetricSettings = Field(
        default_factory=lambda: NodeMetricSettings.model_validate({}), alias="nodeMetric"
    )
    leader_election: LeaderElectionSettings = Field(
        default_factory=lambda: LeaderElectionSettings.model_validate({}), alias="leaderElection"
    )
    peering: PeeringSettings = Field(default_factory=lambda: PeeringSettings.model_validate({}))
    """Deprecated (see :class:`PeeringSettings`)."""
    health: HealthSettings = Field(default_factory=lambda: HealthSettings.model_validate({}))
    migration_controller: MigrationControllerArgs = Field(
        default_factory=lambda: MigrationControllerArgs.model_validate({}), alias="migrationController"
    )
    """PodMigrationJob arbitration and migration (Koordinator ``MigrationControllerArgs``)."""
    descheduling_interval: DurationText = Field("10s", alias="deschedulingInterval")
    """How often the balance plugins run (Koordinator's ``deschedulingInterval``; its shipped configuration's
    10s), 1s to 1h."""
    max_no_of_pods_to_evict_per_node: int | None = Field(
        None, alias="maxNoOfPodsToEvictPerNode", strict=True, ge=0, le=2**32 - 1
    )
    """At most this many pods moved off one node per descheduling round (Koordinator's
    ``DeschedulerConfiguration`` field). Unset: no limit; 0: none."""
    max_no_of_pods_to_evict_per_namespace: int | None = Field(
        None, alias="maxNoOfPodsToEvictPerNamespace", strict=True, ge=0, le=2**32 - 1
    )
    """At most this many pods of one namespace moved per descheduling round. Unset: no limit."""
    max_no_of_pods_to_evict_total: int | None = Field(
        None, alias="maxNoOfPodsToEvictTotal", strict=True, ge=0, le=2**32 - 1
    )
    """At most this many pods moved per descheduling round. Unset: no limit."""
    low_node_load: LowNodeLoadArgs | None = Field(None, alias="lowNodeLoad")
    """The LowNodeLoad balance plugin (Koordinator ``LowNodeLoadArgs``): moves pods off hot nodes through
    PodMigrationJobs. Unset: off."""
    repeat_move_window_seconds: int = Field(600, alias="repeatMoveWindowSeconds", strict=True, ge=1, le=86_400)
    """A pod of a workload moved again less than this long after a pod of the same workload was moved (onto its
    node) is a repeat move: counted in ``koordpy_descheduler_repeat_moves_total`` and told by an Event on the
    workload (``koordpy.descheduler.repeats``)."""
    pod_group: PodGroupSettings = Field(default_factory=lambda: PodGroupSettings.model_validate({}), alias="podGroup")
    reservation: ReservationSettings = Field(default_factory=lambda: ReservationSettings.model_validate({}))
    """Placement of Reservations and starving-job reservations (``koordpy.config.reservation``)."""
    credentials: CredentialsSettings = Field(default_factory=lambda: CredentialsSettings.model_validate({}))
    """When credentials the API server keeps refusing make ``/readyz`` fail (``koordpy.config.credentials``)."""
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", alias="logLevel")

    @field_validator("descheduling_interval")
    @classmethod
    def _interval(cls, value: str) -> str:
        try:
            seconds = parse_duration(value)
        except DurationError as exc:
            raise ValueError(str(exc)) from None
        if not 1 <= seconds <= 3600:
            raise ValueError(f"{value!r} must be between 1s and 1h")
        return value

    @property
    def descheduling_interval_seconds(self) -> float:
        return parse_duration(self.descheduling_interval)


def deprecation_warnings(config: ManagerConfiguration) -> list[str]:
    """One message per deprecated field the configuration sets (the manager logs them at start-up)."""
    given = config.peering.model_fields_set if "peering" in config.model_fields_set else set()
    aliases = {"enabled": "enabled", "owner_cluster_role": "ownerClusterRole", "lifetime_seconds": "lifetimeSeconds"}
    return [
        f"peering.{aliases[name]} is deprecated and ignored: replicas elect their leader with a "
        "coordination.k8s.io Lease (leaderElection)"
        for name in sorted(given)
        if name in aliases
    ]
