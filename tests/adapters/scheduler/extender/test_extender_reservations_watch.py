"""The extender learns Reservations from its watch of the API emulator; an unreadable one is reported.

Node n1 (8 cpu, no NodeMetric: load-aware passes). Reservation ``hold`` (Available on n1, 6 cpu for
``default/big``): a 3-cpu pod that is not ``big`` has 8 - 6 = 2 cpu there and is kept off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.resources import EVENTS, RESERVATIONS
from koordpy.runtime.clock import SystemClock
from koordpy_testkit import NodeBuilder, PodBuilder
from koordpy_testkit.apiserver import ApiServerEmulator, running_apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.reservations import owner_pod, reservation_manifest

RESERVED = "node(s) resource was(were) reserved"


@pytest.fixture
async def api() -> AsyncIterator[ApiServerEmulator]:
    async with running_apiserver(bookmark_interval=0.2) as emulator:
        yield emulator


async def wait_for(predicate: Any, timeout: float = HANG_BACKSTOP) -> None:
    """A bound, not a speed claim."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def failed_nodes(ext: Any) -> dict[str, str]:
    raw = PodBuilder("c").requests(cpu="3").build()
    resp = await ext.post("filter", {"Pod": raw, "Nodes": None, "NodeNames": ["n1"]})
    failed: dict[str, str] = orjson.loads(resp.content)["FailedNodes"]
    return failed


async def test_reservations_arrive_by_watch_and_an_unreadable_one_is_reported(
    api: ApiServerEmulator, make_ext: Any
) -> None:
    api.seed(NodeBuilder("n1").allocatable(cpu="8", memory="32Gi", pods="110").build())
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    ext = await make_ext(client=client, clock=SystemClock())
    await wait_for(lambda: ext.extender.synced is not None and ext.extender.synced.is_set())
    assert "reservations" in [r.resource.plural for r in ext.extender.reflectors]  # part of readiness
    assert await failed_nodes(ext) == {}

    good = reservation_manifest("hold", node="n1", owners=[owner_pod("default", "big")], cpu="6")
    api.seed(good)
    await wait_for(lambda: "hold" in ext.extender.cache.reservations.reservations)
    assert await failed_nodes(ext) == {"n1": RESERVED}

    bad = reservation_manifest("hold", node="n1", owners=[owner_pod("default", "big")], cpu="6")
    bad["spec"]["ttl"] = "forever"
    api.seed(bad)  # the same object, now unreadable: it holds nothing
    await wait_for(lambda: "hold" in ext.extender.cache.reservations.unreadable)
    assert await failed_nodes(ext) == {}
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_watch_conversion_errors_total{resource="reservations"} 1.0' in metrics
    assert 'koordpy_extender_cache_objects{kind="reservations"} 0.0' in metrics
    checker = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    async with checker:
        await wait_for(lambda: any(r["resource"] == "events" and r["verb"] == "create" for r in api.requests))
        events = (await checker.list(EVENTS, namespace="default")).items
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events] == [("Reservation", "hold")]
    assert "spec.ttl" in events[0]["message"]

    async with checker:
        await checker.delete(RESERVATIONS, "hold")
    await wait_for(lambda: "hold" not in ext.extender.cache.reservations.unreadable)
    assert await failed_nodes(ext) == {}
