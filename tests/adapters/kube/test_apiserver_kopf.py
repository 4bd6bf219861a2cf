"""kopf (the manager's framework) against the emulator: discovery, list+watch, finalizer JSON patches with a
resourceVersion test, the /status subresource and deletion through finalizers all work unmodified."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from koordpy.kube.client import ApiClient
from koordpy.kube.errors import NotFound
from koordpy.kube.resources import PODMIGRATIONJOBS
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.bounds import HANG_BACKSTOP


async def test_kopf_operator_lifecycle(apiserver: ApiServerEmulator, api_client: ApiClient, eventually: Any) -> None:
    seen: list[tuple[str, str]] = []
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=apiserver.url, token="manager")

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.watching.server_timeout = 1
        settings.posting.enabled = False

    @kopf.on.create("scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs", registry=registry)
    def created(name: str, patch: kopf.Patch, **_: Any) -> None:
        seen.append(("create", name))
        patch.status["phase"] = "Pending"

    @kopf.on.delete("scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs", registry=registry)
    def deleted(name: str, **_: Any) -> None:
        seen.append(("delete", name))

    stop = asyncio.Event()
    task = asyncio.create_task(kopf.operator(registry=registry, clusterwide=True, standalone=True, stop_flag=stop))
    try:
        await eventually(
            lambda: any(r["verb"] == "watch" and r["resource"] == "podmigrationjobs" for r in apiserver.requests)
        )
        await api_client.create(PODMIGRATIONJOBS, {"metadata": {"name": "j1"}, "spec": {"podRef": {"name": "p"}}})

        phases: list[str] = []

        async def phase() -> None:
            obj = await api_client.get(PODMIGRATIONJOBS, "j1")
            phases.append(obj.get("status", {}).get("phase", ""))

        async with asyncio.timeout(HANG_BACKSTOP):
            while not phases or phases[-1] != "Pending":
                await phase()
                await asyncio.sleep(0.05)
        job = await api_client.get(PODMIGRATIONJOBS, "j1")
        assert job["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]

        await api_client.delete(PODMIGRATIONJOBS, "j1")  # held by kopf's finalizer until on.delete ran

        async def gone() -> bool:
            try:
                await api_client.get(PODMIGRATIONJOBS, "j1")
            except NotFound:
                return True
            return False

        async with asyncio.timeout(HANG_BACKSTOP):
            while not await gone():
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)
    assert seen == [("create", "j1"), ("delete", "j1")]
    manager_calls = {(r["verb"], r["resource"], r["subresource"]) for r in apiserver.requests if r["user"] == "manager"}
    assert ("patch", "podmigrationjobs", "status") in manager_calls
    assert ("watch", "podmigrationjobs", None) in manager_calls
