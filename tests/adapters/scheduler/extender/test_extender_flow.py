"""filter -> prioritize -> bind -> filter over real HTTP: a bind counts at once, a failed bind does not.

Node ``busy``: 32 cores allocatable, NodeMetric usage 19 cores (updated 30 s ago, no per-pod usage),
threshold cpu 65 %. Each pod requests cpu 2 -> estimate 1700m (85 %).

* before any bind:  19000 + 1700        = 20700 / 32000 = 64.69 % -> 65, not > 65: passes
* after one bind:   19000 + 1700 + 1700 = 22400 / 32000 = 70 %    > 65:       fails
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from koordpy.kube.errors import Conflict, NotFound
from koordpy_testkit import PodBuilder

CPU_FAIL = "node(s) cpu usage exceed threshold"


def pod(name: str) -> dict[str, Any]:
    raw = PodBuilder(name, "team").requests(cpu="2", memory="1Gi").build()
    raw["metadata"]["resourceVersion"] = "7"
    return raw


def seed(ext: Any) -> None:
    ext.node("busy")
    ext.node("calm")
    ext.metric("busy", cpu="19", memory="16Gi")
    ext.metric("calm", cpu="2", memory="16Gi")


async def filter_names(ext: Any, raw: dict[str, Any]) -> dict[str, Any]:
    resp = await ext.post("filter", {"Pod": raw, "Nodes": None, "NodeNames": ["busy", "calm"]})
    assert resp.status_code == 200
    result: dict[str, Any] = orjson.loads(resp.content)
    return result


async def scores(ext: Any, raw: dict[str, Any], names: list[str]) -> dict[str, int]:
    resp = await ext.post("prioritize", {"Pod": raw, "Nodes": None, "NodeNames": names})
    return {e["Host"]: e["Score"] for e in orjson.loads(resp.content)}


def bind_args(raw: dict[str, Any], node: str) -> dict[str, str]:
    meta = raw["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


async def test_second_pod_sees_the_first_pods_estimate(ext: Any) -> None:
    seed(ext)
    first, second = pod("a"), pod("b")
    result = await filter_names(ext, first)
    assert result["NodeNames"] == ["busy", "calm"] and result["FailedNodes"] == {}
    before = await scores(ext, first, result["NodeNames"])
    bound = await ext.post("bind", bind_args(first, "busy"))
    assert orjson.loads(bound.content) == {"Error": ""}

    result = await filter_names(ext, second)
    assert result["NodeNames"] == ["calm"]
    assert result["FailedNodes"] == {"busy": CPU_FAIL}
    after = await scores(ext, second, ["busy", "calm"])
    # busy cpu score: (32000-20700)*100//32000 = 35 before, (32000-22400)*100//32000 = 30 after
    assert after["busy"] < before["busy"] or after["busy"] == before["busy"] == 0
    assert after["calm"] == before["calm"]

    # The watch reports the binding: the estimate is still counted once, not twice.
    bound_raw = PodBuilder("a", "team").requests(cpu="2", memory="1Gi").node("busy").build()
    ext.pod_event("MODIFIED", bound_raw)
    assert len(ext.extender.state.assigned) == 1
    small = PodBuilder("c", "team").requests(cpu="100m", memory="1Gi").build()
    # 19000 + 1700 + 85 = 20785 -> 64.95 % -> 65: passes (a double count would be 70.3 %)
    assert (await filter_names(ext, small))["NodeNames"] == ["busy", "calm"]


async def test_failed_binding_is_unassumed(ext: Any) -> None:
    seed(ext)
    for failure, kind in (
        (
            Conflict(409, "Conflict", 'Operation cannot be fulfilled on pods/binding "a": pod a is already assigned'),
            "Conflict",
        ),
        (NotFound(404, "NotFound", 'pods "a" not found'), "NotFound"),
    ):
        first = pod("a")
        await filter_names(ext, first)
        ext.binder.fail_with = failure
        resp = await ext.post("bind", bind_args(first, "busy"))
        assert resp.status_code == 200
        error = orjson.loads(resp.content)["Error"]
        assert kind in error and "team/a" in error
        assert ext.extender.state.assigned == {}
        # nothing was counted: the next pod still fits on busy
        assert (await filter_names(ext, pod("b")))["NodeNames"] == ["busy", "calm"]
        metrics = (await ext.http.get("/metrics")).text
        assert f'koordpy_extender_bind_failures_total{{reason="{kind}"}} 1.0' in metrics


async def test_bind_of_an_unseen_pod_still_binds(ext: Any) -> None:
    seed(ext)
    resp = await ext.post("bind", {"PodName": "x", "PodNamespace": "team", "PodUID": "u-x", "Node": "calm"})
    assert orjson.loads(resp.content) == {"Error": ""}
    assert ext.binder.calls == [("team", "x", "u-x", "calm")]
    assert ext.extender.state.assigned == {}
    metrics = (await ext.http.get("/metrics")).text
    assert "koordpy_extender_binds_without_cached_pod_total 1.0" in metrics


async def test_pending_pod_from_the_watch_is_assumed_without_a_filter_call(ext: Any) -> None:
    seed(ext)
    pending = pod("w")
    ext.pod_event("ADDED", pending)
    resp = await ext.post("bind", bind_args(pending, "busy"))
    assert orjson.loads(resp.content) == {"Error": ""}
    assert ext.extender.state.assigned[pending["metadata"]["uid"]].node_name == "busy"


async def test_bind_timeout_is_an_error_and_unassumes(make_ext: Any) -> None:
    ext = await make_ext(bindTimeoutSeconds=0.2)
    seed(ext)
    ext.binder.gate = asyncio.Event()  # never opened: the POST hangs
    first = pod("a")
    await filter_names(ext, first)
    resp = await ext.post("bind", bind_args(first, "busy"))
    assert "Timeout" in orjson.loads(resp.content)["Error"]
    assert ext.extender.state.assigned == {}
