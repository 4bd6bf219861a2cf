"""Fail closed: a pod the extender cannot read is never bound as a plain pod, since it may be a gang member.

A bind for a pod this process has not seen (it restarted, or the watch could not convert the pod) reads the
pod first. A pod that cannot be converted, or cannot be read at all, is refused with a reason (the bind's
error, which kube-scheduler turns into a FailedScheduling Event), counted in
``koordpy_extender_binds_unreadable_total{reason}``, logged, and told in a ``KoordpyUnreadablePod`` Warning
Event on the pod (once per pod version, however often kube-scheduler retries).
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
from koordpy.kube.errors import ApiConnectionError
from koordpy.kube.resources import EVENTS, PODS
from koordpy.runtime.clock import SystemClock
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.apiserver import ApiServerEmulator, running_apiserver
from koordpy_testkit.bounds import eventually, eventually_awaited

GANG = "gang.scheduling.koordinator.sh/name"
UNREADABLE_POD_REASON = "KoordpyUnreadablePod"


def garbled_member(name: str = "w0", uid: str = "u-w0", version: str = "7") -> dict[str, Any]:
    """A gang member whose cpu request is no quantity: the extender cannot convert it."""
    raw = PodBuilder(name, "team").requests(cpu="2", memory="1Gi").build()
    raw["metadata"].update(uid=uid, resourceVersion=version, annotations={GANG: "train"})
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    return raw


def bind_args(name: str, uid: str, node: str = "n1") -> dict[str, str]:
    return {"PodName": name, "PodNamespace": "team", "PodUID": uid, "Node": node}


class Events:
    """Records the Events the extender posts."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    async def create_event(self, involved_object: Any, **fields: Any) -> dict[str, Any]:
        self.posted.append({"involvedObject": involved_object, **fields})
        return {}


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_gang_member_the_extender_cannot_convert_is_refused_counted_and_told(ext: Any) -> None:
    ext.node("n1")
    ext.binder.readable = [garbled_member()]
    events = Events()
    ext.extender.service.events = events
    for _ in range(2):  # kube-scheduler retries the pod
        resp = await ext.post("bind", bind_args("w0", "u-w0"))
        error = orjson.loads(resp.content)["Error"]
        assert "team/w0 was not bound" in error and "cannot be converted" in error, error
        assert "spec.containers[0].resources.requests.cpu" in error and "gang member" in error, error
    await settle()
    assert ext.binder.calls == []  # never bound as a plain pod
    assert ext.extender.state.assigned == {}
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_binds_unreadable_total{reason="unconvertible"} 2.0' in metrics
    [event] = events.posted  # one per pod version
    assert (event["reason"], event["event_type"]) == (UNREADABLE_POD_REASON, "Warning")
    assert event["involvedObject"]["metadata"] == {"name": "w0", "namespace": "team", "uid": "u-w0"}
    ext.binder.readable = [garbled_member(version="8")]  # changed, still garbled: told again
    await ext.post("bind", bind_args("w0", "u-w0"))
    await settle()
    assert len(events.posted) == 2


async def test_a_pod_that_cannot_be_read_now_is_refused_and_another_of_the_name_is_skipped(ext: Any) -> None:
    ext.node("n1")
    ext.binder.read_fails_with = ApiConnectionError("connection refused")
    resp = await ext.post("bind", bind_args("w0", "u-w0"))
    assert "cannot be read now" in orjson.loads(resp.content)["Error"]
    ext.binder.read_fails_with = None
    # the garbled object is an older pod of the same name (another uid): not this one, which is gone
    ext.binder.readable = [garbled_member(uid="u-older")]
    resp = await ext.post("bind", bind_args("w0", "u-w0"))
    assert orjson.loads(resp.content) == {"Error": ""}  # gone: the API server answers the binding itself
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_binds_unreadable_total{reason="read_failed"} 1.0' in metrics
    assert 'koordpy_extender_binds_unreadable_total{reason="unconvertible"} 0.0' in metrics
    assert ext.binder.calls == [("team", "w0", "u-w0", "n1")]


@pytest.fixture
async def api() -> AsyncIterator[ApiServerEmulator]:
    async with running_apiserver(bookmark_interval=0.2) as emulator:
        yield emulator


async def test_with_the_lean_binder_an_unconvertible_member_is_read_through_the_api_client_and_refused(
    api: ApiServerEmulator, make_ext: Any
) -> None:
    """As ``koordpy extender`` runs: the binder is the lean ``BindingClient`` (it cannot read pods), the API
    client reads. The watch could not convert the member either, so the bind is its first look at it."""
    api.seed(NodeBuilder("n1").allocatable(cpu="32", memory="128Gi", pods="110").build())
    api.seed(NodeMetricBuilder("n1").updated(time.time() - 30).usage(cpu="4", memory="16Gi").build())
    member = api.seed(garbled_member())[0]
    client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
    ext = await make_ext(client=client, clock=SystemClock())
    await eventually(lambda: ext.extender.synced is not None and ext.extender.synced.is_set(), "the extender synced")
    assert type(ext.extender.service.binder).__name__ == "BindingClient"
    uid = member["metadata"]["uid"]
    resp = await ext.post("bind", bind_args("w0", uid))
    assert "cannot be converted" in orjson.loads(resp.content)["Error"]
    async with ApiClient(ConnectionInfo.for_url(api.url, token="admin")) as admin:
        assert (await admin.get(PODS, "w0", "team"))["spec"].get("nodeName") is None

        async def told() -> bool:
            return UNREADABLE_POD_REASON in [e["reason"] for e in (await admin.list(EVENTS, namespace="team")).items]

        await eventually_awaited(told, "the KoordpyUnreadablePod Event")
    assert not [r for r in api.requests if r.get("subresource") == "binding"]
