"""``LoadAwareSchedulingArgs``: Koordinator's field names and defaults, verbatim.

A user can paste the ``args`` of Koordinator's ``LoadAwareScheduling`` plugin here unchanged.
Defaulting follows Koordinator's ``SetDefaults_LoadAwareSchedulingArgs`` (v1.8):

* ``resourceWeights`` -> ``{cpu: 1, memory: 1}`` only when empty *and* ``dominantResourceWeight`` is 0;
* ``usageThresholds`` -> ``{cpu: 65, memory: 95}`` only when empty;
* ``estimatedScalingFactors`` -> missing ``cpu``/``memory`` keys filled with 85/70;
* ``filterExpiredNodeMetrics`` true, ``nodeMetricExpirationSeconds`` 180.

Validation follows Koordinator's ``ValidateLoadAwareSchedulingArgs``: weights 1..100, thresholds
and factors 0..100 (a factor must be > 0), ``dominantResourceWeight`` 0..100, expiration > 0,
every weighted resource needs a scaling factor. Durations accept Go strings (``"5m"``) and are
bounded like Go's. Numbers are strict: a boolean, a float or a string is not an integer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from koordpy.config.errors import field_problems
from koordpy.model.durations import DurationError, parse_duration

__all__ = ["AggregatedArgs", "AggregationType", "LoadAwareSchedulingArgs"]

AggregationType = Literal["", "avg", "p50", "p90", "p95", "p99"]

DEFAULT_RESOURCE_WEIGHTS = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS = {"cpu": 65, "memory": 95}
DEFAULT_ESTIMATED_SCALING_FACTORS = {"cpu": 85, "memory": 70}


def _duration(value: Any) -> float:
    if value is None:
        return 0.0
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None
    if seconds < 0:
        raise ValueError("must not be negative")
    return seconds


Duration = Annotated[float, BeforeValidator(_duration)]
StrictInt = Annotated[int, Field(strict=True)]
"""An integer; ``true`` or ``1.0`` is refused (pydantic's lax mode would take them)."""
Seconds = Annotated[int, Field(strict=True, ge=-(2**31), le=2**31 - 1)]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class AggregatedArgs(_Args):
    """Percentile (aggregated) usage thresholds and scoring."""

    usage_thresholds: dict[str, StrictInt] = Field(default_factory=dict, alias="usageThresholds")
    usage_aggregation_type: AggregationType = Field("", alias="usageAggregationType")
    usage_aggregated_duration: Duration = Field(0.0, alias="usageAggregatedDuration")
    """Seconds; 0 means the longest duration that has data."""
    score_aggregation_type: AggregationType = Field("", alias="scoreAggregationType")
    score_aggregated_duration: Duration = Field(0.0, alias="scoreAggregatedDuration")

    @property
    def filter_enabled(self) -> bool:
        return bool(self.usage_thresholds) and self.usage_aggregation_type != ""

    @property
    def score_enabled(self) -> bool:
        return self.score_aggregation_type != ""


class LoadAwareSchedulingArgs(_Args):
    """Arguments of the LoadAwareScheduling plugin (Koordinator v1.8 semantics)."""

    api_version: str | None = Field(None, alias="apiVersion")
    kind: str | None = None
    filter_expired_node_metrics: bool = Field(True, alias="filterExpiredNodeMetrics", strict=True)
    """Block nodes whose NodeMetric is older than ``nodeMetricExpirationSeconds`` (Filter only)."""
    node_metric_expiration_seconds: Seconds = Field(180, alias="nodeMetricExpirationSeconds")
    """Seconds; 1 to 2^31-1."""
    enable_schedule_when_node_metrics_expired: bool = Field(
        False, alias="enableScheduleWhenNodeMetricsExpired", strict=True
    )
    """Let expired nodes pass Filter anyway (they still score 0)."""
    resource_weights: dict[str, StrictInt] = Field(default_factory=dict, alias="resourceWeights")
    dominant_resource_weight: StrictInt = Field(0, alias="dominantResourceWeight")
    usage_thresholds: dict[str, StrictInt] = Field(default_factory=dict, alias="usageThresholds")
    prod_usage_thresholds: dict[str, StrictInt] = Field(default_factory=dict, alias="prodUsageThresholds")
    prod_usage_include_sys: bool = Field(False, alias="prodUsageIncludeSys", strict=True)
    score_according_prod_usage: bool = Field(False, alias="scoreAccordingProdUsage", strict=True)
    estimator: str = ""
    estimated_scaling_factors: dict[str, StrictInt] = Field(default_factory=dict, alias="estimatedScalingFactors")
    estimated_seconds_after_pod_scheduled: Seconds | None = Field(None, alias="estimatedSecondsAfterPodScheduled")
    estimated_seconds_after_initialized: Seconds | None = Field(None, alias="estimatedSecondsAfterInitialized")
    allow_customize_estimation: bool = Field(False, alias="allowCustomizeEstimation", strict=True)
    aggregated: AggregatedArgs | None = None
    supported_resources: list[str] = Field(default_factory=list, alias="supportedResources")

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        weights = data.get("resourceWeights", data.get("resource_weights"))
        dominant = data.get("dominantResourceWeight", data.get("dominant_resource_weight", 0)) or 0
        if not weights and dominant == 0:
            data.pop("resource_weights", None)
            data["resourceWeights"] = dict(DEFAULT_RESOURCE_WEIGHTS)
        thresholds = data.get("usageThresholds", data.get("usage_thresholds"))
        if not thresholds:
            data.pop("usage_thresholds", None)
            data["usageThresholds"] = dict(DEFAULT_USAGE_THRESHOLDS)
        factors = data.pop("estimatedScalingFactors", None) or data.pop("estimated_scaling_factors", None) or {}
        if isinstance(factors, dict):
            merged = dict(DEFAULT_ESTIMATED_SCALING_FACTORS)
            merged.update(factors)
            factors = merged
        data["estimatedScalingFactors"] = factors
        return data

    @model_validator(mode="after")
    def _validate(self) -> LoadAwareSchedulingArgs:
        problems: list[str] = []
        if self.node_metric_expiration_seconds <= 0:
            problems.append("nodeMetricExpirationSeconds: must be greater than 0")
        for name, weight in self.resource_weights.items():
            if not 1 <= weight <= 100:
                problems.append(f"resourceWeights.{name}: must be in 1..100, got {weight}")
            if name not in self.estimated_scaling_factors:
                problems.append(f"resourceWeights.{name}: needs an estimatedScalingFactors entry")
        if not 0 <= self.dominant_resource_weight <= 100:
            problems.append(f"dominantResourceWeight: must be in 0..100, got {self.dominant_resource_weight}")
        for field, values in (
            ("usageThresholds", self.usage_thresholds),
            ("prodUsageThresholds", self.prod_usage_thresholds),
            ("aggregated.usageThresholds", self.aggregated.usage_thresholds if self.aggregated else {}),
        ):
            for name, threshold in values.items():
                if not 0 <= threshold <= 100:
                    problems.append(f"{field}.{name}: must be in 0..100, got {threshold}")
        for name, factor in self.estimated_scaling_factors.items():
            if not 0 < factor <= 100:
                problems.append(f"estimatedScalingFactors.{name}: must be in 1..100, got {factor}")
        for field, seconds in (
            ("estimatedSecondsAfterPodScheduled", self.estimated_seconds_after_pod_scheduled),
            ("estimatedSecondsAfterInitialized", self.estimated_seconds_after_initialized),
        ):
            if seconds is not None and seconds < 0:
                problems.append(f"{field}: must not be negative")
        if self.estimator not in ("", "defaultEstimator"):
            problems.append(f"estimator: unknown estimator {self.estimator!r} (only defaultEstimator)")
        if problems:
            raise field_problems(problems)
        return self

    @property
    def resources(self) -> tuple[str, ...]:
        """Every resource vectorised by the plugin, name-sorted (cpu before memory)."""
        names = {"cpu", "memory", *self.supported_resources}
        for mapping in (
            self.resource_weights,
            self.usage_thresholds,
            self.prod_usage_thresholds,
            self.estimated_scaling_factors,
        ):
            names.update(mapping)
        if self.aggregated is not None:
            names.update(self.aggregated.usage_thresholds)
        return tuple(sorted(names))
