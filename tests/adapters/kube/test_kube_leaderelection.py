"""The Lease elector against the API emulator over loopback (optimistic concurrency on every update, as
the API server has): who takes the Lease, stickiness, release, expiry as observed, a lost renewal, a
candidate stopped while taking the Lease; and the timings, bookkeeping and log lines: the jittered wait of
a standby, the pause between failed renewals and a renewal in the last second of the deadline, a hung
renewal bounded by it (the one real wait: a 0.5 s renew deadline), when a term is over for whoever waits on
it, what a release writes and when it reads nothing, the fence's refusal.

Time: the lease's expiry is read on an injected monotonic clock that the tests move by hand, so "15 s
later" costs no wall time; waits between attempts use a sleep that only yields.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.errors import NotFound
from koordpy.kube.leaderelection import RELEASE_ATTEMPTS, LeaseElector, NotLeading, lease_seconds, micro_time
from koordpy.kube.resources import LEASES
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.bounds import HANG_BACKSTOP

NS, NAME = "koordpy-system", "koordpy-manager"
LOGGER = "koordpy.kube.leaderelection"


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
        (
            (10, 10, 9),  # both at once, joined
            "leaseDuration: 10s must be longer than renewDeadline (10s); "
            "renewDeadline: 10s must be longer than 1.2 x retryPeriod (10.8s)",
        ),
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


class Draw(random.Random):
    """A random source that always draws ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


class Sleeps:
    """Records each wait and moves the clock by it, plus ``late`` seconds (a process woken late)."""

    def __init__(self, clock: Clock, late: float = 0.0) -> None:
        self.clock = clock
        self.late = late
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.now += seconds + self.late
        await asyncio.sleep(0)


def timed_elector(client: ApiClient, clock: Clock, sleep: Any, *, identity: str = "a", **kwargs: Any) -> LeaseElector:
    return LeaseElector(
        client,
        namespace=NS,
        name=NAME,
        identity=identity,
        lease_duration=kwargs.pop("lease_duration", 15),
        renew_deadline=kwargs.pop("renew_deadline", 10),
        retry_period=kwargs.pop("retry_period", 2),
        monotonic=clock,
        sleep=sleep,
        **kwargs,
    )


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


async def held_by_b(api_client: ApiClient) -> None:
    await api_client.create(
        LEASES,
        {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}},
        namespace=NS,
    )


@pytest.mark.parametrize(
    ("draw", "wait"),
    [
        (0.0, 2.0),  # 2 x (1 + 1.2 x 0)
        (0.25, 2.6),  # 2 x (1 + 1.2 x 0.25)
        (0.5, 3.2),  # 2 x (1 + 1.2 x 0.5)
    ],
)
@pytest.mark.parametrize("stoppable", [False, True], ids=["until-none", "until-event"])
async def test_a_standby_waits_the_retry_period_jittered(
    api_client: ApiClient, draw: float, wait: float, stoppable: bool
) -> None:
    """Three attempts on a Lease b holds, with and without a stop event: each wait is 2 s x (1 + 1.2 x draw)."""
    await held_by_b(api_client)
    until = asyncio.Event() if stoppable else None
    clock, waits = Clock(), []

    class EnoughError(Exception):
        pass

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            if until is None:
                raise EnoughError
            until.set()
        await asyncio.sleep(0)

    standby = timed_elector(api_client, clock, sleep, identity="c", rng=Draw(draw))
    if until is None:
        with pytest.raises(EnoughError):
            await asyncio.wait_for(standby.acquire(), HANG_BACKSTOP)
    else:
        assert await asyncio.wait_for(standby.acquire(until), HANG_BACKSTOP) is False
    assert waits == pytest.approx([wait] * 3)


