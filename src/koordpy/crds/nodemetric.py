"""NodeMetric (``slo.koordinator.sh/v1alpha1``, cluster-scoped, one per node, named after it).

Field names follow Koordinator's ``apis/slo/v1alpha1/nodemetric_types.go``. The agent writes the status;
the manager writes ``spec.metricCollectPolicy``; the extender reads both through
``koordpy.model.objects.nodemetric_from_dict``. Device entries and pod ``extensions`` are kept verbatim.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from koordpy.crds.schema import Duration, FreeForm, PrinterColumn, Resource, ResourceList, Time, WireModel

__all__ = [
    "DEFAULT_AGGREGATE_DURATION_SECONDS",
    "DEFAULT_NODE_AGGREGATE_DURATIONS",
    "DEFAULT_REPORT_INTERVAL_SECONDS",
    "NODE_METRIC",
    "AggregatePolicy",
    "AggregatedUsage",
    "NodeMetricCollectPolicy",
    "NodeMetricSpec",
    "NodeMetricStatus",
    "ResourceMap",
]

DEFAULT_AGGREGATE_DURATION_SECONDS = 300
DEFAULT_REPORT_INTERVAL_SECONDS = 60
DEFAULT_NODE_AGGREGATE_DURATIONS = ("5m0s", "10m0s", "30m0s")
"""Koordinator's slo-controller defaults (colocation config), as metav1.Duration prints them."""

NodeMemoryCollectPolicy = Literal["usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache"]


class AggregatePolicy(WireModel):
    durations: list[Duration] | None = None
    """Windows over which the agent reports aggregated usage (avg/p50/p90/p95/p99)."""


class NodeMetricCollectPolicy(WireModel):
    aggregate_duration_seconds: int | None = Field(None, alias="aggregateDurationSeconds", ge=0)
    """Window of the aggregated node usage the agent reports in ``status.nodeMetric.nodeUsage``."""
    report_interval_seconds: int | None = Field(None, alias="reportIntervalSeconds", ge=0)
    """How often the agent updates the status. The scheduler treats older reports as stale."""
    node_aggregate_policy: AggregatePolicy | None = Field(None, alias="nodeAggregatePolicy")
    """Windows of ``status.nodeMetric.aggregatedNodeUsages``."""
    node_memory_collect_policy: NodeMemoryCollectPolicy | None = Field(None, alias="nodeMemoryCollectPolicy")
    """How node memory usage is computed; ``usageWithoutPageCache`` when unset."""


class NodeMetricSpec(WireModel):
    metric_collect_policy: NodeMetricCollectPolicy | None = Field(None, alias="metricCollectPolicy")
    """Collection policy for the agent on this node, set by the manager from cluster configuration."""


class ResourceMap(WireModel):
    resources: ResourceList | None = None
    """Usage per resource name (``cpu``, ``memory``, ...)."""
    devices: list[FreeForm] | None = None
    """Per-device usage (GPU, RDMA); kept verbatim."""


class AggregatedUsage(WireModel):
    usage: dict[str, ResourceMap] | None = None
    """Usage per aggregation type: ``avg``, ``p50``, ``p90``, ``p95``, ``p99``."""
    duration: Duration | None = None
    """The window these figures cover."""


class NUMAMetricInfo(WireModel):
    numa_node_id: int | None = Field(None, alias="numaNodeID")
    node_usage: ResourceMap | None = Field(None, alias="nodeUsage")
    system_usage: ResourceMap | None = Field(None, alias="systemUsage")


class NodeMetricInfo(WireModel):
    node_usage: ResourceMap | None = Field(None, alias="nodeUsage")
    """Node usage over ``aggregateDurationSeconds``."""
    aggregated_node_usages: list[AggregatedUsage] | None = Field(None, alias="aggregatedNodeUsages")
    """Aggregated node usage per window; a window appears only once it has enough samples."""
    system_usage: ResourceMap | None = Field(None, alias="systemUsage")
    """Node usage minus pods minus host applications."""
    aggregated_system_usages: list[AggregatedUsage] | None = Field(None, alias="aggregatedSystemUsages")
    numa_usages: list[NUMAMetricInfo] | None = Field(None, alias="numaUsages")


class PodMetricInfo(WireModel):
    name: str | None = None
    namespace: str | None = None
    pod_usage: ResourceMap | None = Field(None, alias="podUsage")
    priority: str | None = None
    """Koordinator priority class (``koord-prod``, ``koord-batch``, ...)."""
    qos: str | None = None
    """Koordinator QoS class (``LSE``, ``LSR``, ``LS``, ``BE``, ``SYSTEM``)."""
    extensions: FreeForm | None = None


class HostApplicationMetricInfo(WireModel):
    name: str | None = None
    usage: ResourceMap | None = None
    priority: str | None = None
    qos: str | None = None


class ReclaimableMetric(WireModel):
    resource: ResourceMap | None = None


class NodeMetricStatus(WireModel):
    update_time: Time | None = Field(None, alias="updateTime")
    """When the agent last reported."""
    node_metric: NodeMetricInfo | None = Field(None, alias="nodeMetric")
    pods_metric: list[PodMetricInfo] | None = Field(None, alias="podsMetric")
    host_application_metric: list[HostApplicationMetricInfo] | None = Field(None, alias="hostApplicationMetric")
    prod_reclaimable_metric: ReclaimableMetric | None = Field(None, alias="prodReclaimableMetric")
    prod_peak_metric: ReclaimableMetric | None = Field(None, alias="prodPeakMetric")


NODE_METRIC = Resource(
    group="slo.koordinator.sh",
    version="v1alpha1",
    kind="NodeMetric",
    plural="nodemetrics",
    namespaced=False,
    spec=NodeMetricSpec,
    status=NodeMetricStatus,
    description="Resource usage of one node (named after it), reported by the node agent.",
    categories=("koordpy",),
    columns=(
        PrinterColumn("Updated", "date", ".status.updateTime", "When the agent last reported."),
        PrinterColumn(
            "Interval",
            "integer",
            ".spec.metricCollectPolicy.reportIntervalSeconds",
            "Report interval in seconds.",
            priority=1,
        ),
    ),
)


def nodemetric_body(name: str, spec: NodeMetricSpec) -> dict[str, Any]:
    """A NodeMetric object for node ``name`` with ``spec`` (no status)."""
    return {
        "apiVersion": NODE_METRIC.api_version,
        "kind": NODE_METRIC.kind,
        "metadata": {"name": name},
        "spec": spec.model_dump(by_alias=True, exclude_none=True),
    }
