"""The aiohttp side of the listener limits (the manager's health endpoint; the agent shares the same
handler arguments): real servers on loopback, hostile raw-socket clients, small bounds."""

from __future__ import annotations

import asyncio
import re
import threading
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest

from koordpy.runtime.listeners import (
    ListenerLimits,
    LoopHeartbeat,
    aiohttp_handler_args,
    health_listener,
    listen_host,
    threaded_health_listener,
)
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.hostile_http import dripped_head, oversized_head

HOST = "127.0.0.1"
LIMITS = ListenerLimits(request_read_seconds=0.5)


@asynccontextmanager
async def health(healthy: bool = True) -> AsyncIterator[int]:
    async def check() -> bool:
        return healthy

    async with health_listener(HOST, 0, check, limits=LIMITS) as runner:
        yield int(runner.addresses[0][1])


async def status_and_body(port: int) -> tuple[int, object]:
    async with aiohttp.ClientSession() as http, http.get(f"http://{HOST}:{port}/healthz") as resp:
        return resp.status, await resp.json()


async def test_health_says_its_status() -> None:
    async with health() as port:
        assert await status_and_body(port) == (200, {"status": "ok"})
    async with health(healthy=False) as port:
        assert await status_and_body(port) == (503, {"status": "failing"})


async def test_health_serves_a_report_and_answers_by_its_status() -> None:
    reports = [{"status": "ok", "checks": {"eventLoop": "ok"}}, {"status": "failing", "checks": {"x": "stuck"}}]

    async def check() -> dict[str, object]:
        return reports.pop(0)

    async with health_listener(HOST, 0, check, limits=LIMITS) as runner:
        port = int(runner.addresses[0][1])
        assert await status_and_body(port) == (200, {"status": "ok", "checks": {"eventLoop": "ok"}})
        assert await status_and_body(port) == (503, {"status": "failing", "checks": {"x": "stuck"}})


@pytest.mark.parametrize("size", [20 * 1024, 40 * 1024 * 1024])
async def test_an_oversized_header_is_refused_and_the_connection_closed(size: int) -> None:
    async with health() as port:
        outcome = await oversized_head(HOST, port, size)
        # aiohttp refuses a header line over max_field_size (8190 bytes) with 400 or 431 and closes
        assert outcome.closed
        assert outcome.status_line == b"" or outcome.status_line.split()[1] in (b"400", b"431")
        assert outcome.sent < 16 * 1024 * 1024  # the server stopped reading long before 40 MB
        async with aiohttp.ClientSession() as http, http.get(f"http://{HOST}:{port}/healthz") as resp:
            assert resp.status == 200  # and still serves


async def test_too_many_headers_are_refused() -> None:
    async with health() as port, aiohttp.ClientSession() as http:
        many = {f"x-h-{i}": "v" for i in range(LIMITS.max_headers + 5)}
        async with http.get(f"http://{HOST}:{port}/healthz", headers=many) as resp:
            assert resp.status in (400, 431)


async def test_a_client_that_drips_its_head_is_disconnected() -> None:
    async with health() as port:
        # one byte every 50 ms never completes the head; the 0.5 s bound ends it long before 2,000 bytes
        outcome = await dripped_head(HOST, port, interval=0.05, max_bytes=2000)
        assert outcome.closed and outcome.sent < 2000


async def test_a_connection_that_sends_nothing_is_closed() -> None:
    async with health() as port:
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            assert await asyncio.wait_for(reader.read(1024), HANG_BACKSTOP) == b""
        finally:
            writer.close()


