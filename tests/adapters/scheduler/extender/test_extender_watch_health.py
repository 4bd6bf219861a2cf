"""The extender's watches against hostile input from the emulator: malformed events and list items are
skipped, counted and reported while the cache keeps following the cluster; a watch in a failure loop
makes the extender unready until it recovers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.resources import EVENTS, NODES
from koordpy.runtime.clock import SystemClock
from koordpy_testkit import NodeBuilder, NodeMetricBuilder
from koordpy_testkit.apiserver import ApiServerEmulator, running_apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP


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


def seed(api: ApiServerEmulator) -> None:
    api.seed(NodeBuilder("n1").allocatable(cpu="32", memory="128Gi", pods="110").build())
    api.seed(NodeMetricBuilder("n1").updated(time.time() - 30).usage(cpu="4", memory="16Gi").build())


async def started(api: ApiServerEmulator, make_ext: Any) -> Any:
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    ext = await make_ext(client=client, clock=SystemClock())
    await wait_for(lambda: ext.extender.synced is not None and ext.extender.synced.is_set())
    return ext


async def test_poison_objects_are_skipped_and_reported_and_the_cache_keeps_following(
    api: ApiServerEmulator, make_ext: Any
) -> None:
    seed(api)
    api.inject_list_items("nodes", None, {"metadata": "oops"})  # in the first list
    ext = await started(api, make_ext)
    assert sorted(ext.extender.state.nodes) == ["n1"]
    api.inject_watch_event("nodes", {"type": "MODIFIED", "object": {"metadata": "oops"}})
    api.inject_watch_event("pods", [1, 2])
    api.inject_watch_event(
        "nodemetrics",
        {"type": "MODIFIED", "object": {"metadata": {"name": "n1", "resourceVersion": 12}}},
        group="slo.koordinator.sh",
    )
    api.seed(NodeBuilder("n2").allocatable(cpu="8", memory="32Gi", pods="110").build())
    await wait_for(lambda: "n2" in ext.extender.state.nodes)

    assert (await ext.http.get("/readyz")).text == "ok"  # skipped objects are not a failure
    metrics = (await ext.http.get("/metrics")).text
    for resource, reason, count in (
        ("nodes", "not_an_object", 1),
        ("nodes", "bad_metadata", 2),
        ("pods", "unknown_type", 1),
        ("nodemetrics", "bad_resource_version", 1),
    ):
        line = f'koordpy_extender_watch_bad_objects_total{{reason="{reason}",resource="{resource}"}} {count}.0'
        assert line in metrics
    assert 'koordpy_extender_watch_failing{resource="nodes"} 0.0' in metrics
    # the only malformed object with a name gets an Event where `kubectl describe nodemetric n1` shows it
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    async with client:
        await wait_for(lambda: any(r["resource"] == "events" and r["verb"] == "create" for r in api.requests))
        events = (await client.list(EVENTS, namespace="default")).items
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in events] == [
        ("NodeMetric", "n1", "MalformedObjectIgnored")
    ]
    assert events[0]["source"]["component"] == "koordpy-extender"


async def test_an_object_the_cache_cannot_convert_gets_an_event_and_is_counted(
    api: ApiServerEmulator, make_ext: Any
) -> None:
    seed(api)
    ext = await started(api, make_ext)
    bad = NodeBuilder("garbled").build()
    bad["status"] = {"allocatable": {"cpu": "garbage"}}
    api.seed(bad)
    api.seed(NodeBuilder("n2").allocatable(cpu="8", memory="32Gi", pods="110").build())
    await wait_for(lambda: "n2" in ext.extender.state.nodes)
    assert "garbled" not in ext.extender.state.nodes
    assert (await ext.http.get("/readyz")).text == "ok"
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_watch_conversion_errors_total{resource="nodes"} 1.0' in metrics
    # a named Node is the cache's unreadable-node report (filtered, one Event per transition), not the watch's
    assert 'koordpy_extender_invalid_nodes{resource="nodes"} 1.0' in metrics
    assert "koordpy_extender_watch_bad_objects_total{" not in metrics
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    async with client:
        await wait_for(lambda: any(r["resource"] == "events" and r["verb"] == "create" for r in api.requests))
        (event,) = (await client.list(EVENTS, namespace="default")).items
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == ("Node", "garbled")
    assert event["reason"] == "KoordpyInvalidNode" and "status.allocatable.cpu" in event["message"]


async def test_a_watch_in_a_failure_loop_makes_the_extender_unready_until_it_recovers(
    api: ApiServerEmulator, make_ext: Any
) -> None:
    seed(api)
    ext = await started(api, make_ext)
    assert (await ext.http.get("/readyz")).status_code == 200
    rule = api.inject_error(500, verb="watch", resource="nodes", count=10_000)
    await api.stop()  # ends the open streams; every new nodes watch now fails
    await api.start()
    await wait_for(lambda: ext.extender.not_ready() is not None)
    resp = await ext.http.get("/readyz")
    assert resp.status_code == 503 and "watch failing: nodes" in resp.text
    assert 'koordpy_extender_watch_failing{resource="nodes"} 1.0' in (await ext.http.get("/metrics")).text
    rule.count = 0  # the API server recovers; the next change moves the watch forward
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    async with client:
        await client.create(NODES, NodeBuilder("n2").build())
    await wait_for(lambda: "n2" in ext.extender.state.nodes)
    assert (await ext.http.get("/readyz")).status_code == 200
