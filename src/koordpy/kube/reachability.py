"""Whether the API server answers again: one probe per client, shared by the watches that back off.

A watch that fails backs off exponentially (client-go's reflector does the same, up to 30 s), so after an
outage of the API server a watch can sleep tens of seconds past the moment the server answers again.
:class:`Reachability` cuts those sleeps short: while at least one caller is backing off after a failure, it
asks ``GET /readyz`` every ``probe_interval`` seconds (every ServiceAccount may: the built-in
``system:public-info-viewer`` role), and when the answer turns from a failure into ``200`` it wakes every
sleeper at once (:meth:`Reachability.sleep` returns True, and the caller starts its backoff again from the
initial delay). A server that answers ``/readyz`` with 200 from the first probe (it never went away: the
failure was an error of the request itself, a 403 or a 404) wakes nobody, so a persistent error still backs
off in full.

Not guaranteed: that the first request after the wake-up succeeds (a just-started API server may refuse a
few requests while its caches fill; the caller's backoff, restarted from its initial delay, handles them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from koordpy.kube.client import ApiClient
from koordpy.kube.errors import ApiError

__all__ = ["PROBE_INTERVAL", "Reachability"]

PROBE_INTERVAL = 1.0
"""Seconds between two probes while someone backs off."""

log = logging.getLogger(__name__)

_BY_CLIENT: weakref.WeakKeyDictionary[ApiClient, Reachability] = weakref.WeakKeyDictionary()


class Reachability:
    """The probe of one API server (see the module docstring); ``probe`` answers whether it is ready.

    One event loop only.
    """

    def __init__(
        self,
        probe: Callable[[], Awaitable[bool]],
        *,
        probe_interval: float = PROBE_INTERVAL,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self._probe = probe
        self.probe_interval = probe_interval
        self._sleep = sleep
        self._back = asyncio.Event()
        self._sleepers = 0
        self._task: asyncio.Task[None] | None = None
        self.recoveries = 0
        """How often the probe saw the server come back (and woke the sleepers)."""
        self.probes = 0

    @classmethod
    def of(cls, client: ApiClient) -> Reachability:
        """The probe shared by every caller of ``client`` (made on first use)."""
        found = _BY_CLIENT.get(client)
        if found is None:
            found = _BY_CLIENT[client] = cls(lambda: _ready(client))
        return found

    async def sleep(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less: True when the server came back meanwhile (see the module docstring)."""
        self._sleepers += 1
        back = self._back
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="api server reachability")
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await back.wait()
            return back.is_set()
        finally:
            self._sleepers -= 1

    async def _watch(self) -> None:
        """Probe while anyone sleeps; on a failure followed by a success, wake them all."""
        failed = False
        while self._sleepers > 0:
            self.probes += 1
            ready = False
            with contextlib.suppress(Exception):
                ready = await self._probe()
            if not ready:
                failed = True
            elif failed:
                self.recoveries += 1
                log.info("the API server answers again: watches retry now")
                back, self._back = self._back, asyncio.Event()
                back.set()
                return
            else:
                return  # it answers and never stopped: nothing to cut short
            await self._sleep(self.probe_interval)


async def _ready(client: ApiClient) -> bool:
    """``GET /readyz`` answered 200 (any error or other status: not ready). The body is ``ok``, not JSON:
    the client reports it as an undecodable answer with status 200."""
    try:
        await client.request("GET", "/readyz", timeout=5.0)
    except ApiError as exc:
        return exc.status == 200
    except Exception:
        return False
    return True