async def test_failed_renewals_are_retried_every_quarter_period_until_the_deadline_and_the_loss_is_logged(
    apiserver: ApiServerEmulator, api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Taken at 1000, so writes until 1010. Every renewal fails (500): the first try after the 2 s period, then
    one every 2 / 4 = 0.5 s: at 1002, 1002.5, ..., 1009.5 (16 tries); at 1010 none is left: the term is over."""
    clock = Clock()
    sleeps = Sleeps(clock)
    a = timed_elector(api_client, clock, sleeps)
    await a.acquire()
    apiserver.inject_error(500, resource="leases", count=10_000)
    sleeps.waits.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert sleeps.waits == [2.0] + [0.5] * 16
    assert clock.now == 1010.0
    assert a.state.leading is False
    assert a.state.failed_attempts == 16
    assert messages(caplog)[-1] == (
        f"leader election {NS}/{NAME}: lost (last renewal started 10.0s ago; holder now 'a')"
    )


async def test_a_leader_woken_late_pauses_no_longer_than_what_is_left_of_its_deadline(
    apiserver: ApiServerEmulator, api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Each wait ends 0.1 s late. Tries at 1002.1, 1002.7, ..., 1009.9 (every 0.5 + 0.1 s: 14 tries), the last
    with 0.1 s left: it pauses 0.1 s, not the quarter period (0.5 s), and the term is over at 1010.1 (0.1 s late again)."""
    clock = Clock()
    sleeps = Sleeps(clock, late=0.1)
    a = timed_elector(api_client, clock, sleeps)
    await a.acquire()
    apiserver.inject_error(500, resource="leases", count=10_000)
    sleeps.waits.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert sleeps.waits == pytest.approx([2.0] + [0.5] * 13 + [0.1])
    assert clock.now == pytest.approx(1010.1)
    assert messages(caplog)[-1].endswith("lost (last renewal started 10.1s ago; holder now 'a')")


async def test_a_renewal_in_the_last_second_of_the_deadline_keeps_the_term(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Renewals fail at 1002, 1002.5, ..., 1009.0 (15 tries) and the one at 1009.5, with 0.5 s left, succeeds:
    the term goes on, and its writes may go until 1009.5 + 10 = 1019.5 (not at 1019.5 itself)."""
    clock = Clock()
    renewed = asyncio.Event()

    async def sleep(seconds: float) -> None:
        if clock.now > 1000 and seconds == 2.0:  # the period after a successful renewal: stop here
            renewed.set()
            await asyncio.Event().wait()
        clock.now += seconds
        await asyncio.sleep(0)

    a = timed_elector(api_client, clock, sleep)
    await a.acquire()
    apiserver.inject_error(500, resource="leases", count=15)
    holding = asyncio.create_task(a.hold())
    waiting = asyncio.create_task(renewed.wait())
    try:
        done, _ = await asyncio.wait({holding, waiting}, timeout=HANG_BACKSTOP, return_when=asyncio.FIRST_COMPLETED)
        assert waiting in done and holding not in done
        assert clock.now == 1009.5
        assert a.state.leading
        term = a.term
        clock.now = 1019.4
        assert a.leads(term)
        clock.now = 1019.5
        assert not a.leads(term)
    finally:
        for task in (holding, waiting):
            task.cancel()
        await asyncio.gather(holding, waiting, return_exceptions=True)


async def test_a_hung_renewal_is_abandoned_at_the_deadline(api_client: ApiClient) -> None:
    """A renewal that never gets an answer is bounded by what is left of the renew deadline: taken at 1000
    with a 1 s deadline, renewals start at 1000.5, 1000.625, 1000.75 and 1000.875 (the period 0.5 s, then a
    quarter of it), each given what is left (0.5 + 0.375 + 0.25 + 0.125 = 1.25 s of real time in all); then
    hold returns, the term over, instead of waiting on the request."""
    hang = asyncio.Event()

    class Hangs(ApiClient):
        async def get(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            if hang.is_set():
                await asyncio.Event().wait()
            return await super().get(*args, **kwargs)

    clock = Clock()
    sleeps = Sleeps(clock)
    async with Hangs(api_client.connection) as hanging:
        a = timed_elector(hanging, clock, sleeps, lease_duration=2, renew_deadline=1, retry_period=0.5)
        assert await a.acquire()
        hang.set()
        await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert sleeps.waits == [0.5, 0.125, 0.125, 0.125, 0.125]
    assert a.state.leading is False
    assert not a.leads(a.term)


async def ended_at_once(waiting: Awaitable[None]) -> bool:
    """Whether ``waiting`` is over after a few turns of the event loop (nothing it waits on is slow)."""
    task = asyncio.ensure_future(waiting)
    for _ in range(5):
        await asyncio.sleep(0)
    done = task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return done


async def test_term_over_waits_for_the_end_of_the_current_term_only(api_client: ApiClient) -> None:
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock))
    assert await ended_at_once(a.term_over(0))  # not leading: at once
    await a.acquire()
    first = a.term
    assert not await ended_at_once(a.term_over(first))  # the term goes on
    assert await ended_at_once(a.term_over(first - 1))  # an earlier term: over already
    waiting = asyncio.create_task(a.term_over(first))
    await asyncio.sleep(0)
    assert await a.release() is True
    await asyncio.wait_for(waiting, HANG_BACKSTOP)
    assert await ended_at_once(a.term_over(first))  # over


@pytest.mark.parametrize("transitions", [0, 3])
async def test_a_release_keeps_the_transitions_and_writes_both_times_now(
    apiserver: ApiServerEmulator, api_client: ApiClient, caplog: pytest.LogCaptureFixture, transitions: int
) -> None:
    """Released: holder empty, duration 1 s, ``leaseTransitions`` as it was, acquire and renew time both now;
    logged. A second release sends nothing (the Lease no longer names this candidate)."""
    if transitions:  # a free Lease with 2 transitions: taking it is the third; else the candidate creates it
        await api_client.create(
            LEASES,
            {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": "", "leaseTransitions": 2}},
            namespace=NS,
        )
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, token="candidate")) as client:
        clock = Clock()
        a = timed_elector(client, clock, Sleeps(clock))
        assert await a.acquire()
        with caplog.at_level(logging.INFO, logger=LOGGER):
            assert await a.release() is True
        spec = (await api_client.get(LEASES, NAME, NS))["spec"]
        assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("", 1, transitions)
        assert spec["acquireTime"] == spec["renewTime"]
        assert messages(caplog)[-1] == f"leader election {NS}/{NAME}: released"
        sent = len(apiserver.requests)
        assert await a.release() is False
        assert len(apiserver.requests) == sent


async def test_a_release_of_a_lease_taken_over_meanwhile_writes_nothing_and_looks_once(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, token="candidate")) as client:
        clock = Clock()
        a = timed_elector(client, clock, Sleeps(clock))
        assert await a.acquire()
        current = await api_client.get(LEASES, NAME, NS)
        await api_client.replace(LEASES, {**current, "spec": {**current["spec"], "holderIdentity": "b"}})
        assert await a.release() is False
        assert [r["verb"] for r in apiserver.requests if r["user"] == "candidate"][-1:] == ["get"]
        sent = len(apiserver.requests)
        assert await a.release() is False  # it knows now: no second look
        assert len(apiserver.requests) == sent
    assert (await api_client.get(LEASES, NAME, NS))["spec"]["holderIdentity"] == "b"


async def test_a_release_meeting_a_late_renewal_reads_again_and_releases(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """A renewal sent before the term ended lands after the release's read: its write answers 409 Conflict;
    the release reads the Lease again (still this candidate's) and writes once more, 3 times at most."""
    assert RELEASE_ATTEMPTS == 3
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock))
    assert await a.acquire()
    apiserver.inject_error(409, resource="leases", verb="update", count=2, message="modified")
    assert await a.release() is True
    spec = (await api_client.get(LEASES, NAME, NS))["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    b = timed_elector(api_client, clock, Sleeps(clock), identity="b")
    assert await b.acquire()
    apiserver.inject_error(409, resource="leases", verb="update", count=3, message="modified")
    assert await b.release() is False  # every attempt conflicted: left to expire
    assert (await api_client.get(LEASES, NAME, NS))["spec"]["holderIdentity"] == "b"


async def test_a_release_that_fails_is_logged_and_the_lease_left_to_expire(
    apiserver: ApiServerEmulator, api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock))
    assert await a.acquire()
    apiserver.inject_error(500, resource="leases", verb="update", message="disk full")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await a.release() is False
    assert messages(caplog)[-1].startswith(f"leader election {NS}/{NAME}: release failed (500 ")
    assert messages(caplog)[-1].endswith("disk full); it expires instead")
    assert (await api_client.get(LEASES, NAME, NS))["spec"]["holderIdentity"] == "a"


async def test_the_fence_refusal_says_why_and_is_counted_and_logged(
    api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    fenced: list[int] = []
    a = timed_elector(api_client, clock, Sleeps(clock), on_fenced=lambda: fenced.append(1))
    refusals = []
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.raises(NotLeading) as standby:
            a.admit("POST", "/api/v1/namespaces/default/events")
        refusals.append(standby.value)
        await a.acquire()
        clock.now = 1010.0  # taken at 1000: the renew deadline is over
        with pytest.raises(NotLeading) as overdue:
            a.admit("PATCH", "/api/v1/pods/x")
        refusals.append(overdue.value)
    assert [(e.status, e.reason, e.message) for e in refusals] == [
        (
            0,
            "NotLeading",
            f"POST /api/v1/namespaces/default/events not sent: not leading on Lease {NS}/{NAME} (not the holder)",
        ),
        (0, "NotLeading", f"PATCH /api/v1/pods/x not sent: not leading on Lease {NS}/{NAME} (renewal overdue)"),
    ]
    assert [m for m in messages(caplog) if "not sent" in m] == [
        f"leader election {NS}/{NAME}: {e.message}" for e in refusals
    ]
    assert (len(fenced), a.state.fenced_writes) == (2, 2)


@pytest.mark.parametrize(
    ("duration", "written"),
    [
        (0.4, 1),  # never below 1 s
        (1.0, 1),
        (10.2, 11),  # rounded up, never below a 10.2 s renew deadline
        (15.0, 15),
    ],
)
def test_the_lease_duration_is_written_in_whole_seconds_rounded_up(duration: float, written: int) -> None:
    assert lease_seconds(duration) == written


@pytest.fixture
def kolkata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone UTC+05:30, so that a local-time conversion shows in the result."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_lease_times_are_written_in_utc_whatever_the_zone(kolkata: None) -> None:
    """03:04:05.000678 at UTC+02:00 is 01:04:05.000678 UTC, whatever the process's own zone (UTC+05:30)."""
    now = dt.datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert micro_time(now) == "2026-01-02T01:04:05.000678Z"


async def test_acquire_time_is_kept_on_renewal_and_set_anew_on_a_transition(
    api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """a takes the Lease at 10:00:00 and renews at 10:00:02: acquireTime stays 10:00:00. b takes it over
    (a stopped renewing) at 10:00:20: acquireTime and renewTime are both 10:00:20. Each taking is logged."""
    clock, walls = Clock(), iter(["10:00:00", "10:00:02", "10:00:20"])

    def wall() -> dt.datetime:
        return dt.datetime.fromisoformat(f"2026-01-02T{next(walls)}+00:00")

    a = timed_elector(api_client, clock, Sleeps(clock), wall=wall)
    b = timed_elector(api_client, clock, Sleeps(clock), identity="b", wall=wall)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert await a.acquire()
        assert await a.try_acquire_or_renew()
        spec = await lease(api_client)
        assert (spec["acquireTime"], spec["renewTime"]) == (
            "2026-01-02T10:00:00.000000Z",
            "2026-01-02T10:00:02.000000Z",
        )
        assert await b.try_acquire_or_renew() is False  # b observes a's record now (1000)
        clock.now += 15  # exactly one lease duration later: no longer a's
        assert await b.acquire()
    spec = await lease(api_client)
    assert (spec["holderIdentity"], spec["acquireTime"], spec["renewTime"], spec["leaseTransitions"]) == (
        "b",
        "2026-01-02T10:00:20.000000Z",
        "2026-01-02T10:00:20.000000Z",
        1,
    )
    assert [m for m in messages(caplog) if "acquired" in m] == [
        f"leader election {NS}/{NAME}: acquired as a (transitions 0)",
        f"leader election {NS}/{NAME}: acquired as b (transitions 1)",
    ]


async def test_a_lease_held_without_a_duration_is_free_at_once(api_client: ApiClient) -> None:
    await api_client.create(
        LEASES, {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": "b"}}, namespace=NS
    )
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock))
    assert await a.try_acquire_or_renew() is True  # observed now, held for 0 s: over
    assert (await lease(api_client))["holderIdentity"] == "a"


async def test_a_failed_attempt_is_counted_kept_and_logged(
    apiserver: ApiServerEmulator, api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Two failed reads: counted twice; the last error kept to 300 characters; each logged whole."""
    clock, until = Clock(), asyncio.Event()

    async def sleep(_: float) -> None:
        if apiserver.injected[-1].count == 0:
            until.set()
        await asyncio.sleep(0)

    standby = timed_elector(api_client, clock, sleep, identity="c")
    apiserver.inject_error(500, resource="leases", count=2, message="m" * 400)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await asyncio.wait_for(standby.acquire(until), HANG_BACKSTOP) is False
    assert standby.state.failed_attempts == 2
    error = "500 InternalError: " + "m" * 400
    assert standby.state.last_error == error[:300]
    assert messages(caplog) == [f"leader election {NS}/{NAME}: {error}"] * 2


async def test_a_standby_says_who_holds_the_lease_when_the_holder_changes(
    api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """b holds the Lease, then releases it while the standby may not lead yet: two lines, not one per try."""
    await held_by_b(api_client)
    clock, sleeps = Clock(), []
    until = asyncio.Event()

    async def may_lead() -> bool:
        return False

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            current = await api_client.get(LEASES, NAME, NS)
            await api_client.replace(LEASES, {**current, "spec": {"holderIdentity": ""}})
        if len(sleeps) == 4:
            until.set()
        await asyncio.sleep(0)

    standby = timed_elector(api_client, clock, sleep, identity="c", may_lead=may_lead)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert await asyncio.wait_for(standby.acquire(until), HANG_BACKSTOP) is False
    assert messages(caplog) == [
        f"leader election {NS}/{NAME}: standing by; held by b",
        f"leader election {NS}/{NAME}: standing by; held by nobody (waiting for older replicas)",
    ]


async def test_each_taking_of_the_lease_is_counted(api_client: ApiClient) -> None:
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock))
    for _ in range(2):
        assert await a.acquire()
        assert await a.release()
    assert (a.state.acquired, a.term) == (2, 2)


async def test_two_candidates_racing_to_create_the_lease_one_wins(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """No Lease yet: all read 404 and create; the API server stores one (the others get 409 AlreadyExists).
    The losers neither lead nor look again when they release."""
    clock = Clock()
    candidates = [elector(api_client, f"c{i}", clock) for i in range(3)]
    won = await asyncio.gather(*(c.try_acquire_or_renew() for c in candidates))
    assert sum(won) == 1, won
    winner = next(c for c, w in zip(candidates, won, strict=True) if w)
    assert (await lease(api_client))["holderIdentity"] == winner.identity
    sent = len(apiserver.requests)
    for loser in (c for c, w in zip(candidates, won, strict=True) if not w):
        assert await loser.release() is False
    assert len(apiserver.requests) == sent


async def test_the_default_timings_are_client_gos(api_client: ApiClient) -> None:
    """Unset: a 15 s lease, writes for 10 s after a renewal started, 2 s between tries (drawn jitter 0)."""
    clock, waits, until = Clock(), [], asyncio.Event()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        until.set()
        await asyncio.sleep(0)

    a, b = (
        LeaseElector(api_client, namespace=NS, name=NAME, identity=i, monotonic=clock, sleep=sleep, rng=Draw(0.0))
        for i in "ab"
    )
    assert await a.acquire()
    assert (await lease(api_client))["leaseDurationSeconds"] == 15
    assert a.admit("POST", "/x") == 10.0
    assert await asyncio.wait_for(b.acquire(until), HANG_BACKSTOP) is False
    assert waits == [2.0]


async def test_a_term_ended_at_the_deadline_still_releases_the_lease_it_holds(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Every renewal fails (500) until the deadline ends the term, but the Lease still names a (nothing else
    wrote it): once the API answers again, release reads it and frees it, so no standby waits 15 s."""
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock))
    assert await a.acquire()
    failing = apiserver.inject_error(500, resource="leases", count=10_000)
    await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert a.state.leading is False
    failing.count = 0
    assert await a.release() is True
    spec = await lease(api_client)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)


