"""The leader's fence (``LeaseElector.admit``) on a fenced ``ApiClient``, against the API emulator over
loopback: a write is sent only while the elector leads and its last renewal started less than the renew
deadline ago; a write refused never reaches the server; a write admitted waits no longer than the window
left, and its connection is then reset, not closed (nothing queued is delivered later); reads always pass.

Time: the elector's monotonic clock is injected and moved by hand (the window is read on it); the one
real wait (the grant running out) is bounded by the grant, far below the client's request timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from koordpy.kube.client import ApiClient, ClientSettings
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.errors import ApiConnectionError, is_temporary
from koordpy.kube.leaderelection import LeaseElector, NotLeading
from koordpy.kube.resources import EVENTS, LEASES
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.bounds import HANG_BACKSTOP

NS, NAME = "koordpy-system", "koordpy-manager"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def yield_only(_: float) -> None:
    await asyncio.sleep(0)


def elector(client: ApiClient, clock: Clock, identity: str = "a") -> LeaseElector:
    return LeaseElector(
        client,
        namespace=NS,
        name=NAME,
        identity=identity,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        monotonic=clock,
        sleep=yield_only,
    )


def event(name: str) -> dict[str, object]:
    """An Event named ``name``: the create's body carries its name (the emulator's request log does not)."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"}, "reason": "T"}


async def created(api: ApiClient) -> list[str]:
    """The names of the Events stored."""
    return [item["metadata"]["name"] for item in (await api.list(EVENTS, namespace="default")).items]


@contextlib.asynccontextmanager
async def fenced_client(apiserver: ApiServerEmulator, fence: LeaseElector) -> AsyncIterator[ApiClient]:
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, token="fenced"), fence=fence) as client:
        yield client


