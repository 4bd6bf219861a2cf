"""Head size and read time bounds on both extender listeners (main and ops): real uvicorn on loopback.

A small bound is configured so the tests are quick; the assertions are on what the server did (431,
closed connection, bytes it accepted), never on how long it took.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import orjson
import pytest

from koordpy.config import SchedulerConfiguration, validate
from koordpy.runtime.clock import SystemClock
from koordpy.runtime.listeners import ListenerLimits
from koordpy.scheduler.extender.listener import LimitedHttpToolsProtocol
from koordpy.scheduler.extender.server import build_extender, build_servers, listener_limits, serve_all
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually
from koordpy_testkit.hostile_http import dripped_head, oversized_head

LIMITS = ListenerLimits(max_header_bytes=16 * 1024, request_read_seconds=0.5)
HOST = "127.0.0.1"


@asynccontextmanager
async def listeners(limits: ListenerLimits = LIMITS) -> AsyncIterator[tuple[int, int]]:
    """The main and the ops listener of an extender without an API server, with ``limits``."""
    extender = build_extender(validate(SchedulerConfiguration, {}), None, clock=SystemClock(), freeze_gc=False)
    servers = build_servers(extender, HOST, 0, metrics_host=HOST, metrics_port=0, limits=limits)
    task = asyncio.create_task(serve_all(servers))
    try:
        await eventually(lambda: all(server.started for server in servers) or task.done(), "uvicorn started")
        assert all(server.started for server in servers), "uvicorn did not start"
        main, ops = (server.servers[0].sockets[0].getsockname()[1] for server in servers)
        yield main, ops
    finally:
        for server in servers:
            server.should_exit = True
        await asyncio.wait_for(task, HANG_BACKSTOP)


@pytest.mark.parametrize("which", ["main", "ops"])
async def test_a_head_over_the_bound_is_answered_431_and_closed(which: str) -> None:
    async with listeners() as (main, ops):
        port = main if which == "main" else ops
        outcome = await oversized_head(HOST, port, 20 * 1024)  # 20 KiB head > 16 KiB bound, in one piece
        assert outcome.status_line == b"HTTP/1.1 431 Request Header Fields Too Large"
        assert outcome.closed
        async with httpx.AsyncClient(timeout=HANG_BACKSTOP) as http:  # the listener still serves normal requests
            assert (await http.get(f"http://{HOST}:{port}/healthz")).status_code == 200


async def test_a_40_mb_head_is_cut_off_early_and_not_held() -> None:
    async with listeners() as (_, ops):
        refused = LimitedHttpToolsProtocol.refused_heads
        tracemalloc.start()
        try:
            outcome = await oversized_head(HOST, ops, 40 * 1024 * 1024)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert outcome.closed
        # the server stopped reading long before 40 MB: what went out fits in the socket buffers
        assert outcome.sent < 16 * 1024 * 1024
        assert LimitedHttpToolsProtocol.refused_heads == refused + 1
        assert peak < 8 * 1024 * 1024, f"{peak} bytes traced while a 40 MB head was refused"


@pytest.mark.parametrize("which", ["main", "ops"])
async def test_a_client_that_drips_its_head_is_disconnected(which: str) -> None:
    async with listeners() as (main, ops):
        port = main if which == "main" else ops
        timed_out = LimitedHttpToolsProtocol.timed_out
        # one byte every 50 ms never completes the head; the 0.5 s bound ends it long before 2,000 bytes
        outcome = await dripped_head(HOST, port, interval=0.05, max_bytes=2000)
        assert outcome.closed and outcome.sent < 2000
        assert LimitedHttpToolsProtocol.timed_out == timed_out + 1


async def test_a_connection_that_sends_nothing_is_closed() -> None:
    async with listeners() as (_, ops):
        reader, writer = await asyncio.open_connection(HOST, ops)
        try:
            assert await asyncio.wait_for(reader.read(1024), HANG_BACKSTOP) == b""  # closed by the server, not by us
        finally:
            writer.close()


async def test_big_bodies_and_several_requests_on_one_connection_still_work() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": []}}
    # 2,000 node names of ~600 bytes: a ~1.2 MB body, far over the head bound, well under maxRequestBytes
    names = [f"node-{i:04d}-" + "x" * 590 for i in range(2000)]
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
    assert len(body) > 1_000_000
    # The head bound as above; the read bound generous: moving 1.2 MB is not what is tested here, and a
    # loaded machine may take longer than 0.5 s to move it through one event loop.
    async with (
        listeners(ListenerLimits(max_header_bytes=LIMITS.max_header_bytes, request_read_seconds=60)) as (main, _),
        httpx.AsyncClient(base_url=f"http://{HOST}:{main}", timeout=HANG_BACKSTOP) as http,
    ):
        for _ in range(3):  # kept alive between requests
            resp = await http.post("/filter", content=body, headers={"Content-Type": "application/json"})
            assert resp.status_code == 200
            assert "FailedNodes" in orjson.loads(resp.content)
        many = {f"x-header-{i}": "v" * 100 for i in range(50)}  # ~6 KB of ordinary headers
        assert (await http.get("/healthz", headers=many)).status_code == 200


def test_the_configuration_sets_the_bounds() -> None:
    config = validate(SchedulerConfiguration, {"extender": {"maxHeaderBytes": 4096, "requestReadTimeoutSeconds": 2.5}})
    assert listener_limits(config) == ListenerLimits(max_header_bytes=4096, request_read_seconds=2.5)
    extender = build_extender(config, None, clock=SystemClock(), freeze_gc=False)
    servers = build_servers(extender, HOST, 0, metrics_host=HOST, metrics_port=0, limits=listener_limits(config))
    for server in servers:
        protocol = server.config.http
        assert isinstance(protocol, type) and issubclass(protocol, LimitedHttpToolsProtocol)
        assert protocol.limits == listener_limits(config)
