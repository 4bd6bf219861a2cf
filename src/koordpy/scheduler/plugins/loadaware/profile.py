"""Per-node threshold profile: plugin args, overridden by the node annotation.

``scheduling.koordinator.sh/usage-thresholds`` holds JSON with ``usageThresholds``,
``prodUsageThresholds`` and ``aggregatedUsage``. Each non-empty part replaces the *whole*
plugin-level map (no per-resource merge). ``aggregatedUsage`` counts only with both thresholds and
a type. Unparseable JSON means the plugin args are used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.durations import DurationError, parse_duration

__all__ = ["ANNOTATION_USAGE_THRESHOLDS", "AggregatedProfile", "ThresholdProfile", "threshold_profile"]

ANNOTATION_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"


@dataclass(frozen=True, slots=True)
class AggregatedProfile:
    thresholds: Mapping[str, int]
    aggregation_type: str
    duration: float


@dataclass(frozen=True, slots=True)
class ThresholdProfile:
    usage: Mapping[str, int]
    prod: Mapping[str, int]
    aggregated: AggregatedProfile | None


def _int_map(raw: object) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): int(v) for k, v in raw.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _args_aggregated(args: LoadAwareSchedulingArgs) -> AggregatedProfile | None:
    agg = args.aggregated
    if agg is None or not agg.filter_enabled:
        return None
    return AggregatedProfile(agg.usage_thresholds, agg.usage_aggregation_type, agg.usage_aggregated_duration)


def threshold_profile(annotations: Mapping[str, str], args: LoadAwareSchedulingArgs) -> ThresholdProfile:
    fallback = ThresholdProfile(args.usage_thresholds, args.prod_usage_thresholds, _args_aggregated(args))
    raw = annotations.get(ANNOTATION_USAGE_THRESHOLDS)
    if not raw:
        return fallback
    try:
        parsed = json.loads(raw)
    except ValueError:
        return fallback
    if not isinstance(parsed, dict):
        return fallback
    usage = _int_map(parsed.get("usageThresholds")) or dict(args.usage_thresholds)
    prod = _int_map(parsed.get("prodUsageThresholds")) or dict(args.prod_usage_thresholds)
    aggregated: AggregatedProfile | None = None
    custom = parsed.get("aggregatedUsage")
    if isinstance(custom, dict):
        thresholds = _int_map(custom.get("usageThresholds"))
        kind = custom.get("usageAggregationType") or ""
        try:
            duration = parse_duration(custom.get("usageAggregatedDuration") or 0)
        except (DurationError, TypeError):
            duration = 0.0
        if thresholds and isinstance(kind, str) and kind:
            aggregated = AggregatedProfile(thresholds, kind, duration)
    if aggregated is None:
        aggregated = _args_aggregated(args)
    return ThresholdProfile(usage, prod, aggregated)
