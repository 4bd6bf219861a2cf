"""Preemption and Reservations: refused where the room stays reserved; owners preempt at home only.

Node 8 cpu: pods x (2 cpu) and v (3 cpu, the victim); Reservation ``r`` holds 4 cpu for ``default/big``.
"""

from __future__ import annotations

import pytest

from koordpy.scheduler.plugins.reservation.ledger import REASON_RESERVED, holdings_on_node
from koordpy.scheduler.plugins.reservation.preemption import owned_nodes, preemption_verdict
from koordpy_testkit.reservations import T0, allocated, pod, reservation

ALLOCATABLE = {"cpu": 8000, "memory": 64 << 30}
R = reservation(
    "r",
    cpu="4",
    memory="1Gi",
    owners=[{"object": {"namespace": "default", "name": "big"}}],
    phase="Available",
    node="n1",
)
PODS = [pod("x", "2", "1Gi", node="n1"), pod("v", "3", "1Gi", node="n1")]


@pytest.mark.parametrize(
    ("preemptor", "cpu", "victims", "ok"),
    [
        # with v gone: free = 8 − 2 − 4 = 2 for someone else
        ("small", "2", ["v"], True),  # 2 ≤ 2
        ("medium", "3", ["v"], False),  # 3 > 2: the room stays reserved
        ("medium", "3", ["v", "x"], True),  # 8 − 0 − 4 = 4 ≥ 3
        ("big", "6", ["v"], True),  # the owner is never blocked by its own Reservation
    ],
)
def test_preemption_verdict(preemptor: str, cpu: str, victims: list[str], ok: bool) -> None:
    uids = [p.uid for p in PODS if p.name in victims]
    status = preemption_verdict(pod(preemptor, cpu, "1Gi"), ALLOCATABLE, [R], PODS, victims=uids, now=T0 + 60)
    assert status.is_success is ok
    if not ok:
        assert status.reason == REASON_RESERVED


def test_a_victim_bound_through_the_reservation_gives_its_room_back() -> None:
    # big bound through r (consumed): with big as the victim, r holds its 4 cpu again
    bound = pod("big", "4", "1Gi", node="n1", annotations=allocated("r"))
    pods = [pod("x", "2", "1Gi", node="n1"), bound]
    status = preemption_verdict(pod("medium", "3", "1Gi"), ALLOCATABLE, [R], pods, victims=[bound.uid], now=T0 + 60)
    assert not status.is_success  # 8 − 2 − 4 = 2 < 3


def test_owned_nodes_are_those_holding_an_unconsumed_reservation_of_the_pod() -> None:
    other = reservation(
        "o", owners=[{"object": {"namespace": "default", "name": "else"}}], phase="Available", node="n2"
    )
    consumed_for_big = reservation(
        "c", owners=[{"object": {"namespace": "default", "name": "big"}}], phase="Available", node="n3"
    )
    holdings = {
        "n1": holdings_on_node([R], PODS, T0),
        "n2": holdings_on_node([other], [], T0),
        "n3": holdings_on_node([consumed_for_big], [pod("big-0", node="n3", annotations=allocated("c"))], T0),
    }
    assert owned_nodes(pod("big"), holdings) == {"n1"}
    assert owned_nodes(pod("stranger"), holdings) == set()
