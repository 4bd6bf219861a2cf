"""``migrationController:`` section of the manager configuration: Koordinator's ``MigrationControllerArgs``.

Field names and defaults follow Koordinator's ``MigrationControllerArgs`` (descheduler/v1alpha2,
reference §2.3), so its ``args`` can be pasted here. Highlights:

* ``maxMigratingPerNode`` 2; ``maxMigratingPerNamespace`` and ``maxMigratingGlobally`` unset (off);
  a limit of 0 or less is off as upstream;
* ``maxMigratingPerWorkload`` / ``maxUnavailablePerWorkload``: an integer or a percent string
  (``"10%"``); unset means the implicit rule of :func:`koordpy.descheduler.limits.workload_limit`
  (replicas > 10: 10 %, 4..10: 2, < 4: 1);
* ``objectLimiters`` defaults to ``{workload: {duration: 5m}}``; ``defaultJobMode`` ``ReservationFirst``;
  ``defaultJobTTL`` 5m; ``evictQPS``/``evictBurst`` 10/1; ``evictionPolicy`` ``Eviction``;
* ``arbitrationArgs`` ``{enabled: true, interval: 500ms}``; unlike upstream, ``enabled: false`` is
  honoured: every waiting job passes at once, unsorted and unfiltered.

``processQueueQPS`` and ``jobSelectRatio`` appear only in drafts of Koordinator's arbitration proposal;
they are not accepted here. ``nodeFit: true`` is refused (not built in koordpy). ``priorityThreshold.name``
is refused (koordpy compares ``spec.priority`` with ``priorityThreshold.value`` only).

Not guaranteed: that every accepted field is read by a component: ``dryRun``, ``maxConcurrentReconciles``,
``schedulerNames``, ``evictQPS``/``evictBurst``, ``objectLimiters``, ``evictionPolicy``,
``defaultDeleteOptions``, ``defaultJobMode`` and ``defaultJobTTL`` belong to the migration lifecycle.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from koordpy.config.errors import field_problems
from koordpy.model.durations import DURATION_PATTERN, DurationError, parse_duration
from koordpy.model.names import label_key_problem, label_value_problem
from koordpy.model.selectors import label_selector_matches

__all__ = [
    "EVICTION_GATES",
    "ArbitrationArgs",
    "IntOrPercent",
    "LabelSelector",
    "LabelSelectorRequirement",
    "MigrationControllerArgs",
    "MigrationNamespaces",
    "ObjectLimiter",
    "PriorityThreshold",
]

EvictionGate = Literal[
    "MaxUnavailablePerWorkload",
    "MaxMigratingPerWorkload",
    "MaxMigratingPerNode",
    "MaxMigratingPerNamespace",
    "MaxMigratingGlobally",
    "ExpectedReplicas",
    "PVC",
    "BarePods",
    "LocalStorage",
    "SystemCritical",
    "PriorityThreshold",
    "LabelSelector",
    "Namespaces",
    "NodeFit",
    "GangDisruption",
]

EVICTION_GATES: tuple[str, ...] = get_args(EvictionGate)
"""Names ``skipEvictionGates`` accepts: Koordinator v1.8's, and koordpy's ``GangDisruption`` (the gang rule
of the arbitration: no job takes a running gang below its minimum)."""

PERCENT_PATTERN = r"^(0|[1-9][0-9]{0,8})%$"

IntOrPercent = Annotated[int, Field(strict=True, ge=0, le=2**31 - 1)] | Annotated[str, Field(pattern=PERCENT_PATTERN)]
"""Kubernetes IntOrString as Koordinator uses it: a non-negative integer or a percent string ``"25%"``."""


def _seconds(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a Go duration string or a number of seconds")
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except DurationError as exc:
            raise ValueError(str(exc)) from None
    return value


Seconds = Annotated[
    float,
    BeforeValidator(_seconds),
    WithJsonSchema({"anyOf": [{"type": "string", "pattern": DURATION_PATTERN}, {"type": "number", "minimum": 0}]}),
]
"""A Go duration (``"5m"``, ``"500ms"``) or a number of seconds, kept as seconds."""


def _qps(value: Any) -> Any:
    # Upstream's evictQPS is a FloatOrString: 10, 10.5 or "10.5".
    if isinstance(value, bool):
        raise ValueError("expected a number or a numeric string")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"expected a number or a numeric string, got {value!r}") from None
        if not math.isfinite(value):
            raise ValueError("must be finite")
    return value


QPS = Annotated[
    float,
    BeforeValidator(_qps),
    WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "minLength": 1}]}),
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)


class ArbitrationArgs(_Args):
    enabled: bool = Field(True, strict=True)
    """Sort and filter waiting jobs every ``interval``; false: every waiting job passes at once."""
    interval: Seconds = Field(0.5, gt=0, le=3600)
    """How often the waiting jobs are arbitrated (Go duration, default ``500ms``)."""


class ObjectLimiter(_Args):
    duration: Seconds = Field(300.0, ge=0, le=86_400 * 365)
    """Window of the limiter (default ``5m``); 0 turns the limiter off."""
    max_migrating: IntOrPercent | None = Field(None, alias="maxMigrating")
    """Migrations per window; unset: the per-workload rule of ``maxMigratingPerWorkload``."""
    burst: int = Field(0, strict=True, ge=0, le=1_000_000)
    """Token-bucket burst; 0 means 1 as upstream."""


class MigrationNamespaces(_Args):
    include: tuple[str, ...] | None = None
    """Only pods in these namespaces may migrate."""
    exclude: tuple[str, ...] | None = None
    """Pods in these namespaces never migrate."""

    @model_validator(mode="after")
    def _one_of(self) -> MigrationNamespaces:
        if self.include and self.exclude:
            raise field_problems(["include: only one of include and exclude may be set"])
        return self


class PriorityThreshold(_Args):
    value: int | None = Field(None, strict=True, ge=-(2**31), le=2**31 - 1)
    """Pods whose ``spec.priority`` is at least this never migrate."""
    name: str | None = None
    """Refused: koordpy does not resolve PriorityClass objects; give ``value``."""

    @model_validator(mode="after")
    def _value_only(self) -> PriorityThreshold:
        if self.name is not None:
            raise field_problems(["name: PriorityClass names are not resolved by koordpy; give value instead"])
        return self


class LabelSelectorRequirement(_Args):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values(self) -> LabelSelectorRequirement:
        problem = label_key_problem(self.key)
        if problem is not None:
            raise field_problems([f"key: {problem}"])
        for i, value in enumerate(self.values):
            problem = label_value_problem(value)
            if problem is not None:
                raise field_problems([f"values[{i}]: {problem}"])
        if self.operator in ("In", "NotIn") and not self.values:
            raise field_problems([f"values: required with operator {self.operator}"])
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise field_problems([f"values: must be empty with operator {self.operator}"])
        return self


class LabelSelector(_Args):
    """metav1.LabelSelector: all of ``matchLabels`` and all ``matchExpressions`` must hold. Keys and values
    are checked as ``metav1.LabelSelectorAsSelector`` checks them (a selector that would not parse upstream is
    refused here)."""

    match_labels: dict[str, str] | None = Field(None, alias="matchLabels")
    match_expressions: tuple[LabelSelectorRequirement, ...] | None = Field(None, alias="matchExpressions")

    @model_validator(mode="after")
    def _labels(self) -> LabelSelector:
        problems = []
        for key, value in (self.match_labels or {}).items():
            problem = label_key_problem(key) or label_value_problem(value)
            if problem is not None:
                problems.append(f"matchLabels.{key}: {problem}")
        if problems:
            raise field_problems(problems)
        return self

    def matches(self, labels: dict[str, str] | Any) -> bool:
        """Whether ``labels`` (a mapping) satisfy the selector; an empty selector matches everything."""
        return label_selector_matches(self.match_labels, self.match_expressions, labels)


ObjectKind = Literal["workload", "namespace"]


def _default_object_limiters() -> dict[ObjectKind, ObjectLimiter]:
    return {"workload": ObjectLimiter.model_validate({"duration": "5m"})}


class MigrationControllerArgs(_Args):
    """Koordinator ``MigrationControllerArgs`` (names and defaults verbatim, reference §2.3)."""

    api_version: str | None = Field(None, alias="apiVersion")
    kind: str | None = None
    dry_run: bool = Field(False, alias="dryRun", strict=True)
    max_concurrent_reconciles: int = Field(1, alias="maxConcurrentReconciles", strict=True, ge=1, le=1000)
    evict_failed_bare_pods: bool = Field(False, alias="evictFailedBarePods", strict=True)
    """Failed pods without an owner may migrate."""
    evict_all_bare_pods: bool = Field(False, alias="evictAllBarePods", strict=True)
    """Pods without an owner may migrate."""
    evict_local_storage_pods: bool = Field(False, alias="evictLocalStoragePods", strict=True)
    """Pods with emptyDir or hostPath volumes may migrate."""
    evict_system_critical_pods: bool = Field(False, alias="evictSystemCriticalPods", strict=True)
    """Pods with priority 2000000000 or more (or a system-*-critical class) may migrate."""
    ignore_pvc_pods: bool = Field(False, alias="ignorePvcPods", strict=True)
    """Pods with PersistentVolumeClaim volumes never migrate."""
    priority_threshold: PriorityThreshold | None = Field(None, alias="priorityThreshold")
    label_selector: LabelSelector | None = Field(None, alias="labelSelector")
    """Only pods whose labels match may migrate."""
    namespaces: MigrationNamespaces | None = None
    node_selector: str | None = Field(None, alias="nodeSelector")
    """Label selector string (``a=b,c!=d,e``) on the pod's node; only pods on matching nodes migrate."""
    node_fit: bool = Field(False, alias="nodeFit", strict=True)
    """Must be false: a fit check of the pod against the other nodes is not built in koordpy."""
    skip_eviction_gates: tuple[EvictionGate, ...] = Field((), alias="skipEvictionGates")
    """Filters skipped by name (Koordinator v1.8), and koordpy's ``GangDisruption`` (the gang rule)."""
    max_migrating_globally: int | None = Field(None, alias="maxMigratingGlobally", strict=True, le=2**31 - 1)
    max_migrating_per_node: int | None = Field(2, alias="maxMigratingPerNode", strict=True, le=2**31 - 1)
    max_migrating_per_namespace: int | None = Field(None, alias="maxMigratingPerNamespace", strict=True, le=2**31 - 1)
    max_migrating_per_workload: IntOrPercent | None = Field(None, alias="maxMigratingPerWorkload")
    max_unavailable_per_workload: IntOrPercent | None = Field(None, alias="maxUnavailablePerWorkload")
    skip_check_expected_replicas: bool | None = Field(None, alias="skipCheckExpectedReplicas", strict=True)
    object_limiters: dict[ObjectKind, ObjectLimiter] = Field(
        default_factory=_default_object_limiters,
        alias="objectLimiters",
    )
    default_job_mode: Literal["ReservationFirst", "EvictDirectly"] = Field("ReservationFirst", alias="defaultJobMode")
    default_job_ttl: Seconds = Field(300.0, alias="defaultJobTTL", ge=0, le=86_400 * 365)
    scheduler_names: tuple[str, ...] = Field(("koord-scheduler",), alias="schedulerNames")
    """ReservationFirst requires the pod's ``spec.schedulerName`` in this list."""
    evict_qps: QPS = Field(10.0, alias="evictQPS", gt=0, le=1_000_000)
    evict_burst: int = Field(1, alias="evictBurst", strict=True, ge=1, le=1_000_000)
    eviction_policy: Literal["Eviction", "Delete", "SoftEviction"] = Field("Eviction", alias="evictionPolicy")
    default_delete_options: dict[str, Any] | None = Field(None, alias="defaultDeleteOptions")
    """metav1.DeleteOptions used when a job names none."""
    arbitration_args: ArbitrationArgs = Field(
        default_factory=lambda: ArbitrationArgs.model_validate({}), alias="arbitrationArgs"
    )

    @model_validator(mode="after")
    def _check(self) -> MigrationControllerArgs:
        problems: list[str] = []
        if self.node_fit:
            problems.append("nodeFit: a fit check against other nodes is not built in koordpy; must be false")
        if self.node_selector is not None:
            try:
                parse_node_selector(self.node_selector)
            except ValueError as exc:
                problems.append(f"nodeSelector: {exc}")
        if problems:
            raise field_problems(problems)
        return self


