"""Reflector against malformed input from the emulator: poison watch events and list items are skipped,
counted and reported; the stream goes on; stream errors back off; a failure loop shows in readiness."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import generate_latest

from koordpy.kube.client import ApiClient
from koordpy.kube.reflector import BadObject, Reflector
from koordpy.kube.resources import EVENTS, NODES, PODS
from koordpy.kube.watchmetrics import register_reflector_metrics
from koordpy.runtime.metrics import new_registry
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.bounds import HANG_BACKSTOP

Eventually = Callable[..., Awaitable[None]]


class Recorder:
    """Keeps (type, name) per delivery; raises on objects named ``explode`` (a handler bug)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def __call__(self, etype: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.events.append((etype, name))
        if name == "explode":
            raise KeyError("handler bug")

    def names(self) -> list[str]:
        return [name for _, name in self.events]


class FakeTime:
    """An injected clock and sleep: sleeping advances the clock at once and records the delay."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.slept.append(delay)
        self.now += delay
        await asyncio.sleep(0.005)  # let the emulator breathe; not a timing assumption


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def make(client: ApiClient, handler: Any, resource: Any = NODES, **kw: Any) -> Reflector:
    kw.setdefault("watch_timeout_seconds", 30)
    kw.setdefault("backoff_initial", 0.02)
    kw.setdefault("backoff_max", 0.1)
    return Reflector(client, resource, handler, rng=random.Random(7), **kw)


@asynccontextmanager
async def running(reflector: Reflector) -> AsyncIterator[None]:
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        yield
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_poison_event_is_skipped_and_later_events_apply_without_reconnecting(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    reports: list[BadObject] = []
    rec = Recorder()
    reflector = make(api_client, rec, on_bad_object=reports.append)
    async with running(reflector):
        await api_client.create(NODES, node("before"))
        apiserver.inject_watch_event("nodes", {"type": "MODIFIED", "object": {"metadata": "oops"}})
        await api_client.create(NODES, node("after"))
        await eventually(lambda: rec.names() == ["before", "after"])
    assert reflector.bad_objects == {"bad_metadata": 1}
    assert reflector.errors == 0 and reflector.restarts == 0  # the stream was never dropped
    assert [(r.resource, r.reason, r.event_type, r.name) for r in reports] == [
        ("nodes", "bad_metadata", "MODIFIED", None)
    ]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"type": "ADDED", "object": None}, "bad_metadata"),  # the client hands a non-object over as {}
        ({"type": "ADDED", "object": {"metadata": {"namespace": "x"}}}, "missing_name"),
        ({"type": "ADDED", "object": {"metadata": {"name": ""}}}, "missing_name"),
        ({"type": "ADDED", "object": {"metadata": {"name": 5}}}, "missing_name"),
        ({"type": "ADDED", "object": {"metadata": {"name": "n", "namespace": ["x"]}}}, "bad_namespace"),
        ({"type": "ADDED", "object": {"metadata": {"name": "n", "resourceVersion": 7}}}, "bad_resource_version"),
        ({"type": "SURPRISE", "object": {"metadata": {"name": "n"}}}, "unknown_type"),
        ([1, 2, 3], "unknown_type"),  # valid JSON, not an event
        ("just a string", "unknown_type"),
        ({"type": "BOOKMARK", "object": {"metadata": {}}}, "bad_bookmark"),
    ],
)
async def test_each_kind_of_malformed_event_is_skipped_by_reason(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually, raw: Any, reason: str
) -> None:
    rec = Recorder()
    reflector = make(api_client, rec)
    async with running(reflector):
        apiserver.inject_watch_event("nodes", raw)
        await api_client.create(NODES, node("after"))
        await eventually(lambda: rec.names() == ["after"])
    assert reflector.bad_objects == {reason: 1}
    assert reflector.errors == 0


async def test_a_skipped_event_with_a_resource_version_advances_it(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    rec = Recorder()
    reflector = make(api_client, rec)
    async with running(reflector):
        taken = apiserver.inject_watch_event(
            "nodes", lambda rv: {"type": "MODIFIED", "object": {"metadata": {"name": 5, "resourceVersion": str(rv)}}}
        )
        await eventually(lambda: reflector.bad_objects["missing_name"] == 1)
        assert reflector.resource_version == str(taken)
        # a resume from there does not replay the poison event
        await apiserver.stop()
        await apiserver.start()
        await api_client.create(NODES, node("after"))
        await eventually(lambda: rec.names() == ["after"])
    assert reflector.bad_objects == {"missing_name": 1} and reflector.relists == 0


async def test_malformed_list_items_are_skipped_and_the_rest_is_delivered(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await api_client.create(NODES, node("good"))
    apiserver.inject_list_items("nodes", None, {"metadata": "oops"}, 5, {"metadata": {"name": None}})
    rec = Recorder()
    reflector = make(api_client, rec)
    async with running(reflector):
        assert rec.events == [("ADDED", "good")]
    assert reflector.bad_objects == {"not_an_object": 2, "bad_metadata": 1, "missing_name": 1}
    assert set(reflector.known) == {"good"} and reflector.errors == 0


async def test_a_named_bad_object_gets_a_warning_event_and_an_unnamed_one_does_not(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    rec = Recorder()
    reflector = make(api_client, rec, post_events=True, event_component="koordpy-test", event_host="node-3")
    async with running(reflector):
        apiserver.inject_watch_event("nodes", {"type": "ADDED", "object": {"metadata": "oops"}})
        bad = {"type": "ADDED", "object": {"metadata": {"name": "n7", "uid": "u7", "resourceVersion": 7}}}
        apiserver.inject_watch_event("nodes", bad)
        apiserver.inject_watch_event("nodes", bad)  # the same object again: one Event only
        await api_client.create(NODES, node("explode"))  # a handler bug on a good object
        await api_client.create(NODES, node("after"))
        await eventually(lambda: rec.names() == ["explode", "after"] and reflector.events_posted == 2)
    events = (await api_client.list(EVENTS, namespace="default")).items
    about = sorted((e["involvedObject"]["name"], e["reason"], e["type"]) for e in events)
    assert about == [("explode", "MalformedObjectIgnored", "Warning"), ("n7", "MalformedObjectIgnored", "Warning")]
    n7 = next(e for e in events if e["involvedObject"]["name"] == "n7")
    assert n7["involvedObject"]["kind"] == "Node" and n7["involvedObject"]["uid"] == "u7"
    assert "bad_resource_version" in n7["message"] and n7["source"]["component"] == "koordpy-test"
    # the agent's reflectors name its node as the Event's source, like its own Events
    assert (n7["source"]["host"], n7["reportingInstance"]) == ("node-3", "node-3")
    assert reflector.bad_objects == {"bad_metadata": 1, "bad_resource_version": 2, "handler_error": 1}
    assert reflector.handler_errors == 1


async def test_bad_objects_are_exported_by_resource_and_reason(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    rec = Recorder()
    reflector = make(api_client, rec, resource=PODS)
    registry = new_registry()
    register_reflector_metrics(registry, "koordpy_test", lambda: [reflector])
    async with running(reflector):
        apiserver.inject_watch_event("pods", {"type": "DELETED", "object": {"metadata": "oops"}})
        await eventually(lambda: reflector.bad_objects["bad_metadata"] == 1)
    text = generate_latest(registry).decode()
    assert 'koordpy_test_watch_bad_objects_total{reason="bad_metadata",resource="pods"} 1.0' in text  # sorted labels
    assert 'koordpy_test_watch_failing{resource="pods"} 0.0' in text


async def test_stream_errors_back_off_exponentially_with_jitter_up_to_the_cap(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    clock = FakeTime()
    rec = Recorder()
    reflector = make(
        api_client, rec, backoff_initial=1.0, backoff_max=4.0, sleep=clock.sleep, monotonic=clock.monotonic
    )
    apiserver.inject_error(500, verb="watch", resource="nodes", count=6)
    async with running(reflector):
        await eventually(lambda: reflector.errors == 6)
        await api_client.create(NODES, node("after"))
        await eventually(lambda: rec.names() == ["after"])
    # base delays 1, 2, 4, 4, 4, 4 (doubling, capped at 4); jitter keeps each in [base/2, base]
    bases = [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert len(clock.slept) == 6
    assert all(base / 2 <= slept <= base for base, slept in zip(bases, clock.slept, strict=True))
    assert len(set(clock.slept[2:])) > 1  # jittered, not one fixed value


async def test_a_stream_that_keeps_failing_is_a_failure_loop_until_it_recovers(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    clock = FakeTime()
    rec = Recorder()
    reflector = make(
        api_client, rec, backoff_initial=1.0, backoff_max=8.0, sleep=clock.sleep, monotonic=clock.monotonic
    )
    async with running(reflector):
        assert reflector.not_ready() is None
        rule = apiserver.inject_error(500, verb="watch", resource="nodes", count=1000)
        await apiserver.stop()  # end the open stream so the next watch meets the injected errors
        await apiserver.start()
        await eventually(lambda: reflector.consecutive_failures >= 3)
        reason = reflector.not_ready()
        assert reason is not None and "failed attempts in a row" in reason
        assert reflector.failing()
        # the delays grow although every attempt fails the same way: bases 1, 2, 4 (jitter: [base/2, base])
        first = clock.slept[-reflector.consecutive_failures :][:3]
        assert [0.5 <= first[0] <= 1.0, 1.0 <= first[1] <= 2.0, 2.0 <= first[2] <= 4.0] == [True] * 3
        rule.count = 0  # the API server recovers: once the stream makes progress, the loop is over
        await api_client.create(NODES, node("after"))
        await eventually(lambda: rec.names() == ["after"])
        assert not reflector.failing() and reflector.not_ready() is None


async def test_a_quiet_stream_that_stays_open_ends_the_failure_loop(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    clock = FakeTime()
    reflector = make(api_client, Recorder(), backoff_initial=1.0, backoff_max=8.0, monotonic=clock.monotonic)
    async with running(reflector):
        await eventually(lambda: reflector._stream_since is not None)  # the watch stream is open
        reflector.consecutive_failures = 5  # as after a run of failures, with no event since (a quiet resource)
        assert reflector.failing()
        clock.now += 8.0  # open for backoff_max seconds without an event
        assert not reflector.failing()


async def test_a_line_that_breaks_the_stream_each_time_backs_off_instead_of_reconnecting_hot(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    clock = FakeTime()
    rec = Recorder()
    reflector = make(
        api_client, rec, backoff_initial=1.0, backoff_max=8.0, sleep=clock.sleep, monotonic=clock.monotonic
    )
    async with running(reflector):
        await api_client.create(NODES, node("before"))
        apiserver.inject_watch_event("nodes", b"{not json")  # every resume replays up to this line
        await eventually(lambda: reflector.errors >= 5)
        assert reflector.failing()
    assert rec.names() == ["before"]
    # bases 1, 2, 4, 8, 8: no reset although each stream replays from the same resourceVersion
    bases = [1.0, 2.0, 4.0, 8.0, 8.0]
    assert all(base / 2 <= slept <= base for base, slept in zip(bases, clock.slept, strict=False))
    assert len(clock.slept) >= 5
