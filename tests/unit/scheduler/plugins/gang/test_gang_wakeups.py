"""Members refused at quorum are parked; once their GangGroup passes they are handed out to be woken.

kube-scheduler does not retry a pod an extender refused until a cluster event (an assigned pod or a node
changes) or its 5-minute flush, and a new pending member is no such event. So the extender must wake the
parked members itself: ``take_wakeups`` says whom, once, when their group passes admission.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import QUORUM_REFUSED, GangCache, Wakeup
from koordpy_testkit.gangs import T0, annotated, member, podgroup

ARGS = CoschedulingArgs.model_validate({})
SIGS = "pod-group.scheduling.sigs.k8s.io"


def refused(cache: GangCache, *names: str, **kwargs: object) -> None:
    """Each pod reaches /filter (seen only in the request) and is refused."""
    for name in names:
        admission = cache.admit_request(member(name, **kwargs))  # type: ignore[arg-type]
        assert not admission.ok, admission


def test_the_late_member_wakes_the_parked_ones() -> None:
    """The reproduction: PodGroup minMember 2; member a reaches /filter alone and is refused; b arrives
    (by the watch, or its own /filter): a must be woken, exactly once."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 2))
    refused(cache, "a", labels={SIGS: "pg"})
    assert cache.parked("default/pg") == ["default/a"]
    assert cache.take_wakeups() == []  # 1 of 2: nobody to wake
    cache.upsert_pod(member("b", labels={SIGS: "pg"}))
    assert cache.take_wakeups() == [Wakeup("default/a", "default/pg", "gang default/pg: 2 of 2 members exist")]
    assert cache.take_wakeups() == [] and cache.parked() == []


@pytest.mark.parametrize(
    ("event", "woken"),
    [
        # Two more members arrive: 4 of 4 → both parked members, in refusal order.
        ("two more members", ["default/p1", "default/p0"]),
        # The PodGroup is edited down to minMember 2: 2 of 2.
        ("minMember lowered", ["default/p1", "default/p0"]),
        # A third member shows up bound: 3 of 4 exist, but the group is satisfied once (once-satisfied).
        ("member bound", ["default/p1", "default/p0"]),
        # One more pending member only: 3 of 4, nobody passes.
        ("one more member", []),
        # A member is deleted: 1 of 4, nobody passes; the deleted one is not parked any more.
        ("member deleted", []),
        # A PodGroup of another gang changes: this gang is not even evaluated.
        ("unrelated PodGroup", []),
    ],
)
def test_what_wakes_parked_members(event: str, woken: list[str]) -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 4))
    refused(cache, "p1", "p0", labels={SIGS: "pg"})
    if event == "two more members":
        cache.upsert_pod(member("p2", labels={SIGS: "pg"}))
        assert cache.take_wakeups() == []  # 3 of 4
        cache.upsert_pod(member("p3", labels={SIGS: "pg"}))
    elif event == "minMember lowered":
        cache.upsert_podgroup(podgroup("pg", 2))
    elif event == "member bound":
        cache.upsert_pod(member("p2", labels={SIGS: "pg"}, node="n1"))
    elif event == "one more member":
        cache.upsert_pod(member("p2", labels={SIGS: "pg"}))
    elif event == "member deleted":
        cache.delete_pod("default", "p1")
        assert cache.parked() == ["default/p0"]
    else:
        cache.upsert_podgroup(podgroup("other", 1))
    assert [w.pod for w in cache.take_wakeups()] == woken


def test_a_podgroup_created_after_its_members_wakes_them() -> None:
    cache = GangCache(ARGS)
    refused(cache, "a", "b", labels={SIGS: "pg"})
    assert cache.admit("default/a").reason == (
        QUORUM_REFUSED + "gang default/pg: PodGroup default/pg (scheduling.sigs.k8s.io) not found"
    )
    cache.upsert_podgroup(podgroup("pg", 2))
    assert [w.pod for w in cache.take_wakeups()] == ["default/a", "default/b"]


