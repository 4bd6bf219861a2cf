"""The extender against the API emulator: real reflectors (list+watch), real ``pods/binding`` calls.

Cluster: nodes ``busy`` and ``calm`` (32 cores each), NodeMetrics updated 30 s ago with cpu usage
19 and 2 cores, threshold cpu 65 %. Each test pod requests cpu 2 -> estimate 1700m.
``busy``: 19000 + 1700 = 64.7 % -> passes; after one bind 19000 + 3400 = 70 % -> fails.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from koordpy.config import SchedulerConfiguration, validate
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.runtime.clock import SystemClock
from koordpy.scheduler.extender.server import build_extender
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.apiserver import ApiServerEmulator, running_apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP

CPU_FAIL = "node(s) cpu usage exceed threshold"


@pytest.fixture
async def api() -> AsyncIterator[ApiServerEmulator]:
    async with running_apiserver(bookmark_interval=0.2) as emulator:
        yield emulator


def seed(api: ApiServerEmulator) -> None:
    now = time.time()
    for name, cpu in (("busy", "19"), ("calm", "2")):
        api.seed(NodeBuilder(name).allocatable(cpu="32", memory="128Gi", pods="110").build())
        api.seed(NodeMetricBuilder(name).updated(now - 30).usage(cpu=cpu, memory="16Gi").build())
    api.seed(PodBuilder("old", "team").requests(cpu="1").node("calm").scheduled_at(now - 3600).build())


def new_pod(api: ApiServerEmulator, name: str) -> dict[str, Any]:
    (stored,) = api.seed(PodBuilder(name, "team").requests(cpu="2", memory="1Gi").build())
    return stored


async def wait_for(predicate: Any, timeout: float = HANG_BACKSTOP) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def bind_args(pod: dict[str, Any], node: str) -> dict[str, str]:
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


async def filter_result(ext: Any, pod: dict[str, Any]) -> dict[str, Any]:
    resp = await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["busy", "calm"]})
    assert resp.status_code == 200
    result: dict[str, Any] = orjson.loads(resp.content)
    return result


async def started(api: ApiServerEmulator, make_ext: Any) -> Any:
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    return await make_ext(client=client, clock=SystemClock())


async def test_ready_only_after_every_first_list(api: ApiServerEmulator, make_ext: Any) -> None:
    seed(api)
    api.inject_error(500, verb="list", resource="nodemetrics", count=3)
    ext = await started(api, make_ext)
    resp = await ext.http.get("/readyz")
    assert resp.status_code == 503
    assert "nodemetrics" in resp.text
    result = await filter_result(ext, PodBuilder("p", "team").requests(cpu="1").build())
    assert result["NodeNames"] is None and "not ready" in result["Error"]
    await wait_for(lambda: ext.extender.not_ready() is None)
    assert (await ext.http.get("/readyz")).status_code == 200
    assert sorted(ext.extender.state.nodes) == ["busy", "calm"]
    assert len(ext.extender.state.assigned) == 1
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_cache_objects{kind="nodemetrics"} 2.0' in metrics


async def test_filter_prioritize_bind_then_the_next_pod_sees_the_estimate(
    api: ApiServerEmulator, make_ext: Any
) -> None:
    seed(api)
    first = new_pod(api, "a")
    ext = await started(api, make_ext)
    await wait_for(lambda: ext.extender.not_ready() is None)
    await wait_for(lambda: first["metadata"]["uid"] in ext.extender.cache.pending)

    result = await filter_result(ext, first)
    assert result["NodeNames"] == ["busy", "calm"]
    prio = await ext.post("prioritize", {"Pod": first, "Nodes": None, "NodeNames": result["NodeNames"]})
    assert {e["Host"] for e in orjson.loads(prio.content)} == {"busy", "calm"}
    bound = await ext.post("bind", bind_args(first, "busy"))
    assert orjson.loads(bound.content) == {"Error": ""}
    stored = api.state.objects[next(k for k in api.state.objects if k[1] == "pods")][("team", "a")]
    assert stored["spec"]["nodeName"] == "busy"

    second = new_pod(api, "b")
    result = await filter_result(ext, second)  # right after the bind, before or after the watch: same answer
    assert result["NodeNames"] == ["calm"] and result["FailedNodes"] == {"busy": CPU_FAIL}

    # the watch reports the binding; the estimate is still counted once
    await wait_for(lambda: ext.extender.state.assigned[first["metadata"]["uid"]].scheduled_time is not None)
    assert (await filter_result(ext, second))["FailedNodes"] == {"busy": CPU_FAIL}
    small = new_pod(api, "c")
    small["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100m"
    assert (await filter_result(ext, small))["NodeNames"] == ["busy", "calm"]  # 64.95 %: one estimate, not two


async def test_binding_conflict_and_not_found_are_reported_and_unassumed(api: ApiServerEmulator, make_ext: Any) -> None:
    seed(api)
    pod = new_pod(api, "a")
    ext = await started(api, make_ext)
    await wait_for(lambda: ext.extender.not_ready() is None)
    assert orjson.loads((await ext.post("bind", bind_args(pod, "calm"))).content) == {"Error": ""}
    await wait_for(lambda: pod["metadata"]["uid"] in ext.extender.state.assigned)

    # 409: already bound (kube-scheduler retrying a bind whose answer it lost)
    again = orjson.loads((await ext.post("bind", bind_args(pod, "busy"))).content)["Error"]
    assert "Conflict" in again and "already assigned" in again
    assert ext.extender.state.assigned[pod["metadata"]["uid"]].node_name == "calm"

    # 404: the pod is gone; the filter it went through still left it in the recent cache
    ghost = PodBuilder("ghost", "team").requests(cpu="2").build()
    await filter_result(ext, ghost)
    missing = orjson.loads((await ext.post("bind", bind_args(ghost, "busy"))).content)["Error"]
    assert "NotFound" in missing
    assert ghost["metadata"]["uid"] not in ext.extender.state.assigned
    assert (await filter_result(ext, new_pod(api, "b")))["NodeNames"] == ["busy", "calm"]

    # 500 from the API server: reported, un-assumed
    api.inject_error(500, verb="create", resource="pods", subresource="binding")
    pod_d = new_pod(api, "d")
    await wait_for(lambda: pod_d["metadata"]["uid"] in ext.extender.cache.pending)
    failed = orjson.loads((await ext.post("bind", bind_args(pod_d, "busy"))).content)["Error"]
    assert "ServerError" in failed
    assert pod_d["metadata"]["uid"] not in ext.extender.state.assigned
    metrics = (await ext.http.get("/metrics")).text
    for kind in ("Conflict", "NotFound", "ServerError"):
        assert f'koordpy_extender_bind_failures_total{{reason="{kind}"}} 1.0' in metrics


async def test_gc_is_frozen_after_the_first_lists(api: ApiServerEmulator) -> None:
    seed(api)
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    config = validate(SchedulerConfiguration, {})
    extender = build_extender(config, client, clock=SystemClock(), freeze_gc=True)
    before = gc.get_freeze_count()
    try:
        async with extender.app.router.lifespan_context(extender.app):
            assert extender.synced is not None
            await asyncio.wait_for(extender.synced.wait(), HANG_BACKSTOP)
            assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
