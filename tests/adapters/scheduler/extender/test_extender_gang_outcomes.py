"""A gang's outcome on its PodGroup, and unreadable PodGroups, through the emulator's API.

The extender runs with a real API client against the emulator (watches, bindings, status patches,
Events) and a FakeClock, advanced by hand to run a gang's wait time out.
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
from koordpy.kube.resources import EVENTS, PODGROUPS
from koordpy_testkit import FakeClock, NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.apiserver import ApiServerEmulator, running_apiserver

LABEL = "pod-group.scheduling.sigs.k8s.io"


@pytest.fixture
async def api() -> AsyncIterator[ApiServerEmulator]:
    async with running_apiserver(bookmark_interval=0.2) as emulator:
        yield emulator


async def wait_for(predicate: Any, timeout: float = 30.0) -> None:
    """A hang backstop, not a speed claim."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def podgroup(name: str, min_member: Any, timeout: int = 30) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout},
    }


def member(name: str, group: str) -> dict[str, Any]:
    raw = PodBuilder(name, "team").label(LABEL, group).requests(cpu="1", memory="1Gi").build()
    raw["spec"]["schedulerName"] = "koordpy-scheduler"
    return raw


async def started(api: ApiServerEmulator, make_ext: Any) -> Any:
    clock = FakeClock(time.time())
    api.seed(NodeBuilder("n1").allocatable(cpu="32", memory="128Gi", pods="110").build())
    api.seed(NodeMetricBuilder("n1").updated(clock.now() - 30).usage(cpu="1", memory="1Gi").build())
    ext = await make_ext(client=ApiClient(ConnectionInfo.for_url(api.url, token="test")), clock=clock)
    await wait_for(lambda: ext.extender.synced is not None and ext.extender.synced.is_set())
    ext.extender.gangs.tick = 0.02
    return ext


async def bind(ext: Any, raw: dict[str, Any]) -> asyncio.Task[Any]:
    meta = raw["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": "team", "PodUID": meta["uid"], "Node": "n1"}
    return asyncio.create_task(ext.post("bind", body))


async def stored_podgroup(api: ApiServerEmulator, name: str) -> dict[str, Any]:
    async with ApiClient(ConnectionInfo.for_url(api.url, token="test")) as client:
        return await client.get(PODGROUPS, name, "team")


async def events(api: ApiServerEmulator) -> list[dict[str, Any]]:
    async with ApiClient(ConnectionInfo.for_url(api.url, token="test")) as client:
        return list((await client.list(EVENTS, namespace="team")).items)


async def test_a_timeout_is_written_on_the_podgroup_and_said_in_an_event(api: ApiServerEmulator, make_ext: Any) -> None:
    """PodGroup train (minMember 3, 30 s): two members held, the third never comes. At 30 s the Strict
    gang releases both: GangScheduled=False (WaitTimeout) with the reason, and a GangTimedOut Event. Later
    the three bind together: GangScheduled=True (Bound) and a GangBound Event."""
    (pg,) = api.seed(podgroup("train", 3))
    pods = [api.seed(member(f"t{i}", "train"))[0] for i in range(3)]
    ext = await started(api, make_ext)
    gangs = ext.extender.gangs
    first = [await bind(ext, raw) for raw in pods[:2]]
    await wait_for(lambda: set(gangs.held) == {"team/t0", "team/t1"})
    ext.clock.advance(31)
    replies = [(await t).json()["Error"] for t in first]
    assert all("waited 30s" in r or "(Strict)" in r for r in replies), replies

    await wait_for(lambda: any(r["verb"] == "patch" and r.get("subresource") == "status" for r in api.requests))
    status = (await stored_podgroup(api, "train"))["status"]
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("GangScheduled", "False", "WaitTimeout")
    assert cond["message"].startswith("gang team/train: team/t0 waited 30s, the gang's wait time")
    await wait_for(lambda: any(r["resource"] == "events" and r["verb"] == "create" for r in api.requests))
    (event,) = [e for e in await events(api) if e["involvedObject"]["kind"] == "PodGroup"]
    assert (event["reason"], event["type"], event["involvedObject"]["uid"]) == (
        "GangTimedOut",
        "Warning",
        pg["metadata"]["uid"],
    )
    assert event["message"].startswith("2 held member(s) released: gang team/train: team/t0 waited 30s")

    # kube-scheduler retries; this time all three are held and bind together (once the watch has shown
    # the release condition, which the bound outcome replaces).
    def watched_release() -> bool:
        info = gangs.cache.podgroup("team/train")
        return info is not None and info.conditions != ()

    await wait_for(watched_release)
    second = [await bind(ext, raw) for raw in pods]
    assert [(await t).json() for t in second] == [{"Error": ""}] * 3

    async def bound_condition() -> dict[str, Any]:
        return dict((await stored_podgroup(api, "train"))["status"]["conditions"][0])

    for _ in range(1500):
        cond = await bound_condition()
        if cond["status"] == "True":
            break
        await asyncio.sleep(0.02)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "Bound",
        "gang team/train: 3 held members bound together",
    )
    await wait_for(lambda: sum(r["resource"] == "events" and r["verb"] == "create" for r in api.requests) >= 2)
    reasons = sorted(e["reason"] for e in await events(api) if e["involvedObject"]["kind"] == "PodGroup")
    assert reasons == ["GangBound", "GangTimedOut"]


async def test_an_unreadable_podgroup_is_counted_and_gets_an_event(api: ApiServerEmulator, make_ext: Any) -> None:
    api.seed(podgroup("broken", "three"))
    api.seed(podgroup("fine", 1))
    ext = await started(api, make_ext)
    await wait_for(lambda: ext.extender.gangs.cache.view("team/fine") is not None)
    metrics = (await ext.http.get("/metrics")).text
    line = (
        'koordpy_extender_watch_bad_objects_total{reason="conversion_error",'
        'resource="podgroups.scheduling.sigs.k8s.io"} 1.0'
    )
    assert line in metrics
    await wait_for(lambda: any(r["resource"] == "events" and r["verb"] == "create" for r in api.requests))
    (event,) = await events(api)
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"], event["reason"]) == (
        "PodGroup",
        "broken",
        "MalformedObjectIgnored",
    )
    assert "spec.minMember: expected an integer" in event["message"]
    # Its members wait as for a PodGroup that does not exist: refused at quorum, never bound alone.
    raw = api.seed(member("b0", "broken"))[0]
    body = {"Pod": raw, "Nodes": None, "NodeNames": ["n1"]}
    answer = orjson.loads((await ext.post("filter", body)).content)
    assert answer["NodeNames"] == [] and "PodGroup team/broken" in answer["FailedAndUnresolvableNodes"]["n1"]
