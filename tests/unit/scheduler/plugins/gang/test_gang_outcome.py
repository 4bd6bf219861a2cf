"""What a PodGroup says about its gang's last attempt: one outcome per released gang, and its condition."""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import CONDITION_TYPE, GangCache, bound_outcome, gang_condition, outcomes
from koordpy_testkit.gangs import T0, annotated, member, podgroup

ARGS = CoschedulingArgs.model_validate({})
SIGS = "pod-group.scheduling.sigs.k8s.io"
NOW = "2027-01-15T08:00:00Z"


def strict_pair(wait: int = 30) -> GangCache:
    """PodGroup pg: minMember 3, wait 30 s, Strict; p0 and p1 held at T0, p2 never held."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 3, timeout=wait))
    for i in range(3):
        cache.upsert_pod(member(f"p{i}", labels={SIGS: "pg"}))
    cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0 + 1)
    return cache


@pytest.mark.parametrize(
    ("event", "reason", "members", "message_starts"),
    [
        # p0's 30 s run out at T0+30: expired; its Strict cascade releases p1 too. 2 members, a timeout.
        ("expiry", "WaitTimeout", 2, "gang default/pg: default/p0 waited 30s"),
        # p2 fails scheduling (PodScheduled=False): both holds released by the cascade, a Strict release.
        ("failure", "StrictRelease", 2, "gang default/pg (Strict): member default/p2 failed scheduling"),
        # p0 is deleted while held: its own release (deleted) names the reason, p1 follows.
        ("deletion", "MemberDeleted", 2, "gang default/pg: default/p0 was deleted"),
    ],
)
def test_one_outcome_per_released_gang(event: str, reason: str, members: int, message_starts: str) -> None:
    cache = strict_pair()
    if event == "expiry":
        releases = cache.take_releases(T0 + 30)
    elif event == "failure":
        cache.scheduling_failed("default/p2", "0/3 nodes are available: 3 Insufficient cpu.")
        releases = cache.take_releases(T0 + 2)
    else:
        cache.delete_pod("default", "p0")
        releases = cache.take_releases(T0 + 2)
    (outcome,) = outcomes(releases)
    assert (outcome.gang_id, outcome.scheduled, outcome.reason, outcome.members) == (
        "default/pg",
        False,
        reason,
        members,
    )
    assert outcome.message.startswith(message_starts), outcome.message
    assert outcome.event_reason == ("GangTimedOut" if reason == "WaitTimeout" else "GangReleased")


def test_a_group_mate_released_by_a_timeout_timed_out_too() -> None:
    # a (wait 10 s) and b in one Strict group: a's member expires, the cascade releases b's: both timed out.
    cache = GangCache(ARGS)
    group = ["default/a", "default/b"]
    cache.upsert_pod(member("a0", annotations=annotated("a", 1, groups=group, wait="10s")))
    cache.upsert_pod(member("b0", annotations=annotated("b", 2, groups=group, wait="60s")))
    cache.upsert_pod(member("b1", annotations=annotated("b", 2, groups=group, wait="60s")))
    cache.hold("default/a0", "ua", "n1", T0)
    cache.hold("default/b0", "ub", "n1", T0)
    found = outcomes(cache.take_releases(T0 + 10))
    assert [(o.gang_id, o.reason) for o in found] == [("default/a", "WaitTimeout"), ("default/b", "WaitTimeout")]


def test_renewals_and_superseded_requests_are_no_outcome() -> None:
    cache = strict_pair(wait=3600)
    cache.hold("default/p0", "u0-again", "n2", T0 + 5)  # a newer request: the old one is superseded
    longest = ARGS.longest_hold_seconds
    releases = cache.take_releases(T0 + 5 + longest)  # both answered before the binder timeout: renewals
    assert sorted(r.cause for r in releases) == ["answer-deadline", "answer-deadline", "superseded"]
    assert outcomes(releases) == []


@pytest.mark.parametrize(
    ("stored", "scheduled", "expected"),
    [
        # No condition yet, a release: added (other conditions kept).
        ([{"type": "Other", "status": "True"}], False, [{"type": "Other", "status": "True"}, "released"]),
        # The same release again: nothing to write.
        (["released"], False, None),
        # Bound at the first attempt (no release to report): nothing to write.
        ([], True, None),
        # Bound after a release: True, Bound.
        (["released"], True, ["bound"]),
    ],
)
def test_gang_condition(stored: list[object], scheduled: bool, expected: list[object] | None) -> None:
    released = {
        "type": CONDITION_TYPE,
        "status": "False",
        "reason": "WaitTimeout",
        "message": "gang default/pg: default/p0 waited 30s, the gang's wait time, without its GangGroup completing",
        "lastTransitionTime": NOW,
    }
    bound = {
        "type": CONDITION_TYPE,
        "status": "True",
        "reason": "Bound",
        "message": "gang default/pg: 3 held members bound together",
        "lastTransitionTime": NOW,
    }
    named = {"released": released, "bound": bound}
    cache = strict_pair()
    (timeout,) = outcomes(cache.take_releases(T0 + 30))
    outcome = bound_outcome("default/pg", 3) if scheduled else timeout
    conditions = [named[c] if isinstance(c, str) else c for c in stored]
    got = gang_condition(outcome, conditions, NOW)  # type: ignore[arg-type]
    assert got == (None if expected is None else [named[c] if isinstance(c, str) else c for c in expected])
