"""The lifecycle of jobs that passed arbitration together (a gang moving as one): the annotation that
names the unit, the object limiter that does not split it, and the ReservationFirst barrier that evicts
no member until every member's Reservation is Available."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_reservation_first import OURS, OWN, SETTINGS, T0, cond, job, last, reservation, someone_elses, view

from koordpy.descheduler.decisions import Evict, Finish, Wait
from koordpy.descheduler.gang_migration import (
    ANNOTATION_GANG_MIGRATION,
    GangEvictionBarrier,
    GangMigration,
    gang_eviction_barrier,
    gang_migration,
    gang_migration_value,
)
from koordpy.descheduler.lifecycle import decide
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.descheduler.ratelimit import ObjectLimiter
from koordpy.descheduler.reservation_first import ANNOTATION_MIGRATION_JOB

UNIT = GangMigration("gang ml/train", ("pmj-0", "pmj-1", "pmj-2"))
DIRECT = LifecycleSettings(default_job_mode="EvictDirectly")


def in_unit(raw: dict[str, Any], name: str = "pmj-1") -> dict[str, Any]:
    out = copy.deepcopy(raw)
    if out["metadata"]["name"] != name:  # a sibling: its own name and UID (its Reservation's name)
        out["metadata"]["name"] = name
        out["metadata"]["uid"] = f"uid-{name}"
    out["metadata"]["annotations"][ANNOTATION_GANG_MIGRATION] = gang_migration_value(UNIT.gang, UNIT.jobs)
    return out


def sibling(
    name: str, *, phase: str = "Running", conditions: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    raw = in_unit(job(phase=phase, conditions=conditions, extra_status=status or None), name)
    return raw


def test_the_annotation_round_trips_and_bad_values_are_no_unit() -> None:
    raw = in_unit(job())
    assert gang_migration(raw) == GangMigration("gang ml/train", ("pmj-0", "pmj-1", "pmj-2"))
    assert raw["metadata"]["annotations"][ANNOTATION_GANG_MIGRATION] == (
        '{"gang":"gang ml/train","jobs":["pmj-0","pmj-1","pmj-2"]}'
    )
    for bad in ("", "[1]", '{"gang": 1, "jobs": []}', '{"gang": "g", "jobs": [1]}', "{"):
        broken = copy.deepcopy(raw)
        broken["metadata"]["annotations"][ANNOTATION_GANG_MIGRATION] = bad
        assert gang_migration(broken) is None, bad
    assert gang_migration(job()) is None


def test_the_object_limiter_does_not_split_a_unit() -> None:
    """The workload lost a pod (its limiter allows 1 per 300 s): a plain job waits, a unit's job evicts."""
    limiter = ObjectLimiter(300)
    limiter.record("uid-train", 1, T0)
    running = job(phase="Running")
    running["spec"]["mode"] = "EvictDirectly"
    kwargs: dict[str, Any] = {"object_limiter": limiter, "workload": "uid-train"}
    alone = decide(running, view(), T0 + 10, DIRECT, **kwargs)
    assert isinstance(alone, Wait) and alone.status is not None
    assert last(alone, "Waiting")["reason"] == "ObjectLimiter"
    together = decide(in_unit(running), view(), T0 + 10, DIRECT, **kwargs)
    assert isinstance(together, Evict) and together.workload == "uid-train"  # still recorded after it