async def test_a_term_ended_by_conflicting_renewals_still_releases_the_lease_it_holds(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Every renewal's update meets 409 Conflict until the deadline (the Lease as read still names a): a lost
    race on a Lease that was a's leaves it a's to release, and release frees it."""
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock))
    assert await a.acquire()
    conflicts = apiserver.inject_error(409, resource="leases", verb="update", count=10_000, message="modified")
    await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert a.state.leading is False
    conflicts.count = 0
    assert await a.release() is True
    assert (await lease(api_client))["holderIdentity"] == ""


async def test_a_candidate_that_never_tried_releases_without_a_request(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Stopped before its first attempt: the Lease (even one naming its identity, left by a process before it)
    is none of its business; release sends nothing."""
    await api_client.create(
        LEASES,
        {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}},
        namespace=NS,
    )
    sent = len(apiserver.requests)
    assert await elector(api_client, "a", Clock()).release() is False
    assert len(apiserver.requests) == sent
    assert (await lease(api_client))["holderIdentity"] == "a"


async def test_the_lease_created_is_a_coordination_v1_lease_in_the_namespace(api_client: ApiClient) -> None:
    """The body of the create as sent: the API server decodes it by its apiVersion and kind, and the
    name and namespace it names are where it is stored."""
    bodies: list[dict[str, Any]] = []

    class Recording(ApiClient):
        async def create(self, resource: Any, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            bodies.append(body)
            return await super().create(resource, body, **kwargs)

    clock = Clock()
    async with Recording(api_client.connection) as recording:
        assert await elector(recording, "a", clock).try_acquire_or_renew()
    [body] = bodies
    assert {k: v for k, v in body.items() if k != "spec"} == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": NAME, "namespace": NS},
    }
    assert (body["spec"]["holderIdentity"], body["spec"]["leaseTransitions"]) == ("a", 0)


