"""The node agent's configuration file.

.. code-block:: yaml

    apiVersion: koordpy.io/v1alpha1
    kind: AgentConfiguration
    collectIntervalSeconds: 10
    stateDir: /var/lib/koordpy-agent
    qos:
      protectedNamespaces: [kube-system]
      protectedPriorityAbove: 1000000000
    nodeMetric:
      reportIntervalSeconds: 60
      aggregateDurationSeconds: 300
    server:
      port: 9316

Unknown keys are errors. ``nodeMetric`` values are defaults: a NodeMetric's own
``spec.metricCollectPolicy`` overrides them. Numbers are strict: a boolean or a string is not a
number, NaN and infinity are refused, and every number has the range given in its description.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from koordpy.config.credentials import CredentialsSettings
from koordpy.config.errors import field_problems

__all__ = ["AgentConfiguration", "NodeMetricSettings", "QoSSettings", "ServerSettings"]


WindowSeconds = Annotated[int, Field(strict=True, ge=1, le=86_400)]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)


class QoSSettings(_Settings):
    """Waterline QoS: what the NodeQOSEnsurancePolicy CRD does not say."""

    enabled: bool = Field(True, strict=True)
    """False: no policy is read, nothing is throttled or evicted (collection and reporting go on)."""
    protected_namespaces: tuple[str, ...] = Field(("kube-system",), alias="protectedNamespaces")
    """Pods in these namespaces are never throttled or evicted."""
    protected_priority_above: int = Field(
        1_000_000_000, alias="protectedPriorityAbove", strict=True, ge=-(2**31), le=2**31 - 1
    )
    """Pods with ``spec.priority`` above this are never touched (an int32, like ``spec.priority``). The
    default protects only ``system-cluster-critical``/``system-node-critical``; set 7999 to also protect
    koord-prod."""
    eviction_timeout_seconds: float = Field(
        300.0, alias="evictionTimeoutSeconds", strict=True, allow_inf_nan=False, ge=1, le=86_400
    )
    """How long (plus the grace period) an eviction counts as in flight before its pod may be picked
    again; 1 s to 1 day."""
    max_sample_gap_seconds: float | None = Field(
        None, alias="maxSampleGapSeconds", strict=True, allow_inf_nan=False, ge=0.1, le=86_400
    )
    """Samples further apart are not consecutive; 0.1 s to 1 day. Unset: 3 x ``collectIntervalSeconds``."""
    restore_on_exit: bool = Field(False, alias="restoreOnExit", strict=True)
    """Restore every throttled pod when the agent stops (else they are re-adopted on restart)."""
    eviction_retries: int = Field(3, alias="evictionRetries", strict=True, ge=0, le=100)
    """Retries of an eviction refused with 429 (after its Retry-After) before it is given up for this
    tick; 0 to 100."""
    repeat_move_window_seconds: int = Field(600, alias="repeatMoveWindowSeconds", strict=True, ge=1, le=86_400)
    """An eviction of a pod placed on the node less than this long ago is a repeat move (the scheduler put it
    where the agent finds the node too hot): counted in ``koordpy_descheduler_repeat_moves_total`` and told by
    an Event on the pod's controller (``koordpy.descheduler.repeats``). The manager's
    ``repeatMoveWindowSeconds`` (same default) judges its own moves."""


class NodeMetricSettings(_Settings):
    """NodeMetric reporting defaults (Koordinator's cluster defaults)."""

    enabled: bool = Field(True, strict=True)
    report_interval_seconds: int = Field(60, alias="reportIntervalSeconds", strict=True, ge=1, le=86_400)
    """How often ``status`` is written; 1 s to 1 day."""
    aggregate_duration_seconds: int = Field(300, alias="aggregateDurationSeconds", strict=True, ge=1, le=86_400)
    """Window of the averaged ``nodeUsage``/``podsMetric`` usage; 1 s to 1 day."""
    aggregation_durations_seconds: tuple[WindowSeconds, ...] = Field(
        (300, 600, 1800), alias="aggregationDurationsSeconds", max_length=16
    )
    """Windows of ``aggregatedNodeUsages`` (p50/p90/p95/p99 each); at most 16, each 1 s to 1 day."""


class ServerSettings(_Settings):
    host: str = "0.0.0.0"
    """Listen address of /healthz, /readyz and /metrics."""
    port: int = Field(9316, strict=True, ge=1, le=65535)
    max_header_bytes: int = Field(64 * 1024, alias="maxHeaderBytes", strict=True, ge=1024, le=16 * 1024 * 1024)
    """Bound on request heads. aiohttp serves this port and bounds lines, not the total: each request or
    header line may take min(8 KiB, this), a request at most 32 header lines; over that, 400 or 431 and a
    closed connection."""
    request_read_timeout_seconds: float = Field(
        10.0, alias="requestReadTimeoutSeconds", strict=True, allow_inf_nan=False, gt=0, le=3600
    )
    """A client must deliver a whole request within this many seconds of connecting (or of the previous
    response); slower connections are closed."""


class AgentConfiguration(_Settings):
    api_version: Literal["koordpy.io/v1alpha1"] = Field("koordpy.io/v1alpha1", alias="apiVersion")
    kind: Literal["AgentConfiguration"] = "AgentConfiguration"
    collect_interval_seconds: float = Field(
        10.0, alias="collectIntervalSeconds", strict=True, allow_inf_nan=False, ge=0.1, le=3600
    )
    """One collection + decision tick every this many seconds; 0.1 s to 1 h."""
    state_dir: str = Field("/var/lib/koordpy-agent", alias="stateDir", pattern="^/")
    """Where throttle originals and the policy state survive restarts (a hostPath)."""
    collect_containers: bool = Field(True, alias="collectContainers", strict=True)
    """Read per-container usage too (pods are always read)."""
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", alias="logLevel")
    qos: QoSSettings = Field(default_factory=lambda: QoSSettings.model_validate({}))
    node_metric: NodeMetricSettings = Field(
        default_factory=lambda: NodeMetricSettings.model_validate({}), alias="nodeMetric"
    )
    server: ServerSettings = Field(default_factory=lambda: ServerSettings.model_validate({}))
    credentials: CredentialsSettings = Field(default_factory=lambda: CredentialsSettings.model_validate({}))
    """When credentials the API server keeps refusing make ``/readyz`` fail (``koordpy.config.credentials``)."""

    @model_validator(mode="after")
    def _check(self) -> AgentConfiguration:
        problems = []
        if self.node_metric.report_interval_seconds < self.collect_interval_seconds:
            problems.append("nodeMetric.reportIntervalSeconds: must not be shorter than collectIntervalSeconds")
        if any(d < self.collect_interval_seconds for d in self.node_metric.aggregation_durations_seconds):
            problems.append("nodeMetric.aggregationDurationsSeconds: every window must be >= collectIntervalSeconds")
        if problems:
            raise field_problems(problems)
        return self

    @property
    def sample_gap(self) -> float:
        return self.qos.max_sample_gap_seconds or 3 * self.collect_interval_seconds
