"""The Lease elector against the API emulator over loopback (optimistic concurrency on every update, as
the API server has): who takes the Lease, stickiness, release, expiry as observed, a lost renewal, a
candidate stopped while taking the Lease.

Time: the lease's expiry is read on an injected monotonic clock that the tests move by hand, so "15 s
later" costs no wall time; waits between attempts use a sleep that only yields.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.errors import NotFound
from koordpy.kube.leaderelection import LeaseElector
from koordpy.kube.resources import LEASES
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


def elector(
    client: ApiClient,
    identity: str,
    clock: Clock,
    *,
    may_lead: Callable[[], Awaitable[bool]] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = yield_only,
) -> LeaseElector:
    return LeaseElector(
        client,
        namespace=NS,
        name=NAME,
        identity=identity,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        may_lead=may_lead,
        monotonic=clock,
        sleep=sleep,
    )


async def lease(client: ApiClient) -> dict[str, Any]:
    return dict((await client.get(LEASES, NAME, NS))["spec"])


async def test_the_first_candidate_creates_the_lease_and_a_second_stands_by(api_client: ApiClient) -> None:
    clock = Clock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    assert await a.try_acquire_or_renew() is True
    spec = await lease(api_client)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("a", 15, 0)
    assert spec["renewTime"].endswith("Z") and "." in spec["renewTime"]  # MicroTime
    assert await b.try_acquire_or_renew() is False
    assert b.state.holder == "a"


async def test_leadership_is_sticky_while_the_holder_renews(api_client: ApiClient) -> None:
    """b watches the Lease for 10 lease durations; a renews every retry period: b never takes it."""
    clock = Clock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    assert await a.try_acquire_or_renew()
    for _ in range(75):  # 75 x 2 s = 150 s = 10 lease durations
        clock.now += 2
        assert await a.try_acquire_or_renew() is True
        assert await b.try_acquire_or_renew() is False
    assert (await lease(api_client))["holderIdentity"] == "a"


async def test_a_lease_not_renewed_is_taken_only_after_the_duration_as_observed(api_client: ApiClient) -> None:
    """Expiry counts from when b first saw the current record on its own clock (14.9 s: not yet)."""
    clock = Clock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    assert await a.try_acquire_or_renew()
    assert await b.try_acquire_or_renew() is False  # b observes a's record now
    clock.now += 14.9
    assert await b.try_acquire_or_renew() is False
    clock.now += 0.2
    assert await b.try_acquire_or_renew() is True
    spec = await lease(api_client)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


async def test_release_frees_the_lease_for_the_next_try(api_client: ApiClient) -> None:
    clock = Clock()
    a, b = elector(api_client, "a", clock), elector(api_client, "b", clock)
    await a.acquire()
    assert await b.try_acquire_or_renew() is False
    assert await a.release() is True
    spec = await lease(api_client)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    assert await b.try_acquire_or_renew() is True  # no waiting out a duration: the holder is empty
    assert await a.release() is False  # not leading any more: nothing to release


async def test_two_candidates_racing_for_a_free_lease_one_wins(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Both read the free Lease; the update of the second carries a stale resourceVersion (409)."""
    clock = Clock()
    a = elector(api_client, "a", clock)
    await a.acquire()
    assert await a.release()
    candidates = [elector(api_client, f"c{i}", clock) for i in range(5)]
    won = await asyncio.gather(*(c.try_acquire_or_renew() for c in candidates))
    assert sum(won) == 1, won
    assert (await lease(api_client))["holderIdentity"] == next(
        c.identity for c, w in zip(candidates, won, strict=True) if w
    )