@pytest.mark.parametrize(
    ("others", "expected"),
    [
        # both siblings' Reservations Available: go
        ({"pmj-0": "available", "pmj-2": "available"}, "go"),
        # pmj-2's Reservation is still Pending: wait, naming it
        ({"pmj-0": "available", "pmj-2": "pending"}, "wait"),
        # pmj-2 passed but has not started: wait
        ({"pmj-0": "available", "pmj-2": "not-started"}, "wait"),
        # pmj-0 evicted already (condition Eviction present), pmj-2 done: go
        ({"pmj-0": "evicted", "pmj-2": "succeeded"}, "go"),
        # pmj-2 runs EvictDirectly: it evicts without a Reservation
        ({"pmj-0": "available", "pmj-2": "direct"}, "go"),
        # pmj-2 failed before its eviction: the unit is broken
        ({"pmj-0": "available", "pmj-2": "failed"}, "broken"),
        # pmj-2 failed after its eviction (its replacement never bound): the member is gone, go on
        ({"pmj-0": "available", "pmj-2": "failed-after-eviction"}, "go"),
        # pmj-2 was deleted
        ({"pmj-0": "available", "pmj-2": None}, "broken"),
        # under pmj-2's name an Available Reservation another team made: not pmj-2's, so no go
        ({"pmj-0": "available", "pmj-2": "someone-elses"}, "wait"),
    ],
)
def test_gang_barrier(others: dict[str, str | None], expected: str) -> None:
    jobs: dict[str, dict[str, Any] | None] = {}
    reservations: dict[str, dict[str, Any]] = {}
    evicted = [cond("Eviction", "True", "EvictComplete")]
    for name, state in others.items():
        if state is None:
            jobs[name] = None
            continue
        shapes: dict[str, dict[str, Any]] = {
            "available": {},
            "pending": {},
            "not-started": {"phase": "Pending"},
            "evicted": {"conditions": evicted},
            "succeeded": {"phase": "Succeeded"},
            "direct": {},
            "failed": {"phase": "Failed", "reason": "Unschedulable"},
            "failed-after-eviction": {"phase": "Failed", "conditions": evicted, "reason": "Timeout"},
            "someone-elses": {},
        }
        raw = sibling(name, **shapes[state])
        if state == "direct":
            raw["spec"]["mode"] = "EvictDirectly"
        jobs[name] = raw
        if state in ("available", "pending"):
            res = reservation(name=f"uid-{name}", phase="Available" if state == "available" else "Pending")
            res["metadata"]["annotations"][ANNOTATION_MIGRATION_JOB] = f"{name}/uid-{name}"  # the sibling's marker
            reservations[res["metadata"]["name"]] = res
        if state == "someone-elses":
            reservations[f"uid-{name}"] = someone_elses(name=f"uid-{name}")
    own = in_unit(job())
    found = gang_eviction_barrier(own, UNIT, jobs, reservations, now=T0 + 10, settings=SETTINGS)
    assert found.state == expected, found
    if expected == "wait":
        assert (
            found.message
            == "gang ml/train moves as one: its member is evicted once the Reservations of jobs pmj-2 are Available"
        )
    if expected == "broken":
        assert "pmj-2" in found.message


def test_reservation_first_waits_for_the_unit_then_evicts() -> None:
    own = in_unit(job(options=OURS))
    waiting = GangEvictionBarrier(
        "wait", "gang ml/train moves as one: its member is evicted once the Reservations of jobs pmj-2 are Available"
    )
    held = decide(own, view(), T0 + 10, SETTINGS, reservation=reservation(), gang=waiting)
    assert isinstance(held, Wait) and held.status is not None
    condition = last(held, "Waiting")
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "WaitForGang", waiting.message)
    assert [e.reason for e in held.events] == ["ReservationScheduled", "WaitForGang"]
    go = decide(own, view(), T0 + 10, SETTINGS, reservation=reservation(), gang=GangEvictionBarrier("go"))
    assert isinstance(go, Evict)


def test_reservation_first_fails_a_member_of_a_broken_unit_and_frees_its_reservation() -> None:
    own = in_unit(job(options=OURS))
    broken = GangEvictionBarrier(
        "broken", "gang ml/train moves as one, and its job pmj-2 ended Unschedulable before its eviction"
    )
    failed = decide(own, view(), T0 + 10, SETTINGS, reservation=reservation(), gang=broken)
    assert isinstance(failed, Finish)
    assert (failed.status["phase"], failed.status["reason"], failed.status["message"]) == (
        "Failed",
        "ForbiddenMigratePod",
        broken.message,
    )
    assert failed.delete_reservation == OWN
