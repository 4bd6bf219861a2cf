"""The ledger: what placed reservations hold, owner allocation, and the reserved verdict for other pods."""

from __future__ import annotations

import pytest

from koordpy.scheduler.plugins.reservation.ledger import (
    REASON_RESERVED,
    holdings_on_node,
    holds,
    reserved_against,
    reserved_verdict,
)
from koordpy_testkit.reservations import T0, pod, reservation

GI = 1024**3
NODE = {"cpu": 3000, "memory": 3 * GI}


def owned_by(*names: str) -> list[dict[str, dict[str, str]]]:
    return [{"object": {"namespace": "default", "name": n}} for n in names]


@pytest.mark.parametrize(
    ("phase", "node", "now", "held"),
    [
        ("Available", "n1", T0, True),
        ("Waiting", "n1", T0, True),
        ("Pending", "", T0, False),
        ("Available", "", T0, False),  # no node: holds nothing
        ("Succeeded", "n1", T0, False),
        ("Failed", "n1", T0, False),
        ("Available", "n1", T0 + 86400, False),  # default ttl 24h: expired
    ],
)
def test_what_holds(phase: str, node: str, now: float, held: bool) -> None:
    assert holds(reservation("r", phase=phase, node=node), now) is held


def test_worked_example_of_the_module_docstring() -> None:
    # allocatable 3, requested 1, a Waiting reservation holding 3 for big:
    # a 1-cpu pod: 3 − 1 − 3 = −1 < 1 → blocked; big itself: its own reservation is not counted.
    res = reservation("hold", cpu="3", memory="1Gi", owners=owned_by("big"), phase="Waiting", node="n1")
    running = [pod("small-1", node="n1")]
    holdings = holdings_on_node([res], running, T0)
    requested = {"cpu": 1000, "memory": GI}
    verdict = reserved_verdict(pod("small-2"), NODE, requested, holdings)
    assert (verdict.reason, verdict.plugin) == (REASON_RESERVED, "Reservation")
    assert verdict.detail == "cpu: requested 1, free 0 after 3 reserved"
    assert reserved_verdict(pod("big", "3"), NODE, requested, holdings).is_success
    assert reserved_verdict(pod("be", None, None), NODE, requested, holdings).is_success  # BestEffort


def test_allocate_once_the_first_owner_takes_it_all() -> None:
    res = reservation("r", cpu="2", memory="2Gi", owners=owned_by("a", "b"), phase="Available", node="n1")
    a = pod("a", "1", "1Gi", node="n1", created=T0 + 1)
    b = pod("b", "1", "1Gi", node="n1", created=T0 + 2)
    (holding,) = holdings_on_node([res], [b, a], T0)
    assert holding.owners == ("default/a",)  # oldest owner first
    assert holding.allocated == {"cpu": 1000, "memory": GI}
    assert holding.remaining == {} and holding.consumed


def test_without_allocate_once_owners_share_up_to_the_template() -> None:
    res = reservation(
        "r", cpu="2", memory="2Gi", owners=owned_by("a", "b", "c"), phase="Available", node="n1", allocate_once=False
    )
    pods = [pod(n, "1", "1Gi", node="n1", created=T0 + i) for i, n in enumerate("abc")]
    (holding,) = holdings_on_node([res], pods, T0)
    # three 1-cpu owners against 2 cpu: allocation capped at the template, nothing remains
    assert holding.owners == ("default/a", "default/b", "default/c")
    assert holding.allocated == {"cpu": 2000, "memory": 2 * GI}
    assert holding.remaining == {} and not holding.consumed


def test_an_owner_allocates_from_one_reservation_only_the_oldest() -> None:
    old = reservation("old", cpu="1", owners=owned_by("a"), phase="Available", node="n1", created=T0)
    new = reservation("new", cpu="1", owners=owned_by("a"), phase="Available", node="n1", created=T0 + 5)
    holdings = holdings_on_node([new, old], [pod("a", node="n1")], T0 + 10)
    assert [(h.reservation.name, h.owners) for h in holdings] == [("old", ("default/a",)), ("new", ())]
    assert reserved_against(pod("x"), holdings) == {"cpu": 1000, "memory": GI}  # only "new" still holds


def test_owner_on_another_node_allocates_nothing() -> None:
    res = reservation("r", owners=owned_by("a"), phase="Available", node="n1")
    (holding,) = holdings_on_node([res], [pod("a", node="n2")], T0)
    assert holding.owners == () and holding.remaining == {"cpu": 1000, "memory": GI}
