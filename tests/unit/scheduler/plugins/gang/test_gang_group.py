"""GangGroup all-or-nothing: a group binds only when every gang of it is valid, and then binds together.

A GangGroup is the set of gangs that declare exactly the same group (each gang's ``groups`` annotation,
the gang itself always included). By default only gangs of one namespace: entries naming another
namespace are left out; with ``crossNamespaceGroups`` they count when every gang declares the same group.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import QUORUM_REFUSED, GangCache
from koordpy_testkit.gangs import T0, annotated, member, podgroup

ARGS = CoschedulingArgs.model_validate({})
CROSS = CoschedulingArgs.model_validate({"crossNamespaceGroups": True})
GROUP = ["default/a", "default/b"]


def grouped() -> GangCache:
    """Gangs default/a (min 2) and default/b (min 2) in one GangGroup, two members each."""
    cache = GangCache(ARGS)
    for i in range(2):
        cache.upsert_pod(member(f"a{i}", annotations=annotated("a", 2, groups=GROUP)))
        cache.upsert_pod(member(f"b{i}", annotations=annotated("b", 2, groups=GROUP)))
    return cache


@pytest.mark.parametrize(
    ("held", "verdict", "reason"),
    [
        # a complete (2 of 2), b has 1 of 2: the whole group waits, naming b.
        (
            ["default/a0", "default/a1", "default/b0"],
            "wait",
            "gang default/b: 1 of 2 members waiting at the bind barrier",
        ),
        # b complete, a has 1: waits naming a (first by id).
        (
            ["default/a0", "default/b0", "default/b1"],
            "wait",
            "gang default/a: 1 of 2 members waiting at the bind barrier",
        ),
        # Both 1 of 2: the first gang by id is named.
        (["default/a0", "default/b0"], "wait", "gang default/a: 1 of 2 members waiting at the bind barrier"),
        # Both complete: allowed, for either gang's permit.
        (
            ["default/a0", "default/a1", "default/b0", "default/b1"],
            "allow",
            "gang group default/a,default/b: every gang is satisfied",
        ),
    ],
)
def test_group_verdict_table(held: list[str], verdict: str, reason: str) -> None:
    cache = grouped()
    for pod in held:
        cache.hold(pod, pod, "n1", T0)
    for gang in GROUP:
        permit = cache.permit(gang, T0)
        assert (permit.verdict, permit.reason) == (verdict, reason)


def test_the_last_hold_releases_all_four_in_one_batch() -> None:
    cache = grouped()
    for pod in ("default/a0", "default/a1", "default/b0"):
        cache.hold(pod, pod, "n1", T0)
        assert cache.take_ready(T0) == []
    cache.hold("default/b1", "default/b1", "n2", T0 + 1)
    (batch,) = cache.take_ready(T0 + 1)
    assert batch.group_id == "default/a,default/b"
    assert [h.pod for h in batch.holds] == ["default/a0", "default/a1", "default/b0", "default/b1"]


def test_group_naming_a_podgroup_gang_mixes_both_ways() -> None:
    # A PodGroup-way gang can list an annotation-way gang in its groups annotation, and vice versa.
    cache = GangCache(ARGS)
    groups = '["default/pg", "default/ann"]'
    cache.upsert_podgroup(podgroup("pg", 1, annotations={"gang.scheduling.koordinator.sh/groups": groups}))
    cache.upsert_pod(member("p", labels={"pod-group.scheduling.sigs.k8s.io": "pg"}))
    cache.upsert_pod(member("q", annotations=annotated("ann", 1, groups=["default/pg", "default/ann"])))
    cache.hold("default/p", "p", "n1", T0)
    assert cache.permit("default/pg", T0).reason == "gang default/ann: 0 of 1 members waiting at the bind barrier"
    cache.hold("default/q", "q", "n1", T0)
    (batch,) = cache.take_ready(T0)
    assert [h.pod for h in batch.holds] == ["default/p", "default/q"]


def test_a_group_that_omits_the_gang_itself_still_holds_it() -> None:
    # a lists only b; koordpy adds a itself: a's group is [a, b]. b declares [a, b] too: one group.
    cache = GangCache(ARGS)
    cache.upsert_pod(member("a0", annotations=annotated("a", 1, groups=["default/b"])))
    cache.upsert_pod(member("b0", annotations=annotated("b", 1, groups=["default/a", "default/b"])))
    assert cache.view("default/a").spec.group == ("default/a", "default/b")  # type: ignore[union-attr]
    cache.hold("default/a0", "ua0", "n1", T0)
    assert cache.take_ready(T0) == []  # b: 0 of 1 waiting
    cache.hold("default/b0", "ub0", "n1", T0)
    (batch,) = cache.take_ready(T0)
    assert (batch.group_id, [h.pod for h in batch.holds]) == ("default/a,default/b", ["default/a0", "default/b0"])


def test_a_gang_declaring_another_group_keeps_the_group_waiting_and_binds_alone() -> None:
    # a declares [a, b]; b declares only itself. a's group waits for b to declare the same group, and b
    # (a group of one) binds on its own: a's members are never counted, held or released with b.
    cache = GangCache(ARGS)
    cache.upsert_pod(member("a0", annotations=annotated("a", 1, groups=["default/b"])))
    cache.upsert_pod(member("b0", annotations=annotated("b", 1)))
    disagreement = "gang default/b declares GangGroup [default/b], not [default/a,default/b]"
    assert cache.admit("default/a0").reason == QUORUM_REFUSED + disagreement
    cache.hold("default/a0", "ua0", "n1", T0)
    cache.hold("default/b0", "ub0", "n1", T0)
    assert cache.permit("default/a", T0).reason == disagreement
    (batch,) = cache.take_ready(T0)
    assert (batch.group_id, [h.pod for h in batch.holds]) == ("default/b", ["default/b0"])
    assert [h.pod for h in cache.holds()] == ["default/a0", "default/b0"]  # a0 still held, b0 being bound


def victim_and_evil(args: CoschedulingArgs) -> GangCache:
    """The cross-namespace reproduction: victim/train (2 members) and victim/ps (1 of its 2 members) in
    one GangGroup; a pod in namespace evil whose gang e (min 1) names the victim's gangs in its groups."""
    cache = GangCache(args)
    victim = ["victim/ps", "victim/train"]
    for name in ("train-0", "train-1"):
        cache.upsert_pod(member(name, namespace="victim", annotations=annotated("train", 2, groups=victim)))
    cache.upsert_pod(member("ps-0", namespace="victim", annotations=annotated("ps", 2, groups=victim)))
    cache.upsert_pod(member("e-0", namespace="evil", annotations=annotated("e", 1, groups=victim)))
    return cache


