"""LoadAwareScheduling: filter and score nodes on real usage (Koordinator v1.8 semantics)."""

from koordpy.scheduler.plugins.loadaware.estimator import estimate_node, estimate_pod
from koordpy.scheduler.plugins.loadaware.plugin import (
    NAME,
    REASON_AGGREGATED_USAGE_EXCEED,
    REASON_NODEMETRIC_EXPIRED,
    REASON_USAGE_EXCEED,
    LoadAwarePlugin,
)
from koordpy.scheduler.plugins.loadaware.profile import ThresholdProfile, threshold_profile

__all__ = [
    "NAME",
    "REASON_AGGREGATED_USAGE_EXCEED",
    "REASON_NODEMETRIC_EXPIRED",
    "REASON_USAGE_EXCEED",
    "LoadAwarePlugin",
    "ThresholdProfile",
    "estimate_node",
    "estimate_pod",
    "threshold_profile",
]
