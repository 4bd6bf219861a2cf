"""The reachability probe: sleepers woken when the API server answers again after failing, not when it never
stopped answering; the probe stops once nobody sleeps; a client's own probe asks ``GET /readyz`` of its server
(the emulator stopped and started again, and a loopback server answering ``ok`` as text as kube-apiserver
does); a reflector backing off after an outage retries at once (against the API emulator)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from koordpy.kube import reachability
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.errors import ApiConnectionError
from koordpy.kube.reachability import Reachability
from koordpy.kube.reflector import Reflector
from koordpy.kube.resources import PODS
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually, within_backstop


def scripted(*answers: bool) -> tuple[list[bool], Reachability]:
    """A probe answering ``answers`` in turn (then the last one again); the answers given, and the probe."""
    given: list[bool] = []

    async def probe() -> bool:
        answer = answers[min(len(given), len(answers) - 1)]
        given.append(answer)
        return answer

    return given, Reachability(probe, probe_interval=0.01)


async def test_sleepers_wake_together_when_the_server_answers_after_failing() -> None:
    given, reach = scripted(False, False, True)
    loop = asyncio.get_running_loop()
    started = loop.time()
    woken = await asyncio.gather(*(reach.sleep(HANG_BACKSTOP) for _ in range(3)))
    assert woken == [True, True, True]
    assert loop.time() - started < HANG_BACKSTOP / 2  # cut short, not slept out
    assert given == [False, False, True] and reach.recoveries == 1 and reach.probes == 3


async def test_a_server_that_never_stopped_answering_wakes_nobody() -> None:
    """A 403 or a 404 is an error of the request, not of the server: the backoff runs in full."""
    given, reach = scripted(True)
    assert await reach.sleep(0.2) is False
    assert given == [True] and reach.recoveries == 0


async def test_a_probe_that_raises_counts_as_not_ready() -> None:
    """An exception from the probe is a failure (the server is away), not an answer: the probe goes on, and
    the answer after it wakes the sleeper."""
    calls: list[str] = []

    async def probe() -> bool:
        calls.append("probe")
        if len(calls) == 1:
            raise ConnectionResetError("reset by peer")
        return True

    reach = Reachability(probe, probe_interval=0.01)
    assert await reach.sleep(HANG_BACKSTOP) is True
    assert calls == ["probe", "probe"] and reach.recoveries == 1


async def test_a_sleeper_that_stays_is_woken_after_another_one_left() -> None:
    """Two sleepers, one with a short backoff: the probe goes on for the one that stays, and wakes it."""
    answers = [False]

    async def probe() -> bool:
        return answers[-1]

    reach = Reachability(probe, probe_interval=0.01)
    staying = asyncio.create_task(reach.sleep(HANG_BACKSTOP))
    assert await reach.sleep(0.05) is False
    probed = reach.probes
    await eventually(lambda: reach.probes > probed, "the probe going on for the sleeper that stays")
    answers.append(True)
    assert await within_backstop(staying, "the staying sleeper woken") is True


async def test_the_probe_stops_once_nobody_sleeps_and_starts_again_for_the_next_sleeper() -> None:
    """A server that stays away: the sleeper's time runs out (False), the probe ends with it; the next sleeper
    starts a new probe, which wakes it when the server answers; a second outage and return count a second
    recovery."""
    answers = [False]

    async def probe() -> bool:
        return answers[-1]

    reach = Reachability(probe, probe_interval=0.01)
    assert await reach.sleep(0.05) is False
    first = reach._task
    assert first is not None
    await within_backstop(first, "the probe ending once its only sleeper left")
    probed = reach.probes
    assert probed >= 2 and reach.recoveries == 0
    await asyncio.sleep(0.05)
    assert reach.probes == probed  # nobody sleeps: nobody asks
    sleeper = asyncio.create_task(reach.sleep(HANG_BACKSTOP))
    await eventually(lambda: reach.probes > probed, "a probe for the new sleeper")
    assert reach._task is not first
    answers.append(True)
    assert await within_backstop(sleeper, "the sleeper woken") is True
    assert reach.recoveries == 1
    answers.append(False)
    before = reach.probes
    sleeper = asyncio.create_task(reach.sleep(HANG_BACKSTOP))
    await eventually(lambda: reach.probes > before, "a probe failing again")
    answers.append(True)
    assert await within_backstop(sleeper, "the sleeper woken again") is True
    assert reach.recoveries == 2


async def test_a_client_probes_readyz_of_its_api_server_and_wakes_sleepers_when_it_is_back(
    apiserver: ApiServerEmulator, api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe of ``Reachability.of`` (one per client): ready while the emulator answers, not while it is
    stopped; a sleeper backing off during the outage is woken when the emulator listens again, and the
    recovery is logged."""
    caplog.set_level(logging.INFO, logger="koordpy.kube.reachability")
    reach = Reachability.of(api_client)
    assert Reachability.of(api_client) is reach
    assert reach.probe_interval == reachability.PROBE_INTERVAL == 1.0
    reach.probe_interval = 0.02
    assert await reachability._ready(api_client) is True
    await apiserver.stop()
    assert await reachability._ready(api_client) is False
    sleeper = asyncio.create_task(reach.sleep(HANG_BACKSTOP))
    await eventually(lambda: reach.probes >= 2, "the probe failing while the server is away")
    assert not sleeper.done()
    await apiserver.start()
    assert await within_backstop(sleeper, "the sleeper woken by the server's return") is True
    assert reach.recoveries == 1
    assert [r.getMessage() for r in caplog.records if r.name == "koordpy.kube.reachability"] == [
        "the API server answers again: watches retry now"
    ]
    readyz = [r for r in apiserver.requests if r.get("path") == "/readyz"]
    assert readyz and {r.get("verb") for r in readyz} == {"get"}, readyz


