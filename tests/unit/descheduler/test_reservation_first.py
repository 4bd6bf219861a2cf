"""ReservationFirst: the Reservation built from the pod, and every transition of the job around it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from koordpy.descheduler.decisions import Evict, Finish, Reserve, Wait
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.lifecycle import after_reservation_error, decide, reservation_lookup
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings, PodView
from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket
from koordpy.descheduler.reservation_first import (
    ANNOTATION_MIGRATION_JOB,
    TEMPLATE_SPEC_REFUSED,
    OwnedReservation,
    bound_pod,
    foreign,
    is_ours,
    owned,
    read_reservation,
    reservation_manifest,
    reservation_name,
    stale_reservations,
    template_problem,
)
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import pod_from_dict
from koordpy.scheduler.plugins.reservation.spec import allocated_annotations, reservation_from_dict

T0 = 1795255200.0  # 2026-11-21T10:00:00Z, the job's creation time
SETTINGS = LifecycleSettings()  # defaultJobMode ReservationFirst, defaultJobTTL 5m
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "rs-uid", "controller": True}


def raw_pod(
    *,
    uid: str = "u1",
    node: str = "n1",
    owners: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    affinity_terms: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node,
        "schedulerName": "default-scheduler",
        "containers": [
            {
                "name": "app",
                "image": "nginx",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1"}},
                "env": [{"name": "SECRET", "value": "x"}],
            }
        ],
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"pool": "web"},
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    if affinity_terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": affinity_terms}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": uid,
            "labels": {"app": "web"} if labels is None else labels,
            "ownerReferences": [RS] if owners is None else owners,
        },
        "spec": spec,
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def view(raw: dict[str, Any] | None = None) -> PodView:
    return PodView.from_object(raw if raw is not None else raw_pod())


def job(
    *,
    phase: str | None = "Running",
    ttl: str | None = "5m",
    conditions: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    extra_status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"podRef": {"namespace": "shop", "name": "web-1", "uid": "u1"}}
    if ttl is not None:
        spec["ttl"] = ttl
    if options is not None:
        spec["reservationOptions"] = options
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if conditions is not None:
        status["conditions"] = conditions
    status.update(extra_status or {})
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": "pmj-1",
            "uid": "job-uid-1",
            "creationTimestamp": format_rfc3339(T0),
            "annotations": {ANNOTATION_PASSED_ARBITRATION: "true"},
        },
        "spec": spec,
        "status": status,
    }


OURS = {"reservationRef": {"name": "job-uid-1"}}
"""What the manager records after creating the Reservation (its name is the job's UID, as upstream)."""
RES_UID = "res-uid-1"
OWN = OwnedReservation("job-uid-1", RES_UID)
"""The job's own Reservation as a failed job deletes it: by name, only while it has this UID."""


def someone_elses(**kwargs: Any) -> dict[str, Any]:
    """A Reservation named like the job's own (its UID) that another team created: no marker of the job."""
    res = reservation(**kwargs)
    res["metadata"]["annotations"] = {"team": "b"}
    res["metadata"]["labels"] = {"team": "b"}
    res["metadata"].pop("ownerReferences")
    res["metadata"]["uid"] = "team-b-uid"
    return res


def reservation(
    *,
    phase: str = "Available",
    node: str = "n2",
    name: str = "job-uid-1",
    conditions: list[dict[str, Any]] | None = None,
    owners: list[dict[str, Any]] | None = None,
    ttl: str = "5m",
) -> dict[str, Any]:
    manifest = reservation_manifest(job(), raw_pod(), 300)
    assert isinstance(manifest, dict)
    res = copy.deepcopy(manifest)
    res["metadata"]["name"] = name
    res["metadata"]["uid"] = RES_UID
    res["metadata"]["creationTimestamp"] = format_rfc3339(T0 + 1)
    res["spec"]["ttl"] = ttl
    status: dict[str, Any] = {"phase": phase}
    if node:
        status["nodeName"] = node
    if conditions is not None:
        status["conditions"] = conditions
    if owners is not None:
        status["currentOwners"] = owners
    res["status"] = status
    return res


def cond(kind: str, state: str, reason: str = "") -> dict[str, Any]:
    return {"type": kind, "status": state, "reason": reason, "message": ""}


def last(decision: Any, kind: str) -> dict[str, Any]:
    return next(c for c in decision.status["conditions"] if c["type"] == kind)


# ---- the Reservation built from the pod -----------------------------------------------------------


def test_manifest_from_pod_holds_requests_placement_and_excludes_current_node() -> None:
    manifest = reservation_manifest(job(), raw_pod(), 300)
    assert isinstance(manifest, dict)
    assert (manifest["apiVersion"], manifest["kind"]) == ("scheduling.koordinator.sh/v1alpha1", "Reservation")
    assert manifest["metadata"]["name"] == "job-uid-1"  # the job's UID, as upstream
    assert manifest["metadata"]["labels"]["koordpy.io/migration-job"] == "pmj-1"
    assert manifest["metadata"]["annotations"][ANNOTATION_MIGRATION_JOB] == "pmj-1/job-uid-1"
    assert manifest["metadata"]["ownerReferences"][0]["kind"] == "PodMigrationJob"
    spec = manifest["spec"]
    assert spec["allocateOnce"] is True
    assert spec["ttl"] == "300s"  # the job's ttl (5m)
    assert spec["owners"] == [
        {
            "controller": {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-5d8f",
                "uid": "rs-uid",
                "controller": True,
                "namespace": "shop",
            }
        }
    ]
    pod_spec = spec["template"]["spec"]
    # requests only: no limits, env, image or volumes
    assert pod_spec["containers"] == [{"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]
    assert "volumes" not in pod_spec and "nodeName" not in pod_spec
    assert pod_spec["tolerations"] == [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod_spec["nodeSelector"] == {"pool": "web"}
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]
    assert spec["template"]["metadata"] == {"namespace": "shop", "labels": {"app": "web"}}


def test_exclusion_is_added_to_every_required_term_and_preferred_affinity_dropped() -> None:
    # two ORed terms: each must exclude n1, otherwise the second term would still allow it
    terms_in = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
    ]
    manifest = reservation_manifest(job(), raw_pod(affinity_terms=terms_in), 300)
    assert isinstance(manifest, dict)
    affinity = manifest["spec"]["template"]["spec"]["affinity"]
    assert set(affinity) == {"nodeAffinity"}
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchFields"] for t in terms] == [
        [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}],
        [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}],
    ]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]