async def test_a_candidate_stopped_while_creating_the_lease_releases_it(api_client: ApiClient) -> None:
    """No Lease yet: its create reached the server (the Lease names it) but the answer never came and the
    attempt was abandoned (cancelled). Releasing reads the Lease and frees it."""
    sent = asyncio.Event()

    class AnswerLost(ApiClient):
        async def create(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            await super().create(*args, **kwargs)
            sent.set()
            await asyncio.Event().wait()
            raise AssertionError("never answered")

    async with AnswerLost(api_client.connection) as lossy:
        candidate = elector(lossy, "a", Clock())
        taking = asyncio.create_task(candidate.acquire())
        await asyncio.wait_for(sent.wait(), HANG_BACKSTOP)
        taking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await taking
        assert (await lease(api_client))["holderIdentity"] == "a"
        assert await asyncio.wait_for(candidate.release(), HANG_BACKSTOP) is True
    assert (await lease(api_client))["holderIdentity"] == ""


async def test_a_renewal_of_a_lease_without_an_acquire_time_writes_it_now(api_client: ApiClient) -> None:
    """The Lease names a but carries no acquireTime (written by hand, or by another client): a's renewal
    writes acquireTime as now, beside renewTime."""
    await api_client.create(
        LEASES,
        {"metadata": {"name": NAME, "namespace": NS}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}},
        namespace=NS,
    )
    clock = Clock()
    a = timed_elector(api_client, clock, Sleeps(clock), wall=lambda: dt.datetime(2026, 1, 2, 10, 0, 0, tzinfo=dt.UTC))
    assert await a.try_acquire_or_renew()
    spec = await lease(api_client)
    assert (spec["holderIdentity"], spec["acquireTime"], spec["renewTime"]) == (
        "a",
        "2026-01-02T10:00:00.000000Z",
        "2026-01-02T10:00:00.000000Z",
    )


