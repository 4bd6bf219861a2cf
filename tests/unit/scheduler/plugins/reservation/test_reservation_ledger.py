"""The ledger: what placed reservations hold, owner allocation, and the reserved verdict for other pods."""

from __future__ import annotations

import pytest

from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import PodInfo, pod_from_dict
from koordpy.scheduler.plugins.reservation.ledger import (
    REASON_RESERVED,
    holdings_on_node,
    holds,
    reserved_against,
    reserved_verdict,
    to_allocate,
)
from koordpy.scheduler.plugins.reservation.spec import ANNOTATION_RESERVATION_ALLOCATED, reservation_from_dict
from koordpy_testkit import PodBuilder
from koordpy_testkit.reservations import T0, allocated, pod, reservation, reservation_dict

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


def test_allocate_once_the_first_owner_bound_through_it_takes_it_all() -> None:
    res = reservation("r", cpu="2", memory="2Gi", owners=owned_by("a", "b"), phase="Available", node="n1")
    a = pod("a", "1", "1Gi", node="n1", created=T0 + 1, annotations=allocated("r"))
    b = pod("b", "1", "1Gi", node="n1", created=T0 + 2, annotations=allocated("r"))
    (holding,) = holdings_on_node([res], [b, a], T0)
    assert holding.owners == ("default/a",)  # oldest first
    assert holding.allocated == {"cpu": 1000, "memory": GI}
    assert holding.remaining == {} and holding.consumed


def test_without_allocate_once_owners_share_up_to_the_template() -> None:
    res = reservation(
        "r", cpu="2", memory="2Gi", owners=owned_by("a", "b", "c"), phase="Available", node="n1", allocate_once=False
    )
    pods = [pod(n, "1", "1Gi", node="n1", created=T0 + i, annotations=allocated("r")) for i, n in enumerate("abc")]
    (holding,) = holdings_on_node([res], pods, T0)
    # three 1-cpu owners against 2 cpu: allocation capped at the template, nothing remains
    assert holding.owners == ("default/a", "default/b", "default/c")
    assert holding.allocated == {"cpu": 2000, "memory": 2 * GI}
    assert holding.remaining == {} and not holding.consumed


def test_the_pod_allocates_the_reservation_its_record_names() -> None:
    old = reservation("old", cpu="1", owners=owned_by("a"), phase="Available", node="n1", created=T0)
    new = reservation("new", cpu="1", owners=owned_by("a"), phase="Available", node="n1", created=T0 + 5)
    holdings = holdings_on_node([new, old], [pod("a", node="n1", annotations=allocated("new"))], T0 + 10)
    assert [(h.reservation.name, h.owners) for h in holdings] == [("old", ()), ("new", ("default/a",))]
    assert reserved_against(pod("x"), holdings) == {"cpu": 1000, "memory": GI}  # only "old" still holds


def test_owner_on_another_node_allocates_nothing() -> None:
    res = reservation("r", owners=owned_by("a"), phase="Available", node="n1")
    (holding,) = holdings_on_node([res], [pod("a", node="n2", annotations=allocated("r"))], T0)
    assert holding.owners == () and holding.remaining == {"cpu": 1000, "memory": GI}


# The reproduction, on the ledger alone: a Deployment of 2 (pods "web-a" and "web-b" of ReplicaSet
# "web"), web-a already running on n1 before the migration; web-b is migrated, its Reservation (owners: the
# ReplicaSet, 1 cpu, 1Gi) is placed on n1 next to web-a; web-b is evicted and its replacement "web-c" is Pending.
WEB = [{"controller": {"kind": "ReplicaSet", "name": "web", "namespace": "default"}}]


def web(name: str, node: str | None = None, created: float = T0, **kw: dict[str, str]) -> PodInfo:
    raw = PodBuilder(name).requests(cpu="1", memory="1Gi").owner("ReplicaSet", "web")
    if node:
        raw.node(node).phase("Running")
    for key, value in kw.get("annotations", {}).items():
        raw.annotation(key, value)
    built = raw.build()
    built["metadata"]["creationTimestamp"] = format_rfc3339(created)
    return pod_from_dict(built)