NodeRequirement = tuple[str, str, str | None]
"""``(key, op, value)`` with op one of ``=``, ``!=``, ``exists``, ``!exists``."""


def parse_node_selector(text: str) -> tuple[NodeRequirement, ...]:
    """Parse the equality-based label selector string ``a=b,c!=d,e,!f`` (set syntax is not supported)."""
    out: list[NodeRequirement] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        if "(" in part or " in " in part or " notin " in part:
            raise ValueError(f"{part!r}: set-based selectors are not supported; use a=b, a!=b, a or !a")
        if "!=" in part:
            key, value = part.split("!=", 1)
            out.append((key.strip(), "!=", value.strip()))
        elif "==" in part or "=" in part:
            key, value = part.split("==", 1) if "==" in part else part.split("=", 1)
            out.append((key.strip(), "=", value.strip()))
        elif part.startswith("!"):
            out.append((part[1:].strip(), "!exists", None))
        else:
            out.append((part, "exists", None))
        if not out[-1][0]:
            raise ValueError(f"{part!r}: empty label key")
    return tuple(out)


def node_selector_matches(requirements: tuple[NodeRequirement, ...], labels: Any) -> bool:
    """Whether node ``labels`` (a mapping) satisfy every requirement."""
    for key, op, value in requirements:
        present = labels.get(key)
        if op == "=" and present != value:
            return False
        if op == "!=" and present == value:
            return False
        if op == "exists" and present is None:
            return False
        if op == "!exists" and present is not None:
            return False
    return True
