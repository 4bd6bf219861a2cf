"""Object lifecycle in the cache: PodGroups come and go, pods leave gangs, annotation gangs are forgotten."""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache, PodGroupError, podgroup_from_dict
from koordpy_testkit.gangs import T0, annotated, member, podgroup

ARGS = CoschedulingArgs.model_validate({})
SIGS = "pod-group.scheduling.sigs.k8s.io"


def test_podgroup_after_its_pods_initialises_the_gang() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("p0", labels={SIGS: "pg"}))
    assert cache.admit("default/p0").ok is False
    cache.upsert_podgroup(podgroup("pg", 1))
    assert cache.admit("default/p0").reason == "gang default/pg: 1 of 1 members exist"


def test_deleting_the_podgroup_keeps_members_and_turns_not_found() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 2))
    cache.upsert_pod(member("p0", labels={SIGS: "pg"}))
    cache.delete_podgroup("scheduling.sigs.k8s.io", "default", "pg")
    view = cache.view("default/pg")
    assert view is not None and view.children == ("default/p0",)
    assert view.spec.problem == "gang default/pg: PodGroup default/pg (scheduling.sigs.k8s.io) not found"
    # A PodGroup of the *other* API with the same name does not stand in for it.
    cache.upsert_podgroup(podgroup("pg", 1, api="scheduling.x-k8s.io"))
    assert cache.view("default/pg").spec.initialised is False  # type: ignore[union-attr]


def bound_pair(cache: GangCache) -> None:
    """PodGroup pg (minMember 2), two members held and bound together: the gang was satisfied."""
    cache.upsert_podgroup(podgroup("pg", 2))
    for i in range(2):
        cache.upsert_pod(member(f"p{i}", labels={SIGS: "pg"}))
        cache.hold(f"default/p{i}", f"u{i}", "n1", T0)
    (batch,) = cache.take_ready(T0)
    for hold in batch.holds:
        cache.bound(hold.pod, "n1")
        cache.upsert_pod(member(hold.pod.partition("/")[2], labels={SIGS: "pg"}, node="n1"))
    assert cache.view("default/pg").once_satisfied  # type: ignore[union-attr]


@pytest.mark.parametrize("delete_podgroup", [True, False])
def test_a_recreated_gang_starts_from_nothing(delete_podgroup: bool) -> None:
    """The reproduction: minMember 2, two members bound; both pods (and the PodGroup) deleted; the
    PodGroup recreated with one member. That member must wait for a second one: nothing of the first run
    (once-satisfied) carries over, whether or not the PodGroup was deleted in between."""
    cache = GangCache(ARGS)
    bound_pair(cache)
    for i in range(2):
        cache.delete_pod("default", f"p{i}")
    if delete_podgroup:
        cache.delete_podgroup("scheduling.sigs.k8s.io", "default", "pg")
        assert cache.view("default/pg") is None  # nothing left of it
        cache.upsert_podgroup(podgroup("pg", 2))
    cache.upsert_pod(member("again-0", labels={SIGS: "pg"}))
    admission = cache.admit("default/again-0")
    assert (admission.ok, admission.detail) == (False, "gang default/pg: 1 of 2 members exist")
    _, permit = cache.hold("default/again-0", "ua", "n1", T0 + 10)
    assert (permit.verdict, permit.reason) == ("wait", "gang default/pg: 1 of 2 members waiting at the bind barrier")
    assert cache.take_ready(T0 + 10) == []
    assert not cache.view("default/pg").once_satisfied  # type: ignore[union-attr]


def test_a_fresh_cache_decides_like_a_long_running_one() -> None:
    """A restarted extender sees the same objects and must decide the same: once-satisfied follows the
    members that exist, not the process's history."""
    long_running = GangCache(ARGS)
    bound_pair(long_running)
    long_running.delete_pod("default", "p0")
    long_running.delete_pod("default", "p1")
    long_running.upsert_pod(member("again-0", labels={SIGS: "pg"}))
    restarted = GangCache(ARGS)
    restarted.upsert_podgroup(podgroup("pg", 2))
    restarted.upsert_pod(member("again-0", labels={SIGS: "pg"}))
    for cache in (long_running, restarted):
        assert cache.admit("default/again-0").detail == "gang default/pg: 1 of 2 members exist"
        assert cache.view("default/pg").once_satisfied is False  # type: ignore[union-attr]