async def test_a_leader_that_cannot_renew_for_the_deadline_stops_holding(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Every Lease request fails with 500: ``hold`` returns once 10 s passed without a renewal."""
    clock = Clock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds
        await asyncio.sleep(0)

    a = elector(api_client, "a", clock, sleep=sleep)
    await a.acquire()
    assert a.state.leading
    apiserver.inject_error(500, resource="leases", count=10_000)
    started = clock.now
    await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert a.state.leading is False
    assert 10 <= clock.now - started <= 10 + 2 + 1, clock.now - started


async def test_a_leader_that_sees_another_holder_stops_at_once(api_client: ApiClient) -> None:
    clock = Clock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds
        await asyncio.sleep(0)

    a = elector(api_client, "a", clock, sleep=sleep)
    await a.acquire()
    current = await api_client.get(LEASES, NAME, NS)
    await api_client.replace(LEASES, {**current, "spec": {**current["spec"], "holderIdentity": "intruder"}})
    started = clock.now
    await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert clock.now - started < 10  # not the renew deadline: the Lease is someone else's
    assert a.state.holder == "intruder"


async def test_may_lead_postpones_taking_a_free_lease(api_client: ApiClient) -> None:
    clock = Clock()
    allowed = False

    async def may_lead() -> bool:
        return allowed

    b = elector(api_client, "b", clock, may_lead=may_lead)
    assert await b.try_acquire_or_renew() is False  # missing Lease: not even created
    with pytest.raises(NotFound):
        await api_client.get(LEASES, NAME, NS)
    allowed = True
    assert await b.try_acquire_or_renew() is True


async def test_a_candidate_stopped_while_its_update_is_in_flight_finishes_it_then_releases(
    api_client: ApiClient,
) -> None:
    """Stopped (``until``) after its update of the free Lease went out and before the answer came: the
    attempt is finished, not abandoned, so the candidate learns it took the Lease, and releases it."""
    sent, answer = asyncio.Event(), asyncio.Event()

    class AnswerLate(ApiClient):
        async def replace(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            written = await super().replace(*args, **kwargs)
            if not sent.is_set():
                sent.set()
                await answer.wait()
            return written

    await api_client.create(
        LEASES, {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": ""}}, namespace=NS
    )
    until = asyncio.Event()
    async with AnswerLate(api_client.connection) as late:
        candidate = elector(late, "a", Clock())
        taking = asyncio.create_task(candidate.acquire(until=until))
        await asyncio.wait_for(sent.wait(), HANG_BACKSTOP)
        until.set()  # SIGTERM now
        answer.set()
        assert await asyncio.wait_for(taking, HANG_BACKSTOP) is True
        assert await candidate.release() is True
    spec = (await api_client.get(LEASES, NAME, NS))["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)


async def test_a_candidate_stopped_between_attempts_takes_nothing(api_client: ApiClient) -> None:
    await api_client.create(
        LEASES,
        {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}},
        namespace=NS,
    )
    until = asyncio.Event()
    slept = asyncio.Event()

    async def endless(_: float) -> None:
        slept.set()
        await asyncio.Event().wait()

    candidate = LeaseElector(api_client, namespace=NS, name=NAME, identity="a", monotonic=Clock(), sleep=endless)
    taking = asyncio.create_task(candidate.acquire(until=until))
    await asyncio.wait_for(slept.wait(), HANG_BACKSTOP)
    until.set()
    assert await asyncio.wait_for(taking, HANG_BACKSTOP) is False
    assert (await api_client.get(LEASES, NAME, NS))["spec"]["holderIdentity"] == "b"


async def test_a_candidate_stopped_while_taking_the_lease_releases_it(api_client: ApiClient) -> None:
    """Its update reached the server (the Lease names it) but the answer never came back, and the attempt was
    abandoned (cancelled): it does not know it leads. Releasing reads the Lease and frees it, so no standby
    waits a lease out."""
    sent = asyncio.Event()

    class AnswerLost(ApiClient):
        """The first update reaches the server, and its answer never comes back."""

        async def replace(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            answer = await super().replace(*args, **kwargs)
            if not sent.is_set():
                sent.set()
                await asyncio.Event().wait()
            return answer

    current = await api_client.create(
        LEASES, {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": ""}}, namespace=NS
    )
    assert current["spec"]["holderIdentity"] == ""
    async with AnswerLost(api_client.connection) as lossy:
        candidate = elector(lossy, "a", Clock())
        taking = asyncio.create_task(candidate.acquire())
        await asyncio.wait_for(sent.wait(), HANG_BACKSTOP)
        taking.cancel()  # SIGTERM now
        with contextlib.suppress(asyncio.CancelledError):
            await taking
        assert not candidate.state.leading
        assert (await api_client.get(LEASES, NAME, NS))["spec"]["holderIdentity"] == "a"  # it holds it, unknowing
        assert await asyncio.wait_for(candidate.release(), HANG_BACKSTOP) is True
    spec = (await api_client.get(LEASES, NAME, NS))["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)


async def test_a_standby_stopped_before_it_took_anything_reads_nothing_more(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await api_client.create(
        LEASES,
        {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}},
        namespace=NS,
    )
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, token="standby")) as client:
        standby = elector(client, "a", Clock())
        assert await standby.try_acquire_or_renew() is False
        assert await standby.release() is False
    assert [r["verb"] for r in apiserver.requests if r["user"] == "standby"] == ["get"]


@pytest.mark.parametrize(
    ("durations", "problem"),
    [
        ((10, 10, 2), "leaseDuration: 10s must be longer than renewDeadline (10s)"),
        # 1.2 x 9 = 10.8 >= 10
        ((15, 10, 9), "renewDeadline: 10s must be longer than 1.2 x retryPeriod (10.8s)"),
        ((15, 2, 2), "renewDeadline: 2s must be longer than 1.2 x retryPeriod (2.4s)"),
        ((15, 10, 0), "retryPeriod: must be greater than zero, got 0s"),
    ],
)
def test_the_timings_must_be_ordered_as_client_go_requires(durations: tuple[float, float, float], problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        LeaseElector(
            None,  # type: ignore[arg-type]
            namespace=NS,
            name=NAME,
            identity="a",
            lease_duration=durations[0],
            renew_deadline=durations[1],
            retry_period=durations[2],
        )
    assert str(raised.value) == problem
