"""PreemptionBackoff: a node the pod preempted on and lost is refused to its preemption for ``seconds``."""

from __future__ import annotations

from koordpy.scheduler.framework.preemption import PreemptionBackoff


def test_the_module_docstring_story() -> None:
    # seconds 120: preempted on n1 (nominated n1), lost it; then n2; each charged once, refused 120 s
    backoff = PreemptionBackoff(120)
    assert backoff.observe("p", "", 0) is None  # no nomination yet: nothing lost
    backoff.offered("p", ["n1", "n2"])
    assert backoff.observe("p", "n1", 2) == "n1"
    assert backoff.blocked("p", "n1", 2) == 122 and backoff.blocked("p", "n2", 2) is None
    backoff.offered("p", ["n2"])
    assert backoff.observe("p", "n2", 4) == "n2"
    assert backoff.blocked("p", "n2", 4) == 124
    # kube-scheduler retries with the same nomination: not charged again, the back-off is not prolonged
    assert backoff.observe("p", "n2", 6) is None and backoff.blocked("p", "n2", 6) == 124
    # 121.9 s after: still refused; at 122 n1 is free again, n2 two seconds later
    assert backoff.blocked("p", "n1", 121.9) == 122
    assert backoff.blocked("p", "n1", 122) is None and backoff.blocked("p", "n2", 122) == 124
    assert backoff.blocked("p", "n2", 124) is None


def test_a_stale_nomination_is_not_charged_again_until_the_node_is_offered() -> None:
    backoff = PreemptionBackoff(10)
    assert backoff.observe("p", "n1", 0) == "n1"
    # back-off over; kube-scheduler still shows n1 nominated (nothing preempted since): not charged
    assert backoff.observe("p", "n1", 11) is None and backoff.blocked("p", "n1", 11) is None
    # n1 offered, the pod preempts there again and loses it again: charged anew
    backoff.offered("p", ["n1"])
    assert backoff.observe("p", "n1", 12) == "n1" and backoff.blocked("p", "n1", 12) == 22


def test_pods_are_independent_and_forgotten_when_bound() -> None:
    backoff = PreemptionBackoff(30)
    backoff.observe("a", "n1", 0)
    assert backoff.blocked("b", "n1", 1) is None
    backoff.forget("a")
    assert backoff.blocked("a", "n1", 1) is None and len(backoff) == 0


def test_zero_seconds_turns_it_off_and_memory_is_bounded() -> None:
    off = PreemptionBackoff(0)
    assert off.observe("p", "n1", 0) is None and off.blocked("p", "n1", 0) is None
    small = PreemptionBackoff(30, max_pods=2)
    for uid in ("a", "b", "c"):
        small.observe(uid, "n1", 0)
    assert len(small) == 2 and small.blocked("a", "n1", 1) is None  # the least recently seen went first
    assert small.blocked("c", "n1", 1) == 30
