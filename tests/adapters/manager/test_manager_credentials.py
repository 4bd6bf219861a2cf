"""kopf on the manager's login handler (:class:`koordpy.manager.api.KopfLogin`) against the emulator over
real HTTP: when the token file is rewritten and the old token revoked, kopf's watches go on with the new
token without a new login; when every token the file holds is refused, kopf logs in again, waiting longer
each time, until the file holds a token the API server accepts. kopf's session is fenced as the manager's
own writes are."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf
import pytest

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.credentials import Credentials, TokenFile
from koordpy.kube.leaderelection import LeaseElector, NotLeading
from koordpy.kube.resources import NODES
from koordpy.manager.api import KopfLogin
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.projected import ProjectedVolume

__all__ = ["apiserver"]


async def eventually(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_BACKSTOP):
        while not check():
            await asyncio.sleep(0.02)


async def test_kopf_renews_its_token_on_401_and_logs_in_again_while_refused(
    apiserver: ApiServerEmulator, tmp_path: Path
) -> None:
    volume = ProjectedVolume(tmp_path / "sa")
    volume.write(token="old")
    apiserver.accepted_tokens = {"old", "admin"}
    connection = ConnectionInfo(server=apiserver.url, credentials=Credentials(TokenFile(volume.path())))
    waits: list[float] = []

    async def short_sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0.01)

    login = KopfLogin(connection, sleep=short_sleep)
    registry = kopf.OperatorRegistry()
    seen: list[str] = []

    @kopf.on.login(registry=registry)
    async def login_handler(**kwargs: Any) -> kopf.AiohttpSession:  # as build_registry registers it
        return await login(**kwargs)

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.watching.server_timeout = 1  # a new watch request every second
        settings.posting.enabled = False

    @kopf.on.event("v1", "nodes", registry=registry)
    def node_event(name: str, type: str | None, **_: Any) -> None:
        if type in ("ADDED", None) and name not in seen:
            seen.append(name)

    stop = asyncio.Event()
    operator = asyncio.create_task(kopf.operator(registry=registry, clusterwide=True, standalone=True, stop_flag=stop))
    try:
        async with ApiClient(ConnectionInfo.for_url(apiserver.url, "admin")) as admin:
            await admin.create(NODES, {"metadata": {"name": "n1"}})
            await eventually(lambda: "n1" in seen)

            volume.write(token="new")  # kubelet rotated the token; the old one's bound object is deleted
            apiserver.accepted_tokens = {"new", "admin"}
            await eventually(lambda: "new" in watchers(apiserver))  # an open watch runs on; the next one renews
            await admin.create(NODES, {"metadata": {"name": "n2"}})
            await eventually(lambda: "n2" in seen)
            assert login.logins == 1  # the middleware renewed it: kopf never saw the 401
            assert "old" in apiserver.refused

            apiserver.accepted_tokens = {"admin"}  # "new" revoked too, and the file holds nothing newer
            await eventually(lambda: login.logins >= 3)
            assert connection.credentials.refused
            volume.write(token="newest")
            apiserver.accepted_tokens = {"newest", "admin"}
            await admin.create(NODES, {"metadata": {"name": "n3"}})
            await eventually(lambda: "n3" in seen)
    finally:
        stop.set()
        await asyncio.wait_for(operator, HANG_BACKSTOP)
    assert waits[:2] == [0.5, 1.0]  # each login while refused waits longer than the one before
    assert not connection.credentials.refused
    assert {"old", "new", "newest"} <= watchers(apiserver)


def watchers(apiserver: ApiServerEmulator) -> set[str]:
    """The users whose watch of nodes the emulator accepted."""
    return {r["user"] for r in apiserver.requests if r.get("verb") == "watch" and r.get("resource") == "nodes"}


async def test_kopfs_session_writes_only_while_the_manager_leads(apiserver: ApiServerEmulator) -> None:
    """The session the login hands kopf carries the elector's fence: kopf's reads always pass, a write of
    kopf's (none is expected: the manager's handlers make kopf write nothing) goes only while leading."""
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, "admin")) as admin:
        await admin.create(NODES, {"metadata": {"name": "n1"}})
        elector = LeaseElector(admin, namespace="koordpy-system", name="koordpy-manager", identity="a")
        login = KopfLogin(ConnectionInfo.for_url(apiserver.url, "kopf"), fence=elector)
        session = (await login()).aiohttp_session
        try:
            node = f"{apiserver.url}/api/v1/nodes/n1"
            patch = {"metadata": {"labels": {"x": "y"}}}
            headers = {"Content-Type": "application/merge-patch+json"}
            async with session.get(node) as resp:
                assert resp.status == 200
            with pytest.raises(NotLeading):
                await session.patch(node, json=patch, headers=headers)
            await elector.acquire()
            async with session.patch(node, json=patch, headers=headers) as resp:
                assert resp.status == 200
            await elector.release()
            with pytest.raises(NotLeading):
                await session.patch(node, json=patch, headers=headers)
        finally:
            await session.close()
    assert [r["verb"] for r in apiserver.requests if r["user"] == "kopf"] == ["get", "patch"]