def test_a_group_mate_reaching_quorum_wakes_the_other_gang() -> None:
    # a (min 1) and b (min 2) in one group. a's member is refused because b is short; b's second member
    # arrives: both gangs' parked members are woken.
    cache = GangCache(ARGS)
    group = ["default/a", "default/b"]
    refused(cache, "a0", annotations=annotated("a", 1, groups=group))
    refused(cache, "b0", annotations=annotated("b", 2, groups=group))
    assert cache.take_wakeups() == []
    cache.upsert_pod(member("b1", annotations=annotated("b", 2, groups=group)))
    assert [(w.pod, w.gang_id) for w in cache.take_wakeups()] == [
        ("default/a0", "default/a"),
        ("default/b0", "default/b"),
    ]


def test_a_parked_member_that_passes_its_own_filter_is_not_woken() -> None:
    # kube-scheduler retried it on its own (some cluster event) before the quorum wake-up was taken.
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 2))
    refused(cache, "a", labels={SIGS: "pg"})
    cache.upsert_pod(member("b", labels={SIGS: "pg"}))
    assert cache.admit_request(member("a", labels={SIGS: "pg"})).ok
    assert cache.take_wakeups() == []


def test_held_and_bound_members_are_not_parked() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 3))
    refused(cache, "a", "b", labels={SIGS: "pg"})
    cache.hold("default/a", "ua", "n1", T0)  # a got through some other way (a retry raced the wake-up)
    cache.upsert_pod(member("b", labels={SIGS: "pg"}, node="n2"))
    assert cache.parked() == []


def test_one_evaluation_per_gang_whatever_its_size() -> None:
    """10,000 members refused one by one, then the last arrives: one wake-up each, in refusal order, and
    the gang's admission is computed once for all of them (counted through a wrapper)."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("big", 10_001))
    names = [f"w{i:05d}" for i in range(10_000)]
    for name in names:
        cache.admit_request(member(name, labels={SIGS: "big"}))
    calls = 0
    admit_gang = cache._admit_gang

    def counting(gang_id: str):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return admit_gang(gang_id)

    cache._admit_gang = counting  # type: ignore[method-assign]
    cache.upsert_pod(member("last", labels={SIGS: "big"}))
    woken = cache.take_wakeups()
    assert [w.pod for w in woken] == [f"default/{n}" for n in names]
    assert calls == 1


def test_a_member_the_watch_has_not_shown_is_counted_from_the_request() -> None:
    """The race on a real cluster: kube-scheduler filters a new pod before the extender's watch shows it.
    Membership and the count come from the request's pod, so the quorum test sees it."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 2))
    # Only the request knows a: refused (1 of 2), and a is a member now.
    admission = cache.admit_request(member("a", labels={SIGS: "pg"}))
    assert (admission.ok, admission.detail) == (False, "gang default/pg: 1 of 2 members exist")
    assert cache.gang_of("default/a") == "default/pg"
    # b's request arrives before the watch showed b: 2 of 2, admitted.
    admission = cache.admit_request(member("b", labels={SIGS: "pg"}))
    assert (admission.ok, admission.detail) == (True, "gang default/pg: 2 of 2 members exist")
    # A bind for a pod only a request showed is a gang member too: it is held, not bound at once.
    hold, permit = cache.hold("default/b", "ub", "n1", T0)
    assert hold is not None and permit.verdict == "wait"


def test_the_watch_moves_a_member_the_request_placed_in_another_gang() -> None:
    cache = GangCache(ARGS)
    cache.admit_request(member("a", labels={SIGS: "pg"}))
    assert cache.gang_of("default/a") == "default/pg"
    cache.upsert_pod(member("a", labels={SIGS: "other"}))  # the watch has the newer labels
    assert cache.gang_of("default/a") == "default/other"
    assert cache.parked() == []
    # A request's copy that says "no gang" takes the pod out of its gang too.
    cache.observe(member("a"))
    assert cache.gang_of("default/a") is None