def test_pod_without_controller_is_owned_by_a_label_selector() -> None:
    manifest = reservation_manifest(job(), raw_pod(owners=[]), 300)
    assert isinstance(manifest, dict)
    assert manifest["spec"]["owners"] == [{"labelSelector": {"matchLabels": {"app": "web"}}}]


def test_pod_without_controller_or_labels_cannot_get_a_reservation() -> None:
    message = reservation_manifest(job(), raw_pod(owners=[], labels={}), 300)
    assert isinstance(message, str) and "no controller and no labels" in message
    decision = decide(job(), view(raw_pod(owners=[], labels={})), T0 + 10, SETTINGS)
    assert isinstance(decision, Finish)
    assert decision.status["reason"] == "FailedCreateReservation"
    assert last(decision, "ReservationCreated")["status"] == "False"
    assert decision.delete_reservation is None


def test_user_template_sets_requests_placement_labels_and_a_shorter_ttl_only() -> None:
    # what a template may set: its pod template (requests and placement) replaces the pod's, its ttl
    # (3m <= the job's 5m) is kept, its labels and annotations are copied; the name is the job's UID,
    # the owners the pod's controller and the marker the manager's, whatever the template says; fields
    # the manager does not take are not copied; allocateOnce forced true and nodeName cleared, as upstream
    user: dict[str, Any] = {
        "metadata": {
            "labels": {"team": "a", "koordpy.io/migration-job": "forged"},
            "annotations": {"note": "x", ANNOTATION_MIGRATION_JOB: "other-job/other-uid"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "team-b", "uid": "ns"}],
        },
        "spec": {
            "allocateOnce": False,
            "ttl": "3m",
            "somethingNew": True,
            "template": {
                "spec": {"nodeName": "n9", "containers": [{"name": "x", "resources": {"requests": {"cpu": "2"}}}]}
            },
        },
    }
    the_job = job(options={"template": user})
    assert template_problem(the_job, 300) is None
    manifest = reservation_manifest(the_job, raw_pod(), 300)
    assert isinstance(manifest, dict)
    meta = manifest["metadata"]
    assert meta["name"] == "job-uid-1" == reservation_name(the_job)
    assert meta["labels"] == {
        "team": "a",
        "koordpy.io/migration-job": "pmj-1",
        "app.kubernetes.io/managed-by": "koordpy",
    }
    assert meta["annotations"] == {"note": "x", ANNOTATION_MIGRATION_JOB: "pmj-1/job-uid-1"}
    assert set(meta) == {"name", "labels", "annotations", "ownerReferences"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "name": "pmj-1",
            "uid": "job-uid-1",
        }
    ]
    spec = manifest["spec"]
    assert set(spec) == {"template", "owners", "allocateOnce", "ttl"}
    assert spec["owners"] == [{"controller": {**RS, "namespace": "shop"}}]
    assert (spec["allocateOnce"], spec["ttl"]) == (True, "3m")
    pod_spec = spec["template"]["spec"]
    assert "nodeName" not in pod_spec
    assert pod_spec["containers"][0]["resources"]["requests"] == {"cpu": "2"}
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]
    assert user["spec"]["allocateOnce"] is False  # the job's own object is not modified


