"""Health, readiness, metrics and the debug view over HTTP."""

from __future__ import annotations

from typing import Any

import orjson

from koordpy_testkit import PodBuilder


async def test_healthz_and_readyz_without_watches(ext: Any) -> None:
    assert (await ext.http.get("/healthz")).text == "ok"
    resp = await ext.http.get("/readyz")  # no reflectors: nothing to wait for
    assert resp.status_code == 200


async def test_metrics_content(ext: Any) -> None:
    ext.node("n1")
    ext.metric("n1", cpu="4", memory="8Gi")
    ext.pod_event("ADDED", PodBuilder("a").requests(cpu="1").node("n1").build())
    ext.pod_event("ADDED", PodBuilder("pending").requests(cpu="1").build())
    ext.pod_event("ADDED", {"metadata": {}})  # unconvertible: counted, skipped
    pod = PodBuilder("p").requests(cpu="1").build()
    for _ in range(3):
        await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n1"]})
    await ext.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": ["n1"]})
    await ext.http.post("/filter", content=b"nope", headers={"Content-Type": "application/json"})
    resp = await ext.http.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert 'koordpy_extender_request_duration_seconds_bucket{le="0.0005",verb="filter"}' in text
    assert 'koordpy_extender_request_duration_seconds_count{verb="filter"} 4.0' in text
    assert 'koordpy_extender_requests_total{outcome="ok",verb="filter"} 3.0' in text
    assert 'koordpy_extender_requests_total{outcome="bad_request",verb="filter"} 1.0' in text
    assert 'koordpy_extender_requests_total{outcome="ok",verb="prioritize"} 1.0' in text
    assert 'koordpy_extender_cache_objects{kind="nodes"} 1.0' in text
    assert 'koordpy_extender_cache_objects{kind="assigned_pods"} 1.0' in text
    assert 'koordpy_extender_cache_objects{kind="pending_pods"} 1.0' in text
    assert 'koordpy_extender_cache_objects{kind="nodemetrics"} 1.0' in text
    assert 'koordpy_extender_watch_conversion_errors_total{resource="pods"} 1.0' in text
    assert 'koordpy_extender_watch_restarts_total{resource="nodes"} 0.0' in text
    assert 'koordpy_extender_watch_relists_total{resource="pods"} 0.0' in text
    assert "koordpy_extender_bind_failures_total" in text


async def test_debug_node_shows_what_the_plugin_sees(ext: Any) -> None:
    ext.node("n1", cpu="32", memory="128Gi")
    ext.metric("n1", cpu="4", memory="32Gi", age=30)
    ext.pod_event("ADDED", PodBuilder("a", "team").requests(cpu="2", memory="1Gi").node("n1").build())
    resp = await ext.http.get("/debug/nodes/n1")
    assert resp.status_code == 200
    view = orjson.loads(resp.content)
    assert view["name"] == "n1"
    assert view["allocatable"]["cpu"] == 32000
    assert view["assignedPods"] == ["team/a"]
    load = view["loadAware"]
    assert load["metric"] == {
        "present": True,
        "hasNodeUsage": True,
        "updateTime": ext.clock.now() - 30,
        "ageSeconds": 30.0,
        "expired": False,
        "expirationSeconds": 180,
    }
    assert load["filter"]["thresholds"] == {"cpu": 65, "memory": 95}
    # the pod has no reported usage, so its whole estimate (2000m * 85 % = 1700m) is the delta
    assert load["usage"]["nodeDelta"]["cpu"] == 1700
    assert load["filter"]["base"]["cpu"] == 4000 + 1700
    assert [p["pod"] for p in load["pods"]] == ["team/a"]
    assert load["pods"][0]["estimated"]["cpu"] == 1700

    ext.clock.advance(200)  # past nodeMetricExpirationSeconds
    view = orjson.loads((await ext.http.get("/debug/nodes/n1")).content)
    assert view["loadAware"]["metric"]["expired"] is True


async def test_debug_unknown_node_is_404(ext: Any) -> None:
    resp = await ext.http.get("/debug/nodes/absent")
    assert resp.status_code == 404
    assert "absent" in orjson.loads(resp.content)["Error"]
