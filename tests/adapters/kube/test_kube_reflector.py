"""Reflector against the emulator: list then watch, resume, bookmarks, 410 relist diffs, outages, synced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from koordpy.config import LoadAwareSchedulingArgs, validate
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.reflector import STABLE_STREAM_SECONDS, Reflector, run_reflectors, wait_synced
from koordpy.kube.resources import NODES, PODS
from koordpy.scheduler.extender.cache import ClusterCache
from koordpy.scheduler.framework import ClusterState as SchedulerState
from koordpy.scheduler.plugins.loadaware import LoadAwarePlugin
from koordpy_testkit import FakeClock
from koordpy_testkit.apiserver import ApiServerEmulator, ClusterState
from koordpy_testkit.bounds import HANG_BACKSTOP

Eventually = Callable[..., Awaitable[None]]


class Recorder:
    """A handler that keeps (type, key, resourceVersion) for each delivery."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def __call__(self, etype: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        self.events.append((etype, key, meta.get("resourceVersion", "")))

    def kinds(self) -> list[tuple[str, str]]:
        return [(etype, key) for etype, key, _ in self.events]


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}


@asynccontextmanager
async def running(reflector: Reflector) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(reflector.run())
    try:
        yield task
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def fast(client: ApiClient, resource: Any, handler: Any, **kw: Any) -> Reflector:
    kw.setdefault("watch_timeout_seconds", 30)
    return Reflector(client, resource, handler, backoff_initial=0.02, backoff_max=0.1, **kw)


async def test_initial_list_then_live_events(api_client: ApiClient, eventually: Eventually) -> None:
    for name in ("a", "b", "c"):
        await api_client.create(NODES, node(name))
    rec = Recorder()
    reflector = fast(api_client, NODES, rec, page_size=2)  # the initial list takes two pages
    assert not reflector.synced.is_set()
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        assert rec.kinds() == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]  # all delivered before synced
        await api_client.patch(NODES, "b", {"metadata": {"labels": {"x": "1"}}})
        await api_client.delete(NODES, "a")
        await api_client.create(NODES, node("d"))
        await eventually(lambda: len(rec.events) == 6)
    assert rec.kinds()[3:] == [("MODIFIED", "b"), ("DELETED", "a"), ("ADDED", "d")]
    assert set(reflector.known) == {"b", "c", "d"}
    assert reflector.relists == 0 and reflector.errors == 0