@pytest.mark.parametrize(
    ("args", "evil_group", "evil_admit"),
    [
        # Default: the victim's entries are in another namespace and left out: e is a group of one, passes.
        (ARGS, ("evil/e",), "gang evil/e: 1 of 1 members exist"),
        # crossNamespaceGroups: e's group is [evil/e, victim/ps, victim/train], which neither victim gang
        # declares: e waits, and still counts nothing of the victim.
        (
            CROSS,
            ("evil/e", "victim/ps", "victim/train"),
            "gang victim/ps declares GangGroup [victim/ps,victim/train], not [evil/e,victim/ps,victim/train]",
        ),
    ],
)
def test_another_namespace_cannot_complete_a_gang_group(
    args: CoschedulingArgs, evil_group: tuple[str, ...], evil_admit: str
) -> None:
    cache = victim_and_evil(args)
    assert cache.view("evil/e").spec.group == evil_group  # type: ignore[union-attr]
    assert cache.admit("evil/e-0").detail == evil_admit
    for pod in ("victim/train-0", "victim/train-1", "victim/ps-0", "evil/e-0"):
        cache.hold(pod, pod, "n1", T0)
    # The evil member binds (alone, by default) and is bound: the victim's group is not satisfied by it.
    for batch in cache.take_ready(T0):
        assert [h.pod for h in batch.holds] == ["evil/e-0"]
        cache.bound("evil/e-0", "n1")
    # ps has 1 held of 2: the victim's group waits, and nothing of the victim was handed out.
    assert cache.permit("victim/train", T0).reason == "gang victim/ps: 1 of 2 members waiting at the bind barrier"
    assert cache.take_ready(T0 + 1) == []
    assert not cache.view("victim/train").once_satisfied  # type: ignore[union-attr]
    victim = [h.pod for h in cache.holds() if h.gang_id.startswith("victim/")]
    assert victim == ["victim/ps-0", "victim/train-0", "victim/train-1"]  # still held, none handed out


