"""The manager's watch caches: ordering of watch events against the manager's own writes, relists that
deliver missed deletions, discovery of optional kinds, and a live reflector against the emulator."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from koordpy.descheduler.objects import MigrationJob
from koordpy.kube.client import ApiClient
from koordpy.kube.resources import NODES, PODMIGRATIONJOBS, PODS
from koordpy.manager.cache import JobViews, ManagerCache, ObjectStore, newer_or_equal
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.builders import NodeBuilder, PodBuilder

__all__ = ["api_client", "apiserver"]


def pod(name: str, rv: str, node: str = "n1", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "resourceVersion": rv, **meta},
        "spec": {"nodeName": node},
    }


@pytest.mark.parametrize(
    ("stored", "incoming", "kept"),
    [
        ("10", "9", True),  # an older event after the manager's own write: ignored
        ("10", "10", True),  # a replay of the same version
        ("10", "11", False),
        ("9", "10", False),  # integers, not strings ("9" > "10" as text)
        ("abc", "1", False),  # not integers: the newer arrival wins
        ("", "1", False),
    ],
)
def test_versions_are_ordered_as_integers(stored: str, incoming: str, kept: bool) -> None:
    assert newer_or_equal(stored, incoming) is kept


def test_the_managers_write_is_not_undone_by_an_older_event() -> None:
    store = ObjectStore(PODS)
    store.handle("ADDED", pod("web-1", "5"))
    store.observe(pod("web-1", "7", labels={"written": "by-us"}))
    store.handle("MODIFIED", pod("web-1", "6"))  # the event of a write before ours, arriving late
    assert store.get("shop/web-1")["metadata"]["labels"] == {"written": "by-us"}  # type: ignore[index]
    store.handle("MODIFIED", pod("web-1", "8"))
    assert "labels" not in store.get("shop/web-1")["metadata"]  # type: ignore[index]


def test_a_marked_copy_holds_until_a_newer_version_arrives() -> None:
    store = ObjectStore(PODS)
    store.handle("ADDED", pod("web-1", "5"))

    def terminating(raw: dict[str, Any]) -> dict[str, Any]:
        return {**raw, "metadata": {**raw["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}

    store.mark("shop/web-1", terminating)
    store.handle("MODIFIED", pod("web-1", "5"))  # a replay of the version we marked: the mark stays
    assert store.get("shop/web-1")["metadata"]["deletionTimestamp"]  # type: ignore[index]
    store.handle("DELETED", pod("web-1", "6"))
    assert store.get("shop/web-1") is None


def test_the_node_index_follows_every_change_and_listeners_hear_them() -> None:
    heard: list[tuple[str, str | None, str | None]] = []

    def listener(key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        heard.append((key, old and old["metadata"]["resourceVersion"], new and new["metadata"]["resourceVersion"]))

    store = ObjectStore(PODS, index=lambda raw: raw["spec"].get("nodeName"))
    store.add_listener(listener)
    store.handle("ADDED", pod("a", "1", node="n1"))
    store.handle("ADDED", pod("b", "2", node="n1"))
    store.handle("MODIFIED", pod("a", "3", node="n2"))
    assert (store.keys_by("n1"), store.keys_by("n2")) == ({"shop/b"}, {"shop/a"})
    store.replace_all([pod("a", "3", node="n2")])  # b vanished while the watch was down
    assert store.keys_by("n1") == frozenset() and len(store) == 1
    assert heard == [("shop/a", None, "1"), ("shop/b", None, "2"), ("shop/a", "1", "3"), ("shop/b", "2", None)]
    assert store.version == 4


def job(name: str, rv: str, phase: str = "", pod: str | None = "web-1") -> dict[str, Any]:
    spec = {"podRef": {"namespace": "shop", "name": pod}} if pod is not None else {}
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }


def test_a_jobs_typed_view_is_converted_once_per_stored_version_and_shared() -> None:
    heard: list[tuple[str, str | None, str | None]] = []

    def phase(view: MigrationJob | None) -> str | None:
        return None if view is None else view.phase or "Pending"

    def listener(name: str, old: MigrationJob | None, new: MigrationJob | None) -> None:
        heard.append((name, phase(old), phase(new)))

    store = ObjectStore(PODMIGRATIONJOBS)
    views = JobViews(store)
    views.add_listener(listener)
    store.handle("ADDED", job("j1", "1"))
    first = views.get("j1")
    assert first is not None and first.pod_key == "shop/web-1"
    assert views.get("j1") is first  # the second reader gets the same object: not converted again
    store.handle("MODIFIED", job("j1", "2", "Running"))
    second = views.get("j1")
    assert second is not None and second is not first and second.phase == "Running"
    store.handle("MODIFIED", job("j1", "3", pod=None))  # spec.podRef gone: unreadable
    assert views.get("j1") is None
    store.handle("DELETED", job("j1", "3", pod=None))
    assert views.get("j1") is None and views._views == {}
    assert heard == [("j1", None, "Pending"), ("j1", "Pending", "Running"), ("j1", "Running", None), ("j1", None, None)]


def test_managed_fields_are_not_kept() -> None:
    store = ObjectStore(PODS)
    store.handle("ADDED", pod("a", "1", managedFields=[{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]))
    assert "managedFields" not in store.get("shop/a")["metadata"]  # type: ignore[index]


async def test_discovery_skips_absent_kinds_and_readiness_waits_for_the_rest(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    cache = ManagerCache(api_client, ("pods", "podmigrationjobs", "podgroups"))
    assert cache.not_ready() == "pods: discovery not done"
    await cache.resync()
    assert cache.not_ready() is None
    assert cache.served("podgroups_sigs") and not cache.served("podgroups_x_k8s")
    assert not cache.served("nodes")  # not selected: not watched
    asked = {(r["group"], r["resource"]) for r in apiserver.requests if r["verb"] == "list"}
    assert asked == {
        ("", "pods"),
        ("scheduling.koordinator.sh", "podmigrationjobs"),
        ("scheduling.sigs.k8s.io", "podgroups"),
    }


async def test_a_running_cache_follows_the_cluster(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    await api_client.create(NODES, NodeBuilder("n1").allocatable(cpu="4", memory="4Gi", pods="10").build())
    cache = ManagerCache(api_client, ("pods", "nodes", "podmigrationjobs", "podgroups"))
    task = asyncio.create_task(cache.run())
    try:
        async with asyncio.timeout(30):
            await cache.wait_ready()
            assert set(cache.nodes.objects) == {"n1"}
            web = PodBuilder("web-1").node("n1").build()
            web["metadata"].pop("uid")
            await api_client.create(PODS, web)
            job = {"metadata": {"name": "m1"}, "spec": {"podRef": {"namespace": "default", "name": "web-1"}}}
            await api_client.create(PODMIGRATIONJOBS, job)
            while "default/web-1" not in cache.pods or "m1" not in cache.jobs:
                await asyncio.sleep(0.05)
            assert cache.pods.keys_by("n1") == {"default/web-1"}
            await api_client.delete(PODS, "web-1", "default", grace_period_seconds=0)
            while "default/web-1" in cache.pods:
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not cache.served("podgroups_x_k8s")  # discovery said no: never listed, never watched
    assert not [r for r in apiserver.requests if r["group"] == "scheduling.x-k8s.io" and r["verb"] in ("list", "watch")]