async def test_resume_after_watch_timeout_without_duplicates(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    apiserver.bookmark_interval = 60  # no periodic bookmarks: resuming relies on event RVs
    rec = Recorder()
    reflector = fast(api_client, PODS, rec, watch_timeout_seconds=1)
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        for i in range(3):
            await api_client.create(PODS, pod(f"p{i}"))
            starts = reflector.restarts
            await eventually(lambda s=starts: reflector.restarts > s)  # type: ignore[misc]
    assert rec.kinds() == [("ADDED", "default/p0"), ("ADDED", "default/p1"), ("ADDED", "default/p2")]
    assert len({rv for _, _, rv in rec.events}) == 3
    assert reflector.restarts >= 3 and reflector.relists == 0 and reflector.errors == 0


async def test_bookmarks_advance_resource_version_without_deliveries(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    apiserver.bookmark_interval = 0.05
    rec = Recorder()
    reflector = fast(api_client, PODS, rec)
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        listed = int(reflector.resource_version)
        # writes to another resource move the global resourceVersion; pods only learn of it by bookmark
        for i in range(3):
            await api_client.create(NODES, node(f"n{i}"))
        await eventually(lambda: int(reflector.resource_version) == apiserver.state.rv)
    assert int(reflector.resource_version) == listed + 3
    assert rec.events == []


@pytest.mark.parametrize("gone_as", ["event", "http"])
async def test_gone_relists_and_delivers_the_diff(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually, gone_as: str
) -> None:
    apiserver.watch_gone = gone_as  # type: ignore[assignment]
    for name in ("keep", "change", "remove"):
        await api_client.create(NODES, node(name))
    rec = Recorder()
    reflector = fast(api_client, NODES, rec)
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        await apiserver.stop()  # the reflector loses its watch and backs off
        await eventually(lambda: reflector.errors >= 1)
        apiserver.state.history_size = 2  # compact history so the reflector's resourceVersion is too old
        st = apiserver.state
        nodes, pods = st.infos[("", "nodes")], st.infos[("", "pods")]
        st.patch(nodes, None, "change", {"metadata": {"labels": {"v": "2"}}}, patch_type="merge")
        st.delete(nodes, None, "remove")
        st.create(nodes, None, node("new"))
        for i in range(3):
            st.create(pods, "default", pod(f"noise{i}"))
        await apiserver.start()
        await eventually(lambda: reflector.relists == 1 and len(rec.events) == 6)
    assert sorted(rec.kinds()[3:]) == [("ADDED", "new"), ("DELETED", "remove"), ("MODIFIED", "change")]
    assert set(reflector.known) == {"keep", "change", "new"}
    # the relist delivered the changed object itself, and the reflector keeps only its identity
    changed = st.objects[("", "nodes")][("", "change")]
    assert rec.events[3:].count(("MODIFIED", "change", changed["metadata"]["resourceVersion"])) == 1
    assert reflector.known["change"]["metadata"] == {
        k: changed["metadata"][k] for k in ("name", "uid", "resourceVersion")
    }


async def test_fresh_server_on_same_port_forces_relist(apiserver: ApiServerEmulator, eventually: Eventually) -> None:
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, "test")) as client:
        await client.create(NODES, node("old"))
        rec = Recorder()
        reflector = fast(client, NODES, rec)
        async with running(reflector):
            await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
            await apiserver.stop()
            apiserver.state = ClusterState()  # a new incarnation: all versions of the old one are unknown
            apiserver.seed(node("fresh"))
            await apiserver.start()
            await eventually(lambda: reflector.relists == 1 and len(rec.events) == 3)
    assert sorted(rec.kinds()[1:]) == [("ADDED", "fresh"), ("DELETED", "old")]


