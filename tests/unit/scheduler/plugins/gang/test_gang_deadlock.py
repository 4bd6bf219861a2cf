"""NonStrict deadlock: the proposal's 3/3/4 example and the cases that are *not* deadlocks.

Capacity 10 (one node, 10 CPUs, every member requests 1 CPU). Three NonStrict gangs of min 5 hold
3, 3 and 4 members: 3 + 3 + 4 = 10 CPUs held, 0 free. Pending: 2, 2 and 1 members, none fits. Releasing
any one gang frees ≥ 3 CPUs, enough for another gang's 2 (or 1) pending members → a deadlock, and
releasing helps.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import YIELD_REFUSED, GangCache, WaitingGroup, find_deadlock, is_admission_refusal
from koordpy_testkit.gangs import T0, annotated, member

ARGS = CoschedulingArgs.model_validate({})
GI = 1024**3


def three_gangs(priorities: dict[str, int], created: dict[str, float]) -> GangCache:
    cache = GangCache(ARGS)
    for gang, held in (("a", 3), ("b", 3), ("c", 4)):
        for i in range(5):
            cache.upsert_pod(
                member(
                    f"{gang}{i}",
                    annotations=annotated(gang, 5, mode="NonStrict"),
                    priority=priorities.get(gang),
                    created=created[gang] + i,
                )
            )
        for i in range(held):
            cache.hold(f"default/{gang}{i}", f"u{gang}{i}", "n1", T0)
    return cache


CREATED = {"a": T0 - 300, "b": T0 - 200, "c": T0 - 100}


@pytest.mark.parametrize(
    ("priorities", "victim"),
    [
        # Same priority: the youngest gang (c, created last) is released — its 4 holds.
        ({}, "default/c"),
        # c has the highest priority; a and b tie at 0 → the younger of them, b.
        ({"c": 100}, "default/b"),
        # a has the lowest priority → a, although it is the oldest.
        ({"a": -5, "b": 10, "c": 10}, "default/a"),
    ],
)
def test_three_three_four(priorities: dict[str, int], victim: str) -> None:
    cache = three_gangs(priorities, CREATED)
    free = {"n1": {"cpu": 0, "memory": 100 * GI, "pods": 100}}
    found = cache.resolve_deadlock(free, T0 + 10)
    assert found is not None
    assert found.groups == ("default/a", "default/b", "default/c")
    assert found.victim == victim
    held = {"default/a": 3, "default/b": 3, "default/c": 4}[victim]
    assert len(found.released) == held
    releases = cache.take_releases(T0 + 10)
    assert {r.cause for r in releases} == {"deadlock"} and len(releases) == held
    assert releases[0].reason == found.reason
    assert f"releasing the {held} held member(s) of {victim}" in found.reason


def test_not_a_deadlock_when_a_pending_member_fits() -> None:
    cache = three_gangs({}, CREATED)
    # One CPU free: c's last member fits, c can complete on its own.
    assert cache.resolve_deadlock({"n1": {"cpu": 1000, "memory": 100 * GI}}, T0) is None
    assert cache.take_releases(T0) == []


def test_not_a_deadlock_when_releasing_helps_nobody() -> None:
    # Pending members need 20 CPUs each: no release of 3 or 4 CPUs lets anyone fit → merely waiting
    # for capacity; the wait times decide.
    groups = [
        WaitingGroup("default/a", 0, T0, ("default/a0",), (("n1", {"cpu": 3000}),), ({"cpu": 20000},)),
        WaitingGroup("default/b", 0, T0, ("default/b0",), (("n1", {"cpu": 4000}),), ({"cpu": 20000},)),
    ]
    assert find_deadlock(groups, {"n1": {"cpu": 0}}) is None


def test_a_single_waiting_group_is_never_a_deadlock() -> None:
    groups = [WaitingGroup("default/a", 0, T0, ("default/a0",), (("n1", {"cpu": 3000}),), ({"cpu": 1000},))]
    assert find_deadlock(groups, {"n1": {"cpu": 0}}) is None


def test_pod_slots_count() -> None:
    # CPU is free but the node has no pod slot left: nothing fits; releasing a's hold frees a slot.
    groups = [
        WaitingGroup("default/a", 0, T0, ("default/a0",), (("n1", {"cpu": 1000}),), ({"cpu": 1000},)),
        WaitingGroup("default/b", 0, T0 + 1, ("default/b0",), (("n1", {"cpu": 1000}),), ({"cpu": 1000},)),
    ]
    found = find_deadlock(groups, {"n1": {"cpu": 5000, "pods": 0}})
    assert found is not None and found.victim == "default/b"  # same priority, b is younger


def test_allowed_groups_are_not_in_a_deadlock() -> None:
    cache = GangCache(ARGS)
    for i in range(2):
        cache.upsert_pod(member(f"a{i}", annotations=annotated("a", 1, mode="NonStrict")))
        cache.upsert_pod(member(f"b{i}", annotations=annotated("b", 5, mode="NonStrict")))
    cache.hold("default/a0", "ua0", "n1", T0)  # a is satisfied (1 of 1): verdict allow, not waiting
    cache.hold("default/b0", "ub0", "n1", T0)
    assert cache.resolve_deadlock({"n1": {"cpu": 0}}, T0) is None


def two_held(failed: bool) -> list[WaitingGroup]:
    """Groups x and y each hold one 5-cpu member, x on n0 and y on n1 (8 cpu each: 3 free); each has one
    5-cpu member pending, which kube-scheduler reported unschedulable (``failed``) or has not tried."""
    return [
        WaitingGroup(gid, 0, created, (f"{gid}-0",), ((node, {"cpu": 5}),), ({"cpu": 5},), (failed,))
        for gid, created, node in (("ns/x", 1.0, "n0"), ("ns/y", 2.0, "n1"))
    ]


@pytest.mark.parametrize(
    ("failed", "elsewhere", "victim"),
    [
        # No other node: 3 free on each held node < 5, a deadlock either way; y is younger.
        (False, None, "ns/y"),
        (True, None, "ns/y"),
        # A node with 8 free that the pending members may not use (kube-scheduler said so): 8 ≥ 5 by
        # requests, but both were found unschedulable, so neither fits; releasing y frees n1 (3 + 5 = 8 ≥ 5).
        (True, 8, "ns/y"),
        # The same node, members not tried since: they may fit it, the groups are only waiting.
        (False, 8, None),
        # A node with 4 free: too small by requests, a deadlock with or without kube-scheduler's verdict.
        (False, 4, "ns/y"),
    ],
)
def test_members_kube_scheduler_found_unschedulable_fit_nowhere(
    failed: bool, elsewhere: int | None, victim: str | None
) -> None:
    free = {"n0": {"cpu": 3}, "n1": {"cpu": 3}}
    if elsewhere is not None:
        free["other"] = {"cpu": elsewhere}
    found = find_deadlock(two_held(failed), free)
    assert (found.victim if found else None) == victim


def test_the_cache_passes_kube_schedulers_verdict_on_pending_members() -> None:
    """Gangs x and y (NonStrict, min 2, 5 cpu per member) hold one member each on n0 and n1 (3 cpu left on
    each); node "other" has 8 cpu free. Until kube-scheduler reports x1 and y1 unschedulable they may fit
    "other": no deadlock. Once both are reported, the younger gang y is released."""
    cache = two_gangs_deadlocked()
    # free after the holds: 8 - 5 = 3 cpu on n0 and n1; 8 on "other"
    free = {
        node: {"cpu": cpu, "memory": 100 * GI, "pods": 100}
        for node, cpu in (("n0", 3000), ("n1", 3000), ("other", 8000))
    }
    assert cache.resolve_deadlock(free, T0 + 1) is None
    cache.scheduling_failed("default/x1", "0/3 nodes are available: 3 node(s) didn't match node selector.")
    assert cache.resolve_deadlock(free, T0 + 1) is None  # y1 not tried since
    cache.scheduling_failed("default/y1", "0/3 nodes are available: 3 node(s) didn't match node selector.")
    found = cache.resolve_deadlock(free, T0 + 1)
    assert found is not None and found.victim == "default/y"
    assert [h.pod for h in found.released] == ["default/y0"]


# ---- the victim yields ---------------------------------------------------------------------------------


def two_gangs_deadlocked(yield_seconds: float = 30.0) -> GangCache:
    """Gangs x and y (NonStrict, min 2, 5 cpu per member) hold one member each, x0 on n0 and y0 on n1
    (8 cpu each: 8 − 5 = 3 free < 5); x1 and y1 pending. y is younger: resolution releases y0."""
    cache = GangCache(CoschedulingArgs.model_validate({"deadlockYieldSeconds": yield_seconds}))
    for gang, created in (("x", T0 - 20), ("y", T0 - 10)):
        for i in range(2):
            annotations = annotated(gang, 2, mode="NonStrict")
            cache.upsert_pod(member(f"{gang}{i}", annotations=annotations, cpu="5", created=created + i))
    cache.hold("default/x0", "ux0", "n0", T0)
    cache.hold("default/y0", "uy0", "n1", T0)
    return cache


FREE = {node: {"cpu": 3000, "memory": 100 * GI, "pods": 100} for node in ("n0", "n1")}


def test_the_victim_yields_to_the_group_its_release_helps() -> None:
    cache = two_gangs_deadlocked()
    found = cache.resolve_deadlock(FREE, T0 + 10)
    assert found is not None and (found.victim, found.helped) == ("default/y", ("default/x",))
    cache.take_releases(T0 + 10)
    assert cache.yielding() == {"default/y": ("default/x",)}
    for pod in ("default/y0", "default/y1"):
        refusal = cache.admit(pod)
        assert not refusal.ok and refusal.reason.startswith(YIELD_REFUSED + "gang group default/y ")
        assert "yields the room to default/x until they bind or give up (at most 30s)" in refusal.reason
        assert is_admission_refusal(refusal.reason)
    assert cache.admit("default/x1").ok  # the helped group is not refused
    # The yield ends at most 30 s after the release: the timer is armed for it.
    assert cache.next_deadline() == T0 + 40


def test_the_yield_ends_when_the_helped_group_binds_and_wakes_the_parked_members() -> None:
    cache = two_gangs_deadlocked()
    cache.resolve_deadlock(FREE, T0 + 10)
    cache.take_releases(T0 + 10)
    y1 = member("y1", annotations=annotated("y", 2, mode="NonStrict"), cpu="5", created=T0 - 9)
    assert not cache.admit_request(y1).ok  # refused while yielding: parked
    assert cache.take_wakeups() == []
    cache.hold("default/x1", "ux1", "n1", T0 + 11)  # x1 takes the freed node: x is whole
    [batch] = cache.take_ready(T0 + 11)
    assert batch.group_id == "default/x"
    cache.take_releases(T0 + 11)
    assert cache.yielding() == {"default/y": ("default/x",)}  # x's members are binding, not bound yet
    for hold in batch.holds:
        cache.bound(hold.pod, hold.node)
    cache.take_releases(T0 + 12)
    assert cache.yielding() == {}
    assert [w.pod for w in cache.take_wakeups()] == ["default/y1"]
    assert cache.admit("default/y1").ok


@pytest.mark.parametrize(
    ("at", "still_yielding"),
    [
        # 10 s (the release) + 30 s = 40 s: x still holds x0 and has not bound; the yield lasts until then.
        (39.9, True),
        (40.0, False),
    ],
)
def test_the_yield_ends_at_most_deadlock_yield_seconds_after_the_release(at: float, still_yielding: bool) -> None:
    cache = two_gangs_deadlocked()
    cache.resolve_deadlock(FREE, T0 + 10)
    cache.take_releases(T0 + 10)
    cache.take_releases(T0 + at)
    assert (cache.yielding() != {}) is still_yielding
    assert cache.admit("default/y1").ok is not still_yielding


def test_the_yield_ends_when_the_helped_group_gives_up() -> None:
    """x0's wait time (the default 600 s) runs out while the yield's 1 h bound has not: x holds nothing
    any more, so y's members are admitted again."""
    cache = two_gangs_deadlocked(yield_seconds=3600)
    cache.resolve_deadlock(FREE, T0 + 10)
    cache.take_releases(T0 + 10)
    released = cache.take_releases(T0 + 600)
    assert [(r.hold.pod, r.cause) for r in released] == [("default/x0", "expired")]
    assert cache.take_releases(T0 + 600) == [] and cache.yielding() == {}
    assert cache.admit("default/y1").ok


def test_no_yield_when_deadlock_yield_seconds_is_zero() -> None:
    cache = two_gangs_deadlocked(yield_seconds=0)
    assert cache.resolve_deadlock(FREE, T0 + 10) is not None
    assert cache.yielding() == {} and cache.admit("default/y1").ok
