"""``RoundGate``: one round per interval however many timers knock, and none while one runs."""

from __future__ import annotations

import asyncio

import pytest

from koordpy.manager.rounds import RoundGate


async def test_a_knock_while_a_round_runs_does_not_start_another() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    rounds = 0

    async def slow_round() -> None:
        nonlocal rounds
        rounds += 1
        started.set()
        await release.wait()

    gate = RoundGate(slow_round, interval=0.0, clock=lambda: 0.0)
    first = asyncio.create_task(gate.knock())
    await started.wait()
    assert await gate.knock() is False  # the first round still runs
    release.set()
    assert await first is True
    assert rounds == 1


async def test_outcomes_are_reported_and_an_error_reaches_the_knocker() -> None:
    heard: list[str] = []
    times = iter([0.0, 5.0, 9.0, 10.0])
    fail = False

    async def round_() -> None:
        if fail:
            raise RuntimeError("list failed")

    gate = RoundGate(round_, interval=10.0, clock=lambda: next(times), outcome=heard.append)
    assert await gate.knock() is True  # t=0
    assert await gate.knock() is False  # t=5: within the interval, nothing heard
    fail = True
    assert await gate.knock() is False  # t=9: still within it
    with pytest.raises(RuntimeError, match="list failed"):
        await gate.knock()  # t=10: runs and fails
    assert heard == ["done", "error"]


async def test_health_reports_the_last_round() -> None:
    now = [100.0]
    fail = False

    async def round_() -> None:
        if fail:
            raise RuntimeError("list failed")

    gate = RoundGate(round_, interval=10.0, clock=lambda: now[0])
    assert gate.health() == {"intervalSeconds": 10.0, "lastOutcome": None, "lastStartedSecondsAgo": None}
    assert await gate.knock() is True
    now[0] = 104.25
    assert gate.health() == {"intervalSeconds": 10.0, "lastOutcome": "done", "lastStartedSecondsAgo": 4.2}
    fail = True
    now[0] = 110.0
    with pytest.raises(RuntimeError):
        await gate.knock()
    now[0] = 113.0
    assert gate.health() == {"intervalSeconds": 10.0, "lastOutcome": "error", "lastStartedSecondsAgo": 3.0}