async def test_outage_backs_off_then_resumes_from_resource_version(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    rec = Recorder()
    reflector = fast(api_client, PODS, rec)
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        await apiserver.stop()
        await eventually(lambda: reflector.errors >= 3)  # keeps retrying while the port is closed
        await api_client_write_while_down(apiserver)
        await apiserver.start()
        await eventually(lambda: len(rec.events) == 2)
        assert reflector.relists == 0  # resumed from its resourceVersion: no relist needed
        await api_client.create(PODS, pod("after"))
        await eventually(lambda: len(rec.events) == 3)
    assert rec.kinds() == [("ADDED", "default/during"), ("MODIFIED", "default/during"), ("ADDED", "default/after")]


async def api_client_write_while_down(apiserver: ApiServerEmulator) -> None:
    """Change the state directly (the HTTP port is closed) as if another API server replica took writes."""
    pods = apiserver.state.infos[("", "pods")]
    apiserver.state.create(pods, "default", pod("during"))
    apiserver.state.patch(pods, "default", "during", {"metadata": {"labels": {"x": "1"}}}, patch_type="merge")


async def test_synced_waits_for_a_successful_list(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    apiserver.inject_error(500, verb="list", resource="nodes", count=2)
    await api_client_create_nodes(api_client, 2)
    rec = Recorder()
    reflector = fast(api_client, NODES, rec)
    async with running(reflector):
        await wait_synced([reflector], timeout=HANG_BACKSTOP)
        assert reflector.errors == 2 and len(rec.events) == 2
        # a later relist keeps synced set
        apiserver.state.history_size = 1
        await apiserver.stop()
        await api_client_create_nodes_direct(apiserver, 3)
        await apiserver.start()
        await eventually(lambda: reflector.relists == 1)
        assert reflector.synced.is_set()


async def api_client_create_nodes(client: ApiClient, n: int) -> None:
    for i in range(n):
        await client.create(NODES, node(f"n{i}"))


async def api_client_create_nodes_direct(apiserver: ApiServerEmulator, n: int) -> None:
    for i in range(n):
        apiserver.state.create(apiserver.state.infos[("", "nodes")], None, node(f"direct{i}"))


async def test_handler_errors_do_not_stop_the_reflector(api_client: ApiClient, eventually: Eventually) -> None:
    seen: list[str] = []

    def flaky(etype: str, obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        if obj["metadata"]["name"] == "bad":
            raise RuntimeError("handler bug")

    reflector = fast(api_client, NODES, flaky)
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        await api_client.create(NODES, node("bad"))
        await api_client.create(NODES, node("good"))
        await eventually(lambda: seen == ["bad", "good"])
    assert reflector.handler_errors == 1 and reflector.errors == 0


async def test_selector_reflector_sees_objects_leave(api_client: ApiClient, eventually: Eventually) -> None:
    await api_client.create(NODES, node("a", pool="x"))
    await api_client.create(NODES, node("b", pool="y"))
    rec = Recorder()
    reflector = fast(api_client, NODES, rec, label_selector="pool=x")
    other = Recorder()
    everything = fast(api_client, NODES, other)
    task = asyncio.create_task(run_reflectors([reflector, everything]))
    try:
        await wait_synced([reflector, everything], timeout=HANG_BACKSTOP)
        await api_client.patch(NODES, "a", {"metadata": {"labels": {"pool": "y"}}})
        await eventually(lambda: len(rec.events) == 2 and len(other.events) == 3)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert rec.kinds() == [("ADDED", "a"), ("DELETED", "a")]
    assert other.kinds() == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
    assert reflector.known == {}


async def test_repeated_gone_backs_off_instead_of_relisting_hot(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    apiserver.inject_error(410, verb="watch", resource="nodes", count=4)  # every watch start is refused
    delays: list[int] = []
    reflector = fast(api_client, NODES, Recorder())
    original = reflector._delay

    def recording_delay(attempt: int) -> float:
        delays.append(attempt)
        return original(attempt)

    reflector._delay = recording_delay  # type: ignore[method-assign]
    async with running(reflector):
        await eventually(lambda: reflector.errors == 4 and reflector.relists == 4)
        await api_client.create(NODES, node("after"))
        await eventually(lambda: "after" in reflector.known)
    # the first 410 relists at once; each further one in a row waits longer
    assert delays == [0, 1, 2]


async def test_deleted_during_a_gap_arrives_as_a_tombstone_the_extender_cache_understands(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    apiserver.watch_gone = "event"  # type: ignore[assignment]
    placed = pod("placed")
    placed["spec"]["nodeName"] = "n1"
    placed["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    created = await api_client.create(PODS, placed, namespace="default")
    cache = ClusterCache(SchedulerState([LoadAwarePlugin(validate(LoadAwareSchedulingArgs, {}))]), FakeClock())
    handler = cache.handler("pods")
    delivered: list[tuple[str, dict[str, Any]]] = []

    def record(etype: str, obj: dict[str, Any]) -> None:
        delivered.append((etype, obj))
        handler(etype, obj)

    reflector = fast(api_client, PODS, record)
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        assert created["metadata"]["uid"] in cache.state.assigned
        # the reflector remembers the pod's identity only, never its spec
        assert reflector.known["default/placed"] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {k: created["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion")},
        }
        await apiserver.stop()
        await eventually(lambda: reflector.errors >= 1)
        apiserver.state.history_size = 1
        st = apiserver.state
        st.delete(st.infos[("", "pods")], "default", "placed", {"gracePeriodSeconds": 0})
        st.create(st.infos[("", "nodes")], None, node("noise"))
        await apiserver.start()
        await eventually(lambda: reflector.relists == 1 and len(delivered) == 2)
    etype, tombstone = delivered[1]
    assert etype == "DELETED"
    assert "spec" not in tombstone and tombstone["metadata"]["uid"] == created["metadata"]["uid"]
    assert cache.state.assigned == {}  # the cache removed the pod from its identity alone


async def test_an_optional_resource_not_served_is_looked_for_quietly_until_its_crd_appears(
    api_client: ApiClient, eventually: Eventually, caplog: pytest.LogCaptureFixture
) -> None:
    """A PodGroup API whose CRD is absent: one info line, no failure loop (readiness unaffected), a look
    every ``backoff_max`` seconds; once the CRD is created the reflector lists and delivers."""
    from koordpy.crds import crd_manifest
    from koordpy.crds.podgroup import POD_GROUP_X_K8S
    from koordpy.kube.resources import CUSTOMRESOURCEDEFINITIONS, PODGROUPS_X_K8S

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(0.001)

    seen = Recorder()
    reflector = Reflector(api_client, PODGROUPS_X_K8S, seen, backoff_max=120.0, sleep=sleep, optional=True)
    caplog.set_level("DEBUG", logger="koordpy.kube.reflector")
    async with running(reflector):
        await eventually(lambda: len(slept) >= 3)
        assert reflector.absent and not reflector.failing() and not reflector.synced.is_set()
        assert set(slept) == {120.0}
        absent_lines = [r for r in caplog.records if "not served by this API server" in r.getMessage()]
        assert [r.levelname for r in absent_lines] == ["INFO"]
        assert not [r for r in caplog.records if r.levelname == "WARNING"]

        await api_client.create(CUSTOMRESOURCEDEFINITIONS, crd_manifest(POD_GROUP_X_K8S))
        await api_client.create(
            PODGROUPS_X_K8S,
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "default"},
                "spec": {"minMember": 2},
            },
        )
        await eventually(lambda: ("ADDED", "default/g") in seen.kinds())
        assert not reflector.absent and reflector.synced.is_set()
        assert any("now served" in r.getMessage() for r in caplog.records)


async def test_a_required_resource_not_served_is_a_failure_loop(api_client: ApiClient, eventually: Eventually) -> None:
    from koordpy.kube.resources import PODGROUPS_X_K8S

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(0.001)

    reflector = Reflector(api_client, PODGROUPS_X_K8S, Recorder(), sleep=sleep)
    async with running(reflector):
        await eventually(reflector.failing)
        assert not reflector.absent


async def test_a_failure_loop_ends_once_the_resumed_watch_is_accepted_and_stays_open(
    apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Eventually
) -> None:
    """Nodes that never change: after an outage the watch resumes from its resourceVersion and no event comes
    for minutes. The failure loop (readiness) ends once the server accepted the watch and it stayed open for
    STABLE_STREAM_SECONDS (on the reflector's clock, moved by hand here), not backoff_max (30 s) of it; no
    relist was needed."""
    await api_client_create_nodes(api_client, 2)
    rec = Recorder()
    now = [0.0]
    reflector = Reflector(
        api_client,
        NODES,
        rec,
        backoff_initial=0.02,
        backoff_max=30.0,
        watch_timeout_seconds=300,
        monotonic=lambda: now[0],
    )
    async with running(reflector):
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
        await apiserver.stop()
        await eventually(reflector.failing)
        await apiserver.start()
        await eventually(lambda: reflector._stream_since is not None)  # the resumed watch was accepted
        assert reflector.failing()  # not yet: it could still break at once
        now[0] += STABLE_STREAM_SECONDS
        assert not reflector.failing()
        assert reflector.relists == 0 and len(rec.events) == 2  # the two ADDED of the first list, nothing since
