"""Reservation and pod watch events -> the extender's per-node reservation accounts.

Nodes n1, n2, n3 (8 cpu each). Each test checks which node's cached account an event drops: the
account of a node no event touched stays the very same object (no recomputation).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from koordpy.model.objects import pod_from_dict
from koordpy.scheduler.extender.cache import ClusterCache
from koordpy.scheduler.extender.reservations import ReservationTracker
from koordpy.scheduler.framework import ClusterState
from koordpy.scheduler.plugins.reservation.spec import ReservationAllocated, reservation_allocated
from koordpy_testkit import FakeClock, NodeBuilder, PodBuilder
from koordpy_testkit.reservations import owner_pod, reservation_manifest


def new_cache() -> tuple[ClusterCache, ReservationTracker, FakeClock, list[tuple[str, str, str]]]:
    tracker = ReservationTracker()
    state = ClusterState([tracker])
    tracker.attach(state)
    rejected: list[tuple[str, str, str]] = []
    clock = FakeClock()
    cache = ClusterCache(
        state, clock, on_rejected=lambda resource, event, raw, exc: rejected.append((resource, event, str(exc)))
    )
    cache.reservations = tracker
    for name in ("n1", "n2", "n3"):
        cache.handler("nodes")("ADDED", NodeBuilder(name).allocatable(cpu="8", memory="32Gi", pods="110").build())
    return cache, tracker, clock, rejected


def hold(name: str, node: str, cpu: str = "4", **kw: Any) -> dict[str, Any]:
    return reservation_manifest(name, node=node, owners=[owner_pod("default", "big")], cpu=cpu, **kw)


def warm(tracker: ReservationTracker, now: float) -> dict[str, object]:
    return {node: tracker.account(node, now) for node in sorted(tracker.by_node)}


def test_reservation_events_drop_only_the_nodes_they_touch() -> None:
    cache, tracker, clock, _ = new_cache()
    now = clock.now()
    on = cache.handler("reservations")
    on("ADDED", hold("r1", "n1", created=now))
    on("ADDED", hold("r2", "n2", created=now))
    assert tracker.by_node == {"n1": {"r1"}, "n2": {"r2"}}
    before = warm(tracker, now)
    assert tracker.recomputed == {"n1": 1, "n2": 1}

    on("MODIFIED", hold("r1", "n1", cpu="6", created=now))  # n1 only
    assert tracker.cached("n1") is None and tracker.cached("n2") is before["n2"]
    assert tracker.account("n1", now).holdings[0].remaining == {"cpu": 6000}

    on("MODIFIED", hold("r2", "n3", created=now))  # moved n2 -> n3: both, n1 untouched
    n1 = tracker.cached("n1")
    assert n1 is not None
    assert tracker.cached("n2") is None and tracker.by_node == {"n1": {"r1"}, "n3": {"r2"}}
    tracker.account("n3", now)
    on("MODIFIED", hold("r2", "n3", phase="Succeeded", created=now))  # no longer placed: n3 dropped
    assert tracker.by_node == {"n1": {"r1"}} and tracker.cached("n3") is None
    on("DELETED", {"metadata": {"name": "r1"}})  # a deletion needs the name only
    assert tracker.by_node == {} and tracker.cached("n1") is None
    assert cache.events["reservations", "DELETED"] == 1 and cache.events["reservations", "MODIFIED"] == 3
    assert cache.sizes()["reservations"] == 1  # r2 (Succeeded) is still known, it holds nothing


def test_pod_events_drop_only_their_node_and_only_when_it_has_reservations() -> None:
    cache, tracker, clock, _ = new_cache()
    now = clock.now()
    cache.handler("reservations")("ADDED", hold("r1", "n1", created=now))
    cache.handler("reservations")("ADDED", hold("r2", "n2", created=now))
    before = warm(tracker, now)
    pods = cache.handler("pods")
    pods("ADDED", PodBuilder("x").requests(cpu="2").node("n1").phase("Running").build())
    assert tracker.cached("n1") is None and tracker.cached("n2") is before["n2"]
    assert tracker.account("n1", now).requested == {"cpu": 2000}
    n1 = tracker.cached("n1")
    pods("ADDED", PodBuilder("y").requests(cpu="1").node("n3").phase("Running").build())  # n3 holds nothing
    assert tracker.cached("n1") is n1 and tracker.cached("n2") is before["n2"]
    assert set(tracker.pods["n3"]) == {PodBuilder("y").build()["metadata"]["uid"]}  # known for later
    pods("MODIFIED", PodBuilder("x").requests(cpu="2").node("n1").phase("Succeeded").build())
    assert tracker.account("n1", now).requested == {}
    assert tracker.recomputed == {"n1": 3, "n2": 1}
    pods("DELETED", PodBuilder("y").requests(cpu="1").node("n3").build())
    assert "n3" not in tracker.pods


def test_an_owner_bind_assumed_by_the_state_allocates_at_once() -> None:
    cache, tracker, clock, _ = new_cache()
    now = clock.now()
    cache.handler("reservations")("ADDED", hold("r1", "n1", created=now))
    assert tracker.account("n1", now).holdings[0].remaining == {"cpu": 4000}
    big = PodBuilder("big").requests(cpu="4").build()
    cache.handler("pods")("ADDED", big)
    pending = cache.pending[big["metadata"]["uid"]]
    annotations = tracker.annotations_for_bind(pending, "n1", now)
    assert reservation_allocated(annotations) == ReservationAllocated("r1", hold("r1", "n1")["metadata"]["uid"])
    assert tracker.annotations_for_bind(pending, "n2", now) == {}  # n2 holds nothing
    # what a bind does: the pod assumed with the annotation its binding carries
    cache.state.assume(dataclasses.replace(pending, annotations=annotations), "n1", now)
    holding = tracker.account("n1", now).holdings[0]
    assert holding.owners == ("default/big",) and holding.consumed and holding.remaining == {}
    assert tracker.annotations_for_bind(pending, "n1", now) == {}  # consumed: a second owner gets nothing


def test_an_owner_assumed_without_the_annotation_allocates_nothing() -> None:
    # e.g. bound by another binder: it runs on the node, the reservation keeps holding
    cache, tracker, clock, _ = new_cache()
    now = clock.now()
    cache.handler("reservations")("ADDED", hold("r1", "n1", created=now))
    big = PodBuilder("big").requests(cpu="4").build()
    cache.handler("pods")("ADDED", big)
    cache.state.assume(cache.pending[big["metadata"]["uid"]], "n1", now)
    holding = tracker.account("n1", now).holdings[0]
    assert holding.owners == () and holding.remaining == {"cpu": 4000}


def test_an_unreadable_reservation_is_reported_and_holds_nothing() -> None:
    cache, tracker, clock, rejected = new_cache()
    now = clock.now()
    on = cache.handler("reservations")
    on("ADDED", hold("r1", "n1", created=now))
    tracker.account("n1", now)
    bad = hold("r1", "n1", created=now)
    bad["spec"]["ttl"] = "forever"
    on("MODIFIED", bad)
    assert [(resource, event) for resource, event, _ in rejected] == [("reservations", "MODIFIED")]
    assert rejected[0][2].startswith("spec.ttl: ")
    assert tracker.by_node == {} and tracker.cached("n1") is None
    assert set(tracker.unreadable) == {"r1"} and cache.conversion_errors["reservations"] == 1
    on("MODIFIED", {"metadata": 7})  # not even a name: reported, nothing else changes
    assert len(rejected) == 2 and set(tracker.unreadable) == {"r1"}
    on("MODIFIED", hold("r1", "n1", created=now))  # readable again
    assert tracker.unreadable == {} and tracker.by_node == {"n1": {"r1"}}


def test_expiry_is_noticed_through_the_injected_clock() -> None:
    cache, tracker, clock, _ = new_cache()
    now = clock.now()
    # created 60 s ago with ttl 120 s: expires at now + 60
    cache.handler("reservations")("ADDED", hold("r1", "n1", created=now - 60, ttl="120s"))
    assert len(tracker.account("n1", now).holdings) == 1
    assert len(tracker.account("n1", now + 59).holdings) == 1 and tracker.recomputed["n1"] == 1
    assert tracker.account("n1", now + 60).holdings == () and tracker.recomputed["n1"] == 2


def test_a_cached_verdict_follows_the_nodes_allocatable() -> None:
    cache, tracker, clock, _ = new_cache()
    now = clock.now()
    cache.handler("reservations")("ADDED", hold("r1", "n1", created=now))
    cache.handler("pods")("ADDED", PodBuilder("x").requests(cpu="2").node("n1").phase("Running").build())
    pending = pod_from_dict(PodBuilder("c").requests(cpu="3").build())
    # 8 - 2 - 4 = 2 < 3: blocked, and the same answer again from the cache
    assert not tracker.verdict(pending, "n1", now).is_success
    assert tracker.verdict(pending, "n1", now) is tracker.verdict(pending, "n1", now)
    bigger = NodeBuilder("n1").allocatable(cpu="16", memory="32Gi", pods="110").build()
    cache.handler("nodes")("MODIFIED", bigger)  # 16 - 2 - 4 = 10 >= 3
    assert tracker.verdict(pending, "n1", now).is_success
    assert tracker.recomputed["n1"] == 1  # the account itself did not change


def test_a_deleted_node_leaves_no_account_verdicts_or_count() -> None:
    cache, tracker, clock, _ = new_cache()
    now = clock.now()
    cache.handler("reservations")("ADDED", hold("r1", "n1", created=now))
    tracker.account("n1", now)
    big = pod_from_dict(PodBuilder("big").requests(cpu="1").build())
    tracker.verdict(big, "n1", now)
    assert tracker.cached("n1") is not None and tracker._verdicts and tracker.recomputed == {"n1": 1}
    cache.handler("nodes")("DELETED", NodeBuilder("n1").build())
    assert tracker.cached("n1") is None and tracker._verdicts == {} and tracker.recomputed == {}
