"""An in-memory Kubernetes API server emulator for adapter and system tests.

Two faces:

- in process: ``async with running_apiserver() as api: ...`` (``api.url``, ``api.state``, ``api.seed(...)``,
  ``api.requests``), or the pytest fixtures in :mod:`koordpy_testkit.apiserver.fixture`;
- as a process: ``python -m koordpy_testkit.apiserver --host 127.0.0.1 --port N [--record FILE] [--seed FILE]``
  prints its URL on stdout when ready.

It is built on aiohttp.web, not on kmock (see :mod:`koordpy_testkit.apiserver.server` for why and for
what is not emulated). :func:`write_kubeconfig` writes a kubeconfig pointing at it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from koordpy.kube.connection import write_kubeconfig
from koordpy_testkit.apiserver.errors import StatusError, status_body
from koordpy_testkit.apiserver.server import ApiServerEmulator, InjectedError
from koordpy_testkit.apiserver.state import ClusterState, ResourceInfo, default_resources

__all__ = [
    "ApiServerEmulator",
    "ClusterState",
    "InjectedError",
    "ResourceInfo",
    "StatusError",
    "default_resources",
    "running_apiserver",
    "status_body",
    "write_kubeconfig",
]


@asynccontextmanager
async def running_apiserver(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    state: ClusterState | None = None,
    tokens: Mapping[str, str] | None = None,
    record_path: str | os.PathLike[str] | None = None,
    bookmark_interval: float = 5.0,
) -> AsyncIterator[ApiServerEmulator]:
    """Run an emulator on loopback for the duration of the block; yields it (its URL is ``.url``)."""
    emulator = ApiServerEmulator(state, tokens=tokens, record_path=record_path, bookmark_interval=bookmark_interval)
    await emulator.start(host, port)
    try:
        yield emulator
    finally:
        await emulator.close()
