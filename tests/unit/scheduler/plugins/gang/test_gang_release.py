"""Release decisions: wait expiry, Strict release across the GangGroup, answer deadlines, abandonment.

Reference §2.5: a Strict gang that is not (once-satisfied ∧ satisfied) releases every waiting member of
the whole GangGroup when one member fails or its wait ends; NonStrict releases only what ended.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache
from koordpy_testkit.gangs import T0, annotated, member

ARGS = CoschedulingArgs.model_validate({})


def gang(
    mode: str, *, size: int = 4, min_available: int = 4, wait: str = "60s", args: CoschedulingArgs = ARGS
) -> GangCache:
    cache = GangCache(args)
    for i in range(size):
        cache.upsert_pod(member(f"p{i}", annotations=annotated("g", min_available, mode=mode, wait=wait)))
    return cache


@pytest.mark.parametrize(
    ("mode", "released"),
    [
        # p0 held at T0, p1 at T0+30, wait 60 s. At T0+60 p0's wait ends.
        # Strict: p0 expires and the cascade releases p1 as well (whole group).
        ("Strict", [("default/p0", "expired"), ("default/p1", "strict")]),
        # NonStrict: only p0; p1 keeps waiting until T0+90.
        ("NonStrict", [("default/p0", "expired")]),
    ],
)
def test_wait_expiry(mode: str, released: list[tuple[str, str]]) -> None:
    cache = gang(mode)
    cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0 + 30)
    assert cache.next_deadline() == T0 + 60
    assert cache.take_releases(T0 + 59.9) == []
    got = [(r.hold.pod, r.cause) for r in cache.take_releases(T0 + 60)]
    assert got == released
    if mode == "NonStrict":
        assert cache.next_deadline() == T0 + 90
    else:
        assert cache.next_deadline() is None


def test_expired_reason_names_the_wait_time() -> None:
    cache = gang("NonStrict")
    cache.hold("default/p0", "u0", "n1", T0)
    (release,) = cache.take_releases(T0 + 60)
    assert (
        release.reason
        == "gang default/g: default/p0 waited 60s, the gang's wait time, without its GangGroup completing"
    )


def test_strict_scheduling_failure_releases_the_whole_group_and_rejects_until_retried() -> None:
    cache = GangCache(ARGS)
    group = ["default/a", "default/b"]
    for name in ("a0", "a1"):
        cache.upsert_pod(member(name, annotations=annotated("a", 2, mode="Strict", groups=group)))
    for name in ("b0", "b1"):
        cache.upsert_pod(member(name, annotations=annotated("b", 2, mode="NonStrict", groups=group)))
    cache.hold("default/a0", "ua0", "n1", T0)
    cache.hold("default/b0", "ub0", "n1", T0)
    cache.hold("default/b1", "ub1", "n1", T0)
    # a1 (Strict gang a) fails to schedule: every held member of the *group* goes, b's too.
    cache.scheduling_failed("default/a1", "0/3 nodes are available")
    releases = cache.take_releases(T0 + 1)
    assert [(r.hold.pod, r.cause) for r in releases] == [
        ("default/a0", "strict"),
        ("default/b0", "strict"),
        ("default/b1", "strict"),
    ]
    assert releases[0].reason == (
        "gang default/a (Strict): member default/a1 failed scheduling (0/3 nodes are available)"
    )
    # While a1's failure is outstanding, the group's permit is reject and new holds are answered at once.
    assert cache.permit("default/b", T0 + 2).verdict == "reject"
    _, permit = cache.hold("default/b0", "ub0", "n1", T0 + 2)
    assert permit.verdict == "reject"
    (rejected,) = cache.take_releases(T0 + 2)
    assert (rejected.hold.pod, rejected.cause, rejected.reason) == (
        "default/b0",
        "rejected",
        "gang default/a (Strict): member default/a1 failed scheduling (0/3 nodes are available)",
    )
    # a1 is tried again and held: its failure is no longer outstanding, the group waits normally.
    _, permit = cache.hold("default/a1", "ua1", "n2", T0 + 3)
    assert permit.verdict == "wait"


def test_nonstrict_scheduling_failure_keeps_holds() -> None:
    cache = gang("NonStrict")
    cache.hold("default/p0", "u0", "n1", T0)
    cache.scheduling_failed("default/p3", "Insufficient cpu")
    assert cache.take_releases(T0 + 1) == []
    assert cache.permit("default/g", T0 + 1).verdict == "wait"


def test_strict_does_not_release_once_satisfied_and_satisfied() -> None:
    cache = gang("Strict")
    cache.upsert_pod(member("p0", annotations=annotated("g", 4, mode="Strict"), node="n1"))  # bound: satisfied once
    cache.hold("default/p1", "u1", "n1", T0)
    cache.scheduling_failed("default/p2", "Insufficient cpu")
    # once-satisfied ∧ satisfied → the Strict rule does not apply: p1 is kept (and allowed).
    assert cache.take_releases(T0) == []
    assert cache.permit("default/g", T0).verdict == "allow"


@pytest.mark.parametrize("event", ["deleted", "bind-failed", "abandoned"])
def test_other_strict_triggers_release_the_group(event: str) -> None:
    cache = gang("Strict")
    hold0, _ = cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0)
    assert hold0 is not None
    if event == "deleted":
        cache.delete_pod("default", "p0")
        expected = [("default/p0", "deleted"), ("default/p1", "strict")]
    elif event == "bind-failed":
        cache.bind_failed("default/p0", "etcd timeout")
        expected = [("default/p1", "strict")]  # the caller answers p0's own request itself
    else:
        assert cache.abandon("default/p0", hold0.hold_id) is True
        expected = [("default/p1", "strict")]  # nobody is left to answer p0's request
    assert [(r.hold.pod, r.cause) for r in cache.take_releases(T0 + 1)] == expected
    assert cache.holds() == []


def test_abandoned_request_is_never_handed_out() -> None:
    cache = gang("NonStrict", min_available=2)
    hold0, _ = cache.hold("default/p0", "u0", "n1", T0)
    assert hold0 is not None
    cache.abandon("default/p0", hold0.hold_id)
    assert not cache.is_current(hold0)
    # p1's hold alone does not complete the gang (p0 no longer waits): nothing to bind.
    cache.hold("default/p1", "u1", "n1", T0 + 1)
    assert cache.take_ready(T0 + 1) == []


def test_abandon_after_hand_out_is_reported() -> None:
    cache = gang("NonStrict", min_available=1)
    hold0, _ = cache.hold("default/p0", "u0", "n1", T0)
    assert hold0 is not None
    (batch,) = cache.take_ready(T0)
    # Too late to drop it silently: False tells the caller to check is_current before POSTing.
    assert cache.abandon("default/p0", hold0.hold_id) is False
    assert not cache.is_current(batch.holds[0])


def test_answer_deadline_renews_and_keeps_the_wait_clock() -> None:
    # Binder timeout 100 s, margin 10 s → a request is answered after 90 s; the gang waits 1 h.
    args = CoschedulingArgs.model_validate({"binderHttpTimeoutSeconds": 100, "binderAnswerMarginSeconds": 10})
    cache = gang("Strict", wait="1h", args=args)
    cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0)
    assert cache.next_deadline() == T0 + 90
    releases = cache.take_releases(T0 + 90)
    # Both answered, neither cascades (renewal is not a failure), both keep their wait clocks.
    assert [(r.hold.pod, r.cause) for r in releases] == [
        ("default/p0", "answer-deadline"),
        ("default/p1", "answer-deadline"),
    ]
    again, permit = cache.hold("default/p0", "u0", "n2", T0 + 100)
    assert again is not None and permit.verdict == "wait"
    # The wait started at T0 (first hold), not T0+100: 3600 s from T0.
    assert (again.wait_started_at, again.wait_deadline, again.answer_deadline) == (T0, T0 + 3600, T0 + 190)


def test_wait_times_longer_than_koordinators_cap_are_kept() -> None:
    # Koordinator issue #1919: waits above ~1500 s are not honoured there. Here 2 h is 7200 s.
    cache = gang("Strict", wait="2h")
    hold, _ = cache.hold("default/p0", "u0", "n1", T0)
    assert hold is not None and hold.wait_deadline == T0 + 7200


def test_newer_request_supersedes_without_cascade() -> None:
    cache = gang("Strict")
    first, _ = cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0)
    second, _ = cache.hold("default/p0", "u0", "n2", T0 + 5)
    assert first is not None and second is not None and second.hold_id != first.hold_id
    assert [(r.hold.hold_id, r.cause) for r in cache.take_releases(T0 + 5)] == [(first.hold_id, "superseded")]
    assert [h.pod for h in cache.holds()] == ["default/p0", "default/p1"]


def test_member_bound_elsewhere_answers_its_hold() -> None:
    cache = gang("Strict")
    cache.hold("default/p0", "u0", "n1", T0)
    cache.upsert_pod(member("p0", annotations=annotated("g", 4, mode="Strict"), node="n9"))
    (release,) = cache.take_releases(T0)
    assert (release.cause, release.reason) == ("superseded", "default/p0 is already bound to n9")


def test_newer_request_for_a_handed_out_hold_drops_it_without_a_second_answer() -> None:
    cache = gang("NonStrict", min_available=1)
    first, _ = cache.hold("default/p0", "u0", "n1", T0)
    assert first is not None
    (batch,) = cache.take_ready(T0)
    # kube-scheduler gave up on the first request and sent a new one while the binding was being made:
    # the first is not answered again (take_ready answered it), but it is no longer current.
    cache.hold("default/p0", "u0", "n2", T0 + 1)
    assert cache.take_releases(T0 + 1) == []
    assert not cache.is_current(batch.holds[0])