@pytest.mark.parametrize(
    ("case", "pods", "owners", "remaining_cpu", "blocks_1cpu_stranger"),
    [
        # node n1: 3 cpu; web-a (1 cpu, an owner by its controller) already there; reservation 1 cpu.
        # web-a was not bound through the reservation: it allocates nothing, 1 cpu still held;
        # a 1-cpu stranger sees 3 − 1 (web-a) − 1 (held) = 1 ≥ 1 → fits; a 2-cpu one (below) would not.
        ("sibling-before", [web("web-a", "n1", T0 - 600)], (), 1000, False),
        # a second 1-cpu pod of some other app arrives: 3 − 2 − 1 = 0 < 1 → the stranger is refused.
        ("sibling-and-other", [web("web-a", "n1", T0 - 600), pod("other", node="n1")], (), 1000, True),
        # the replacement web-c bound through it (annotation names the reservation): it takes it all,
        # nothing held; the stranger sees 3 − 2 − 0 = 1 ≥ 1.
        (
            "replacement-bound",
            [web("web-a", "n1", T0 - 600), web("web-c", "n1", T0 + 30, annotations=allocated("web-b-pmj"))],
            ("default/web-c",),
            0,
            False,
        ),
        # a record naming another Reservation (or one of the same name with another uid) allocates nothing.
        ("other-uid", [web("web-c", "n1", T0 + 30, annotations=allocated("web-b-pmj", "uid-old"))], (), 1000, False),
        # a record that cannot be read allocates nothing.
        (
            "garbage-record",
            [web("web-c", "n1", T0 + 30, annotations={ANNOTATION_RESERVATION_ALLOCATED: "{not json"})],
            (),
            1000,
            False,
        ),
        # a terminated pod bound through it no longer allocates (the reservation holds again, until the
        # manager writes Succeeded).
        (
            "bound-then-failed",
            [pod("done", node="n1", phase="Failed", annotations=allocated("web-b-pmj"))],
            (),
            1000,
            False,
        ),
    ],
)
def test_only_a_pod_bound_through_the_reservation_allocates_it(
    case: str, pods: list[PodInfo], owners: tuple[str, ...], remaining_cpu: int, blocks_1cpu_stranger: bool
) -> None:
    res = reservation("web-b-pmj", owners=WEB, phase="Available", node="n1")
    (holding,) = holdings_on_node([res], pods, T0 + 60)
    assert holding.owners == owners
    assert holding.remaining.get("cpu", 0) == remaining_cpu
    requested = {"cpu": sum(p.requests["cpu"] for p in pods if not p.terminated)}
    verdict = reserved_verdict(pod("stranger"), NODE, requested, [holding])
    assert verdict.is_success is not blocks_1cpu_stranger
    # an owner is never blocked by its own reservation
    assert reserved_verdict(web("web-d"), NODE, requested, [holding]).is_success


def test_a_sibling_never_becomes_a_current_owner_even_if_listed() -> None:
    # status.currentOwners orders the pods bound through it; it does not make a pod allocate
    raw = reservation_dict("r", owners=WEB, phase="Available", node="n1")
    raw["status"]["currentOwners"] = [{"namespace": "default", "name": "web-a"}]
    (holding,) = holdings_on_node([reservation_from_dict(raw)], [web("web-a", "n1")], T0)
    assert holding.owners == () and not holding.consumed


@pytest.mark.parametrize(
    ("case", "reservations", "bound", "pod_name", "cpu", "chosen"),
    [
        # the oldest reservation the pod owns that is not consumed
        ("oldest", [("old", T0, True), ("new", T0 + 5, True)], {}, "a", "1", "old"),
        # "old" is consumed (allocateOnce, taken by b): the next one
        ("skip-consumed", [("old", T0, True), ("new", T0 + 5, True)], {"b": "old"}, "a", "1", "new"),
        # not an owner of any: outside every reservation
        ("stranger", [("old", T0, True)], {}, "x", "1", None),
        # shared (allocateOnce false), 1 cpu held, b took 1 cpu: nothing left of cpu → not allocated
        ("shared-full", [("old", T0, False)], {"b": "old"}, "a", "1", None),
        # shared, 1 cpu held, nothing taken: a takes it (its 1 cpu fits what is left)
        ("shared-room", [("old", T0, False)], {}, "a", "1", "old"),
        # a BestEffort owner of a shared reservation with something left allocates it too
        ("shared-besteffort", [("old", T0, False)], {}, "a", None, "old"),
    ],
)
def test_which_reservation_a_bind_allocates(
    case: str,
    reservations: list[tuple[str, float, bool]],
    bound: dict[str, str],
    pod_name: str,
    cpu: str | None,
    chosen: str | None,
) -> None:
    placed = [
        reservation(n, owners=owned_by("a", "b"), phase="Available", node="n1", created=c, allocate_once=once)
        for n, c, once in reservations
    ]
    pods = [pod(p, node="n1", annotations=allocated(r)) for p, r in bound.items()]
    holdings = holdings_on_node(placed, pods, T0 + 10)
    mem = "1Gi" if cpu else None
    picked = to_allocate(pod(pod_name, cpu, mem), holdings)
    assert (picked.name if picked else None) == chosen