@pytest.mark.parametrize(
    ("case", "template", "job_ttl", "problem"),
    [
        ("nothing set", {}, 300.0, None),
        ("requests and placement", {"spec": {"template": {"spec": {"nodeSelector": {"pool": "b"}}}}}, 300.0, None),
        ("labels and annotations", {"metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}}}, 300.0, None),
        # Koordinator's controller writes the job's UID back as the template's name: still the job's own
        ("name = the job's UID", {"metadata": {"name": "job-uid-1"}}, 300.0, None),
        ("a name of the user's choosing", {"metadata": {"name": "team-b-db"}}, 300.0, ".metadata.name: 'team-b-db'"),
        ("ttl 5m = the job's 300 s", {"spec": {"ttl": "5m"}}, 300.0, None),
        ("ttl 301s > the job's 300 s", {"spec": {"ttl": "301s"}}, 300.0, ".spec.ttl: 301s is longer than the job's"),
        ("ttl 0s: never expires", {"spec": {"ttl": "0s"}}, 300.0, ".spec.ttl: must be a positive duration"),
        ("ttl not a duration", {"spec": {"ttl": "soon"}}, 300.0, ".spec.ttl: "),
        ("the job has no ttl: any positive one", {"spec": {"ttl": "24h"}}, 0.0, None),
        ("allocateOnce is forced true anyway", {"spec": {"allocateOnce": False}}, 300.0, None),
        ("unknown fields are ignored", {"spec": {"newField": 1}, "metadata": {"finalizers": ["x"]}}, 300.0, None),
        ("spec not an object", {"spec": "x"}, 300.0, ".spec: expected an object"),
        *[
            (f"{key} refused", {"spec": {key: value}}, 300.0, f".spec.{key}: may not be set")
            for key, value in (
                ("owners", [{"labelSelector": {"matchLabels": {"app": "db"}}}]),
                ("expires", "2030-01-01T00:00:00Z"),
                ("preAllocation", True),
                ("preAllocationPolicy", {"mode": "Cluster"}),
                ("unschedulable", True),
                ("taints", [{"key": "k", "effect": "NoSchedule"}]),
                ("allocatePolicy", "Restricted"),
            )
        ],
    ],
)
def test_what_a_template_may_set(case: str, template: dict[str, Any], job_ttl: float, problem: str | None) -> None:
    found = template_problem(job(options={"template": template}), job_ttl)
    if problem is None:
        assert found is None, case
    else:
        assert found is not None and found.startswith("spec.reservationOptions.template" + problem), (case, found)


def test_every_refused_template_field_is_in_the_table() -> None:
    assert sorted(TEMPLATE_SPEC_REFUSED) == [
        "allocatePolicy",
        "expires",
        "owners",
        "preAllocation",
        "preAllocationPolicy",
        "taints",
        "unschedulable",
    ]


def test_a_job_whose_template_is_refused_fails_invalid_without_a_reservation() -> None:
    named = job(options={"template": {"metadata": {"name": "team-b-db"}}})
    decision = decide(named, view(), T0 + 10, SETTINGS, reservation=someone_elses(name="team-b-db"))
    assert isinstance(decision, Finish)
    assert (decision.status["phase"], decision.status["reason"]) == ("Failed", "InvalidSpec")
    assert "spec.reservationOptions.template.metadata.name" in decision.status["message"]
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", "InvalidSpec")]
    assert decision.delete_reservation is None
    longer = job(ttl="5m", options={"template": {"spec": {"ttl": "1h"}}})
    assert decide(longer, view(), T0 + 10, SETTINGS).status["reason"] == "InvalidSpec"  # type: ignore[union-attr]
    # the job without ttl gets defaultJobTTL (5m): a template ttl of 1h outlives it too
    assert (
        decide(job(ttl=None, options={"template": {"spec": {"ttl": "1h"}}}), view(), T0 + 10, SETTINGS).status[  # type: ignore[union-attr]
            "reason"
        ]
        == "InvalidSpec"
    )


@pytest.mark.parametrize(
    ("case", "the_reservation", "ours", "is_foreign"),
    [
        ("created by this job: the marker names its name and UID", reservation(), True, False),
        ("another team's under the job's name", someone_elses(), False, True),
        ("a marker of another job", reservation(), False, True),
        ("a marker of this job's name but an older UID", reservation(), False, True),
        ("the user's reservationRef, named otherwise", someone_elses(name="shared"), False, False),
        ("none", None, False, False),
    ],
)
def test_a_reservation_is_the_jobs_only_with_its_marker(
    case: str, the_reservation: dict[str, Any] | None, ours: bool, is_foreign: bool
) -> None:
    if the_reservation is not None and "another job" in case:
        the_reservation["metadata"]["annotations"][ANNOTATION_MIGRATION_JOB] = "pmj-2/job-uid-2"
    if the_reservation is not None and "older UID" in case:
        the_reservation["metadata"]["annotations"][ANNOTATION_MIGRATION_JOB] = "pmj-1/job-uid-0"
    the_job = job(options={"reservationRef": {"name": "shared"}} if "reservationRef" in case else None)
    assert is_ours(the_job, the_reservation) is ours, case
    assert foreign(the_job, the_reservation) is is_foreign, case
    assert owned(the_job, the_reservation) == (OWN if ours else None), case


@pytest.mark.parametrize(
    ("case", "options", "uid", "name"),
    [
        ("job UID (upstream)", None, "job-uid-1", "job-uid-1"),
        ("no UID (a dump): from the job name", None, None, "pmj-pmj-1"),
        ("recorded ref to our own", {"reservationRef": {"name": "job-uid-1"}}, "job-uid-1", "job-uid-1"),
        ("the user's Reservation", {"reservationRef": {"name": "shared"}}, "job-uid-1", "shared"),
        ("a template name is never the name", {"template": {"metadata": {"name": "x"}}}, "job-uid-1", "job-uid-1"),
    ],
)
def test_reservation_name_is_deterministic(
    case: str, options: dict[str, Any] | None, uid: str | None, name: str
) -> None:
    the_job = job(options=options)
    if uid is None:
        del the_job["metadata"]["uid"]
    assert reservation_name(the_job) == name, case
    assert reservation_name(copy.deepcopy(the_job)) == name  # a restarted manager computes the same


def test_reservation_lookup_only_for_running_reservation_first() -> None:
    assert reservation_lookup(job(), SETTINGS) == "job-uid-1"
    assert reservation_lookup(job(phase="Pending"), SETTINGS) is None
    direct = job()
    direct["spec"]["mode"] = "EvictDirectly"
    assert reservation_lookup(direct, SETTINGS) is None


# ---- transitions ---------------------------------------------------------------------------------


def test_running_without_reservation_creates_it() -> None:
    decision = decide(job(), view(), T0 + 10, SETTINGS)
    assert isinstance(decision, Reserve)
    assert decision.manifest is not None and decision.manifest["metadata"]["name"] == "job-uid-1"
    assert decision.ref["name"] == "job-uid-1" and decision.ref["kind"] == "Reservation"
    created = last(decision, "ReservationCreated")
    assert created["status"] == "True"
    assert [e.reason for e in decision.events] == ["ReservationCreated"]


def test_restart_between_create_and_record_adopts_never_creates_twice() -> None:
    # the Reservation exists under the deterministic name, the job has no reservationRef yet
    decision = decide(job(), view(), T0 + 10, SETTINGS, reservation=reservation(phase="Pending", node=""))
    assert isinstance(decision, Reserve)
    assert decision.manifest is None  # adopt: record the ref only
    assert decision.ref["name"] == "job-uid-1"


@pytest.mark.parametrize(
    ("case", "the_job", "phase"),
    [
        ("before the job records it", job(), "Available"),
        ("after the job recorded its name (its own was replaced)", job(options=OURS), "Available"),
        ("pending, before recording", job(), "Pending"),
        ("after the eviction", job(options=OURS, conditions=[cond("Eviction", "True", "EvictComplete")]), "Available"),
    ],
)
def test_someone_elses_reservation_under_the_jobs_name_fails_the_job_untouched(
    case: str, the_job: dict[str, Any], phase: str
) -> None:
    theirs = someone_elses(phase=phase, node="n2" if phase == "Available" else "")
    decision = decide(the_job, view(), T0 + 10, SETTINGS, reservation=theirs, evict_tokens=TokenBucket(10, 1))
    assert isinstance(decision, Finish), case
    assert (decision.status["phase"], decision.status["reason"]) == ("Failed", "FailedCreateReservation"), case
    assert 'Reservation "job-uid-1" exists and was not created by this job' in decision.status["message"]
    assert "'pmj-1/job-uid-1'" in decision.status["message"]
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", "FailedCreateReservation")]
    assert decision.delete_reservation is None, case  # never deleted, adopted, waited for or evicted for
    created = last(decision, "ReservationCreated")
    assert (created["status"], created["reason"]) == ("False", "FailedCreateReservation")


def test_someone_elses_reservation_is_never_deleted_at_the_jobs_timeout() -> None:
    # job ttl 5m = 300 s: at T0 + 300 the job times out; the Reservation under its name is not its own
    decision = decide(job(options=OURS), view(), T0 + 300, SETTINGS, reservation=someone_elses())
    assert isinstance(decision, Finish) and decision.status["reason"] == "Timeout"
    assert decision.delete_reservation is None
    own = decide(job(options=OURS), view(), T0 + 300, SETTINGS, reservation=reservation())
    assert isinstance(own, Finish) and own.delete_reservation == OWN


@pytest.mark.parametrize(
    ("case", "the_job", "the_reservation", "now", "reason", "deletes"),
    [
        # nothing read, nothing deleted (a straggler is the sweep's, by its marker)
        ("recorded Reservation gone", job(options=OURS), None, T0 + 10, "MissingReservation", None),
        (
            "user's Reservation missing",
            job(options={"reservationRef": {"name": "x"}}),
            None,
            T0 + 10,
            "MissingReservation",
            None,
        ),
        (
            "Failed with Ready/Expired",
            job(options=OURS),
            reservation(phase="Failed", conditions=[cond("Ready", "False", "Expired")]),
            T0 + 10,
            "ReservationExpired",
            OWN,
        ),
        # Reservation created at T0+1 with ttl 60 s: at T0+61 it has expired even before the manager marks it
        (
            "Available but past its own ttl",
            job(options=OURS, ttl="10m"),
            reservation(ttl="60s"),
            T0 + 61,
            "ReservationExpired",
            OWN,
        ),
        (
            "Failed otherwise",
            job(options=OURS),
            reservation(phase="Failed", node=""),
            T0 + 10,
            "Unschedulable",
            OWN,
        ),
        (
            "already consumed by another pod before eviction",
            job(options=OURS),
            reservation(phase="Succeeded", owners=[{"namespace": "shop", "name": "other"}]),
            T0 + 10,
            "ForbiddenMigratePod",
            OWN,
        ),
        (
            "placed on the pod's own node",
            job(options=OURS),
            reservation(node="n1"),
            T0 + 10,
            "ForbiddenMigratePod",
            OWN,
        ),
        # job ttl 5m = 300 s; the Reservation stayed Pending (Unschedulable) until then
        (
            "unschedulable past the job's ttl",
            job(options=OURS),
            reservation(phase="Pending", node="", conditions=[cond("Scheduled", "False", "Unschedulable")]),
            T0 + 300,
            "Timeout",
            OWN,
        ),
    ],
)
def test_failures_delete_our_reservation(
    case: str,
    the_job: dict[str, Any],
    the_reservation: dict[str, Any] | None,
    now: float,
    reason: str,
    deletes: OwnedReservation | None,
) -> None:
    decision = decide(the_job, view(), now, SETTINGS, reservation=the_reservation)
    assert isinstance(decision, Finish), case
    assert decision.status["phase"] == "Failed", case
    assert decision.status["reason"] == reason, case
    assert decision.events[0].type == "Warning" and decision.events[0].reason == reason
    assert decision.delete_reservation == deletes, case


def test_pending_reservation_waits_and_copies_unschedulable_once() -> None:
    plain = decide(job(options=OURS), view(), T0 + 10, SETTINGS, reservation=reservation(phase="Pending", node=""))
    # not placed yet, no message from the scheduler: the wait is named once (condition and Event)
    assert isinstance(plain, Wait) and plain.status is not None and plain.after == 3.0
    named = last(plain, "ReservationScheduled")
    assert (named["status"], named["reason"]) == ("False", "WaitForReservationScheduled")
    assert [(e.type, e.reason) for e in plain.events] == [("Normal", "WaitForReservationScheduled")]
    quiet = decide(
        job(options=OURS, conditions=plain.status["conditions"]),
        view(),
        T0 + 13,
        SETTINGS,
        reservation=reservation(phase="Pending", node=""),
    )
    assert isinstance(quiet, Wait) and quiet.status is None and quiet.events == ()
    unschedulable = cond("Scheduled", "False", "Unschedulable")
    unschedulable["message"] = "0/3 nodes are available: 2 Insufficient cpu, 1 excluded"
    res = reservation(phase="Pending", node="", conditions=[unschedulable])
    first = decide(job(options=OURS), view(), T0 + 10, SETTINGS, reservation=res)
    assert isinstance(first, Wait) and first.status is not None
    synced = last(first, "ReservationScheduled")
    assert (synced["status"], synced["reason"], synced["message"]) == (
        "False",
        "Unschedulable",
        unschedulable["message"],
    )
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "Unschedulable")]
    again = decide(job(options=OURS, conditions=first.status["conditions"]), view(), T0 + 13, SETTINGS, reservation=res)
    assert isinstance(again, Wait) and again.status is None and again.events == ()  # no write, no Event storm


