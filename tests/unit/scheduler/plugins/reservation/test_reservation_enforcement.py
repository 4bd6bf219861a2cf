"""The per-node account and verdict both the extender and ``explain`` use, on top of the ledger.

Node allocatable cpu 8 (8000m). Assigned pods: ``x`` 2 cpu (and a Succeeded pod of 5 cpu that must not
count). Reservation ``hold`` (Available, 4 cpu for pod ``default/big``).
"""

from __future__ import annotations

import math

import pytest

from koordpy.model.objects import PodInfo, pod_from_dict
from koordpy.scheduler.plugins.reservation.enforcement import (
    node_reservations,
    node_verdict,
    owner_prefers,
    requested_by,
)
from koordpy.scheduler.plugins.reservation.ledger import REASON_RESERVED
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, allocated_annotations, reservation_from_dict
from koordpy_testkit import PodBuilder
from koordpy_testkit.reservations import owner_pod, reservation_manifest

NOW = 1_795_255_200.0
ALLOCATABLE = {"cpu": 8000, "memory": 32 << 30, "pods": 110}


def pod(
    name: str, cpu: str | None = None, node: str = "", phase: str = "Running", through: ReservationInfo | None = None
) -> PodInfo:
    builder = PodBuilder(name)
    for key, value in (allocated_annotations(through) if through is not None else {}).items():
        builder = builder.annotation(key, value)
    if cpu is not None:
        builder = builder.requests(cpu=cpu)
    if node:
        builder = builder.node(node).phase(phase)
    return pod_from_dict(builder.build())


def hold(phase: str = "Available", **kw: object) -> ReservationInfo:
    raw = reservation_manifest(
        "hold", node="n1", owners=[owner_pod("default", "big")], phase=phase, created=NOW - 60, cpu="4"
    )
    raw["spec"].update(kw)
    return reservation_from_dict(raw)


ASSIGNED = [pod("x", "2", "n1"), pod("done", "5", "n1", phase="Succeeded")]


def test_requested_sums_the_pods_that_are_not_terminated() -> None:
    assert requested_by(ASSIGNED) == {"cpu": 2000}


@pytest.mark.parametrize(
    ("name", "cpu", "blocked"),
    [
        # free for a non-owner = 8000 - 2000 requested - 4000 reserved = 2000
        ("small", "2", False),  # 2000 <= 2000
        ("medium", "3", True),  # 3000 > 2000
        ("big", "4", False),  # the owner: its own reservation never blocks it
        ("besteffort", None, False),  # no requests: never blocked
    ],
)
def test_verdict_on_a_node_with_an_available_reservation(name: str, cpu: str | None, blocked: bool) -> None:
    account = node_reservations("n1", [hold()], ASSIGNED, NOW)
    status = node_verdict(pod(name, cpu), ALLOCATABLE, account)
    assert (not status.is_success) is blocked
    if blocked:
        assert status.reason == REASON_RESERVED
        assert status.plugin == "Reservation"
        assert status.detail == "cpu: requested 3, free 2 after 4 reserved"


def test_a_reservation_on_another_node_is_not_in_the_account() -> None:
    account = node_reservations("n2", [hold()], [], NOW)
    assert account.holdings == () and math.isinf(account.valid_until)
    assert node_verdict(pod("medium", "3"), ALLOCATABLE, account).is_success


def test_valid_until_is_the_earliest_expiry_and_an_expired_one_holds_nothing() -> None:
    # created NOW-60 with ttl 120s -> expires NOW+60
    account = node_reservations("n1", [hold(ttl="120s")], ASSIGNED, NOW)
    assert account.valid_until == NOW + 60
    assert not node_verdict(pod("medium", "3"), ALLOCATABLE, account).is_success
    later = node_reservations("n1", [hold(ttl="120s")], ASSIGNED, NOW + 60)
    assert later.holdings == ()
    assert node_verdict(pod("medium", "3"), ALLOCATABLE, later).is_success


@pytest.mark.parametrize(
    ("phase", "bound_owner", "preferred"),
    [
        ("Available", False, True),
        ("Waiting", False, False),  # placed, but its room is not free yet
        ("Available", True, False),  # allocateOnce: consumed by the owner bound through it
    ],
)
def test_owner_preference(phase: str, bound_owner: bool, preferred: bool) -> None:
    res = hold(phase)
    pods = [*ASSIGNED, pod("big", "4", "n1", through=res)] if bound_owner else ASSIGNED
    account = node_reservations("n1", [res], pods, NOW)
    assert owner_prefers(pod("big", "4"), account.holdings) is preferred
    assert owner_prefers(pod("small", "1"), account.holdings) is False