def test_cross_namespace_group_declared_by_both_sides_counts_with_the_flag() -> None:
    cache = GangCache(CROSS)
    group = ["default/a", "other/b"]
    cache.upsert_pod(member("a0", annotations=annotated("a", 1, groups=group)))
    cache.upsert_pod(member("b0", namespace="other", annotations=annotated("b", 1, groups=group)))
    cache.hold("default/a0", "ua", "n1", T0)
    assert cache.take_ready(T0) == []  # other/b: 0 of 1 waiting
    cache.hold("other/b0", "ub", "n1", T0)
    (batch,) = cache.take_ready(T0)
    assert (batch.group_id, [h.pod for h in batch.holds]) == ("default/a,other/b", ["default/a0", "other/b0"])


def test_without_the_flag_the_same_declarations_make_two_groups_of_one() -> None:
    cache = GangCache(ARGS)
    group = ["default/a", "other/b"]
    cache.upsert_pod(member("a0", annotations=annotated("a", 1, groups=group)))
    cache.upsert_pod(member("b0", namespace="other", annotations=annotated("b", 1, groups=group)))
    a = cache.view("default/a")
    assert a is not None and (a.spec.group, a.spec.left_out) == (("default/a",), ("other/b",))
    cache.hold("default/a0", "ua", "n1", T0)
    (batch,) = cache.take_ready(T0)
    assert (batch.group_id, [h.pod for h in batch.holds]) == ("default/a", ["default/a0"])


def test_strict_failure_releases_only_the_gangs_that_declare_the_group() -> None:
    # a and b declare [a, b]; c declares [a, b, c]. c's failure must not release a's or b's holds (c is
    # not part of their group), and a's failure must not release c's.
    cache = GangCache(ARGS)
    cache.upsert_pod(member("a0", annotations=annotated("a", 2, groups=["default/a", "default/b"])))
    cache.upsert_pod(member("b0", annotations=annotated("b", 2, groups=["default/a", "default/b"])))
    cache.upsert_pod(member("c0", annotations=annotated("c", 2, groups=["default/a", "default/b", "default/c"])))
    cache.upsert_pod(member("c1", annotations=annotated("c", 2, groups=["default/a", "default/b", "default/c"])))
    for pod in ("default/a0", "default/b0", "default/c0"):
        cache.hold(pod, pod, "n1", T0)
    cache.scheduling_failed("default/c1", "0/3 nodes are available: 3 Insufficient cpu.")
    assert [r.hold.pod for r in cache.take_releases(T0)] == ["default/c0"]
    cache.scheduling_failed("default/b0", "0/3 nodes are available: 3 Insufficient cpu.")
    # b0 was held: it is superseded by its own failure; a0 is released by the Strict cascade.
    assert sorted((r.hold.pod, r.cause) for r in cache.take_releases(T0)) == [
        ("default/a0", "strict"),
        ("default/b0", "superseded"),
    ]