def test_waiting_reservation_records_node_but_does_not_evict() -> None:
    decision = decide(job(options=OURS), view(), T0 + 10, SETTINGS, reservation=reservation(phase="Waiting"))
    assert isinstance(decision, Wait)
    assert decision.status is not None and decision.status["nodeName"] == "n2"
    assert last(decision, "ReservationScheduled")["status"] == "True"
    waiting = last(decision, "Waiting")
    assert (waiting["status"], waiting["reason"]) == ("True", "WaitForReservationAvailable")
    assert [e.reason for e in decision.events] == ["ReservationScheduled", "WaitForReservationAvailable"]


def test_available_elsewhere_evicts_through_the_evictor_path() -> None:
    tokens = TokenBucket(10, 1)
    decision = decide(
        job(options=OURS), view(), T0 + 10, SETTINGS, reservation=reservation(), evict_tokens=tokens, workload="rs-uid"
    )
    assert isinstance(decision, Evict)
    assert (decision.evictor, decision.namespace, decision.name, decision.uid) == ("Eviction", "shop", "web-1", "u1")
    assert decision.status["nodeName"] == "n2"
    assert last(decision, "ReservationScheduled")["status"] == "True"
    assert (last(decision, "Eviction")["status"], last(decision, "Eviction")["reason"]) == ("False", "Evicting")
    assert [e.reason for e in decision.events] == ["ReservationScheduled", "Evicting"]
    assert not tokens.available(T0 + 10)  # the evictQPS token is taken, as for EvictDirectly