class ReadyzServer:
    """A loopback HTTP server answering ``GET /readyz`` as kube-apiserver does: ``ok`` as plain text with 200
    (``ready`` True), or 500 with its check list (False); anything else 404."""

    def __init__(self) -> None:
        self.ready = True
        self.asked: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.asked.append(f"{request.method} {request.path}")
        if request.method != "GET" or request.path != "/readyz":
            return web.Response(status=404, text="404 page not found")
        if self.ready:
            return web.Response(text="ok")
        return web.Response(status=500, text="[-]etcd failed: reason withheld\nreadyz check failed")


@pytest_asyncio.fixture
async def readyz() -> AsyncIterator[tuple[ReadyzServer, ApiClient]]:
    server = ReadyzServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with ApiClient(ConnectionInfo.for_url(f"http://127.0.0.1:{port}", token="t")) as client:
            yield server, client
    finally:
        await runner.cleanup()


async def test_readyz_answered_ok_as_text_is_ready_and_500_is_not(readyz: tuple[ReadyzServer, ApiClient]) -> None:
    """kube-apiserver's ``/readyz`` body is ``ok``, not JSON: the client reports it as an undecodable answer
    with status 200, which the probe takes as ready; a 500 (a failing check) is not ready."""
    server, client = readyz
    assert await reachability._ready(client) is True
    server.ready = False
    assert await reachability._ready(client) is False
    assert server.asked == ["GET /readyz", "GET /readyz"]


async def test_the_probe_bounds_its_request_to_5_s() -> None:
    """A server that accepts the connection and never answers must not hold the probe (and with it every
    sleeper's wake-up) for the client's default timeout: the request carries 5 s (a stand-in client records
    it and fails it as the client would when that time runs out)."""
    sent: list[tuple[str, str, Any]] = []

    class Unanswered:
        async def request(self, method: str, path: str, *, timeout: float | None = None) -> dict[str, Any]:
            sent.append((method, path, timeout))
            raise ApiConnectionError(f"{method} {path}: TimeoutError")

    assert await reachability._ready(Unanswered()) is False  # type: ignore[arg-type]
    assert sent == [("GET", "/readyz", 5.0)]


async def test_a_closed_client_is_not_ready() -> None:
    """Any other error than the API's (a closed client's RuntimeError) is not ready either."""
    async with ApiClient(ConnectionInfo.for_url("http://127.0.0.1:9", token="t")) as client:
        pass
    assert await reachability._ready(client) is False


async def test_a_reflector_backing_off_after_an_outage_retries_as_soon_as_the_server_answers(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """The list answered 503 (the server restarting), with a 10 s initial backoff: without the probe the
    reflector would sleep 5 to 10 s; the probe fails twice, then answers, and the reflector lists at once."""
    given, reach = scripted(False, False, True)
    reachability._BY_CLIENT[api_client] = reach
    apiserver.inject_error(503, verb="list", resource="pods", count=1)
    seen: list[str] = []
    reflector = Reflector(api_client, PODS, lambda etype, obj: seen.append(etype), backoff_initial=10.0)
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), HANG_BACKSTOP)
    finally:
        task.cancel()
    assert reflector.wakeups == 1 and reflector.errors == 1
    assert len(reflector.delays) == 1 and reflector.delays[0] >= 5.0  # the delay it was sleeping, cut short
    assert given == [False, False, True]
