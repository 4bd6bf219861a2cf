"""Reservations enforced by ``/filter`` and ``/prioritize`` over real HTTP, fed through the watch handlers.

Nodes ``held`` and ``free``: 8 cpu / 32 GiB each. Only ``free`` has a NodeMetric (usage 1 cpu, far
below the threshold): ``held`` has none, so load-aware filtering passes there and its load-aware
score is 0; only the reservation decides. ``held`` runs pod ``x`` (2 cpu) and carries reservation
``r1`` (Available, 4 cpu, owners: pods labelled ``job=big``). For a pod that is not an owner:

    free on held = 8 - 2 (requested) - 4 (reserved) = 2 cpu

so a 3-cpu pod is blocked there and a 2-cpu pod is not.
"""

from __future__ import annotations

from typing import Any

import orjson

from koordpy.scheduler.plugins.reservation.spec import ANNOTATION_RESERVATION_ALLOCATED
from koordpy_testkit import PodBuilder
from koordpy_testkit.reservations import owner_labels, reservation_manifest

RESERVED = "node(s) resource was(were) reserved"
NODES = ["held", "free"]


def pod(name: str, cpu: str | None = None, owner: bool = False) -> dict[str, Any]:
    builder = PodBuilder(name, "default")
    if cpu is not None:
        builder = builder.requests(cpu=cpu)
    if owner:
        builder = builder.label("job", "big")
    raw = builder.build()
    raw["metadata"]["resourceVersion"] = "1"
    raw["metadata"]["creationTimestamp"] = "2026-11-20T00:00:00Z"
    return raw


def seed(ext: Any, **spec: Any) -> None:
    for name in NODES:
        ext.node(name, cpu="8", memory="32Gi")
    ext.metric("free", cpu="1", memory="4Gi")
    ext.pod_event("ADDED", PodBuilder("x").requests(cpu="2").node("held").phase("Running").build())
    raw = reservation_manifest(
        "r1", node="held", owners=[owner_labels(job="big")], created=ext.clock.now() - 60, cpu="4"
    )
    raw["spec"].update(spec)
    ext.extender.cache.handler("reservations")("ADDED", raw)


async def filtered(ext: Any, raw: dict[str, Any]) -> dict[str, Any]:
    resp = await ext.post("filter", {"Pod": raw, "Nodes": None, "NodeNames": NODES})
    assert resp.status_code == 200
    result: dict[str, Any] = orjson.loads(resp.content)
    assert result["Error"] == ""
    return result


async def scores(ext: Any, raw: dict[str, Any], names: list[str]) -> dict[str, int]:
    resp = await ext.post("prioritize", {"Pod": raw, "Nodes": None, "NodeNames": names})
    return dict.fromkeys(names, 0) | {e["Host"]: e["Score"] for e in orjson.loads(resp.content)}  # 0: left out


async def bind(ext: Any, raw: dict[str, Any], node: str) -> str:
    meta = raw["metadata"]
    args = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    error: str = orjson.loads((await ext.post("bind", args)).content)["Error"]
    return error


async def test_a_pod_that_does_not_own_the_reservation_is_kept_off_its_room(ext: Any) -> None:
    seed(ext)
    blocked = await filtered(ext, pod("c", "3"))
    assert blocked["NodeNames"] == ["free"] and blocked["FailedNodes"] == {"held": RESERVED}
    fits = await filtered(ext, pod("d", "2"))  # 2 <= 2: the unreserved rest of the node is usable
    assert fits["NodeNames"] == NODES and fits["FailedNodes"] == {}
    # the Nodes (items) form of the protocol carries the same verdict
    items = [{"metadata": {"name": n}} for n in NODES]
    resp = await ext.post("filter", {"Pod": pod("c", "3"), "Nodes": {"items": items}, "NodeNames": None})
    result = orjson.loads(resp.content)
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["free"]
    assert result["FailedNodes"] == {"held": RESERVED}


async def test_a_besteffort_pod_is_never_blocked(ext: Any) -> None:
    seed(ext)
    result = await filtered(ext, pod("be"))
    assert result["NodeNames"] == NODES and result["FailedNodes"] == {}


async def test_the_owner_passes_and_prefers_its_reserved_node(ext: Any) -> None:
    seed(ext)
    owner = pod("big-0", "4", owner=True)
    result = await filtered(ext, owner)
    assert result["NodeNames"] == NODES and result["FailedNodes"] == {}
    owned = await scores(ext, owner, NODES)
    other = await scores(ext, pod("e", "4"), NODES)  # the same requests, not an owner
    # the owner gets the maximum extender priority on held; free keeps its load-aware score
    assert owned["held"] == 10 and owned["free"] == other["free"] > 0
    assert other["held"] == 0