def test_rate_limits_hold_back_the_eviction_but_keep_the_node() -> None:
    limiter = ObjectLimiter(300)
    limiter.record("rs-uid", 1, T0)
    decision = decide(
        job(options=OURS),
        view(),
        T0 + 10,
        SETTINGS,
        reservation=reservation(),
        object_limiter=limiter,
        workload="rs-uid",
    )
    assert isinstance(decision, Wait) and decision.after == 3.0
    assert decision.status is not None and decision.status["nodeName"] == "n2"


EVICTING = cond("Eviction", "False", "Evicting")
SCHEDULED = {"nodeName": "n2"}


def test_pod_being_evicted_is_never_evicted_again() -> None:
    terminating = raw_pod()
    terminating["metadata"]["deletionTimestamp"] = format_rfc3339(T0 + 11)
    decision = decide(
        job(options=OURS, conditions=[EVICTING], extra_status=SCHEDULED),
        view(terminating),
        T0 + 12,
        SETTINGS,
        reservation=reservation(),
    )
    assert isinstance(decision, Wait) and decision.status is None


def test_evicted_waits_for_a_pod_to_bind_the_reservation() -> None:
    decision = decide(
        job(options=OURS, conditions=[EVICTING], extra_status=SCHEDULED),
        None,
        T0 + 20,
        SETTINGS,
        reservation=reservation(),
    )
    assert isinstance(decision, Wait) and decision.status is not None
    assert (last(decision, "Eviction")["status"], last(decision, "Eviction")["reason"]) == ("True", "EvictComplete")
    bound = last(decision, "PodBoundReservation")
    assert (bound["status"], bound["reason"]) == ("False", "WaitForPodBindReservation")
    assert [e.reason for e in decision.events] == ["EvictComplete"]


