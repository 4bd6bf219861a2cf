"""The reachability probe: sleepers woken when the API server answers again after failing, not when it never
stopped answering; a reflector backing off after an outage retries at once (against the API emulator)."""

from __future__ import annotations

import asyncio

from koordpy.kube import reachability
from koordpy.kube.client import ApiClient
from koordpy.kube.reachability import Reachability
from koordpy.kube.reflector import Reflector
from koordpy.kube.resources import PODS
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.bounds import HANG_BACKSTOP


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
    assert given == [False, False, True] and reach.recoveries == 1


async def test_a_server_that_never_stopped_answering_wakes_nobody() -> None:
    """A 403 or a 404 is an error of the request, not of the server: the backoff runs in full."""
    given, reach = scripted(True)
    assert await reach.sleep(0.2) is False
    assert given == [True] and reach.recoveries == 0


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
