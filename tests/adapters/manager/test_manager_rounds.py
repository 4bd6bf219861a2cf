"""``RoundLoop``: rounds start to start every interval, never overlap, skip when not due, survive a failed
round and log a repeated failure once a minute."""

from __future__ import annotations

import asyncio
import logging

import pytest

from koordpy.manager.rounds import RoundLoop


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_rounds_run_start_to_start_and_stop_when_asked() -> None:
    clock = Clock()
    slept: list[float] = []
    started: list[float] = []

    async def round_() -> None:
        started.append(clock.now)
        clock.now += 0.2  # the round takes 0.2 s of the 0.5 s interval

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    loop = RoundLoop("migration", round_, 0.5, clock=clock)
    await loop.run(lambda: len(started) >= 3, sleep)
    assert started == pytest.approx([0.0, 0.5, 1.0])
    assert slept == pytest.approx([0.3, 0.3])  # the rest of each interval; none after the last round
    assert loop.rounds == 3 and not loop.running


async def test_a_long_round_delays_the_next_one_never_overlaps() -> None:
    clock = Clock()
    slept: list[float] = []
    active = 0
    peak = 0

    async def round_() -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        clock.now += 2.0  # four times the interval
        await asyncio.sleep(0)
        active -= 1

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    loop = RoundLoop("migration", round_, 0.5, clock=clock)
    await loop.run(lambda: loop.rounds >= 3, sleep)
    assert peak == 1 and slept == [0.0, 0.0]


async def test_not_due_rounds_are_skipped_and_not_counted() -> None:
    ran: list[int] = []
    due = iter([False, True, False, True])
    outcomes: list[str] = []

    async def round_() -> None:
        ran.append(1)

    loop = RoundLoop("reservation", round_, 1.0, due=lambda: next(due), outcome=outcomes.append)
    assert [await loop.run_once() for _ in range(4)] == [False, True, False, True]
    assert len(ran) == 2 and loop.rounds == 2 and outcomes == ["done", "done"]


async def test_a_failed_round_is_counted_logged_once_a_minute_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    outcomes: list[str] = []
    calls = 0

    async def round_() -> None:
        nonlocal calls
        calls += 1
        if calls <= 40:
            raise RuntimeError("pods/web-1 lookup failed")

    async def sleep(seconds: float) -> None:
        clock.now += 0.5

    caplog.set_level(logging.ERROR, logger="koordpy.manager")
    loop = RoundLoop("migration", round_, 0.5, outcome=outcomes.append, clock=clock)
    await loop.run(lambda: calls >= 41, sleep)  # 40 failed rounds in 20 s, then a good one
    assert outcomes == ["error"] * 40 + ["done"]
    assert loop.errors == 40
    # 40 failures within 20 s: one line with the traceback, not 40 tracebacks
    records = [r for r in caplog.records if "migration round failed" in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info is not None
    clock.now += 60
    await loop.run_once()  # a good round: nothing logged
    assert len([r for r in caplog.records if "round failed" in r.getMessage()]) == 1


async def test_health_says_whether_rounds_run_and_how_the_last_one_ended() -> None:
    clock = Clock()
    fail = True

    async def round_() -> None:
        if fail:
            raise RuntimeError("list failed")

    loop = RoundLoop("migration", round_, 0.5, clock=clock)
    assert loop.health() == {
        "running": False,
        "intervalSeconds": 0.5,
        "lastOutcome": None,
        "lastStartedSecondsAgo": None,
    }
    clock.now = 10.0
    await loop.run_once()
    clock.now = 12.5
    assert loop.health() | {"running": False} == {
        "running": False,
        "intervalSeconds": 0.5,
        "lastOutcome": "error",
        "lastStartedSecondsAgo": 2.5,
    }
    fail = False
    await loop.run_once()
    assert loop.health()["lastOutcome"] == "done" and loop.health()["lastStartedSecondsAgo"] == 0.0

    async def sleep(seconds: float) -> None:
        assert loop.health()["running"] is True  # while run() runs
        clock.now += seconds

    await loop.run(lambda: loop.rounds >= 4, sleep)
    assert loop.health()["running"] is False
