"""What a round knows of a PodMigrationJob before deciding its next step (:func:`examine`): its stage
(waiting for arbitration, active, finished, invalid), when its ttl ends it and when the scavenger deletes
it. A spec the lifecycle cannot work with is found here, with the field path, before any of its names
reaches a request path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from koordpy.descheduler.job_status import PENDING, REASON_INVALID_POD_REF, REASON_INVALID_SPEC, RUNNING
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.descheduler.objects import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.reservation_first import template_problem
from koordpy.model.durations import DurationError, parse_duration, parse_rfc3339
from koordpy.model.names import dns1123_label_problem, dns1123_subdomain_problem

__all__ = [
    "ANNOTATION_PASSED_ARBITRATION",
    "SCAVENGE_AFTER_TTL_SECONDS",
    "SCAVENGE_WITHOUT_TTL_SECONDS",
    "JobFacts",
    "Stage",
    "created_at",
    "examine",
    "ttl_seconds",
]

SCAVENGE_AFTER_TTL_SECONDS = 300.0
SCAVENGE_WITHOUT_TTL_SECONDS = 1800.0


def ttl_seconds(spec: Mapping[str, Any], settings: LifecycleSettings) -> float:
    raw = spec.get("ttl")
    if raw in (None, ""):
        return settings.default_job_ttl_seconds
    try:
        return parse_duration(raw)
    except DurationError:
        return settings.default_job_ttl_seconds


def created_at(job: Mapping[str, Any]) -> float | None:
    raw = (job.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(raw, str):
        return None
    try:
        return parse_rfc3339(raw)
    except DurationError:
        return None


Stage = Literal["waiting", "active", "finished", "deleting", "invalid"]
_MODES = (None, "", "ReservationFirst", "EvictDirectly")


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a round needs to know of one PodMigrationJob without deciding its next step (:func:`examine`).

    ``stage``: ``waiting`` (Pending, arbitration decides on it), ``active``
    (:func:`~koordpy.descheduler.lifecycle.decide` takes its next step: Running, or Pending once passed or with
    arbitration off, paused ones included), ``finished`` (Succeeded, Failed, Aborted or a phase koordpy does not know:
    only the scavenger looks at it), ``deleting`` (Pending, not passed, being deleted: nothing to do), ``invalid``
    (cannot be processed: :attr:`problem` says why, :attr:`reason` is the terminal reason to report).
    """

    name: str
    stage: Stage
    phase: str
    deadline: float | None = None
    """When the job fails with ``Timeout`` (creation + ttl), None without a ttl or creation time."""
    scavenge_at: float | None = None
    """When a finished job is deleted (creation + ttl + 5 minutes, or + 30 minutes without a ttl)."""
    reason: str = ""
    problem: str = ""


