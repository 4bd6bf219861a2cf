"""Bounds every HTTP listener of koordpy puts on what a client may send and how slowly.

``ListenerLimits`` holds two numbers: the bytes a request head (request line plus headers) may take,
and the seconds a client has to deliver a complete request once the connection is open or, between
requests on a kept-alive connection, once the previous response was sent. A client over either bound
is answered 431 (head too large, where the server can still answer) or disconnected.

The extender's uvicorn listeners get them from :mod:`koordpy.scheduler.extender.listener`. The aiohttp
listeners (the agent's, the manager's health endpoint) get them through :func:`aiohttp_handler_args`:
aiohttp bounds each line of the head (request line, each header) and the number of headers rather than
their total, so the total there is ``max_line_bytes * (max_headers + 1)`` at most (about 270 KB with
the defaults); its read bound is the keep-alive timeout, which aiohttp (3.14.5 and later) also arms
when a connection opens and does not extend while a head trickles in.

Where they listen: :func:`listen_host` checks an address given on a command line (``--host``,
``--health-host``, ``--metrics-host``). The chart passes the pod IP there (``$(POD_IP)`` from the downward
API), so a component's health and metrics port answers on the pod's network interface only, not on
loopback or any other address of the pod.

Not guaranteed: a bound on the number of connections (each one is bounded in size and time only), or
on a handler's own run time once the request was read. Binding to one pod IP serves one address family:
on a dual-stack pod ``status.podIP`` is the primary family's address.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = [
    "DEFAULT_LIMITS",
    "ListenerLimits",
    "LoopHeartbeat",
    "aiohttp_handler_args",
    "health_listener",
    "listen_host",
    "threaded_health_listener",
]

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")


def listen_host(value: str, option: str = "--host") -> str:
    """``value`` when it is an IP address (v4 or v6, no brackets) or a host name; else ``ValueError``
    naming ``option``. An unexpanded ``$(POD_IP)`` (the variable missing from the pod's env) is named
    as such, instead of failing later inside the server's bind call."""
    text = value.strip()
    if "$(" in text or "${" in text:
        raise ValueError(f"{option}: {value!r} is an unexpanded variable (is it defined in the container's env?)")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if _HOSTNAME.match(text) and not text.replace(".", "").isdigit():
        return text
    raise ValueError(f"{option}: {value!r} is neither an IP address nor a host name")


@dataclass(frozen=True)
class ListenerLimits:
    max_header_bytes: int = 64 * 1024
    """Request line plus headers, in bytes (uvicorn listeners: the total; aiohttp: see the module doc)."""
    request_read_seconds: float = 10.0
    """Time to deliver a whole request head (uvicorn: and body) after connecting or after a response."""
    max_line_bytes: int = 8190
    """aiohttp only: one request line or header line."""
    max_headers: int = 32
    """aiohttp only: header lines per request."""

    def __post_init__(self) -> None:
        if self.max_header_bytes < 1024:
            raise ValueError(f"max_header_bytes must be at least 1024, got {self.max_header_bytes}")
        if not 0 < self.request_read_seconds <= 3600:
            raise ValueError(f"request_read_seconds must be in (0, 3600], got {self.request_read_seconds}")
        if self.max_line_bytes < 256 or self.max_headers < 1:
            raise ValueError("max_line_bytes must be at least 256 and max_headers at least 1")


DEFAULT_LIMITS = ListenerLimits()


def aiohttp_handler_args(limits: ListenerLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """``web.Application(handler_args=...)`` that apply ``limits`` to every connection of the app."""
    return {
        "max_line_size": min(limits.max_line_bytes, limits.max_header_bytes),
        "max_field_size": min(limits.max_line_bytes, limits.max_header_bytes),
        "max_headers": limits.max_headers,
        "keepalive_timeout": limits.request_read_seconds,
    }


@contextlib.asynccontextmanager
async def health_listener(
    host: str,
    port: int,
    healthy: Callable[[], Awaitable[bool | Mapping[str, Any]]],
    *,
    limits: ListenerLimits = DEFAULT_LIMITS,
    path: str = "/healthz",
    metrics: Callable[[], tuple[bytes, str]] | None = None,
    ready: Callable[[], Awaitable[bool | Mapping[str, Any]]] | None = None,
) -> AsyncIterator[web.AppRunner]:
    """Serve ``GET path`` on ``host:port`` for as long as the block runs (kopf's liveness endpoint, which it
    replaces, has no bounds). ``healthy()`` returns a bool (body ``{"status": "ok"}`` or ``"failing"``) or
    the body itself, a mapping whose ``status`` is ``ok`` when healthy; the answer is 200 when healthy, else
    503. With ``metrics`` (body and content type), ``GET /metrics`` serves them too; with ``ready`` (same
    answers as ``healthy``), ``GET /readyz``."""

    def answer(
        check: Callable[[], Awaitable[bool | Mapping[str, Any]]],
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def respond(_: web.Request) -> web.Response:
            verdict = await check()
            body = dict(verdict) if isinstance(verdict, Mapping) else {"status": "ok" if verdict else "failing"}
            return web.json_response(body, status=200 if body.get("status") == "ok" else 503)

        return respond

    app = web.Application(handler_args=aiohttp_handler_args(limits))
    app.router.add_get(path, answer(healthy))
    if ready is not None:
        app.router.add_get("/readyz", answer(ready))
    if metrics is not None:
        render_metrics = metrics

        async def exposition(_: web.Request) -> web.Response:
            body, content_type = render_metrics()
            return web.Response(body=body, headers={"Content-Type": content_type})

        app.router.add_get("/metrics", exposition)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield runner
    finally:
        await runner.cleanup()


class LoopHeartbeat:
    """Tells from another thread whether an event loop still runs: :meth:`beat` (a task on that loop)
    records the time every ``period`` seconds; :meth:`alive` is True while the last record is younger than
    ``stall`` seconds. Not guaranteed: that the loop is responsive (a loop busy for ``stall`` minus a
    little still counts as alive)."""

    def __init__(self, stall: float, period: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall = stall
        self.period = period
        self.clock = clock
        self.last = clock()

    def alive(self) -> bool:
        return self.clock() - self.last < self.stall

    async def beat(self) -> None:
        """Record the time every ``period`` seconds until cancelled."""
        while True:
            self.last = self.clock()
            await asyncio.sleep(self.period)


@contextlib.asynccontextmanager
async def threaded_health_listener(
    host: str,
    port: int,
    healthy: Callable[[], bool | Mapping[str, Any]],
    *,
    limits: ListenerLimits = DEFAULT_LIMITS,
    path: str = "/healthz",
    metrics: Callable[[], tuple[bytes, str]] | None = None,
    ready: Callable[[], bool | Mapping[str, Any]] | None = None,
) -> AsyncIterator[int]:
    """:func:`health_listener` served from a thread of its own with its own event loop, for as long as the
    block runs: a probe is answered however busy the caller's event loop is (``healthy``, ``ready`` and
    ``metrics`` are called in that thread: they must be thread-safe and quick, as a :class:`LoopHeartbeat` and a
    prometheus_client exposition are). Yields the bound port; one that cannot be bound raises here, in the
    caller.

    Not guaranteed: answers while a thread holds the GIL for long (the answer then waits for it, as
    every Python thread does)."""
    started = threading.Event()
    state: dict[str, Any] = {}

    async def answer() -> bool | Mapping[str, Any]:
        return healthy()

    async def readiness() -> bool | Mapping[str, Any]:
        assert ready is not None
        return ready()

    async def serve() -> None:
        stop = asyncio.Event()
        state["loop"], state["stop"] = asyncio.get_running_loop(), stop
        try:
            async with health_listener(
                host, port, answer, limits=limits, path=path, metrics=metrics, ready=readiness if ready else None
            ) as runner:
                state["port"] = int(runner.addresses[0][1])
                started.set()
                await stop.wait()
        except BaseException as exc:
            state["error"] = exc
            raise
        finally:
            started.set()

    def main() -> None:
        with contextlib.suppress(BaseException):
            asyncio.run(serve())

    thread = threading.Thread(target=main, name=f"health {host}:{port}", daemon=True)
    thread.start()
    await asyncio.to_thread(started.wait)
    if "error" in state:
        await asyncio.to_thread(thread.join)
        raise state["error"]
    try:
        yield state["port"]
    finally:
        loop, stop = state["loop"], state["stop"]
        with contextlib.suppress(RuntimeError):  # the loop already ended
            loop.call_soon_threadsafe(stop.set)
        await asyncio.to_thread(thread.join, 10.0)
