"""PodMigrationJob lifecycle: phases, ttl, paused, evictors, write-ahead record, limits, scavenger."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordpy.descheduler.decisions import Evict, Finish, Ignore, Scavenge, Start, Wait
from koordpy.descheduler.eviction import ANNOTATION_SOFT_EVICTION, LABEL_EVICT_POLICY, select_evictor
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION, examine
from koordpy.descheduler.lifecycle import after_eviction_error, arbitration_wait, decide
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings, PodView
from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket
from koordpy.descheduler.reservation_first import ANNOTATION_MIGRATION_JOB, OwnedReservation
from koordpy.model.durations import format_rfc3339

T0 = 1795255200.0  # 2026-11-21T10:00:00Z, the job's creation time
DIRECT = LifecycleSettings(default_job_mode="EvictDirectly")


def job(
    *,
    phase: str | None = None,
    mode: str | None = "EvictDirectly",
    ttl: str | None = "5m",
    paused: bool = False,
    passed: bool = True,
    uid: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"podRef": {"namespace": "shop", "name": "web-1"}}
    if mode is not None:
        spec["mode"] = mode
    if ttl is not None:
        spec["ttl"] = ttl
    if paused:
        spec["paused"] = True
    if uid is not None:
        spec["podRef"]["uid"] = uid
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if conditions is not None:
        status["conditions"] = conditions
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": "pmj-1",
            "creationTimestamp": format_rfc3339(T0),
            "annotations": {ANNOTATION_PASSED_ARBITRATION: "true"} if passed else {},
            "labels": labels or {},
        },
        "spec": spec,
        "status": status,
    }


def pod(uid: str = "u1", **kwargs: Any) -> PodView:
    return PodView(namespace="shop", name="web-1", uid=uid, node_name="n1", **kwargs)


EVICTING = {"type": "Eviction", "status": "False", "reason": "Evicting"}


@pytest.mark.parametrize(
    ("case", "the_job", "the_pod", "now", "expected"),
    [
        ("paused names its wait", job(paused=True), pod(), T0 + 10, Wait),
        ("not passed arbitration waits", job(passed=False), pod(), T0 + 10, Ignore),
        ("pending + pod -> Running", job(), pod(), T0 + 10, Start),
        ("pending, pod missing -> Failed MissingPod", job(), None, T0 + 10, Finish),
        # ttl 5m = 300 s: at T0+300 the job is exactly ttl old -> timeout (>=, as upstream)
        ("ttl reached -> Failed Timeout", job(phase="Running", uid="u1"), pod(), T0 + 300, Finish),
        ("running, no eviction yet -> Evict", job(phase="Running", uid="u1"), pod(), T0 + 10, Evict),
        ("Succeeded, before ttl+5m: kept", job(phase="Succeeded"), None, T0 + 599, Ignore),
        # ttl 300 s + 5 min scavenger grace = 600 s
        ("Succeeded, ttl+5m: scavenged", job(phase="Succeeded"), None, T0 + 600, Scavenge),
        ("Failed, ttl+5m: scavenged", job(phase="Failed"), None, T0 + 600, Scavenge),
        ("Aborted is never driven", job(phase="Aborted"), pod(), T0 + 10, Ignore),
    ],
)
def test_decision_kind(case: str, the_job: dict[str, Any], the_pod: PodView | None, now: float, expected: type) -> None:
    assert isinstance(decide(the_job, the_pod, now, DIRECT), expected), case


def test_start_records_uid_and_running_phase() -> None:
    decision = decide(job(), pod("u-42"), T0 + 1, DIRECT)
    assert isinstance(decision, Start)
    assert decision.pod_uid == "u-42"
    assert decision.status["phase"] == "Running"


def test_timeout_uses_upstream_reason_and_warning_event() -> None:
    decision = decide(job(phase="Running", uid="u1"), pod(), T0 + 300, DIRECT)
    assert isinstance(decision, Finish)
    assert decision.status["phase"] == "Failed"
    assert decision.status["reason"] == "Timeout"
    assert decision.events[0].type == "Warning" and decision.events[0].reason == "Timeout"


def test_missing_ttl_takes_default_job_ttl() -> None:
    # defaultJobTTL 60 s: a job without spec.ttl times out at T0+60, not later
    settings = LifecycleSettings(default_job_mode="EvictDirectly", default_job_ttl_seconds=60)
    assert isinstance(decide(job(ttl=None, phase="Running", uid="u1"), pod(), T0 + 59, settings), Evict)
    timed_out = decide(job(ttl=None, phase="Running", uid="u1"), pod(), T0 + 60, settings)
    assert isinstance(timed_out, Finish) and timed_out.status["reason"] == "Timeout"


def test_reservation_first_starts_like_evict_directly() -> None:
    # mode unset -> defaultJobMode ReservationFirst (upstream default): Pending -> Running first; the
    # Reservation steps are tabled in test_reservation_first.py
    for the_job in (job(mode=None), job(mode="ReservationFirst")):
        decision = decide(the_job, pod(), T0 + 1, LifecycleSettings())
        assert isinstance(decision, Start)
        assert decision.status["phase"] == "Running"


def test_evict_writes_ahead_the_evicting_condition() -> None:
    decision = decide(job(phase="Running", uid="u1"), pod(), T0 + 10, DIRECT)
    assert isinstance(decision, Evict)
    assert (decision.evictor, decision.namespace, decision.name, decision.uid) == ("Eviction", "shop", "web-1", "u1")
    cond = decision.status["conditions"][-1]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Eviction", "False", "Evicting")
    assert decision.status["status"] == "Eviction"


def test_delete_options_from_job_then_default() -> None:
    with_default = LifecycleSettings(default_job_mode="EvictDirectly", default_delete_options={"gracePeriodSeconds": 5})
    decision = decide(job(phase="Running", uid="u1"), pod(), T0 + 10, with_default)
    assert isinstance(decision, Evict) and decision.delete_options == {"gracePeriodSeconds": 5}
    own = job(phase="Running", uid="u1")
    own["spec"]["deleteOptions"] = {"gracePeriodSeconds": 0}
    decision = decide(own, pod(), T0 + 10, with_default)
    assert isinstance(decision, Evict) and decision.delete_options == {"gracePeriodSeconds": 0}


@pytest.mark.parametrize(
    ("case", "the_job", "the_pod", "expected_phase"),
    [
        (
            "pod gone after eviction -> Succeeded",
            job(phase="Running", uid="u1", conditions=[EVICTING]),
            None,
            "Succeeded",
        ),
        (
            "replacement with another UID -> Succeeded",
            job(phase="Running", uid="u1", conditions=[EVICTING]),
            pod("u2"),
            "Succeeded",
        ),
        ("pod gone, never evicted -> MissingPod", job(phase="Running", uid="u1"), None, "Failed"),
    ],
)
def test_completion(case: str, the_job: dict[str, Any], the_pod: PodView | None, expected_phase: str) -> None:
    decision = decide(the_job, the_pod, T0 + 20, DIRECT)
    assert isinstance(decision, Finish), case
    assert decision.status["phase"] == expected_phase, case
    if expected_phase == "Succeeded":
        assert decision.status["status"] == "Complete"
        cond = decision.status["conditions"][-1]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Eviction", "True", "EvictComplete")
    else:
        assert decision.status["reason"] == "MissingPod"


def test_terminating_pod_is_never_evicted_again_after_restart() -> None:
    # crash between the eviction call and any status write: the pod carries deletionTimestamp
    decision = decide(job(phase="Running", uid="u1"), pod(deleting=True), T0 + 10, DIRECT)
    assert isinstance(decision, Wait)
    assert decision.status is not None and decision.status["conditions"][-1]["reason"] == "Evicting"
    # with the write-ahead record already there: just wait
    again = decide(job(phase="Running", uid="u1", conditions=[EVICTING]), pod(deleting=True), T0 + 13, DIRECT)
    assert isinstance(again, Wait) and again.status is None


def test_adopted_running_job_with_write_ahead_record_is_driven_to_success() -> None:
    # a new process (fresh limiters) sees a Running job whose pod is gone: Succeeded, no eviction
    decision = decide(
        job(phase="Running", uid="u1", conditions=[EVICTING]),
        None,
        T0 + 30,
        DIRECT,
        evict_tokens=TokenBucket(10, 1),
        object_limiter=ObjectLimiter(300),
        workload="rs-uid",
    )
    assert isinstance(decision, Finish) and decision.status["phase"] == "Succeeded"


def test_write_ahead_record_with_untouched_pod_evicts_once() -> None:
    # crash after the write-ahead status but before the eviction call: the pod is untouched, so evict now
    decision = decide(job(phase="Running", uid="u1", conditions=[EVICTING]), pod(), T0 + 10, DIRECT)
    assert isinstance(decision, Evict)


@pytest.mark.parametrize(
    ("pod_label", "job_label", "policy", "expected"),
    [
        (None, None, "Eviction", "Eviction"),
        (None, None, "Delete", "Delete"),
        (None, "SoftEviction", "Eviction", "SoftEviction"),
        ("Delete", "SoftEviction", "Eviction", "Delete"),  # pod label wins over job label
        ("Bogus", None, "Eviction", "Eviction"),  # unknown value skipped, never a delete
        ("Bogus", "Delete", "Eviction", "Delete"),
    ],
)
def test_select_evictor(pod_label: str | None, job_label: str | None, policy: Any, expected: str) -> None:
    the_pod = pod(labels={LABEL_EVICT_POLICY: pod_label} if pod_label else {})
    the_job = job(labels={LABEL_EVICT_POLICY: job_label} if job_label else {})
    assert select_evictor(the_pod, the_job, LifecycleSettings(eviction_policy=policy)) == expected


def test_soft_eviction_annotates_and_waits() -> None:
    settings = LifecycleSettings(default_job_mode="EvictDirectly", eviction_policy="SoftEviction")
    decision = decide(job(phase="Running", uid="u1"), pod(), T0 + 10, settings)
    assert isinstance(decision, Evict) and decision.evictor == "SoftEviction"
    assert decision.soft_eviction is not None
    payload = json.loads(decision.soft_eviction)
    assert set(payload) == {"timestamp", "deleteOptions", "initiator", "reason"}
    annotated = pod(annotations={ANNOTATION_SOFT_EVICTION: decision.soft_eviction})
    again = decide(job(phase="Running", uid="u1", conditions=[EVICTING]), annotated, T0 + 13, settings)
    assert isinstance(again, Wait)  # someone else must delete it; never annotated twice


def test_eviction_429_is_retried_with_backoff_never_deleted() -> None:
    the_job = job(phase="Running", uid="u1", conditions=[EVICTING])
    wait = after_eviction_error(
        the_job, 429, "Cannot evict pod as it would violate the pod's disruption budget.", 3, T0
    )
    assert wait.after == 4.0  # 1 s * 2^(3-1)
    assert wait.status is not None
    cond = wait.status["conditions"][-1]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Eviction", "False", "FailedEvict")
    failed = dict(the_job, status=wait.status)
    retry = decide(failed, pod(), T0 + 14, DIRECT)
    assert isinstance(retry, Evict) and retry.evictor == "Eviction"
    # until the ttl (300 s) ends the job with Timeout
    end = decide(failed, pod(), T0 + 300, DIRECT)
    assert isinstance(end, Finish) and end.status["reason"] == "Timeout"


def test_evict_qps_limits_decisions() -> None:
    bucket = TokenBucket(10, 1)
    first = decide(job(phase="Running", uid="u1"), pod(), T0 + 10, DIRECT, evict_tokens=bucket)
    second = decide(job(phase="Running", uid="u1"), pod(), T0 + 10, DIRECT, evict_tokens=bucket)
    assert isinstance(first, Evict)
    # looked at again when the next token is due (1 / 10 qps), not after the 3 s requeue
    assert isinstance(second, Wait) and second.after == pytest.approx(0.1)


def test_object_limiter_per_workload() -> None:
    # duration 300 s, maxMigrating 2 -> rate 2/300 per s, burst 1: after one recorded eviction the same
    # workload waits 150 s; another workload is not affected; a decision alone consumes nothing
    limiter = ObjectLimiter(300, burst=1)
    kwargs: dict[str, Any] = {"object_limiter": limiter, "workload_max_migrating": 2}
    running = job(phase="Running", uid="u1")
    first = decide(running, pod(), T0 + 10, DIRECT, workload="w1", **kwargs)
    assert isinstance(first, Evict) and (first.workload, first.max_migrating) == ("w1", 2)
    assert isinstance(decide(running, pod(), T0 + 10, DIRECT, workload="w1", **kwargs), Evict)  # not recorded yet
    limiter.record("w1", 2, T0 + 10)  # the eviction succeeded
    assert isinstance(decide(running, pod(), T0 + 11, DIRECT, workload="w1", **kwargs), Wait)
    assert isinstance(decide(running, pod(), T0 + 11, DIRECT, workload="w2", **kwargs), Evict)
    assert isinstance(decide(running, pod(), T0 + 159, DIRECT, workload="w1", **kwargs), Wait)
    assert isinstance(decide(running, pod(), T0 + 160, DIRECT, workload="w1", **kwargs), Evict)


def test_rate_limited_wait_consumes_no_tokens() -> None:
    # the object limiter refuses first: the QPS token stays for another workload
    limiter = ObjectLimiter(300)
    bucket = TokenBucket(0.001, 1)
    limiter.record("w1", 1, T0)
    blocked = decide(
        job(phase="Running", uid="u1"),
        pod(),
        T0 + 1,
        DIRECT,
        evict_tokens=bucket,
        object_limiter=limiter,
        workload="w1",
    )
    assert isinstance(blocked, Wait)
    assert bucket.available(T0 + 1)


def test_invalid_pod_ref_fails() -> None:
    bad = job()
    bad["spec"]["podRef"] = {"name": "web-1"}
    decision = decide(bad, None, T0 + 1, DIRECT)
    assert isinstance(decision, Finish) and decision.status["reason"] == "InvalidPodRef"


def test_arbitration_disabled_starts_without_annotation() -> None:
    settings = LifecycleSettings(default_job_mode="EvictDirectly", arbitration_enabled=False)
    assert isinstance(decide(job(passed=False), pod(), T0 + 1, settings), Start)


# ---------------------------------------------------------------- unusable jobs


def _with(spec_patch: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    out = job(passed=False)
    if spec_patch is not None:
        out["spec"] = {**out["spec"], **spec_patch}
    out.update(top)
    return out


@pytest.mark.parametrize(
    ("case", "the_job", "reason", "path"),
    [
        ("no podRef", _with(spec=None) | {"spec": {"ttl": "5m"}}, "InvalidPodRef", "spec.podRef: required"),
        ("podRef not an object", _with({"podRef": "web-1"}), "InvalidPodRef", "spec.podRef: expected an object"),
        (
            "a subresource in the name",
            _with({"podRef": {"namespace": "shop", "name": "web-1/status"}}),
            "InvalidPodRef",
            "spec.podRef.name",
        ),
        (
            "9,000 characters",
            _with({"podRef": {"namespace": "shop", "name": "a" * 9000}}),
            "InvalidPodRef",
            "must be no more than 253 characters",
        ),
        (
            "upper case namespace",
            _with({"podRef": {"namespace": "Shop", "name": "web-1"}}),
            "InvalidPodRef",
            "namespace",
        ),
        ("no namespace", _with({"podRef": {"name": "web-1"}}), "InvalidPodRef", "spec.podRef.namespace"),
        ("spec not an object", _with(spec="move web-1"), "InvalidSpec", "spec: expected an object"),
        ("status not an object", _with(status="Pending"), "InvalidSpec", "status: expected an object"),
        ("ttl 1e99h", _with({"ttl": "1e99h"}), "InvalidSpec", "spec.ttl"),
        ("ttl past Go's range", _with({"ttl": "99999999h"}), "InvalidSpec", "spec.ttl"),
        ("ttl a number", _with({"ttl": 30}), "InvalidSpec", "spec.ttl"),
        ("unknown mode", _with({"mode": "Teleport"}), "InvalidSpec", "spec.mode"),
        (
            "reservationRef with a slash",
            _with({"reservationOptions": {"reservationRef": {"name": "r/status"}}}),
            "InvalidSpec",
            "reservationRef.name",
        ),
        (
            "template name with a slash",
            _with({"reservationOptions": {"template": {"metadata": {"name": "../x"}}}}),
            "InvalidSpec",
            "template.metadata.name",
        ),
    ],
)
def test_unusable_job_is_invalid_and_fails_once_with_condition_and_event(
    case: str, the_job: dict[str, Any], reason: str, path: str
) -> None:
    facts = examine(the_job, DIRECT)
    assert (facts.stage, facts.reason) == ("invalid", reason), case
    assert path in facts.problem, (case, facts.problem)
    decision = decide(the_job, None, T0 + 1, DIRECT)
    assert isinstance(decision, Finish), case
    assert (decision.status["phase"], decision.status["reason"]) == ("Failed", reason)
    invalid = [c for c in decision.status["conditions"] if c["type"] == "Invalid"]
    assert [(c["status"], c["reason"]) for c in invalid] == [("True", reason)]
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", reason)]
    # once failed, the job is finished: nothing more is decided until the scavenger
    failed = dict(the_job, status=decision.status)
    assert examine(failed, DIRECT).stage == "finished"
    assert isinstance(decide(failed, None, T0 + 2, DIRECT), Ignore)


def test_malformed_conditions_are_replaced_by_the_failure() -> None:
    bad = job(phase="Running", uid="u1")
    bad["status"]["conditions"] = "none"
    decision = decide(bad, pod(), T0 + 1, DIRECT)
    assert isinstance(decision, Finish) and decision.status["reason"] == "InvalidSpec"
    assert [c["type"] for c in decision.status["conditions"]] == ["Invalid"]


@pytest.mark.parametrize(
    ("case", "the_job", "stage", "deadline", "scavenge_at"),
    [
        # ttl 5m: deadline T0 + 300; finished: scavenged at T0 + 300 + 300
        ("waiting for arbitration", job(passed=False), "waiting", T0 + 300, None),
        ("passed", job(), "active", T0 + 300, None),
        ("running", job(phase="Running"), "active", T0 + 300, None),
        (
            "paused running jobs are driven (they name their wait)",
            job(phase="Running", paused=True),
            "active",
            T0 + 300,
            None,
        ),
        ("no ttl: defaultJobTTL 5m", job(phase="Running", ttl=None), "active", T0 + 300, None),
        ("ttl 0: no deadline", job(phase="Running", ttl="0"), "active", None, None),
        ("succeeded", job(phase="Succeeded"), "finished", None, T0 + 600),
        ("failed without ttl: 30 minutes", job(phase="Failed", ttl="0"), "finished", None, T0 + 1800),
        ("an unknown phase is finished", job(phase="Exploded"), "finished", None, T0 + 600),
    ],
)
def test_examine_stages(
    case: str, the_job: dict[str, Any], stage: str, deadline: float | None, scavenge_at: float | None
) -> None:
    facts = examine(the_job, DIRECT)
    assert (facts.stage, facts.deadline, facts.scavenge_at) == (stage, deadline, scavenge_at), case


def test_a_waiting_job_being_deleted_is_left_alone() -> None:
    deleting = job(passed=False)
    deleting["metadata"]["deletionTimestamp"] = format_rfc3339(T0 + 5)
    assert examine(deleting, DIRECT).stage == "deleting"


def test_without_arbitration_a_pending_job_is_active() -> None:
    settings = LifecycleSettings(default_job_mode="EvictDirectly", arbitration_enabled=False)
    assert examine(job(passed=False), settings).stage == "active"


# ---------------------------------------------------------------- named waits


def waiting_condition(status: dict[str, Any] | None) -> dict[str, Any] | None:
    assert status is not None
    return next((c for c in status.get("conditions") or () if c["type"] == "Waiting"), None)


def test_paused_names_its_wait_once() -> None:
    first = decide(job(phase="Running", uid="u1", paused=True), pod(), T0 + 10, DIRECT)
    assert isinstance(first, Wait)
    cond = waiting_condition(first.status)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Paused")
    assert [(e.type, e.reason) for e in first.events] == [("Normal", "Paused")]
    again = job(phase="Running", uid="u1", paused=True, conditions=first.status["conditions"])  # type: ignore[index]
    assert isinstance(decide(again, pod(), T0 + 20, DIRECT), Ignore)  # named already: no write, no Event


def test_object_limiter_wait_is_named_once_and_ends_with_the_eviction() -> None:
    # the issue's case: the workload may lose 2 pods per 5 minutes (burst 1), one was just evicted
    limiter = ObjectLimiter(300, burst=1)
    limiter.record("w1", 2, T0 + 5)
    kwargs: dict[str, Any] = {
        "object_limiter": limiter,
        "workload": "w1",
        "workload_max_migrating": 2,
        "workload_name": "Deployment shop/web",
    }
    first = decide(job(phase="Running", uid="u1"), pod(), T0 + 10, DIRECT, **kwargs)
    assert isinstance(first, Wait)
    cond = waiting_condition(first.status)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "ObjectLimiter")
    assert "Deployment shop/web" in cond["message"] and "2 pod(s)" in cond["message"] and "300s" in cond["message"]
    assert first.status is not None and first.status["reason"] == "ObjectLimiter"
    assert [(e.type, e.reason) for e in first.events] == [("Normal", "ObjectLimiter")]
    named = job(phase="Running", uid="u1", conditions=first.status["conditions"])
    again = decide(named, pod(), T0 + 60, DIRECT, **kwargs)
    assert isinstance(again, Wait) and again.status is None and again.events == ()
    # rate 2 per 300 s: the next token 150 s after the recorded eviction
    evict = decide(named, pod(), T0 + 155, DIRECT, **kwargs)
    assert isinstance(evict, Evict)
    ended = waiting_condition(evict.status)
    assert ended is not None and ended["status"] == "False"


def test_evict_qps_wait_is_named() -> None:
    bucket = TokenBucket(10, 1)
    assert bucket.try_accept(T0 + 10)
    decision = decide(job(phase="Running", uid="u1"), pod(), T0 + 10, DIRECT, evict_tokens=bucket)
    assert isinstance(decision, Wait)
    cond = waiting_condition(decision.status)
    assert cond is not None and cond["reason"] == "EvictQPS" and "evictQPS 10" in cond["message"]


def test_start_ends_an_arbitration_wait() -> None:
    found = arbitration_wait({}, "MaxMigratingPerNode", "2 pods migrating on node n1 >= maxMigratingPerNode 2", T0)
    assert found is not None
    status, event = found
    assert (event.type, event.reason) == ("Normal", "MaxMigratingPerNode")
    assert waiting_condition(status)["reason"] == "MaxMigratingPerNode"  # type: ignore[index]
    assert status["reason"] == "MaxMigratingPerNode" and status.get("phase") is None  # still Pending
    # the same filter again (its count moved): nothing to write
    assert arbitration_wait(status, "MaxMigratingPerNode", "3 pods migrating ...", T0 + 1) is None
    # another filter: written again
    other = arbitration_wait(status, "ObjectLimiter", "Deployment shop/web is rate limited", T0 + 2)
    assert other is not None and waiting_condition(other[0])["reason"] == "ObjectLimiter"  # type: ignore[index]
    passed = job(conditions=status["conditions"])
    start = decide(passed, pod(), T0 + 3, DIRECT)
    assert isinstance(start, Start)
    assert waiting_condition(start.status)["status"] == "False"  # type: ignore[index]


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("evictor", "verb"),
    [("Eviction", "create pods/eviction"), ("Delete", "delete pods"), ("SoftEviction", "patch pods")],
)
def test_forbidden_evictor_fails_the_job_at_once(evictor: str, verb: str) -> None:
    the_job = job(phase="Running", uid="u1", conditions=[EVICTING])
    decision = after_eviction_error(the_job, 403, "pods is forbidden", 1, T0 + 5, evictor=evictor)  # type: ignore[arg-type]
    assert isinstance(decision, Finish)
    assert (decision.status["phase"], decision.status["reason"]) == ("Failed", "FailedEvict")
    assert verb in decision.status["message"] and evictor in decision.status["message"]
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", "FailedEvict")]
    assert decision.delete_reservation is None  # EvictDirectly: no Reservation of its own


def test_forbidden_eviction_of_a_reservation_first_job_deletes_its_own_reservation_only() -> None:
    the_job = job(phase="Running", uid="u1", mode=None, conditions=[EVICTING])
    the_job["metadata"]["uid"] = "job-uid-1"
    the_job["spec"]["reservationOptions"] = {"reservationRef": {"name": "job-uid-1"}}
    marker = {ANNOTATION_MIGRATION_JOB: f"{the_job['metadata']['name']}/job-uid-1"}
    own = {"metadata": {"name": "job-uid-1", "uid": "r1", "annotations": marker}}
    decision = after_eviction_error(the_job, 403, "forbidden", 1, T0 + 5, settings=LifecycleSettings(), reservation=own)
    assert isinstance(decision, Finish) and decision.delete_reservation == OwnedReservation("job-uid-1", "r1")
    theirs = {"metadata": {"name": "job-uid-1", "uid": "r2", "annotations": {}}}
    decision = after_eviction_error(
        the_job, 403, "forbidden", 1, T0 + 5, settings=LifecycleSettings(), reservation=theirs
    )
    assert isinstance(decision, Finish) and decision.delete_reservation is None


def test_a_repeated_refusal_posts_its_event_once() -> None:
    the_job = job(phase="Running", uid="u1", conditions=[EVICTING])
    first = after_eviction_error(the_job, 429, "budget", 1, T0)
    assert isinstance(first, Wait) and len(first.events) == 1
    second = after_eviction_error(dict(the_job, status=first.status), 429, "budget", 2, T0 + 1)
    assert isinstance(second, Wait) and second.events == () and second.status is not None
    changed = after_eviction_error(dict(the_job, status=second.status), 429, "another budget", 3, T0 + 3)
    assert isinstance(changed, Wait) and len(changed.events) == 1
