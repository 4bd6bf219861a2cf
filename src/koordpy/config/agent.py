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
``spec.metricCollectPolicy`` overrides them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from koordpy.config.errors import field_problems

__all__ = ["AgentConfiguration", "NodeMetricSettings", "QoSSettings", "ServerSettings"]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class QoSSettings(_Settings):
    """Waterline QoS: what the NodeQOSEnsurancePolicy CRD does not say."""

    enabled: bool = True
    """False: no policy is read, nothing is throttled or evicted (collection and reporting go on)."""
    protected_namespaces: tuple[str, ...] = Field(("kube-system",), alias="protectedNamespaces")
    """Pods in these namespaces are never throttled or evicted."""
    protected_priority_above: int = Field(1_000_000_000, alias="protectedPriorityAbove")
    """Pods with ``spec.priority`` above this are never touched. The default protects only
    ``system-cluster-critical``/``system-node-critical``; set 7999 to also protect koord-prod."""
    eviction_timeout_seconds: float = Field(300.0, alias="evictionTimeoutSeconds", gt=0)
    """How long (plus the grace period) an eviction counts as in flight before its pod may be picked again."""
    max_sample_gap_seconds: float | None = Field(None, alias="maxSampleGapSeconds", gt=0)
    """Samples further apart are not consecutive. Unset: 3 x ``collectIntervalSeconds``."""
    restore_on_exit: bool = Field(False, alias="restoreOnExit")
    """Restore every throttled pod when the agent stops (else they are re-adopted on restart)."""
    eviction_retries: int = Field(3, alias="evictionRetries", ge=0)
    """Retries of an eviction refused with 429 (after its Retry-After) before it is given up for this tick."""


class NodeMetricSettings(_Settings):
    """NodeMetric reporting defaults (Koordinator's cluster defaults)."""

    enabled: bool = True
    report_interval_seconds: int = Field(60, alias="reportIntervalSeconds", ge=1)
    """How often ``status`` is written."""
    aggregate_duration_seconds: int = Field(300, alias="aggregateDurationSeconds", ge=1)
    """Window of the averaged ``nodeUsage``/``podsMetric`` usage."""
    aggregation_durations_seconds: tuple[int, ...] = Field((300, 600, 1800), alias="aggregationDurationsSeconds")
    """Windows of ``aggregatedNodeUsages`` (p50/p90/p95/p99 each)."""


class ServerSettings(_Settings):
    host: str = "0.0.0.0"
    """Listen address of /healthz, /readyz and /metrics."""
    port: int = Field(9316, ge=1, le=65535)
    max_header_bytes: int = Field(64 * 1024, alias="maxHeaderBytes", ge=1024, le=16 * 1024 * 1024)
    """Bound on request heads. aiohttp serves this port and bounds lines, not the total: each request or
    header line may take min(8 KiB, this), a request at most 32 header lines; over that, 400 or 431 and a
    closed connection."""
    request_read_timeout_seconds: float = Field(10.0, alias="requestReadTimeoutSeconds", gt=0, le=3600)
    """A client must deliver a whole request within this many seconds of connecting (or of the previous
    response); slower connections are closed."""


class AgentConfiguration(_Settings):
    api_version: Literal["koordpy.io/v1alpha1"] = Field("koordpy.io/v1alpha1", alias="apiVersion")
    kind: Literal["AgentConfiguration"] = "AgentConfiguration"
    collect_interval_seconds: float = Field(10.0, alias="collectIntervalSeconds", gt=0)
    """One collection + decision tick every this many seconds."""
    state_dir: str = Field("/var/lib/koordpy-agent", alias="stateDir")
    """Where throttle originals and the policy state survive restarts (a hostPath)."""
    collect_containers: bool = Field(True, alias="collectContainers")
    """Read per-container usage too (pods are always read)."""
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", alias="logLevel")
    qos: QoSSettings = Field(default_factory=lambda: QoSSettings.model_validate({}))
    node_metric: NodeMetricSettings = Field(
        default_factory=lambda: NodeMetricSettings.model_validate({}), alias="nodeMetric"
    )
    server: ServerSettings = Field(default_factory=lambda: ServerSettings.model_validate({}))

    @model_validator(mode="after")
    def _check(self) -> AgentConfiguration:
        problems = []
        if not self.state_dir.startswith("/"):
            problems.append("stateDir: must be an absolute path")
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