def test_evicted_pod_gone_without_any_eviction_is_missing_pod() -> None:
    decision = decide(job(options=OURS), None, T0 + 20, SETTINGS, reservation=reservation())
    assert isinstance(decision, Finish) and decision.status["reason"] == "MissingPod"
    assert decision.delete_reservation == OWN


DONE = [cond("Eviction", "True", "EvictComplete")]


def replacement(
    *, ready: bool, uid: str = "u-new", node: str = "n2", name: str = "web-2", through: str | None = "job-uid-1"
) -> dict[str, Any]:
    """A pod of the same ReplicaSet on ``node``; ``through``: the Reservation it was bound through (its
    reservation-allocated annotation, as the extender writes it), None: bound without one."""
    pod = raw_pod(uid=uid, node=node)
    pod["metadata"]["name"] = name
    pod["metadata"]["creationTimestamp"] = format_rfc3339(T0 + 30)
    if through is not None:
        pod["metadata"].setdefault("annotations", {}).update(
            allocated_annotations(reservation_from_dict(reservation(name=through)))
        )
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return pod


def test_bound_through_current_owners_then_ready_succeeds() -> None:
    consumed = reservation(phase="Succeeded", owners=[{"namespace": "shop", "name": "web-2", "uid": "u-new"}])
    the_job = job(options=OURS, conditions=DONE, extra_status=SCHEDULED)
    waiting = decide(the_job, None, T0 + 40, SETTINGS, reservation=consumed, replacement=view(replacement(ready=False)))
    assert isinstance(waiting, Wait) and waiting.status is not None
    assert waiting.status["podRef"] == {"namespace": "shop", "name": "web-2", "uid": "u-new"}
    assert last(waiting, "PodBoundReservation")["status"] == "True"
    ready = last(waiting, "BoundPodReady")
    assert (ready["status"], ready["reason"]) == ("False", "WaitForBoundPodReady")
    adopted = dict(the_job, status=waiting.status)
    done = decide(adopted, None, T0 + 45, SETTINGS, reservation=consumed, replacement=view(replacement(ready=True)))
    assert isinstance(done, Finish)
    assert (done.status["phase"], done.status["status"], done.status["reason"]) == ("Succeeded", "Complete", "")
    assert done.status["message"] == 'Bind Pod "shop/web-2" in Reservation "job-uid-1"'
    assert done.status["nodeName"] == "n2"
    assert last(done, "BoundPodReady")["status"] == "True"
    assert done.delete_reservation is None  # consumed: it holds nothing, left to its ttl as upstream
    assert [(e.type, e.reason) for e in done.events] == [("Normal", "Complete")]


