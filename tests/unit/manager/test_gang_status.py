"""PodGroup status and gang Events as the manager decides them (pure), both PodGroup APIs."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.manager.gang_status import (
    EventThrottle,
    desired_status,
    occupied_by,
    reconcile_gang,
    waiting_message,
)
from koordpy.scheduler.plugins.gang import API_SIGS, API_VOLCANO, API_X_K8S, GangCache
from koordpy_testkit.gangs import T0, member, podgroup

SIGS_LABEL = "pod-group.scheduling.sigs.k8s.io"
X_LABEL = "scheduling.x-k8s.io/pod-group"
NOW = "2027-01-15T08:00:00Z"


def cache_with(api: str, min_member: int, pods: list[tuple[str | None, str | None]]) -> GangCache:
    """A gang ``default/mpi`` of ``api`` with one member per ``(node, phase)``."""
    cache = GangCache(CoschedulingArgs.model_validate({}))
    cache.upsert_podgroup(podgroup("mpi", min_member, api=api))
    label = SIGS_LABEL if api == API_SIGS else X_LABEL
    for i, (node, phase) in enumerate(pods):
        if api == API_VOLCANO:  # Volcano's members name their PodGroup in an annotation
            joins: dict[str, Any] = {"annotations": {"scheduling.k8s.io/group-name": "mpi"}}
        else:
            joins = {"labels": {label: "mpi"}}
        cache.upsert_pod(member(f"w{i}", node=node, phase=phase, created=T0 + i, **joins))
    return cache


@pytest.mark.parametrize(
    ("api", "stored", "pods", "want"),
    [
        # min 3, no pods yet: "" → Pending, counters 0 (x-k8s.io has no "scheduled").
        (API_SIGS, {}, [], {"phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0}),
        (API_X_K8S, {}, [], {"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0}),
        # 3 pods, 1 bound: Pending → PreScheduling → Scheduling (1 < 3 scheduled); start time and occupiedBy set.
        (
            API_SIGS,
            {"phase": "Pending"},
            [("n1", "Pending"), (None, None), (None, None)],
            {
                "phase": "Scheduling",
                "scheduled": 1,
                "running": 0,
                "succeeded": 0,
                "failed": 0,
                "scheduleStartTime": NOW,
                "occupiedBy": "default/job-mpi",
            },
        ),
        # x-k8s.io: Pending → Scheduling at 3 pods ≥ min 3.
        (
            API_X_K8S,
            {"phase": "Pending"},
            [("n1", "Pending"), (None, None), (None, None)],
            {
                "phase": "Scheduling",
                "running": 0,
                "succeeded": 0,
                "failed": 0,
                "scheduleStartTime": NOW,
                "occupiedBy": "default/job-mpi",
            },
        ),
        # 3 bound and running (3 + 0 ≥ 3): Running; start time already set stays, counters change only.
        (
            API_SIGS,
            {
                "phase": "Scheduling",
                "scheduled": 1,
                "running": 0,
                "succeeded": 0,
                "failed": 0,
                "scheduleStartTime": "2027-01-15T07:00:00Z",
                "occupiedBy": "default/job-mpi",
            },
            [("n1", "Running"), ("n2", "Running"), ("n3", "Running")],
            {"phase": "Running", "scheduled": 3, "running": 3},
        ),
        # 2 running + 1 failed: failed ≠ 0 and 1 + 2 ≥ 3 → Failed.
        (
            API_X_K8S,
            {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0, "occupiedBy": "x"},
            [("n1", "Running"), ("n2", "Running"), ("n3", "Failed")],
            {"phase": "Failed", "running": 2, "failed": 1},
        ),
        # Volcano: "" → Pending → Inqueue (no queues) with nothing bound; only phase and counters, in
        # Volcano's phases (no scheduled, occupiedBy or scheduleStartTime).
        (API_VOLCANO, {}, [(None, None)] * 2, {"phase": "Inqueue", "running": 0, "succeeded": 0, "failed": 0}),
        # 3 bound, 3 running ≥ min 3: Running; 2 bound and running of 3 with one failed: Unknown.
        (
            API_VOLCANO,
            {"phase": "Inqueue", "running": 0, "succeeded": 0, "failed": 0},
            [("n1", "Running"), ("n2", "Running"), ("n3", "Running")],
            {"phase": "Running", "running": 3},
        ),
        (
            API_VOLCANO,
            {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0},
            [("n1", "Running"), ("n2", "Running"), ("n3", "Failed")],
            {"phase": "Unknown", "running": 2, "failed": 1},
        ),
        # Every member succeeded: Completed.
        (
            API_VOLCANO,
            {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0},
            [("n1", "Succeeded"), ("n2", "Succeeded"), ("n3", "Succeeded")],
            {"phase": "Completed", "running": 0, "succeeded": 3},
        ),
    ],
)
def test_status_per_api(api: str, stored: dict[str, Any], pods: list[tuple[str | None, str | None]], want: Any) -> None:
    cache = cache_with(api, 3, pods)
    patch = desired_status(cache, api, "default", "mpi", stored=stored, occupant="default/job-mpi", now=NOW)
    assert patch is not None
    assert (patch.api, patch.namespace, patch.name) == (api, "default", "mpi")
    assert patch.status == want
    # Applying the patch converges: nothing left to write.
    assert (
        desired_status(
            cache, api, "default", "mpi", stored={**stored, **patch.status}, occupant="default/job-mpi", now=NOW
        )
        is None
    )


def test_a_podgroup_of_the_other_api_is_not_written() -> None:
    cache = cache_with(API_SIGS, 2, [(None, None)])
    # An x-k8s.io PodGroup of the same name exists too, but the gang's parameters come from sigs.k8s.io.
    assert desired_status(cache, API_X_K8S, "default", "mpi", stored={}, occupant=None, now=NOW) is None
    assert desired_status(cache, API_SIGS, "default", "ghost", stored={}, occupant=None, now=NOW) is None


def test_occupied_by_sorts_owner_references() -> None:
    pod = {"metadata": {"namespace": "ns", "ownerReferences": [{"name": "b"}, {"name": "a"}, {"kind": "x"}]}}
    assert occupied_by(pod) == "ns/a,ns/b"
    assert occupied_by({"metadata": {"namespace": "ns"}}) is None


@pytest.mark.parametrize(
    ("min_member", "pods", "want"),
    [
        # 3 of 5 exist: the quorum message the extender's /filter gives too.
        (5, [(None, None)] * 3, "gang default/mpi: 3 of 5 members exist"),
        # 5 of 5 exist, 3 bound: 5 − 3 = 2 more to place.
        (
            5,
            [("n", "Running")] * 3 + [(None, None)] * 2,
            "gang default/mpi: 5 of 5 members exist, waiting for 2 more members to be placed",
        ),
        (
            2,
            [("n", "Running"), (None, None)],
            "gang default/mpi: 2 of 2 members exist, waiting for 1 more member to be placed",
        ),
        # every member placed: nothing to wait for.
        (2, [("n", "Running")] * 2, None),
    ],
)
def test_waiting_message(min_member: int, pods: list[tuple[str | None, str | None]], want: str | None) -> None:
    cache = cache_with(API_SIGS, min_member, pods)
    view = cache.view("default/mpi")
    assert view is not None
    assert waiting_message(cache, view) == want


def test_waiting_message_of_a_missing_podgroup_and_of_a_final_phase() -> None:
    cache = GangCache(CoschedulingArgs.model_validate({}))
    cache.upsert_pod(member("w0", labels={SIGS_LABEL: "gone"}))
    view = cache.view("default/gone")
    assert view is not None
    message = waiting_message(cache, view)
    assert message is not None and "gone" in message
    finished = cache_with(API_SIGS, 1, [("n", "Succeeded")])
    fview = finished.view("default/mpi")
    assert fview is not None and waiting_message(finished, fview, "Finished") is None


def test_throttle_posts_changes_at_most_once_per_interval() -> None:
    throttle = EventThrottle(60)
    assert throttle.allow("g", "k", "3 of 5", 0)
    assert not throttle.allow("g", "k", "3 of 5", 100)  # same message: never again
    assert not throttle.allow("g", "k", "4 of 5", 30)  # changed, but 30 < 60 s since the last one
    assert throttle.pending == {"g"}
    assert throttle.allow("g", "k", "4 of 5", 60)  # 60 ≥ 60
    assert throttle.allow("g", "other", "4 of 5", 61)  # per object
    throttle.forget(["k", "other"])
    assert len(throttle) == 0


def test_reconcile_posts_to_the_podgroup_and_a_bounded_number_of_waiting_pods() -> None:
    cache = cache_with(API_SIGS, 5, [("n1", "Running")] + [(None, None)] * 3)
    throttle = EventThrottle(60)
    podgroups = {(API_SIGS, "default/mpi"): ("pg-uid", {"phase": "Pending"})}
    uids = {f"default/w{i}": f"uid-{i}" for i in range(4)}
    kw: dict[str, Any] = {
        "podgroups": podgroups,
        "pod_uids": uids,
        "occupant": None,
        "throttle": throttle,
        "pod_events": 2,
    }
    patches, events = reconcile_gang(cache, "default/mpi", **kw, now=T0, now_text=NOW)
    # 4 of 5 members: the phase stays Pending (not in the patch); the counters are written.
    assert [p.status for p in patches] == [{"scheduled": 1, "running": 1, "succeeded": 0, "failed": 0}]
    assert [(e.kind, e.name, e.uid) for e in events] == [
        ("PodGroup", "mpi", "pg-uid"),
        ("Pod", "w1", "uid-1"),  # w0 has a node; 2 pod Events at most
        ("Pod", "w2", "uid-2"),
    ]
    assert {e.message for e in events} == {"gang default/mpi: 4 of 5 members exist"}
    assert events[0].api_version == "scheduling.sigs.k8s.io/v1alpha1" and events[1].api_version == "v1"
    # The same state again: no new Events (nothing changed).
    _, again = reconcile_gang(cache, "default/mpi", **kw, now=T0 + 1, now_text=NOW)
    assert again == []