def test_handler_args_carry_the_limits() -> None:
    args = aiohttp_handler_args(ListenerLimits(max_header_bytes=4096, request_read_seconds=3.0))
    # a line may not exceed the whole head bound: min(8190, 4096)
    assert args == {"max_line_size": 4096, "max_field_size": 4096, "max_headers": 32, "keepalive_timeout": 3.0}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_header_bytes": 10}, "max_header_bytes"),
        ({"request_read_seconds": 0}, "request_read_seconds"),
        ({"request_read_seconds": float("nan")}, "request_read_seconds"),
        ({"max_headers": 0}, "max_headers"),
    ],
)
def test_limits_are_validated(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ListenerLimits(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10.244.1.7", "10.244.1.7"),
        (" 10.244.1.7 ", "10.244.1.7"),
        ("fd00:10:244::7", "fd00:10:244::7"),
        ("FD00:0:0::7", "fd00::7"),  # normalised as the kernel prints it
        ("0.0.0.0", "0.0.0.0"),
        ("localhost", "localhost"),
        ("node-1.cluster.local", "node-1.cluster.local"),
    ],
)
def test_listen_host_accepts_addresses_and_host_names(value: str, expected: str) -> None:
    assert listen_host(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("$(POD_IP)", "--host: '$(POD_IP)' is an unexpanded variable"),
        ("${POD_IP}", "--host: '${POD_IP}' is an unexpanded variable"),
        ("", "--host: '' is neither an IP address nor a host name"),
        ("10.0.0.256", "--host: '10.0.0.256' is neither"),
        ("[::1]", "--host: '[::1]' is neither"),
        ("two words", "--host: 'two words' is neither"),
        ("-leading-dash", "--host: '-leading-dash' is neither"),
    ],
)
def test_listen_host_refuses_anything_else_naming_the_option(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        listen_host(value)


async def test_a_listener_bound_to_one_address_answers_there_only() -> None:
    """What the pod-IP flags buy: bound to one address (here 127.0.0.2, as the chart binds the pod IP), the
    listener is not reachable on another address of the same host (127.0.0.1, the pod's loopback)."""

    async def check() -> bool:
        return True

    async with health_listener(listen_host("127.0.0.2"), 0, check, limits=LIMITS) as runner:
        port = int(runner.addresses[0][1])
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.2:{port}/healthz") as resp:
            assert resp.status == 200
        with pytest.raises(aiohttp.ClientConnectorError):
            async with aiohttp.ClientSession() as http, http.get(f"http://{HOST}:{port}/healthz"):
                pass


async def test_the_threaded_listener_answers_while_the_callers_loop_is_blocked() -> None:
    # The caller's event loop is blocked (a long round doing CPU work); a probe from another thread must
    # still be answered. The block ends as soon as the probe got its answer, or after a 60 s backstop.
    answered = threading.Event()
    result: list[int] = []

    def probe(port: int) -> None:
        with urllib.request.urlopen(f"http://{HOST}:{port}/healthz", timeout=60) as resp:
            result.append(resp.status)
        answered.set()

    heartbeat = LoopHeartbeat(stall=30.0)
    async with threaded_health_listener(HOST, 0, heartbeat.alive, limits=LIMITS) as port:
        prober = threading.Thread(target=probe, args=(port,))
        prober.start()
        blocked_until_answered = answered.wait(60)  # blocks this event loop: it cannot serve anything
        prober.join(60)
    assert blocked_until_answered and result == [200]


async def test_the_threaded_listener_says_503_once_the_loop_stalls() -> None:
    now = [0.0]
    heartbeat = LoopHeartbeat(stall=30.0, clock=lambda: now[0])
    async with threaded_health_listener(HOST, 0, heartbeat.alive, limits=LIMITS) as port:
        assert await status_and_body(port) == (200, {"status": "ok"})
        now[0] = 31.0  # no beat for 31 s: the loop is stuck
        assert await status_and_body(port) == (503, {"status": "failing"})
        heartbeat.last = now[0]  # it beats again
        assert await status_and_body(port) == (200, {"status": "ok"})


async def test_a_port_in_use_fails_in_the_caller() -> None:
    async with health() as port:
        with pytest.raises(OSError):
            async with threaded_health_listener(HOST, port, lambda: True, limits=LIMITS):
                pass