async def test_no_renewal_is_tried_with_nothing_left_of_the_deadline(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    """Taken at 1000; renewals fail (500) at 1002, 1002.5, ..., 1009.5: 16 reads. At 1010 nothing of the
    deadline is left: no 17th read is started (it could only be abandoned), the term is over."""
    reads: list[float] = []

    class CountsReads(ApiClient):
        async def get(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            reads.append(clock.now)
            return await super().get(*args, **kwargs)

    clock = Clock()
    async with CountsReads(api_client.connection) as counting:
        a = timed_elector(counting, clock, Sleeps(clock))
        assert await a.acquire()
        apiserver.inject_error(500, resource="leases", count=10_000)
        reads.clear()
        await asyncio.wait_for(a.hold(), HANG_BACKSTOP)
    assert reads == [1002 + 0.5 * i for i in range(16)]
    assert clock.now == 1010.0


async def test_a_standby_on_a_free_lease_it_may_not_take_yet_logs_the_first_holder_only(
    api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """No Lease at first and may_lead says no (its own log line says why): no "standing by" line for nobody;
    once b holds the Lease, one line names b."""
    clock, sleeps, until = Clock(), [], asyncio.Event()

    async def may_lead() -> bool:
        return False

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            await held_by_b(api_client)
        if len(sleeps) == 4:
            until.set()
        await asyncio.sleep(0)

    standby = timed_elector(api_client, clock, sleep, identity="c", may_lead=may_lead)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert await asyncio.wait_for(standby.acquire(until), HANG_BACKSTOP) is False
    assert messages(caplog) == [f"leader election {NS}/{NAME}: standing by; held by b"]


async def test_a_standby_stopped_while_waiting_returns_once_its_sleep_has_ended(api_client: ApiClient) -> None:
    """Stopped (``until``) during the wait between attempts: the sleep is cancelled and acquire returns only
    after it has finished (its cleanup done), so nothing of the elector runs on after it returns."""
    await held_by_b(api_client)
    until, ended = asyncio.Event(), []

    async def sleep(_: float) -> None:
        try:
            until.set()
            await asyncio.Event().wait()
        finally:
            for _ in range(10):  # a cleanup that takes a few turns of the event loop
                await asyncio.sleep(0)
            ended.append(True)

    standby = timed_elector(api_client, Clock(), sleep, identity="c")
    async with asyncio.timeout(HANG_BACKSTOP):
        taken = await standby.acquire(until)  # awaited in this task: no turn of the loop between its return and here
        assert ended == [True]
    assert taken is False