def test_bound_found_by_the_ledger_before_the_manager_writes_current_owners() -> None:
    # the Reservation is still Available on n2; the replacement (same ReplicaSet: an owner) runs on n2
    node_pods = [pod_from_dict(replacement(ready=True))]
    res = reservation()
    assert bound_pod(res, [], T0 + 40) is None
    found = bound_pod(res, node_pods, T0 + 40)
    assert found is not None and (found.key, found.uid) == ("shop/web-2", "u-new")
    decision = decide(
        job(options=OURS, conditions=DONE, extra_status=SCHEDULED),
        None,
        T0 + 40,
        SETTINGS,
        reservation=res,
        node_pods=node_pods,
        replacement=view(replacement(ready=True)),
    )
    assert isinstance(decision, Finish) and decision.status["phase"] == "Succeeded"


def test_a_sibling_already_on_the_reserved_node_never_completes_the_job() -> None:
    # The reproduction: web-0 (same ReplicaSet, Ready) ran on n2 before the Reservation existed; the
    # replacement web-2 is Pending. The job must wait, not succeed with web-0.
    sibling = replacement(ready=True, uid="u-sibling", name="web-0", through=None)
    sibling["metadata"]["creationTimestamp"] = format_rfc3339(T0 - 3600)
    node_pods = [pod_from_dict(sibling)]
    res = reservation()
    assert bound_pod(res, node_pods, T0 + 40) is None
    the_job = job(options=OURS, conditions=DONE, extra_status=SCHEDULED)
    waiting = decide(the_job, None, T0 + 40, SETTINGS, reservation=res, node_pods=node_pods, replacement=view(sibling))
    assert isinstance(waiting, Wait) and waiting.status is not None
    assert "podRef" not in waiting.status
    bound = last(waiting, "PodBoundReservation")
    assert (bound["status"], bound["reason"]) == ("False", "WaitForPodBindReservation")
    # the replacement binds through the Reservation next to the sibling: it, and only it, is the bound pod
    node_pods.append(pod_from_dict(replacement(ready=True)))
    found = bound_pod(res, node_pods, T0 + 50)
    assert found is not None and (found.key, found.uid) == ("shop/web-2", "u-new")


