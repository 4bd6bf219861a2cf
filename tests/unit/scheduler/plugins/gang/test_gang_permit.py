"""Permit under the three match policies × Strict/NonStrict (reference §2.4), and admit (PreEnqueue quorum).

Permit counts, per gang: waiting = members held at the bind barrier (or allowed and not yet bound),
bound = members with a node. The verdict is for the whole GangGroup.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import QUORUM_REFUSED, GangCache
from koordpy_testkit.gangs import T0, annotated, member, podgroup

ARGS = CoschedulingArgs.model_validate({})


def gang_of_four(mode: str, policy: str, held: int, bound: int) -> GangCache:
    """Gang default/g, min 3, four members: the first `bound` have a node, the next `held` are held."""
    cache = GangCache(ARGS)
    for i in range(4):
        cache.upsert_pod(
            member(f"p{i}", annotations=annotated("g", 3, mode=mode, policy=policy), node="n1" if i < bound else None)
        )
    for i in range(bound, bound + held):
        cache.hold(f"default/p{i}", f"uid{i}", "n2", T0)
    return cache


@pytest.mark.parametrize("mode", ["Strict", "NonStrict"])
@pytest.mark.parametrize(
    ("policy", "held", "bound", "verdict", "reason"),
    [
        # only-waiting: waiting ≥ min. 2 held < 3 → wait even with 1 bound (bound members do not count).
        ("only-waiting", 2, 1, "wait", "gang default/g: 2 of 3 members waiting at the bind barrier (only-waiting)"),
        ("only-waiting", 3, 0, "allow", "gang default/g: 3 of 3 members waiting at the bind barrier"),
        # waiting-and-running: waiting + bound ≥ min. 2 + 1 = 3 ≥ 3 → allow; 1 + 1 = 2 < 3 → wait.
        ("waiting-and-running", 2, 1, "allow", "gang default/g: 2 waiting + 1 bound of 3 members"),
        ("waiting-and-running", 1, 1, "wait", "gang default/g: 1 waiting + 1 bound of 3 members (waiting-and-running)"),
        # once-satisfied: waiting ≥ min, or the GangGroup had a member bound once. 1 bound → satisfied once,
        # so even 1 held member is allowed; with nothing bound, 2 < 3 waits and 3 ≥ 3 allows.
        ("once-satisfied", 1, 1, "allow", "gang default/g: satisfied once (once-satisfied)"),
        ("once-satisfied", 2, 0, "wait", "gang default/g: 2 of 3 members waiting at the bind barrier"),
        ("once-satisfied", 3, 0, "allow", "gang default/g: 3 of 3 members waiting at the bind barrier"),
    ],
)
def test_permit_table(mode: str, policy: str, held: int, bound: int, verdict: str, reason: str) -> None:
    # The mode changes what happens on failure, never the counting: the same rows hold for both.
    permit = gang_of_four(mode, policy, held, bound).permit("default/g", T0)
    assert (permit.verdict, permit.reason) == (verdict, reason)


def test_allow_hands_out_every_held_member_once() -> None:
    cache = gang_of_four("Strict", "once-satisfied", held=2, bound=0)
    assert cache.take_ready(T0) == []  # 2 of 3: nothing to bind yet
    _, permit = cache.hold("default/p2", "uid2", "n3", T0 + 5)
    assert permit.verdict == "allow"
    (batch,) = cache.take_ready(T0 + 5)
    assert [h.pod for h in batch.holds] == ["default/p0", "default/p1", "default/p2"]
    assert batch.group_id == "default/g"
    # Handed out once: a second call has nothing, and the members still count as waiting until bound.
    assert cache.take_ready(T0 + 5) == []
    assert cache.view("default/g").waiting == ("default/p0", "default/p1", "default/p2")  # type: ignore[union-attr]
    for pod in ("default/p0", "default/p1", "default/p2"):
        cache.bound(pod, "n3")
    view = cache.view("default/g")
    assert view is not None and view.waiting == () and view.once_satisfied


def test_remaining_wait_is_the_earliest_held_members() -> None:
    cache = GangCache(ARGS)
    for i in range(3):
        cache.upsert_pod(member(f"p{i}", annotations=annotated("g", 3, wait="100s")))
    cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0 + 40)
    # p0's wait ends at T0+100, p1's at T0+140: 100 − 50 = 50 s left at T0+50.
    assert cache.permit("default/g", T0 + 50).remaining_seconds == 50.0


def test_pod_in_no_gang_is_allowed_without_a_hold() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("solo"))
    hold, permit = cache.hold("default/solo", "u", "n1", T0)
    assert hold is None and permit.verdict == "allow"
    assert cache.holds() == []


def test_missing_podgroup_waits_with_zero_wait_time() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("p0", labels={"pod-group.scheduling.sigs.k8s.io": "ghost"}))
    hold, permit = cache.hold("default/p0", "u0", "n1", T0)
    # Koordinator: Wait with the gang's wait time, 0 for an un-initialised gang → the hold expires at once.
    assert (permit.verdict, permit.remaining_seconds) == ("wait", 0.0)
    assert hold is not None and hold.wait_deadline == T0
    (release,) = cache.take_releases(T0)
    assert (release.cause, release.reason) == (
        "expired",
        "gang default/ghost: PodGroup default/ghost (scheduling.sigs.k8s.io) not found; "
        "default/p0 is not held for an un-initialised gang",
    )


@pytest.mark.parametrize(
    ("children", "bound", "ok", "reason", "detail"),
    [
        # min 5: 3 of 5 exist → refused. The reason /filter answers has no count (it stays true while the
        # pod waits, so kube-scheduler does not rewrite the pod's condition as members arrive); the detail has.
        (
            3,
            0,
            False,
            QUORUM_REFUSED + "gang default/g: fewer than 5 members exist",
            "gang default/g: 3 of 5 members exist",
        ),
        (5, 0, True, "gang default/g: 5 of 5 members exist", "gang default/g: 5 of 5 members exist"),
        # A member is bound (once-satisfied): quorum no longer gates, 3 of 5 pass.
        (
            3,
            1,
            True,
            "gang default/g: satisfied once (once-satisfied)",
            "gang default/g: satisfied once (once-satisfied)",
        ),
    ],
)
def test_admit_table(children: int, bound: int, ok: bool, reason: str, detail: str) -> None:
    cache = GangCache(ARGS)
    for i in range(children):
        cache.upsert_pod(member(f"p{i}", annotations=annotated("g", 5), node="n1" if i < bound else None))
    admission = cache.admit(f"default/p{children - 1}")
    assert (admission.ok, admission.reason, admission.detail) == (ok, reason, detail)


def test_admit_checks_every_gang_of_the_group() -> None:
    cache = GangCache(ARGS)
    group = ["default/a", "default/b"]
    for name in ("a0", "a1"):
        cache.upsert_pod(member(name, annotations=annotated("a", 2, groups=group)))
    cache.upsert_pod(member("b0", annotations=annotated("b", 2, groups=group)))
    # a has 2 of 2, but its group-mate b has 1 of 2: a's members are parked too, naming b.
    admission = cache.admit("default/a0")
    assert (admission.ok, admission.reason, admission.detail, admission.gang_id) == (
        False,
        QUORUM_REFUSED + "gang default/b: fewer than 2 members exist",
        "gang default/b: 1 of 2 members exist",
        "default/b",
    )


def test_admit_missing_podgroup_and_missing_group_mate() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("p", labels={"scheduling.x-k8s.io/pod-group": "pg"}))
    assert cache.admit("default/p").reason == (
        QUORUM_REFUSED + "gang default/pg: PodGroup default/pg (scheduling.x-k8s.io) not found"
    )
    cache.upsert_podgroup(
        podgroup(
            "pg",
            1,
            api="scheduling.x-k8s.io",
            annotations={"gang.scheduling.koordinator.sh/groups": '["default/pg", "default/q"]'},
        )
    )
    assert cache.admit("default/p").reason == QUORUM_REFUSED + "gang default/q: no member exists yet"


def test_events_other_than_holds_can_allow_a_group() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("pg", 3))
    for i in range(3):
        cache.upsert_pod(member(f"p{i}", labels={"pod-group.scheduling.sigs.k8s.io": "pg"}))
    cache.hold("default/p0", "u0", "n1", T0)
    cache.hold("default/p1", "u1", "n1", T0)
    assert cache.take_ready(T0) == []  # 2 of 3
    # The PodGroup is edited down to minMember 2: 2 of 2 → the held pair is handed out without a new hold.
    cache.upsert_podgroup(podgroup("pg", 2))
    (batch,) = cache.take_ready(T0 + 1)
    assert [h.pod for h in batch.holds] == ["default/p0", "default/p1"]


def test_group_member_bound_elsewhere_satisfies_once() -> None:
    cache = GangCache(ARGS)
    for i in range(3):
        cache.upsert_pod(member(f"p{i}", annotations=annotated("g", 3)))
    cache.hold("default/p0", "u0", "n1", T0)
    assert cache.take_ready(T0) == []
    # p2 shows up bound (another binder, or a restart found it bound): the group is satisfied once.
    cache.upsert_pod(member("p2", annotations=annotated("g", 3), node="n2"))
    (batch,) = cache.take_ready(T0 + 1)
    assert [h.pod for h in batch.holds] == ["default/p0"]