async def test_an_owner_bind_allocates_before_the_next_filter(ext: Any) -> None:
    """allocateOnce (default): big-0 (1 cpu) takes the whole reservation at its bind, so the 3 cpu it
    did not need are free at once (8 - 2 - 1 = 5 >= 3) and the second owner loses its preference."""
    seed(ext)
    first, second, other = pod("big-0", "1", owner=True), pod("big-1", "1", owner=True), pod("c", "3")
    assert (await filtered(ext, other))["FailedNodes"] == {"held": RESERVED}
    assert (await scores(ext, second, NODES))["held"] == 10
    await filtered(ext, first)
    assert await bind(ext, first, "held") == ""
    assert (await filtered(ext, other))["FailedNodes"] == {}
    assert (await scores(ext, second, NODES))["held"] < 10
    holding = ext.extender.cache.reservations.account("held", ext.clock.now()).holdings[0]
    assert holding.owners == ("default/big-0",) and holding.consumed
    # the binding carried Koordinator's record of the Reservation, so the pod says it on the API server
    uid = holding.reservation.uid
    assert ext.binder.annotations == [{ANNOTATION_RESERVATION_ALLOCATED: f'{{"name":"r1","uid":"{uid}"}}'}]
    # the second owner, bound elsewhere, carries nothing
    await filtered(ext, second)
    assert await bind(ext, second, "free") == ""
    assert ext.binder.annotations[-1] == {}


async def test_a_sibling_already_on_the_node_does_not_consume_the_reservation(ext: Any) -> None:
    """An owner (label job=big, 1 cpu) that ran on held before the reservation, bound without it:
    free on held for a non-owner = 8 - 3 (x and the sibling) - 4 (still reserved) = 1 cpu."""
    seed(ext)
    sibling = PodBuilder("big-old").requests(cpu="1").label("job", "big").node("held").phase("Running").build()
    ext.pod_event("ADDED", sibling)
    blocked = await filtered(ext, pod("c", "2"))
    assert blocked["FailedNodes"] == {"held": RESERVED}
    fits = await filtered(ext, pod("d", "1"))  # 1 <= 1
    assert fits["FailedNodes"] == {}
    holding = ext.extender.cache.reservations.account("held", ext.clock.now()).holdings[0]
    assert holding.owners == () and holding.remaining == {"cpu": 4000}
    # the owner still binds through it next to its sibling, and then it is consumed
    owner = pod("big-1", "4", owner=True)
    assert (await scores(ext, owner, NODES))["held"] == 10
    await filtered(ext, owner)
    assert await bind(ext, owner, "held") == ""
    holding = ext.extender.cache.reservations.account("held", ext.clock.now()).holdings[0]
    assert holding.owners == ("default/big-1",) and holding.consumed


async def test_a_failed_owner_bind_gives_the_reservation_back(ext: Any) -> None:
    from koordpy.kube.errors import Conflict

    seed(ext)
    first, other = pod("big-0", "1", owner=True), pod("c", "3")
    await filtered(ext, first)
    ext.binder.fail_with = Conflict(409, "conflict")
    assert "failed" in await bind(ext, first, "held")
    assert (await filtered(ext, other))["FailedNodes"] == {"held": RESERVED}


async def test_an_expired_reservation_stops_holding_on_the_injected_clock(ext: Any) -> None:
    seed(ext, ttl="120s")  # created 60 s before the clock's start: expires 60 s after it
    assert (await filtered(ext, pod("c", "3")))["FailedNodes"] == {"held": RESERVED}
    ext.clock.advance(59)
    assert (await filtered(ext, pod("c", "3")))["FailedNodes"] == {"held": RESERVED}
    ext.clock.advance(1)
    result = await filtered(ext, pod("c", "3"))
    assert result["NodeNames"] == NODES and result["FailedNodes"] == {}
    assert (await scores(ext, pod("big-0", "4", owner=True), NODES))["held"] < 10


async def test_without_reservations_nothing_is_looked_at(ext: Any) -> None:
    for name in NODES:
        ext.node(name, cpu="8", memory="32Gi")
        ext.metric(name, cpu="1", memory="4Gi")
    result = await filtered(ext, pod("c", "3"))
    assert result["NodeNames"] == NODES
    await scores(ext, pod("c", "3"), NODES)
    assert ext.extender.cache.reservations.recomputed == {}


async def test_debug_node_shows_the_reservation_account(ext: Any) -> None:
    seed(ext, ttl="120s")
    view = orjson.loads((await ext.http.get("/debug/nodes/held")).content)
    assert view["reservations"] == {
        "placed": ["r1"],
        "requested": {"cpu": 2000},
        "validUntil": ext.clock.now() + 60,
        "holdings": [
            {
                "name": "r1",
                "phase": "Available",
                "allocatedTo": [],
                "requests": {"cpu": 4000},
                "allocated": {},
                "remaining": {"cpu": 4000},
                "consumed": False,
            }
        ],
    }
    assert "reservations" not in orjson.loads((await ext.http.get("/debug/nodes/free")).content)