def _spec_problem(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, problem) of a spec the lifecycle cannot work with, or None. Names are checked as the API
    server checks them, before any of them reaches a request path."""
    ref = spec.get("podRef")
    if ref is None:
        return REASON_INVALID_POD_REF, "spec.podRef: required"
    if not isinstance(ref, Mapping):
        return REASON_INVALID_POD_REF, "spec.podRef: expected an object"
    problem = dns1123_label_problem(ref.get("namespace"))
    if problem is not None:
        return REASON_INVALID_POD_REF, f"spec.podRef.namespace: {problem}"
    problem = dns1123_subdomain_problem(ref.get("name"))
    if problem is not None:
        return REASON_INVALID_POD_REF, f"spec.podRef.name: {problem}"
    ttl = spec.get("ttl")
    if ttl not in (None, ""):
        if not isinstance(ttl, str):
            return REASON_INVALID_SPEC, "spec.ttl: expected a duration string such as 5m"
        try:
            if parse_duration(ttl) < 0:
                return REASON_INVALID_SPEC, f"spec.ttl: {ttl[:40]!r} is negative"
        except DurationError as exc:
            return REASON_INVALID_SPEC, f"spec.ttl: {exc}"
    if spec.get("mode") not in _MODES:
        return (
            REASON_INVALID_SPEC,
            f"spec.mode: {str(spec.get('mode'))[:40]!r} is not ReservationFirst or EvictDirectly",
        )
    options = spec.get("reservationOptions")
    if options is not None:
        if not isinstance(options, Mapping):
            return REASON_INVALID_SPEC, "spec.reservationOptions: expected an object"
        res_ref = options.get("reservationRef")
        if res_ref is not None:
            if not isinstance(res_ref, Mapping):
                return REASON_INVALID_SPEC, "spec.reservationOptions.reservationRef: expected an object"
            problem = dns1123_subdomain_problem(res_ref.get("name"))
            if problem is not None:
                return REASON_INVALID_SPEC, f"spec.reservationOptions.reservationRef.name: {problem}"
        template = options.get("template")
        if template is not None and not isinstance(template, Mapping):
            return REASON_INVALID_SPEC, "spec.reservationOptions.template: expected an object"
        meta = (template or {}).get("metadata")
        if meta is not None and not isinstance(meta, Mapping):
            return REASON_INVALID_SPEC, "spec.reservationOptions.template.metadata: expected an object"
        if (meta or {}).get("name") not in (None, ""):
            problem = dns1123_subdomain_problem((meta or {}).get("name"))
            if problem is not None:
                return REASON_INVALID_SPEC, f"spec.reservationOptions.template.metadata.name: {problem}"
    if spec.get("deleteOptions") is not None and not isinstance(spec.get("deleteOptions"), Mapping):
        return REASON_INVALID_SPEC, "spec.deleteOptions: expected an object"
    return None


def examine(job: Mapping[str, Any], settings: LifecycleSettings) -> JobFacts:
    """Classify ``job`` (a PodMigrationJob object as read): its stage, deadline and scavenge time.

    An unfinished job whose spec is not an object, whose ``spec.podRef`` is missing or names a pod the API server
    could not hold (``web-1/status``, 9,000 characters), whose ttl is not a Go duration (``1e99h``) or whose status is
    not an object is ``invalid``: :func:`~koordpy.descheduler.lifecycle.decide` fails it once, with ``reason``.
    """
    raw_meta = job.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    name = str(meta.get("name") or "")
    raw_status = job.get("status")
    status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    phase = str(status.get("phase") or PENDING)
    created = created_at(job)
    raw_spec = job.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    ttl = ttl_seconds(spec, settings)
    if phase not in (PENDING, RUNNING):
        wait = ttl + SCAVENGE_AFTER_TTL_SECONDS if ttl > 0 else SCAVENGE_WITHOUT_TTL_SECONDS
        return JobFacts(name, "finished", phase, scavenge_at=created + wait if created is not None else None)
    if raw_status is not None and not isinstance(raw_status, Mapping):
        return JobFacts(name, "invalid", phase, reason=REASON_INVALID_SPEC, problem="status: expected an object")
    if not isinstance(status.get("conditions") or [], list):
        return JobFacts(
            name, "invalid", phase, reason=REASON_INVALID_SPEC, problem="status.conditions: expected a list"
        )
    if not isinstance(raw_spec, Mapping):
        return JobFacts(name, "invalid", phase, reason=REASON_INVALID_SPEC, problem="spec: expected an object")
    found = _spec_problem(spec)
    if found is not None:
        return JobFacts(name, "invalid", phase, reason=found[0], problem=found[1])
    problem = template_problem(job, ttl)
    if problem is not None:
        return JobFacts(name, "invalid", phase, reason=REASON_INVALID_SPEC, problem=problem)
    deadline = created + ttl if created is not None and ttl > 0 else None
    passed = (meta.get("annotations") or {}).get(ANNOTATION_PASSED_ARBITRATION) == "true"
    if phase == PENDING and settings.arbitration_enabled and not passed:
        stage: Stage = "deleting" if meta.get("deletionTimestamp") else "waiting"
        return JobFacts(name, stage, phase, deadline=deadline)
    return JobFacts(name, "active", phase, deadline=deadline)