async def test_writes_go_only_while_leading_and_inside_the_renew_deadline(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    clock = Clock()
    leader = elector(api_client, clock)
    async with fenced_client(apiserver, leader) as client:
        with pytest.raises(NotLeading, match="not the holder"):  # a standby sends nothing
            await client.create(EVENTS, event("standby"))
        assert (await client.list(EVENTS, namespace="default")).items == []  # reads pass
        await leader.acquire()  # the renewal starts at 1000: writes until 1010
        await client.create(EVENTS, event("leading"))
        clock.now = 1009.9
        assert leader.admit("POST", "/x") == pytest.approx(0.1)
        await client.create(EVENTS, event("just-in-time"))
        clock.now = 1010.0  # no renewal since: the deadline passed, though nothing noticed it yet
        assert leader.state.leading  # hold() would say so at its next look; the fence does not wait for it
        with pytest.raises(NotLeading, match="renewal overdue"):
            await client.patch(EVENTS, "leading", {"data": {"k": "v"}}, namespace="default")
        assert (await client.get(EVENTS, "leading", "default"))["metadata"]["name"] == "leading"
    assert sorted(await created(api_client)) == ["just-in-time", "leading"]
    fenced_writes = [r["verb"] for r in apiserver.requests if r["user"] == "fenced" and r["verb"] != "get"]
    assert fenced_writes == ["list", "create", "create"]  # the refused create and patch never reached it
    assert leader.state.fenced_writes == 2


async def test_a_renewal_extends_the_window_from_its_own_start(api_client: ApiClient) -> None:
    """hold() renews 2 s after taking the Lease: the window then ends 10 s after that renewal started."""
    clock = Clock()
    blocked = asyncio.Event()

    async def sleep(seconds: float) -> None:
        if clock.now >= 1002:
            blocked.set()
            await asyncio.Event().wait()  # the second wait never ends: one renewal only
        clock.now += seconds
        await asyncio.sleep(0)

    leader = LeaseElector(
        api_client,
        namespace=NS,
        name=NAME,
        identity="a",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        monotonic=clock,
        sleep=sleep,
    )
    await leader.acquire()
    holding = asyncio.create_task(leader.hold())
    try:
        await asyncio.wait_for(blocked.wait(), HANG_BACKSTOP)
        assert leader.admit("POST", "/x") == pytest.approx(10.0)  # renewed at 1002: 1012 - 1002
        clock.now = 1011.9
        assert leader.admit("POST", "/x") == pytest.approx(0.1)
    finally:
        holding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holding


async def test_no_write_goes_once_the_lease_is_lost_or_released(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    clock = Clock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds
        await asyncio.sleep(0)

    leader = LeaseElector(
        api_client,
        namespace=NS,
        name=NAME,
        identity="a",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        monotonic=clock,
        sleep=sleep,
    )
    async with fenced_client(apiserver, leader) as client:
        await leader.acquire()
        term = leader.term
        await client.create(EVENTS, event("before"))
        current = await api_client.get(LEASES, NAME, NS)
        await api_client.replace(LEASES, {**current, "spec": {**current["spec"], "holderIdentity": "b"}})
        await asyncio.wait_for(leader.hold(), HANG_BACKSTOP)  # sees b at its next renewal: the term is over
        await asyncio.wait_for(leader.term_over(term), HANG_BACKSTOP)  # returns at once now
        assert not leader.leads(term)
        with pytest.raises(NotLeading) as refused:
            await client.create(EVENTS, event("after-loss"))
        assert not is_temporary(refused.value)  # nothing retries it as it stands
        # b gives it back, this candidate leads again (a new term), then releases: the fence closes again
        current = await api_client.get(LEASES, NAME, NS)
        await api_client.replace(LEASES, {**current, "spec": {**current["spec"], "holderIdentity": ""}})
        await leader.acquire()
        assert leader.term == term + 1 and not leader.leads(term) and leader.leads(term + 1)
        await client.create(EVENTS, event("second-term"))
        assert await leader.release()
        with pytest.raises(NotLeading):
            await client.create(EVENTS, event("after-release"))
    assert sorted(await created(api_client)) == ["before", "second-term"]


async def test_a_write_admitted_waits_no_longer_than_the_window_and_its_connection_is_reset(
    api_client: ApiClient,
) -> None:
    """A server that reads the request and never answers (the answer lost in a cut network): the write
    fails once the 0.2 s left of the window have passed, not after the client's request timeout (an hour
    here), and the server sees the connection reset, not closed: what the kernel had not delivered is
    dropped with it."""
    seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        try:
            end = await reader.read()  # b"" on a graceful close; a reset raises
            outcome = "closed" if end == b"" else "more data"
        except ConnectionResetError:
            outcome = "reset"
        if not seen.done():
            seen.set_result(outcome)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clock = Clock()
    leader = elector(api_client, clock)
    await leader.acquire()
    clock.now = 1009.8  # 0.2 s of the window left
    settings = ClientSettings(request_timeout=3600.0)
    try:
        async with ApiClient(ConnectionInfo.for_url(f"http://127.0.0.1:{port}"), settings, fence=leader) as client:
            with pytest.raises(ApiConnectionError):
                await asyncio.wait_for(client.create(EVENTS, event("unanswered")), HANG_BACKSTOP)
        assert await asyncio.wait_for(seen, HANG_BACKSTOP) == "reset"
    finally:
        server.close()
        await server.wait_closed()


async def test_the_lease_is_written_rounded_up_never_below_the_renew_deadline(api_client: ApiClient) -> None:
    """10.4 s and 10.2 s: an integer ``leaseDurationSeconds`` of 10 (client-go truncates) would let a standby
    take over before this leader stops writing; 11 does not."""
    leader = LeaseElector(
        api_client,
        namespace=NS,
        name=NAME,
        identity="a",
        lease_duration=10.4,
        renew_deadline=10.2,
        retry_period=2,
        monotonic=Clock(),
        sleep=yield_only,
    )
    await leader.acquire()
    assert (await api_client.get(LEASES, NAME, NS))["spec"]["leaseDurationSeconds"] == 11
