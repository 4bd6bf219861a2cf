"""NonStrict deadlock: the proposal's 3/3/4 example and the cases that are *not* deadlocks.

Capacity 10 (one node, 10 CPUs, every member requests 1 CPU). Three NonStrict gangs of min 5 hold
3, 3 and 4 members: 3 + 3 + 4 = 10 CPUs held, 0 free. Pending: 2, 2 and 1 members, none fits. Releasing
any one gang frees ≥ 3 CPUs, enough for another gang's 2 (or 1) pending members → a deadlock, and
releasing helps.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache, WaitingGroup, find_deadlock
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