def test_while_one_member_stays_bound_a_replacement_binds_alone() -> None:
    # once-satisfied as Koordinator means it: p0 fails and is replaced while p1 runs; the replacement
    # needs no quorum (1 of 2 exist, but the group has a bound member).
    cache = GangCache(ARGS)
    bound_pair(cache)
    cache.delete_pod("default", "p0")
    cache.upsert_pod(member("p0-again", labels={SIGS: "pg"}))
    assert cache.admit("default/p0-again").detail == "gang default/pg: satisfied once (once-satisfied)"
    _, permit = cache.hold("default/p0-again", "u", "n1", T0 + 5)
    assert (permit.verdict, permit.reason) == ("allow", "gang default/pg: satisfied once (once-satisfied)")


def test_deleting_the_podgroup_releases_its_held_members_and_forgets_failures() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 3))
    for i in range(3):
        cache.upsert_pod(member(f"p{i}", labels={SIGS: "pg"}))
    cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0)
    cache.delete_podgroup("scheduling.sigs.k8s.io", "default", "pg")
    released = cache.take_releases(T0 + 1)
    # p0's release (deleted) cascades Strict to p1, whichever comes first: both answered, once each.
    assert sorted(r.hold.pod for r in released) == ["default/p0", "default/p1"]
    assert released[0].reason == "gang default/pg: PodGroup default/pg (scheduling.sigs.k8s.io) was deleted"
    assert cache.holds() == []
    # Recreated: the members are counted again (they never left), nothing else of the old gang is.
    cache.upsert_podgroup(podgroup("pg", 3))
    assert cache.admit("default/p2").detail == "gang default/pg: 3 of 3 members exist"


def test_podgroup_without_pods_is_a_gang_and_is_dropped_with_it() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 3))
    assert [v.spec.id for v in cache.views()] == ["default/pg"]
    cache.delete_podgroup("scheduling.sigs.k8s.io", "default", "pg")
    assert cache.views() == []


def test_annotation_gang_is_forgotten_with_its_last_member_and_reinitialised() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("p0", annotations=annotated("g", 3)))
    cache.delete_pod("default", "p0")
    assert cache.view("default/g") is None
    # A fresh first writer: min 5 now.
    cache.upsert_pod(member("p1", annotations=annotated("g", 5)))
    assert cache.view("default/g").spec.min_member == 5  # type: ignore[union-attr]


def test_pod_that_leaves_its_gang_releases_its_hold() -> None:
    cache = GangCache(ARGS)
    for i in range(2):
        cache.upsert_pod(member(f"p{i}", annotations=annotated("g", 2, mode="Strict")))
    cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0)  # allowed: 2 of 2
    assert cache.take_ready(T0)  # handed out
    cache.upsert_pod(member("p2", annotations=annotated("g", 2)))
    cache.hold("default/p2", "u2", "n1", T0)
    # p2's annotations change to another gang: its hold is answered, and g forgets it.
    cache.upsert_pod(member("p2", annotations=annotated("h", 1)))
    (release,) = cache.take_releases(T0)
    assert (release.hold.pod, release.cause) == ("default/p2", "deleted")
    assert release.reason == "gang default/g: default/p2 left the gang (labels or annotations changed)"
    assert cache.gang_of("default/p2") == "default/h"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"apiVersion": "v1", "kind": "PodGroup", "metadata": {"name": "x"}},
            "apiVersion: expected one of scheduling.sigs.k8s.io/v1alpha1, scheduling.x-k8s.io/v1alpha1, "
            "scheduling.volcano.sh/v1beta1, scheduling.k8s.io/v1beta1, got 'v1'",
        ),
        ({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "metadata": {}}, "metadata.name: required"),
        (
            {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "metadata": {"name": "x"}, "spec": {"minMember": -1}},
            "spec.minMember: must be at least 0, got -1",
        ),
        (
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "metadata": {"name": "x"},
                "spec": {"scheduleTimeoutSeconds": "1m"},
            },
            "spec.scheduleTimeoutSeconds: expected an integer",
        ),
        (
            {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "metadata": {"name": "x", "creationTimestamp": "now"}},
            "metadata.creationTimestamp: not an RFC 3339 timestamp: 'now'",
        ),
    ],
)
def test_podgroup_errors_name_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(PodGroupError) as info:
        podgroup_from_dict(raw)
    assert str(info.value) == message
