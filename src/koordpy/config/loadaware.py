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
bounded like Go's. Numbers are strict: a boolean, a float or a string is not an integer. Every bound is
a field constraint, so ``model_json_schema()`` carries it (the chart's values schema is generated from
it); only the cross-field rule is a model validator.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from koordpy.config.errors import FIELD_PROBLEMS, field_problems
from koordpy.model.durations import DURATION_PATTERN, DurationError, parse_duration

__all__ = ["AggregatedArgs", "AggregationType", "LoadAwareSchedulingArgs"]

AggregationType = Literal["", "avg", "p50", "p90", "p95", "p99"]

DEFAULT_RESOURCE_WEIGHTS = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS = {"cpu": 65, "memory": 95}
DEFAULT_ESTIMATED_SCALING_FACTORS = {"cpu": 85, "memory": 70}


def _with_defaults(data: Any) -> Any:
    """Koordinator's SetDefaults_LoadAwareSchedulingArgs on the raw mapping (a new dict; anything else as is)."""
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


def _unscaled_weights(data: Any) -> list[str]:
    """Every weighted resource needs an estimatedScalingFactors entry (Koordinator's one cross-field rule)."""
    if not isinstance(data, dict):
        return []
    weights = data.get("resourceWeights", data.get("resource_weights"))
    factors = data.get("estimatedScalingFactors")
    if not isinstance(weights, dict) or not isinstance(factors, dict):
        return []
    return [
        f"resourceWeights.{name}: needs an estimatedScalingFactors entry" for name in weights if name not in factors
    ]


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


Duration = Annotated[
    float,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "null"},
            ]
        }
    ),
]
"""Seconds: a Go duration string (``"5m"``), a bare number of seconds, or null (0)."""
Weight = Annotated[int, Field(strict=True, ge=1, le=100)]
Percent = Annotated[int, Field(strict=True, ge=0, le=100)]
ScalingFactor = Annotated[int, Field(strict=True, gt=0, le=100)]
Seconds = Annotated[int, Field(strict=True, ge=0, le=2**31 - 1)]
"""Integers are strict: ``true`` or ``1.0`` is refused (pydantic's lax mode would take them)."""


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)


class AggregatedArgs(_Args):
    """Percentile (aggregated) usage thresholds and scoring."""

    usage_thresholds: dict[str, Percent] = Field(default_factory=dict, alias="usageThresholds")
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
    node_metric_expiration_seconds: int = Field(
        180, alias="nodeMetricExpirationSeconds", strict=True, gt=0, le=2**31 - 1
    )
    """Seconds; 1 to 2^31-1."""
    enable_schedule_when_node_metrics_expired: bool = Field(
        False, alias="enableScheduleWhenNodeMetricsExpired", strict=True
    )
    """Let expired nodes pass Filter anyway (they still score 0)."""
    resource_weights: dict[str, Weight] = Field(default_factory=dict, alias="resourceWeights")
    dominant_resource_weight: int = Field(0, alias="dominantResourceWeight", strict=True, ge=0, le=100)
    usage_thresholds: dict[str, Percent] = Field(default_factory=dict, alias="usageThresholds")
    prod_usage_thresholds: dict[str, Percent] = Field(default_factory=dict, alias="prodUsageThresholds")
    prod_usage_include_sys: bool = Field(False, alias="prodUsageIncludeSys", strict=True)
    score_according_prod_usage: bool = Field(False, alias="scoreAccordingProdUsage", strict=True)
    estimator: Literal["", "defaultEstimator"] = ""
    estimated_scaling_factors: dict[str, ScalingFactor] = Field(default_factory=dict, alias="estimatedScalingFactors")
    estimated_seconds_after_pod_scheduled: Seconds | None = Field(None, alias="estimatedSecondsAfterPodScheduled")
    estimated_seconds_after_initialized: Seconds | None = Field(None, alias="estimatedSecondsAfterInitialized")
    allow_customize_estimation: bool = Field(False, alias="allowCustomizeEstimation", strict=True)
    aggregated: AggregatedArgs | None = None
    supported_resources: list[str] = Field(default_factory=list, alias="supportedResources")

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        return _with_defaults(data)

    @model_validator(mode="wrap")
    @classmethod
    def _validate(
        cls, data: Any, handler: ModelWrapValidatorHandler[LoadAwareSchedulingArgs]
    ) -> LoadAwareSchedulingArgs:
        """The one cross-field rule (every bound is a field constraint). It reads only the keys of the defaulted
        mapping, so it is reported together with the field errors instead of after they are fixed."""
        problems = _unscaled_weights(_with_defaults(data))
        try:
            args = handler(data)
        except ValidationError as exc:
            if not problems:
                raise
            extra = InitErrorDetails(
                type=PydanticCustomError("field_problems", "{text}", {"text": FIELD_PROBLEMS + "\n".join(problems)}),
                loc=(),
                input=data,
            )
            raise ValidationError.from_exception_data(exc.title, [*exc.errors(), extra]) from None  # type: ignore[list-item]
        if problems:
            raise field_problems(problems)
        return args

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
