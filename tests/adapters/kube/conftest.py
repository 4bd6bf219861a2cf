"""Fixtures for the kube adapter tests: a fresh emulator per test, a client for it, a polling helper."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP

__all__ = ["api_client", "apiserver", "eventually"]

Eventually = Callable[..., Awaitable[None]]


async def _eventually(predicate: Callable[[], bool], timeout: float = HANG_BACKSTOP) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


@pytest.fixture
def eventually() -> Eventually:
    """Poll a predicate until true; fail after ``timeout`` seconds (a bound, not a speed claim)."""
    return _eventually
