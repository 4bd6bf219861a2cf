"""GangGroup all-or-nothing: a group binds only when every gang of it is valid, and then binds together."""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache
from koordpy_testkit.gangs import T0, annotated, member, podgroup

ARGS = CoschedulingArgs.model_validate({})
GROUP = ["default/a", "other/b"]


def grouped() -> GangCache:
    """Gang default/a (min 2) and other/b (min 2, another namespace) in one GangGroup, two members each."""
    cache = GangCache(ARGS)
    for i in range(2):
        cache.upsert_pod(member(f"a{i}", annotations=annotated("a", 2, groups=GROUP)))
        cache.upsert_pod(member(f"b{i}", namespace="other", annotations=annotated("b", 2, groups=GROUP)))
    return cache


@pytest.mark.parametrize(
    ("held", "verdict", "reason"),
    [
        # a complete (2 of 2), b has 1 of 2: the whole group waits, naming b.
        (["default/a0", "default/a1", "other/b0"], "wait", "gang other/b: 1 of 2 members waiting at the bind barrier"),
        # b complete, a has 1: waits naming a (first by id).
        (["default/a0", "other/b0", "other/b1"], "wait", "gang default/a: 1 of 2 members waiting at the bind barrier"),
        # Both 1 of 2: the first gang by id is named.
        (["default/a0", "other/b0"], "wait", "gang default/a: 1 of 2 members waiting at the bind barrier"),
        # Both complete: allowed, for either gang's permit.
        (
            ["default/a0", "default/a1", "other/b0", "other/b1"],
            "allow",
            "gang group default/a,other/b: every gang is satisfied",
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
    for pod in ("default/a0", "default/a1", "other/b0"):
        cache.hold(pod, pod, "n1", T0)
        assert cache.take_ready(T0) == []
    cache.hold("other/b1", "other/b1", "n2", T0 + 1)
    (batch,) = cache.take_ready(T0 + 1)
    assert batch.group_id == "default/a,other/b"
    assert [h.pod for h in batch.holds] == ["default/a0", "default/a1", "other/b0", "other/b1"]


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
