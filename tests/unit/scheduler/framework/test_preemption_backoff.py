"""PreemptionBackoff: a pod that preempted on a node and lost it does not preempt for ``seconds``."""

from __future__ import annotations

from koordpy.scheduler.framework.preemption import PreemptionBackoff


def test_the_module_docstring_story() -> None:
    # seconds 120: preempted on n1 (nominated n1) and lost it: no preemption anywhere until 122
    backoff = PreemptionBackoff(120)
    assert backoff.observe("p", "", 0) is None  # no nomination yet: nothing lost
    backoff.offered("p", ["n1", "n2"])
    assert backoff.observe("p", "n1", 2) == "n1"
    assert backoff.blocked("p", 2) == (122, "n1")
    # kube-scheduler retries with the same nomination: not charged again, the back-off is not prolonged
    assert backoff.observe("p", "n1", 60) is None and backoff.blocked("p", 60) == (122, "n1")
    assert backoff.blocked("p", 121.9) == (122, "n1")
    assert backoff.blocked("p", 122) is None
    # offered again, it preempts on n2 and loses it: a new back-off
    backoff.offered("p", ["n2"])
    assert backoff.observe("p", "n2", 125) == "n2" and backoff.blocked("p", 125) == (245, "n2")


def test_a_stale_nomination_is_not_charged_again_until_candidates_are_offered() -> None:
    backoff = PreemptionBackoff(10)
    assert backoff.observe("p", "n1", 0) == "n1"
    # back-off over; kube-scheduler still shows n1 nominated (nothing preempted since): not charged
    assert backoff.observe("p", "n1", 11) is None and backoff.blocked("p", 11) is None
    backoff.offered("p", [])  # nothing offered: still nothing new to charge
    assert backoff.observe("p", "n1", 11) is None
    # offered, the pod preempts on n1 again and loses it again: charged anew
    backoff.offered("p", ["n1"])
    assert backoff.observe("p", "n1", 12) == "n1" and backoff.blocked("p", 12) == (22, "n1")


def test_pods_are_independent_and_forgotten_when_bound() -> None:
    backoff = PreemptionBackoff(30)
    backoff.observe("a", "n1", 0)
    assert backoff.blocked("b", 1) is None
    backoff.forget("a")
    assert backoff.blocked("a", 1) is None and len(backoff) == 0


def test_zero_seconds_turns_it_off_and_memory_is_bounded() -> None:
    off = PreemptionBackoff(0)
    assert off.observe("p", "n1", 0) is None and off.blocked("p", 0) is None
    small = PreemptionBackoff(30, max_pods=2)
    for uid in ("a", "b", "c"):
        small.observe(uid, "n1", 0)
    assert len(small) == 2 and small.blocked("a", 1) is None  # the least recently seen went first
    assert small.blocked("c", 1) == (30, "n1")
