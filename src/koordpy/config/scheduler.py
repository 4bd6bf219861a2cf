"""The scheduler deployable's configuration file.

.. code-block:: yaml

    apiVersion: koordpy.io/v1alpha1
    kind: SchedulerConfiguration
    loadAware:            # Koordinator LoadAwareSchedulingArgs, verbatim
      usageThresholds: {cpu: 65, memory: 95}
    extender:
      port: 10262
      metricsPort: 10263  # optional: /healthz, /readyz and /metrics on the pod IP as well
    gang:                 # Koordinator CoschedulingArgs names, plus koordpy's binder fields
      defaultTimeout: 600s

Unknown keys are errors (a typo must not silently fall back to a default). Numbers are strict (a
boolean or a string is not a number; NaN and infinity are refused) and bounded as each field says.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from koordpy.config.credentials import CredentialsSettings
from koordpy.config.errors import field_problems
from koordpy.config.gang import CoschedulingArgs
from koordpy.config.loadaware import LoadAwareSchedulingArgs

__all__ = ["API_VERSION", "ExtenderSettings", "SchedulerConfiguration"]

API_VERSION = "koordpy.io/v1alpha1"


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)


class ExtenderSettings(_Settings):
    """The HTTP side of ``koordpy extender``."""

    host: str = "127.0.0.1"
    """Listen address. Loopback by default: kube-scheduler runs in the same pod."""
    port: int = Field(10262, strict=True, ge=1, le=65535)
    metrics_port: int | None = Field(None, alias="metricsPort", strict=True, ge=1, le=65535)
    """Port of a second, operations-only listener serving ``/healthz``, ``/readyz`` and ``/metrics``
    (never the verbs nor ``/debug``), so that the kubelet can probe and Prometheus can scrape the
    extender while the verbs stay on loopback. Unset: no second listener. Must differ from ``port``."""
    metrics_host: str = Field("0.0.0.0", alias="metricsHost")
    """Listen address of the operations listener: all interfaces, so the pod IP answers."""
    max_request_bytes: int = Field(16 * 1024 * 1024, alias="maxRequestBytes", strict=True, ge=1024, le=1 << 30)
    """Larger bodies get 413; 1 KiB to 1 GiB. 16 MiB holds a 5,000-node NodeNames request many times over."""
    scheduler_name: str = Field("koordpy-scheduler", alias="schedulerName")
    """Pods with this ``spec.schedulerName`` are the ones the extender is asked about."""
    bind_timeout_seconds: float = Field(
        4.0, alias="bindTimeoutSeconds", strict=True, allow_inf_nan=False, ge=0.01, le=300
    )
    """Deadline for one ``pods/binding`` call, 0.01 s to 300 s; keep it below kube-scheduler's ``httpTimeout``."""
    watch_timeout_seconds: int = Field(300, alias="watchTimeoutSeconds", strict=True, ge=10, le=86_400)
    """Server-side ``timeoutSeconds`` of each watch request, 10 s to 1 day; the watch is resumed after it."""
    max_header_bytes: int = Field(64 * 1024, alias="maxHeaderBytes", strict=True, ge=1024, le=16 * 1024 * 1024)
    """Largest request head (request line plus headers) a listener accepts; larger ones get 431 or a closed
    connection. Both listeners (verbs and operations)."""
    request_read_timeout_seconds: float = Field(
        10.0, alias="requestReadTimeoutSeconds", strict=True, allow_inf_nan=False, gt=0, le=3600
    )
    """A client must deliver a whole request within this many seconds of connecting (or of the previous
    response); slower connections are closed."""
    preemption_backoff_seconds: float = Field(
        120.0, alias="preemptionBackoffSeconds", strict=True, allow_inf_nan=False, ge=0, le=86_400
    )
    """The preempt verb: a pod that preempted on a node and lost it (another scheduler took the room) does
    not preempt again for this many seconds, on any node but one koordpy's taint holds for it (0 to 1 day;
    0 turns the back-off off). See ``koordpy.scheduler.framework.preemption``."""
    shortlist_nodes: int = Field(0, alias="shortlistNodes", strict=True, ge=0, le=100_000)
    """Experimental: ``/filter`` passes at most this many of the nodes that pass it, those koordpy scores
    highest (ties in kube-scheduler's order), so kube-scheduler scores and ``/prioritize`` sends only
    them; the others are left out of the answer (neither passed nor failed). 0: every node that passes.
    Not guaranteed: that kube-scheduler's own score plugins (spreading, affinity preferences) find their
    best node among the shortlist."""
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", alias="logLevel")

    @model_validator(mode="after")
    def _check(self) -> ExtenderSettings:
        if self.metrics_port is not None and self.metrics_port == self.port:
            raise field_problems([f"metricsPort: must differ from port ({self.port}): that one serves the verbs"])
        return self


class SchedulerConfiguration(_Settings):
    api_version: Literal["koordpy.io/v1alpha1"] = Field("koordpy.io/v1alpha1", alias="apiVersion")
    kind: Literal["SchedulerConfiguration"] = "SchedulerConfiguration"
    load_aware: LoadAwareSchedulingArgs = Field(
        default_factory=lambda: LoadAwareSchedulingArgs.model_validate({}), alias="loadAware"
    )
    extender: ExtenderSettings = Field(default_factory=lambda: ExtenderSettings.model_validate({}))
    gang: CoschedulingArgs = Field(default_factory=lambda: CoschedulingArgs.model_validate({}))
    """Gang scheduling (Koordinator ``CoschedulingArgs`` names); see ``koordpy.config.gang``."""
    credentials: CredentialsSettings = Field(default_factory=lambda: CredentialsSettings.model_validate({}))
    """When credentials the API server keeps refusing make ``/readyz`` fail (``koordpy.config.credentials``)."""
