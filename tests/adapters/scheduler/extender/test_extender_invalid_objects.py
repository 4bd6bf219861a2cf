"""Unreadable objects over HTTP: a Node or NodeMetric that cannot be read is the safe side (filtered with a reason,
score 0, reported), a hostile pod gets a clean answer, prioritize stays valid JSON, bind checks names."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from koordpy.scheduler.extender.cache import ClusterCache
from koordpy.scheduler.extender.invalid_events import REASONS, NodeEventReporter
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy_testkit import FakeClock, NodeBuilder, NodeMetricBuilder
from koordpy_testkit.bounds import eventually

POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {"containers": []}}
HUGE = ["1e99999999", "1e400"]


def _bad_metric(ext: Any, name: str, cpu: str) -> dict[str, Any]:
    return NodeMetricBuilder(name).updated(ext.clock.now() - 30).usage(cpu=cpu, memory="1Gi").build()


@pytest.mark.parametrize("cpu", [*HUGE, "-4"])
async def test_unreadable_nodemetric_filters_its_node_and_scores_zero(ext: Any, cpu: str) -> None:
    for name in ("good", "bad"):
        ext.node(name)
    ext.metric("good", cpu="1", memory="1Gi")
    ext.extender.cache.handler("nodemetrics")("ADDED", _bad_metric(ext, "bad", cpu))
    body = {"Pod": POD, "Nodes": None, "NodeNames": ["good", "bad"]}
    answer = orjson.loads((await ext.post("filter", body)).content)
    assert answer["NodeNames"] == ["good"]
    assert answer["FailedNodes"] == {"bad": "node(s) nodeMetric invalid"}
    scores = orjson.loads((await ext.post("prioritize", body)).content)
    assert "bad" not in {row["Host"] for row in scores}  # score 0: left out of the answer
    text = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_invalid_nodes{resource="nodemetrics"} 1.0' in text
    # A readable NodeMetric for the node lifts it again.
    ext.metric("bad", cpu="1", memory="1Gi")
    answer = orjson.loads((await ext.post("filter", body)).content)
    assert answer["NodeNames"] == ["good", "bad"]
    assert 'koordpy_extender_invalid_nodes{resource="nodemetrics"} 0.0' in (await ext.http.get("/metrics")).text


@pytest.mark.parametrize("cpu", HUGE)
async def test_unreadable_raw_allocatable_filters_the_node(ext: Any, cpu: str) -> None:
    ext.node("good")
    ext.node("bad")  # first readable, then the annotation arrives over the watch
    raw = (
        NodeBuilder("bad")
        .allocatable(cpu="32", memory="128Gi", pods="110")
        .annotation("node.koordinator.sh/raw-allocatable", orjson.dumps({"cpu": cpu}).decode())
        .build()
    )
    ext.extender.cache.handler("nodes")("MODIFIED", raw)
    body = {"Pod": POD, "Nodes": None, "NodeNames": ["good", "bad"]}
    answer = orjson.loads((await ext.post("filter", body)).content)
    assert answer["NodeNames"] == ["good"]
    assert answer["FailedNodes"] == {"bad": "node(s) Node object invalid"}
    assert "raw-allocatable" in ext.extender.cache.invalid["nodes"]["bad"]
    assert 'koordpy_extender_invalid_nodes{resource="nodes"} 1.0' in (await ext.http.get("/metrics")).text
    # Deleting the node forgets it entirely.
    ext.extender.cache.handler("nodes")("DELETED", raw)
    answer = orjson.loads((await ext.post("filter", body)).content)
    assert answer["FailedNodes"] == {"bad": "node(s) not yet known to the koordpy extender"}


@pytest.mark.parametrize("cpu", HUGE)
async def test_pod_with_an_out_of_range_request_gets_a_clean_error(ext: Any, cpu: str) -> None:
    ext.node("n0")
    pod = {**POD, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    for verb in ("filter", "prioritize"):
        resp = await ext.post(verb, {"Pod": pod, "Nodes": None, "NodeNames": ["n0"]})
        assert resp.status_code == 400
        error = orjson.loads(resp.content)["Error"]
        assert "spec.containers[0].resources.requests.cpu: quantity out of range" in error
        assert "internal error" not in error


async def test_prioritize_is_valid_json_with_several_unreadable_nodes(ext: Any) -> None:
    names = [f"n{i}" for i in range(4)]
    for name in names:
        ext.node(name)
    ext.metric("n0", cpu="1", memory="1Gi")  # a score above 0: the one row of the answer
    for i, name in enumerate(names[1:]):
        bad = NodeBuilder(name).allocatable(cpu=HUGE[i % 2]).build()
        ext.extender.cache.handler("nodes")("MODIFIED", bad)
        ext.extender.cache.handler("nodemetrics")("ADDED", _bad_metric(ext, name, HUGE[i % 2]))
    resp = await ext.post("prioritize", {"Pod": POD, "Nodes": None, "NodeNames": names})
    rows = orjson.loads(resp.content)  # raises on `[{...}, 0 ]`
    assert [row["Host"] for row in rows] == ["n0"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("PodNamespace", ".."),
        ("PodNamespace", "a/b"),
        ("PodNamespace", "Default"),
        ("PodNamespace", "x" * 64),
        ("PodName", "../../nodes/n0"),
        ("PodName", "p?x=1"),
        ("PodName", "p%2F"),
        ("Node", "n0/.."),
    ],
)
async def test_bind_refuses_names_kubernetes_would_refuse(ext: Any, field: str, value: str) -> None:
    body = {"PodName": "p", "PodNamespace": "default", "PodUID": "u1", "Node": "n0", field: value}
    resp = await ext.post("bind", body)
    assert resp.status_code == 400
    assert orjson.loads(resp.content)["Error"].startswith(f"{field}: ")
    assert ext.binder.calls == []  # nothing was built from the name


class FakeSink:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[tuple[dict[str, Any], str, str, str]] = []
        self.fail = fail

    async def create_event(self, involved_object: Any, *, reason: str, message: str, **kw: Any) -> Any:
        if self.fail:
            raise OSError("API down")
        self.events.append((involved_object, reason, message, kw["event_type"]))
        return {}


async def test_reporter_posts_one_warning_per_transition_to_unreadable() -> None:
    class Log:
        def warning(self, *args: Any, **kw: Any) -> None: ...

    reporter = NodeEventReporter(Log(), capacity=2)
    cache = ClusterCache(ClusterState([]), FakeClock(), Log(), report=reporter.report)
    metric = NodeMetricBuilder("n7").usage(cpu="1e400", memory="1Gi").build()
    other = NodeMetricBuilder("n7").usage(cpu="1e99999999", memory="1Gi").build()
    for raw in (metric, metric, other):  # a resync, then another bad value: still one report
        cache.handler("nodemetrics")("MODIFIED", raw)
    sink = FakeSink()
    task = asyncio.create_task(reporter.run(sink))
    await eventually(lambda: sink.events, "the report sent", interval=0.01)
    task.cancel()
    assert len(sink.events) == 1
    obj, reason, message, kind = sink.events[0]
    assert obj["kind"] == "Node" and obj["metadata"]["name"] == "n7"
    assert (reason, kind) == (REASONS["nodemetrics"], "Warning")
    assert "status.nodeMetric.nodeUsage.resources.cpu: quantity out of range" in message
    # Readable again, then unreadable again: a second report.
    cache.handler("nodemetrics")("MODIFIED", NodeMetricBuilder("n7").usage(cpu="1", memory="1Gi").build())
    cache.handler("nodemetrics")("MODIFIED", other)
    assert reporter.queue.qsize() == 1
    reporter.queue.get_nowait()
    # A full queue drops instead of blocking the watch handler.
    for i in range(5):
        reporter.report("nodes", f"x{i}", "e")
    assert reporter.dropped == 3


async def test_reporter_survives_a_failing_api() -> None:
    class Log:
        lines: list[str] = []

        def warning(self, event: str, **kw: Any) -> None:
            self.lines.append(event)

    reporter = NodeEventReporter(Log())
    reporter.report("nodes", "n1", "boom")
    reporter.report("nodes", "n2", "boom")
    task = asyncio.create_task(reporter.run(FakeSink(fail=True)))
    await eventually(lambda: reporter.failed == 2, "both reports failed", interval=0.01)
    task.cancel()
    assert reporter.failed == 2 and Log.lines == ["event.failed", "event.failed"]


def test_cache_handler_never_raises_on_an_unprintable_name() -> None:
    class Log:
        lines: list[dict[str, Any]] = []

        def warning(self, event: str, **kw: Any) -> None:
            self.lines.append(kw)

    cache = ClusterCache(ClusterState([]), FakeClock(), Log())
    # A 5,000-digit integer name: str() of it raises ValueError; the log line must not.
    cache.handler("nodes")("ADDED", {"metadata": {"name": 10**5000}})
    assert cache.conversion_errors["nodes"] == 1
    assert Log.lines[-1]["object"] == "<int>"
