"""pytest fixtures for the emulator. Import them by name into any ``conftest.py``
(``from koordpy_testkit.apiserver.fixture import apiserver, api_client``), or list this module in
``pytest_plugins`` of the root ``conftest.py`` (pytest only honours ``pytest_plugins`` there).

- ``apiserver``: a running :class:`ApiServerEmulator` (fresh state per test, bookmarks every 0.2 s).
- ``api_client``: an open :class:`koordpy.kube.ApiClient` for it, authenticated as user ``test``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy_testkit.apiserver.server import ApiServerEmulator

__all__ = ["api_client", "apiserver"]


@pytest_asyncio.fixture
async def apiserver() -> AsyncIterator[ApiServerEmulator]:
    emulator = ApiServerEmulator(bookmark_interval=0.2)
    await emulator.start()
    try:
        yield emulator
    finally:
        await emulator.close()


@pytest_asyncio.fixture
async def api_client(apiserver: ApiServerEmulator) -> AsyncIterator[ApiClient]:
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, token="test")) as client:
        yield client