def test_a_pod_that_is_not_an_owner_does_not_bind() -> None:
    stranger = replacement(ready=True, through=None)
    stranger["metadata"]["ownerReferences"] = [dict(RS, uid="other-rs")]
    assert bound_pod(reservation(), [pod_from_dict(stranger)], T0 + 40) is None


def test_bound_pod_replaced_by_another_uid_is_not_ready() -> None:
    consumed = reservation(phase="Succeeded", owners=[{"namespace": "shop", "name": "web-2", "uid": "u-new"}])
    decision = decide(
        job(options=OURS, conditions=DONE, extra_status=SCHEDULED),
        None,
        T0 + 40,
        SETTINGS,
        reservation=consumed,
        replacement=view(replacement(ready=True, uid="u-other")),
    )
    assert isinstance(decision, Wait)


def test_recorded_bound_pod_survives_the_reservation_being_deleted() -> None:
    recorded = dict(SCHEDULED, podRef={"namespace": "shop", "name": "web-2", "uid": "u-new"})
    decision = decide(
        job(options=OURS, conditions=DONE, extra_status=recorded),
        None,
        T0 + 50,
        SETTINGS,
        reservation=None,
        replacement=view(replacement(ready=True)),
    )
    assert isinstance(decision, Finish) and decision.status["phase"] == "Succeeded"


def test_evicted_and_reservation_gone_before_binding_fails() -> None:
    decision = decide(job(options=OURS, conditions=DONE, extra_status=SCHEDULED), None, T0 + 40, SETTINGS)
    assert isinstance(decision, Finish) and decision.status["reason"] == "MissingReservation"


@pytest.mark.parametrize(("code", "kind"), [(422, Finish), (404, Finish), (403, Finish), (429, Wait), (503, Wait)])
def test_refused_create(code: int, kind: type) -> None:
    decision = after_reservation_error(job(), code, "refused", 1, T0 + 10)
    assert isinstance(decision, kind)
    assert decision.status is not None
    created = next(c for c in decision.status["conditions"] if c["type"] == "ReservationCreated")
    assert (created["status"], created["reason"]) == ("False", "FailedCreateReservation")


def test_read_reservation() -> None:
    state = read_reservation(reservation(phase="Waiting"), T0 + 10)
    assert (state.phase, state.node_name, state.placed, state.expired) == ("Waiting", "n2", True, False)
    bad = reservation()
    bad["status"]["phase"] = "Bogus"
    assert "status.phase" in (read_reservation(bad, T0).invalid or "")


def test_stale_reservations_are_those_of_gone_failed_or_aborted_jobs() -> None:
    def res(name: str, marker: str | None) -> dict[str, Any]:
        annotations = {ANNOTATION_MIGRATION_JOB: marker} if marker else {}
        return {"metadata": {"name": name, "uid": f"{name}-uid", "annotations": annotations}}

    jobs = [
        job(),  # pmj-1, Running
        {"metadata": {"name": "pmj-failed", "uid": "f"}, "status": {"phase": "Failed"}},
        {"metadata": {"name": "pmj-aborted", "uid": "a"}, "status": {"phase": "Aborted"}},
        {"metadata": {"name": "pmj-done", "uid": "d"}, "status": {"phase": "Succeeded"}},
    ]
    reservations = [
        res("r-running", "pmj-1/job-uid-1"),
        res("r-gone", "pmj-deleted/x"),
        res("r-recreated", "pmj-1/an-older-uid"),
        res("r-failed", "pmj-failed/f"),
        res("r-aborted", "pmj-aborted/a"),
        res("r-done", "pmj-done/d"),
        res("r-foreign", None),
        res("r-no-uid", "pmj-deleted/"),  # not a marker the manager writes (it always names the UID)
        res("r-no-job", "/x"),
    ]
    assert stale_reservations(jobs, reservations) == [
        OwnedReservation(name, f"{name}-uid") for name in ("r-aborted", "r-failed", "r-gone", "r-recreated")
    ]


def test_malformed_pod_cannot_get_a_reservation_and_the_field_is_named() -> None:
    broken = raw_pod()
    broken["metadata"]["ownerReferences"] = "not-a-list"
    message = reservation_manifest(job(), broken, 300)
    assert isinstance(message, str)
    assert message.startswith('Pod "shop/web-1" cannot be read: ') and "metadata.ownerReferences" in message
