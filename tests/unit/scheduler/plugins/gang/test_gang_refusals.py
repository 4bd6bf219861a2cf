"""Quorum refusals are recognisable in the ``PodScheduled=False`` condition kube-scheduler writes from them.

kube-scheduler copies the extender's per-node reason into the condition message, e.g.
``0/3 nodes are available: 3 gang quorum not reached: gang ns/g: fewer than 4 members exist. preemption:
...``. The watch later shows that condition; it must not count as a Strict member failure (the gang is
incomplete, not failing), in any extender process: one that refused the pod, or one started after.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import QUORUM_REFUSED, YIELD_REFUSED, GangCache, is_admission_refusal
from koordpy_testkit.gangs import T0, annotated, member, podgroup

ARGS = CoschedulingArgs.model_validate({})
SIGS = "pod-group.scheduling.sigs.k8s.io"


def kube_scheduler_message(reason: str, nodes: int = 3) -> str:
    """The FitError message kube-scheduler v1.37 writes when the extender refused every node."""
    return (
        f"0/{nodes} nodes are available: {nodes} {reason}. preemption: 0/{nodes} nodes are available: "
        f"{nodes} Preemption is not helpful for scheduling."
    )


def every_refusal() -> list[str]:
    """Each kind of refusal the model produces: short of members, a missing group-mate, a group-mate that
    declares another group, a missing PodGroup, an annotation gang without a usable min-available."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 3))
    cache.upsert_pod(member("short", labels={SIGS: "pg"}))
    cache.upsert_pod(member("lonely", annotations=annotated("a", 1, groups=["default/absent"])))
    cache.upsert_pod(member("mate", annotations=annotated("m", 1, groups=["default/n"])))
    cache.upsert_pod(member("n0", annotations=annotated("n", 1)))
    cache.upsert_pod(member("ghost", labels={"scheduling.x-k8s.io/pod-group": "none"}))
    cache.upsert_pod(member("bad", annotations=annotated("b", "five")))
    keys = ("short", "lonely", "mate", "ghost", "bad")
    return [cache.admit(f"default/{k}").reason for k in keys]


def test_every_refusal_carries_the_marker() -> None:
    reasons = every_refusal()
    assert reasons == [
        QUORUM_REFUSED + "gang default/pg: fewer than 3 members exist",
        QUORUM_REFUSED + "gang default/absent: no member exists yet",
        QUORUM_REFUSED + "gang default/n declares GangGroup [default/n], not [default/m,default/n]",
        QUORUM_REFUSED + "gang default/none: PodGroup default/none (scheduling.x-k8s.io) not found",
        QUORUM_REFUSED + "gang default/b: member default/bad: annotation "
        "gang.scheduling.koordinator.sh/min-available is not an integer",
    ]
    assert all(is_admission_refusal(kube_scheduler_message(r)) for r in reasons)


@pytest.mark.parametrize(
    ("message", "refusal"),
    [
        (kube_scheduler_message(QUORUM_REFUSED + "gang default/g: fewer than 4 members exist"), True),
        # Some nodes failed in-tree first, the rest at quorum: still the quorum that left no node.
        (
            "0/5 nodes are available: 2 Insufficient cpu, 3 " + QUORUM_REFUSED + "gang default/g: fewer than "
            "4 members exist. preemption: not eligible",
            True,
        ),
        (kube_scheduler_message(YIELD_REFUSED + "gang group default/b yields to default/a"), True),
        ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available.", False),
        ("0/3 nodes are available: 3 node(s) exceed the cpu usage threshold 65%.", False),
        # The pre-marker wording (an older extender's condition) is a failure: it cannot be told apart.
        ("0/3 nodes are available: 3 gang default/g: 3 of 4 members exist.", False),
    ],
)
def test_is_admission_refusal(message: str, refusal: bool) -> None:
    assert is_admission_refusal(message) is refusal


def test_a_restarted_extender_does_not_count_its_refusals_as_strict_failures() -> None:
    """The reproduction: a Strict gang of 4, three members held by a new extender process, which never
    refused anything itself; the watch shows the fourth member's condition, left by the previous process's
    quorum refusal. The held members stay held; a real failure releases them."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 4))
    for i in range(4):
        cache.upsert_pod(member(f"p{i}", labels={SIGS: "pg"}))
    for i in range(3):
        cache.hold(f"default/p{i}", f"u{i}", "n1", T0)
    cache.scheduling_failed(
        "default/p3", kube_scheduler_message(QUORUM_REFUSED + "gang default/pg: fewer than 4 members exist")
    )
    assert cache.take_releases(T0) == []
    assert cache.view("default/pg").failed == ()  # type: ignore[union-attr]
    cache.scheduling_failed("default/p3", kube_scheduler_message("Insufficient cpu"))
    assert sorted((r.hold.pod, r.cause) for r in cache.take_releases(T0)) == [
        ("default/p0", "strict"),
        ("default/p1", "strict"),
        ("default/p2", "strict"),
    ]


def test_a_refusal_seen_in_a_condition_parks_the_member_for_a_restarted_extender() -> None:
    """The previous process refused a and b (their conditions say so) and is gone; this process never
    refused anything. When c arrives, a and b must still be woken."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 3))
    refusal = kube_scheduler_message(QUORUM_REFUSED + "gang default/pg: fewer than 3 members exist")
    for name in ("a", "b"):
        cache.upsert_pod(member(name, labels={SIGS: "pg"}))
        cache.scheduling_failed(f"default/{name}", refusal)
    assert cache.parked("default/pg") == ["default/a", "default/b"]
    assert cache.take_wakeups() == []
    cache.upsert_pod(member("c", labels={SIGS: "pg"}))
    assert [w.pod for w in cache.take_wakeups()] == ["default/a", "default/b"]


def test_a_refusal_seen_after_the_quorum_is_there_wakes_the_member_at_once() -> None:
    # The gang completed while no extender ran (or before the watch showed the condition).
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 2))
    for name in ("a", "b"):
        cache.upsert_pod(member(name, labels={SIGS: "pg"}))
    cache.take_wakeups()
    refusal = kube_scheduler_message(QUORUM_REFUSED + "gang default/pg: fewer than 2 members exist")
    cache.scheduling_failed("default/a", refusal)
    assert [w.pod for w in cache.take_wakeups()] == ["default/a"]
