"""The eviction step both job modes end in: the evictor (pod label, job label, ``evictionPolicy``), the
object limiter and ``evictQPS`` checks, and the write-ahead record (condition ``Eviction`` False,
``Evicting``) that goes with the :class:`~koordpy.descheduler.decisions.Evict` decision. A pod already
being evicted is never evicted again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.descheduler.decisions import (
    EVICTORS,
    REQUEUE_SECONDS,
    Evict,
    EvictorName,
    JobEvent,
    Wait,
    end_wait,
    named_wait,
)
from koordpy.descheduler.gang_migration import GangEvictionBarrier, gang_migration
from koordpy.descheduler.job_status import (
    CONDITION_EVICTION,
    REASON_EVICT_QPS,
    REASON_EVICTING,
    REASON_OBJECT_LIMITER,
    condition,
    with_condition,
)
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings, PodView
from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket
from koordpy.model.durations import format_rfc3339

__all__ = [
    "ANNOTATION_EVICT_REASON",
    "ANNOTATION_SOFT_EVICTION",
    "EVICTOR_VERBS",
    "LABEL_EVICT_POLICY",
    "RunningStep",
    "evict_step",
    "select_evictor",
]

ANNOTATION_SOFT_EVICTION = "scheduling.koordinator.sh/soft-eviction"
ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
LABEL_EVICT_POLICY = "koordinator.sh/evict-policy"
EVICTOR_VERBS: Mapping[str, str] = {
    "Eviction": "create pods/eviction",
    "Delete": "delete pods",
    "SoftEviction": "patch pods",
}
"""The permission each evictor needs (the chart grants the first only)."""


def select_evictor(pod: PodView | None, job: Mapping[str, Any], settings: LifecycleSettings) -> EvictorName:
    """Pod label ``koordinator.sh/evict-policy``, then the job's, then ``evictionPolicy``.

    An unknown label value is skipped (the next source decides), never turned into ``Delete``.
    """
    job_labels = (job.get("metadata") or {}).get("labels") or {}
    for labels in ((pod.labels if pod is not None else {}), job_labels):
        value = labels.get(LABEL_EVICT_POLICY)
        if value in EVICTORS:
            return value
    return settings.eviction_policy


@dataclass(frozen=True)
class RunningStep:
    """What one :func:`~koordpy.descheduler.lifecycle.decide` call on a Running job works with."""

    job: Mapping[str, Any]
    key: str
    now: float
    settings: LifecycleSettings
    evict_tokens: TokenBucket | None
    workload: str | None
    workload_max_migrating: int
    object_limiter: ObjectLimiter | None
    workload_name: str = ""
    gang: GangEvictionBarrier | None = None


def evict_step(
    step: RunningStep,
    status: dict[str, Any],
    pod: PodView,
    *,
    changed: bool = False,
    events: tuple[JobEvent, ...] = (),
) -> Evict | Wait:
    """Evict ``pod`` (present, with the recorded UID) unless it is already being evicted or a limit
    says wait. ``status`` (``changed``: differs from the job's) and ``events`` go with the decision."""
    job, key, now, settings = step.job, step.key, step.now, step.settings
    spec = job.get("spec") or {}
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    eviction = condition(status, CONDITION_EVICTION)
    evictor = select_evictor(pod, job, settings)
    already = pod.deleting or (evictor == "SoftEviction" and ANNOTATION_SOFT_EVICTION in pod.annotations)
    if already:
        if eviction is None:  # evicted by us before a crash, or by someone else: record it, keep waiting
            message = f'Pod "{key}" is being evicted'
            new = with_condition(status, CONDITION_EVICTION, "False", reason=REASON_EVICTING, message=message, now=now)
            return Wait(REQUEUE_SECONDS, new, events)
        return Wait(REQUEUE_SECONDS, status if changed else None, events)
    workload, limiter = step.workload, step.object_limiter
    if gang_migration(job) is not None:
        limiter = None  # the unit passed the limiter's filter as one disruption of its workload
    if limiter is not None and workload is not None and not limiter.allows(workload, step.workload_max_migrating, now):
        message = (
            f"objectLimiters.workload: {step.workload_name or workload} may lose "
            f"{step.workload_max_migrating} pod(s) to eviction per {limiter.duration:g}s; "
            f'Pod "{key}" is evicted at its next turn'
        )
        return named_wait(status, REASON_OBJECT_LIMITER, message, now, changed=changed, events=events)
    if step.evict_tokens is not None and not step.evict_tokens.try_accept(now):
        tokens = step.evict_tokens
        message = f'evictQPS {tokens.qps:g} (evictBurst {tokens.burst}): Pod "{key}" waits for its turn to be evicted'
        # looked at again once the next token is due, not after the 3 s requeue: jobs that all missed a
        # token together would otherwise come back together and share one token per 3 s
        return named_wait(
            status, REASON_EVICT_QPS, message, now, changed=changed, events=events, after=1.0 / tokens.qps
        )
    status = end_wait(status, now)
    delete_options = spec.get("deleteOptions")
    if delete_options is None and settings.default_delete_options is not None:
        delete_options = dict(settings.default_delete_options)
    reason = annotations.get(ANNOTATION_EVICT_REASON, "")
    message = f'Pod "{key}" evicted from node "{pod.node_name}" by the reason "{reason}"'
    new = with_condition(status, CONDITION_EVICTION, "False", reason=REASON_EVICTING, message=message, now=now)
    soft = None
    if evictor == "SoftEviction":
        soft = json.dumps(
            {
                "timestamp": format_rfc3339(now),
                "deleteOptions": delete_options,
                "initiator": "koordpy-manager",
                "reason": reason,
            },
            sort_keys=True,
        )
    return Evict(
        evictor=evictor,
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        delete_options=dict(delete_options) if delete_options is not None else None,
        status=new,
        soft_eviction=soft,
        workload=workload,
        max_migrating=step.workload_max_migrating,
        events=(*events, JobEvent("Normal", REASON_EVICTING, message)),
    )
