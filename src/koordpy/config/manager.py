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
    peering: {enabled: false, name: koordpy-manager, lifetimeSeconds: 60}
    health: {host: 0.0.0.0, port: 8080}
    migrationController:              # Koordinator MigrationControllerArgs (see koordpy.config.migration)
      maxMigratingPerNode: 2
      arbitrationArgs: {enabled: true, interval: 500ms}
    podGroup:                         # PodGroup status and gang Events
      {enabled: true, eventIntervalSeconds: 60, eventDelaySeconds: 2, podEventsPerGang: 10}
    reservation:                      # starving-job reservations (see koordpy.config.reservation)
      {enabled: false, starvingJobTimeThreshold: 600, reservedNodePercent: 20}

Unknown keys are errors (a typo must not silently fall back to a default). Numbers are strict (a
boolean or a string is not a number) and bounded as each field says.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from koordpy.config.credentials import CredentialsSettings
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.reservation import ReservationSettings
from koordpy.model.durations import DURATION_PATTERN, DurationError, parse_duration

__all__ = [
    "HealthSettings",
    "ManagerConfiguration",
    "NodeMetricOverride",
    "NodeMetricSettings",
    "PeeringSettings",
]

MemoryPolicy = Literal["usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache"]
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
    """kopf peering between replicas. Off: the process acts alone (``--standalone``)."""

    enabled: bool = Field(False, strict=True)
    """Required with more than one replica; the chart forces it on then."""
    name: str = Field("koordpy-manager", min_length=1, max_length=63)
    """Name of the ClusterKopfPeering object the replicas share; the manager creates it when missing."""
    owner_cluster_role: str | None = Field(None, alias="ownerClusterRole", min_length=1, max_length=253)
    """A ClusterRole that owns the peering object the manager creates, so that deleting the role (helm
    uninstall) garbage-collects it. The chart sets its manager ClusterRole; unset, the object has no owner."""
    lifetime_seconds: int = Field(60, alias="lifetimeSeconds", strict=True, ge=15, le=3600)
    """How long a replica's keep-alive counts (kopf's peering lifetime; each replica renews it 5 to 10 s
    before it runs out). It bounds failover: a replica that dies without exiting (kill -9, a lost node)
    is taken over at most this long after its last keep-alive; one that exits cleanly hands over at once.
    Shorter means faster failover and more keep-alive writes (one per replica every lifetime - 5..10 s)."""


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
    peering: PeeringSettings = Field(default_factory=lambda: PeeringSettings.model_validate({}))
    health: HealthSettings = Field(default_factory=lambda: HealthSettings.model_validate({}))
    migration_controller: MigrationControllerArgs = Field(
        default_factory=lambda: MigrationControllerArgs.model_validate({}), alias="migrationController"
    )
    """PodMigrationJob arbitration and migration (Koordinator ``MigrationControllerArgs``)."""
    pod_group: PodGroupSettings = Field(default_factory=lambda: PodGroupSettings.model_validate({}), alias="podGroup")
    reservation: ReservationSettings = Field(default_factory=lambda: ReservationSettings.model_validate({}))
    """Placement of Reservations and starving-job reservations (``koordpy.config.reservation``)."""
    credentials: CredentialsSettings = Field(default_factory=lambda: CredentialsSettings.model_validate({}))
    """When credentials the API server keeps refusing make ``/readyz`` fail (``koordpy.config.credentials``)."""
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", alias="logLevel")
