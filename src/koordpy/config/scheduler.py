"""The scheduler deployable's configuration file.

.. code-block:: yaml

    apiVersion: koordpy.io/v1alpha1
    kind: SchedulerConfiguration
    loadAware:            # Koordinator LoadAwareSchedulingArgs, verbatim
      usageThresholds: {cpu: 65, memory: 95}
    extender:
      port: 10262

Unknown keys are errors (a typo must not silently fall back to a default).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from koordpy.config.loadaware import LoadAwareSchedulingArgs

__all__ = ["API_VERSION", "ExtenderSettings", "SchedulerConfiguration"]

API_VERSION = "koordpy.io/v1alpha1"


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ExtenderSettings(_Settings):
    """The HTTP side of ``koordpy extender``."""

    host: str = "127.0.0.1"
    """Listen address. Loopback by default: kube-scheduler runs in the same pod."""
    port: int = Field(10262, ge=1, le=65535)
    max_request_bytes: int = Field(16 * 1024 * 1024, alias="maxRequestBytes", ge=1024)
    """Larger bodies get 413. 16 MiB holds a 5,000-node NodeNames request many times over."""
    scheduler_name: str = Field("koordpy-scheduler", alias="schedulerName")
    """Pods with this ``spec.schedulerName`` are the ones the extender is asked about."""
    bind_timeout_seconds: float = Field(4.0, alias="bindTimeoutSeconds", gt=0)
    """Deadline for one ``pods/binding`` call; keep it below kube-scheduler's ``httpTimeout``."""
    watch_timeout_seconds: int = Field(300, alias="watchTimeoutSeconds", ge=10)
    """Server-side ``timeoutSeconds`` of each watch request; the watch is resumed after it."""
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", alias="logLevel")


class SchedulerConfiguration(_Settings):
    api_version: Literal["koordpy.io/v1alpha1"] = Field("koordpy.io/v1alpha1", alias="apiVersion")
    kind: Literal["SchedulerConfiguration"] = "SchedulerConfiguration"
    load_aware: LoadAwareSchedulingArgs = Field(
        default_factory=lambda: LoadAwareSchedulingArgs.model_validate({}), alias="loadAware"
    )
    extender: ExtenderSettings = Field(default_factory=lambda: ExtenderSettings.model_validate({}))
