"""Crane's ``ensurance.crane.io/v1alpha1`` kinds: NodeQOSEnsurancePolicy, NodeQOS, PodQOS, AvoidanceAction.

Field names are Crane's (gocrane/api ``ensurance/v1alpha1``), so existing manifests load unchanged.
NodeQOS (Crane v0.8+) is NodeQOSEnsurancePolicy renamed, with ``spec.rules`` for
``spec.objectiveEnsurances`` (same element schema): :meth:`NodeQOS.to_policy` converts it, keeping
``kind: NodeQOS`` so the planner knows its rules only act on pods a PodQOS allows
(:func:`pod_qos_allows`). Defaults are Crane's
(``avoidanceThreshold``/``restoreThreshold`` 1, ``coolDownSeconds`` 300, ``strategy`` ``None``).

koordpy reads these fields differently from Crane where Crane's behaviour is a bug (see
``docs/agent.md``): thresholds count *consecutive* samples, ``coolDownSeconds`` rate-limits the
action itself, and ``eviction.terminationGracePeriodSeconds`` really reaches the eviction call.

``metricRule.name`` must be one of Crane's metric names or one of koordpy's pressure metrics
(:data:`METRIC_NAMES`, the CRD's enum): a misspelt name is refused, naming the closest one.

Not guaranteed: ``nodeQualityProbe`` and ``memoryThrottle`` are accepted and ignored (as in Crane);
``metricRule.selector`` is evaluated for the ``pod_*_pressure_*`` metrics only (the others have
node-level series). NodeQOS
``elasticCpuLimit``/``memLimit``/``memoryCompression``/``netLimits`` and PodQOS ``resourceQOS``/
``podQualityProbe`` are kept verbatim and not acted on (``koordpy.agent.policy.warnings`` says so).
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from pydantic import Field, field_validator, model_validator

from koordpy.crds.schema import FreeForm, PrinterColumn, Quantity, Resource, WireModel
from koordpy.model.objects import PodInfo
from koordpy.model.quantity import QuantityError, parse_quantity
from koordpy.model.selectors import label_selector_matches as selector_matches

__all__ = [
    "AVOIDANCE_ACTION",
    "CRANE_METRIC_NAMES",
    "METRIC_NAMES",
    "NODE_QOS",
    "NODE_QOS_ENSURANCE_POLICY",
    "POD_QOS",
    "PRESSURE_METRIC_NAMES",
    "AvoidanceAction",
    "AvoidanceActionSpec",
    "CPUThrottle",
    "Eviction",
    "LabelSelector",
    "LabelSelectorRequirement",
    "MetricRule",
    "NodeQOS",
    "NodeQOSEnsurancePolicy",
    "NodeQOSEnsurancePolicySpec",
    "NodeQOSSpec",
    "ObjectMeta",
    "ObjectiveEnsurance",
    "PodQOS",
    "PodQOSSpec",
    "ScopeSelector",
    "ScopedResourceSelectorRequirement",
    "Strategy",
    "Throttle",
    "label_selector_matches",
    "pod_qos_allows",
    "pod_qos_matches",
]

GROUP = "ensurance.crane.io"
VERSION = "v1alpha1"
MAX_RULE_VALUE = 2**63 - 1
"""Largest waterline value (an int64, like the quantities the API server stores)."""
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class LabelSelectorRequirement(WireModel):
    key: str
    """The label key the selector applies to."""
    operator: str
    """``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``."""
    values: list[str] = Field(default_factory=list)
    """Values for ``In``/``NotIn``; empty for ``Exists``/``DoesNotExist``."""

    @field_validator("operator")
    @classmethod
    def _known_operator(cls, value: str) -> str:
        if value not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown operator {value!r} (In, NotIn, Exists, DoesNotExist)")
        return value


class LabelSelector(WireModel):
    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    """Labels that must all be present with these values."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, alias="matchExpressions")
    """Requirements that must all hold."""


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics; ``None`` and an empty selector match everything."""
    if selector is None:
        return True
    return selector_matches(selector.match_labels, selector.match_expressions, labels)


class ObjectMeta(WireModel):
    name: str
    """Object name (both kinds are cluster-scoped)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Object labels."""


class Strategy(enum.StrEnum):
    NONE = "None"
    PREVIEW = "Preview"


CRANE_METRIC_NAMES = (
    "cpu_total_usage",
    "cpu_total_utilization",
    "cpu_load_1_min",
    "cpu_load_5_min",
    "cpu_load_15_min",
    "cpu_core_numbers",
    "exclusive_cpu_idle",
    "memory_total_usage",
    "memory_total_utilization",
    "memory_total",
    "disk_read_kibps",
    "disk_write_kibps",
    "disk_read_iops",
    "disk_read_utilization",
    "network_receive_kibps",
    "network_sent_kibps",
    "network_receive_pckps",
    "network_sent_pckps",
    "network_drop_in",
    "network_drop_out",
    "container_cpu_total_usage",
    "container_cpu_limit",
    "container_cpu_quota",
    "container_cpu_period",
    "container_sched_run_queue_time",
    "ext_res_container_cpu_total_usage",
    "ext_cpu_total_distribute",
    "container_mem_total_usage",
    "ext_res_container_mem_total_usage",
)
"""Every metric name Crane defines (gocrane/crane ``pkg/ensurance/collector/types/types.go``, v0.11): a
manifest written for Crane names one of these. koordpy acts on four of them (``docs/agent.md``); a rule
naming another is kept and reported (``UnknownMetric``). Crane's own write-up of disk write IOPS and
utilization reuses ``disk_read_iops`` and ``disk_read_utilization``, so those are the names."""

PSI_RESOURCES = ("cpu", "memory", "io")
PSI_DEGREES = ("some", "full")
PSI_WINDOWS = ("avg10", "avg60", "avg300")
PRESSURE_METRIC_NAMES = tuple(
    f"{scope}{resource}_pressure_{degree}_{window}"
    for scope in ("", "pod_")
    for resource in PSI_RESOURCES
    for degree in PSI_DEGREES
    for window in PSI_WINDOWS
)
"""koordpy's pressure (PSI) metrics, unknown to Crane: ``<resource>_pressure_<degree>_<window>`` of the
node (``/proc/pressure/<resource>``) and ``pod_<resource>_pressure_<degree>_<window>`` of the pods a rule
protects (their cgroups' ``<resource>.pressure``); percent of the window, as the kernel writes it."""

METRIC_NAMES = CRANE_METRIC_NAMES + PRESSURE_METRIC_NAMES
"""What ``metricRule.name`` accepts (the CRD's enum): Crane's names and koordpy's pressure metrics."""


_METRIC_NAME_SET = frozenset(METRIC_NAMES)


class MetricRule(WireModel):
    name: str = Field(json_schema_extra={"enum": list(METRIC_NAMES)})
    """Metric name. Acted on: ``cpu_total_usage`` (milliCPU), ``cpu_total_utilization`` (percent),
    ``memory_total_usage`` (bytes), ``memory_total_utilization`` (percent), and koordpy's pressure metrics
    ``[pod_]<cpu|memory|io>_pressure_<some|full>_<avg10|avg60|avg300>`` (percent). Every other Crane
    metric name is accepted and not acted on."""
    selector: LabelSelector | None = None
    """Series filter. For the ``pod_*_pressure_*`` metrics: the pods whose pressure counts, by their labels
    (unset: every pod the rule's action may not act on). Other metrics have node-level series only."""
    value: Quantity
    """The waterline, in the metric's Crane unit; must be > 0 and at most 2^63-1. Above means strictly greater."""

    @field_validator("name")
    @classmethod
    def _known_name(cls, value: str) -> str:
        if value not in _METRIC_NAME_SET:
            close = difflib.get_close_matches(value, METRIC_NAMES, n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"unknown metric {value!r}: {hint}expected a Crane metric (such as cpu_total_usage or "
                "memory_total_utilization) or a koordpy pressure metric such as cpu_pressure_some_avg10 "
                "or pod_cpu_pressure_some_avg10"
            )
        return value

    @field_validator("value")
    @classmethod
    def _positive(cls, raw: str | int | float) -> str | int | float:
        try:
            parsed = parse_quantity(raw)
        except QuantityError as exc:
            raise ValueError(f"not a quantity: {exc}") from None
        if parsed <= 0:
            raise ValueError("must be > 0")
        if parsed > MAX_RULE_VALUE:
            raise ValueError(f"out of range (at most {MAX_RULE_VALUE})")
        return raw

    @property
    def threshold(self) -> Fraction:
        """The waterline as an exact number in the metric's Crane unit."""
        return parse_quantity(self.value)


class ObjectiveEnsurance(WireModel):
    name: str
    """Rule name: a DNS-1123 label, unique within the policy."""
    metric_rule: MetricRule = Field(alias="metricRule")
    """Which metric and where its waterline is."""
    avoidance_threshold: int = Field(default=1, ge=1, le=2**31 - 1, strict=True, alias="avoidanceThreshold")
    """Consecutive samples above the line before the rule fires (Crane counted cumulatively)."""
    restore_threshold: int = Field(default=1, ge=1, le=2**31 - 1, strict=True, alias="restoreThreshold")
    """Consecutive samples at or below the line before the rule restores."""
    action_name: str = Field(alias="actionName")
    """Name of the AvoidanceAction to run."""
    strategy: Strategy = Strategy.NONE
    """``None`` acts; ``Preview`` only emits Events and metrics."""

    @field_validator("name", "action_name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not _DNS1123_LABEL.match(value) or len(value) > 63:
            raise ValueError(f"{value!r} is not a DNS-1123 label")
        return value


class HTTPGetProbe(WireModel):
    path: str = ""
    """Accepted for compatibility; not implemented (as in Crane)."""
    port: int | str = Field(default=0, json_schema_extra={"x-kubernetes-int-or-string": True})
    """Accepted for compatibility."""


class NodeLocalGet(WireModel):
    local_cache_ttl_seconds: int = Field(default=60, alias="localCacheTTLSeconds")
    """Accepted for compatibility; never read (as in Crane)."""


class NodeQualityProbe(WireModel):
    http_get: HTTPGetProbe | None = Field(default=None, alias="httpGet")
    """Accepted, not implemented."""
    node_local_get: NodeLocalGet | None = Field(default=None, alias="nodeLocalGet")
    """The agent always collects node-local metrics."""
    timeout_seconds: int = Field(default=0, alias="timeoutSeconds")
    """Accepted, never read."""


class NodeQOSEnsurancePolicySpec(WireModel):
    selector: LabelSelector | None = None
    """Node label selector; ``None`` selects every node."""
    node_quality_probe: NodeQualityProbe | None = Field(default=None, alias="nodeQualityProbe")
    """Accepted for compatibility."""
    objective_ensurances: list[ObjectiveEnsurance] = Field(default_factory=list, alias="objectiveEnsurances")
    """The rules."""

    @model_validator(mode="after")
    def _unique_rule_names(self) -> NodeQOSEnsurancePolicySpec:
        seen: set[str] = set()
        for rule in self.objective_ensurances:
            if rule.name in seen:
                raise ValueError(f"objectiveEnsurances: duplicate rule name {rule.name!r}")
            seen.add(rule.name)
        return self


class NodeQOSEnsurancePolicy(WireModel):
    api_version: str = Field(default=f"{GROUP}/{VERSION}", alias="apiVersion")
    kind: str = "NodeQOSEnsurancePolicy"
    metadata: ObjectMeta
    spec: NodeQOSEnsurancePolicySpec = Field(default_factory=NodeQOSEnsurancePolicySpec)

    @model_validator(mode="before")
    @classmethod
    def _nodeqos_rules(cls, data: Any) -> Any:
        # Crane v0.8+ renamed the kind to NodeQOS and the list to ``rules`` (same element schema).
        if isinstance(data, Mapping) and data.get("kind") == "NodeQOS":
            spec = dict(data.get("spec") or {})
            if "rules" in spec and "objectiveEnsurances" not in spec:
                spec["objectiveEnsurances"] = spec.pop("rules")
            data = {**data, "spec": spec}
        return data


class NodeQOSSpec(WireModel):
    selector: LabelSelector | None = None
    """Node label selector; ``None`` selects every node."""
    node_quality_probe: NodeQualityProbe | None = Field(default=None, alias="nodeQualityProbe")
    """Accepted for compatibility."""
    rules: list[ObjectiveEnsurance] = Field(default_factory=list)
    """The rules (NodeQOSEnsurancePolicy's ``objectiveEnsurances``)."""
    elastic_cpu_limit: FreeForm | None = Field(default=None, alias="elasticCpuLimit")
    """Kept verbatim; not acted on (warned)."""
    mem_limit: FreeForm | None = Field(default=None, alias="memLimit")
    """Kept verbatim; not acted on (warned)."""
    memory_compression: FreeForm | None = Field(default=None, alias="memoryCompression")
    """Kept verbatim; not acted on (warned)."""
    net_limits: FreeForm | None = Field(default=None, alias="netLimits")
    """Kept verbatim; not acted on (warned)."""

    @model_validator(mode="after")
    def _unique_rule_names(self) -> NodeQOSSpec:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"rules: duplicate rule name {rule.name!r}")
            seen.add(rule.name)
        return self

    def ignored_fields(self) -> list[str]:
        """Set fields koordpy does not act on, by their wire name."""
        pairs = (
            ("elasticCpuLimit", self.elastic_cpu_limit),
            ("memLimit", self.mem_limit),
            ("memoryCompression", self.memory_compression),
            ("netLimits", self.net_limits),
        )
        return [name for name, value in pairs if value]


class NodeQOS(WireModel):
    """Crane v0.8+ node policy. Convert with :meth:`to_policy` for the planner."""

    api_version: str = Field(default=f"{GROUP}/{VERSION}", alias="apiVersion")
    kind: str = "NodeQOS"
    metadata: ObjectMeta
    spec: NodeQOSSpec = Field(default_factory=NodeQOSSpec)

    def to_policy(self) -> NodeQOSEnsurancePolicy:
        """The same rules as a NodeQOSEnsurancePolicy whose ``kind`` stays ``NodeQOS`` (PodQOS-scoped)."""
        return NodeQOSEnsurancePolicy(
            kind="NodeQOS",
            metadata=self.metadata,
            spec=NodeQOSEnsurancePolicySpec(
                selector=self.spec.selector,
                nodeQualityProbe=self.spec.node_quality_probe,
                objectiveEnsurances=list(self.spec.rules),
            ),
        )


class ScopeName(enum.StrEnum):
    QOS_CLASS = "QOSClass"
    PRIORITY = "Priority"
    NAMESPACE = "Namespace"


class ScopedResourceSelectorRequirement(WireModel):
    scope_name: ScopeName = Field(alias="scopeName")
    """``QOSClass`` (pod status.qosClass), ``Priority`` (spec.priority) or ``Namespace``."""
    operator: str
    """``In`` or ``NotIn`` (the only operators Crane evaluates)."""
    values: list[str] = Field(default_factory=list)
    """Values; for ``Priority`` each is an integer ``"N"`` or an inclusive range ``"A-B"``."""

    @field_validator("operator")
    @classmethod
    def _known_operator(cls, value: str) -> str:
        if value not in ("In", "NotIn"):
            raise ValueError(f"unknown operator {value!r} (In, NotIn)")
        return value

    @model_validator(mode="after")
    def _values(self) -> ScopedResourceSelectorRequirement:
        if not self.values:
            raise ValueError("values: must be non-empty for In/NotIn")
        if self.scope_name is ScopeName.PRIORITY:
            for value in self.values:
                if _priority_range(value) is None:
                    raise ValueError(f"values: {value!r} is not a priority 'N' or range 'A-B' with A <= B")
        return self

    def matches(self, pod: PodInfo) -> bool:
        if self.scope_name is ScopeName.PRIORITY:
            priority = pod.priority if pod.priority is not None else 0
            hit = any(lo <= priority <= hi for lo, hi in (_priority_range(v) or (1, 0) for v in self.values))
        elif self.scope_name is ScopeName.QOS_CLASS:
            hit = str(pod.qos) in self.values
        else:
            hit = pod.namespace in self.values
        return hit if self.operator == "In" else not hit


def _priority_range(value: str) -> tuple[int, int] | None:
    """``"N"`` -> (N, N); ``"A-B"`` -> (A, B); anything else (or A > B) -> None."""
    parts = value.split("-")
    try:
        if len(parts) == 1:
            return int(parts[0]), int(parts[0])
        if len(parts) == 2:
            lo, hi = int(parts[0]), int(parts[1])
            return (lo, hi) if lo <= hi else None
    except ValueError:
        return None
    return None


class ScopeSelector(WireModel):
    match_expressions: list[ScopedResourceSelectorRequirement] = Field(default_factory=list, alias="matchExpressions")
    """Requirements that must all hold."""


class PodQOSSpec(WireModel):
    label_selector: LabelSelector | None = Field(default=None, alias="labelSelector")
    """Pod label selector."""
    scope_selector: ScopeSelector | None = Field(default=None, alias="scopeSelector")
    """QoS class, priority and namespace requirements (ANDed with the label selector)."""
    allowed_actions: list[str] = Field(default_factory=list, alias="allowedActions")
    """AvoidanceAction names a NodeQOS rule may run on the selected pods."""
    resource_qos: FreeForm | None = Field(default=None, alias="resourceQOS")
    """Kept verbatim; not acted on (warned)."""
    pod_quality_probe: FreeForm | None = Field(default=None, alias="podQualityProbe")
    """Kept verbatim; not acted on (warned)."""

    def selects_nothing(self) -> bool:
        """Crane: a PodQOS with neither a label selector nor a scope selector matches no pod."""
        labels = self.label_selector
        no_labels = labels is None or (not labels.match_labels and not labels.match_expressions)
        return no_labels and (self.scope_selector is None or not self.scope_selector.match_expressions)


class PodQOS(WireModel):
    """Crane v0.8+ pod policy: which pods NodeQOS rules may act on, and with which actions."""

    api_version: str = Field(default=f"{GROUP}/{VERSION}", alias="apiVersion")
    kind: str = "PodQOS"
    metadata: ObjectMeta
    spec: PodQOSSpec = Field(default_factory=PodQOSSpec)


def pod_qos_matches(pod_qos: PodQOS, pod: PodInfo) -> bool:
    """Whether ``pod_qos`` selects ``pod``: label selector AND every scope requirement.

    As Crane: a PodQOS with no selector at all selects nothing. Unlike Crane's fetcher (which
    skips ``labelSelector``), the label selector is evaluated, as the field's documentation says.
    """
    spec = pod_qos.spec
    if spec.selects_nothing():
        return False
    if not label_selector_matches(spec.label_selector, pod.labels):
        return False
    scope = spec.scope_selector
    return scope is None or all(req.matches(pod) for req in scope.match_expressions)


def pod_qos_allows(pod_qos: Iterable[PodQOS], pod: PodInfo, action_name: str) -> bool:
    """Crane v0.8+: a NodeQOS rule may run ``action_name`` on ``pod`` only if some PodQOS that
    selects the pod lists the action in ``allowedActions``; a pod no PodQOS selects is never acted on."""
    return any(action_name in q.spec.allowed_actions and pod_qos_matches(q, pod) for q in pod_qos)


class CPUThrottle(WireModel):
    min_cpu_ratio: int = Field(default=0, ge=0, le=100, strict=True, alias="minCPURatio")
    """Floor as a percentage of the pod's CPU limit: floor = max(request, limit x ratio / 100)."""
    step_cpu_ratio: int = Field(default=0, ge=0, le=100, strict=True, alias="stepCPURatio")
    """Percentage of the current quota removed per throttle step and added per restore step."""


class MemoryThrottle(WireModel):
    force_gc: bool = Field(default=False, alias="forceGC")
    """Accepted; unused (as in Crane)."""


class Throttle(WireModel):
    cpu_throttle: CPUThrottle | None = Field(default=None, alias="cpuThrottle")
    """CPU quota stepping."""
    memory_throttle: MemoryThrottle | None = Field(default=None, alias="memoryThrottle")
    """Accepted; unused."""


class Eviction(WireModel):
    termination_grace_period_seconds: int | None = Field(
        default=None, ge=0, le=2**31 - 1, strict=True, alias="terminationGracePeriodSeconds"
    )
    """Grace period passed to the Eviction call; unset uses the pod's own."""


class AvoidanceActionSpec(WireModel):
    cool_down_seconds: int = Field(default=300, ge=1, le=2**31 - 1, strict=True, alias="coolDownSeconds")
    """Minimum seconds between two executions of this action on a node (koordpy semantics)."""
    throttle: Throttle | None = None
    """Present: the action throttles CPU."""
    eviction: Eviction | None = None
    """Present: the action evicts."""
    description: str = Field(default="", max_length=1024)
    """Free text."""


class AvoidanceAction(WireModel):
    api_version: str = Field(default=f"{GROUP}/{VERSION}", alias="apiVersion")
    kind: str = "AvoidanceAction"
    metadata: ObjectMeta
    spec: AvoidanceActionSpec = Field(default_factory=AvoidanceActionSpec)


NODE_QOS_ENSURANCE_POLICY = Resource(
    group=GROUP,
    version=VERSION,
    kind="NodeQOSEnsurancePolicy",
    plural="nodeqosensurancepolicies",
    namespaced=False,
    spec=NodeQOSEnsurancePolicySpec,
    status=None,
    description="Crane node QoS ensurance policy: waterline rules and the actions they trigger.",
    short_names=("nep",),
    status_subresource=False,
)

AVOIDANCE_ACTION = Resource(
    group=GROUP,
    version=VERSION,
    kind="AvoidanceAction",
    plural="avoidanceactions",
    namespaced=False,
    spec=AvoidanceActionSpec,
    status=None,
    description="Crane avoidance action: how to throttle or evict when a waterline is crossed.",
    short_names=("avoid",),
    columns=(PrinterColumn("CoolDown", "integer", ".spec.coolDownSeconds"),),
    status_subresource=False,
)

NODE_QOS = Resource(
    group=GROUP,
    version=VERSION,
    kind="NodeQOS",
    plural="nodeqoss",
    namespaced=False,
    spec=NodeQOSSpec,
    status=None,
    description="Crane (v0.8+) node QoS: waterline rules and the actions they trigger.",
    short_names=("nq",),
    status_subresource=False,
)

POD_QOS = Resource(
    group=GROUP,
    version=VERSION,
    kind="PodQOS",
    plural="podqoss",
    namespaced=False,
    spec=PodQOSSpec,
    status=None,
    description="Crane (v0.8+) pod QoS: which pods NodeQOS rules may act on, and with which actions.",
    short_names=("pq",),
    status_subresource=False,
)
