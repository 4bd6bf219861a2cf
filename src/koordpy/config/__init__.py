"""Configuration: pydantic models with defaults and validation; errors name the field path.

Config models take mappings (already parsed YAML/JSON); reading files is the caller's job.
"""

from koordpy.config.errors import ConfigError, validate
from koordpy.config.gang import CoschedulingArgs
from koordpy.config.loadaware import AggregatedArgs, LoadAwareSchedulingArgs
from koordpy.config.scheduler import ExtenderSettings, SchedulerConfiguration

__all__ = [
    "AggregatedArgs",
    "ConfigError",
    "CoschedulingArgs",
    "ExtenderSettings",
    "LoadAwareSchedulingArgs",
    "SchedulerConfiguration",
    "validate",
]
