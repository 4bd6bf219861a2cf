"""Round axis ticks: 1/2/2.5/5 × 10^k steps, widened bounds, h:mm time ticks inside the run only."""

from __future__ import annotations

import pytest

from koordpy.sim.ticks import clock_label, nice_axis, nice_step, tick_label, time_ticks, whole_axis


@pytest.mark.parametrize(
    ("span", "target", "step"),
    [
        (100, 4, 25.0),  # raw 25 → 2.5 × 10
        (100, 5, 20.0),  # raw 20 → 2 × 10
        (60, 4, 20.0),  # raw 15 → 2 × 10 (1.5 is not a nice mantissa)
        (6000, 4, 2000.0),  # raw 1,500 → 2 × 1,000
        (0.153, 4, 0.05),  # raw 0.03825 → 5 × 0.01
        (3, 4, 1.0),  # raw 0.75 → 1 × 1
        (1, 4, 0.25),  # raw 0.25 → 2.5 × 0.1
        (0, 4, 1.0),  # degenerate span: a unit step
    ],
)
def test_nice_step(span: float, target: int, step: float) -> None:
    assert nice_step(span, target) == pytest.approx(step)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0, 100, [0, 25, 50, 75, 100]),
        (0, 47.3, [0, 20, 40, 60]),  # step 20 (raw 11.8 → 2 × 10), 47.3 widened to 60
        (0, 17.6, [0, 5, 10, 15, 20]),  # raw 4.4 → 5
        (0, 5634, [0, 2000, 4000, 6000]),  # raw 1,408.5 → 2 × 1,000
        (0, 26, [0, 10, 20, 30]),  # raw 6.5 → 10
        (12, 13, [12, 12.25, 12.5, 12.75, 13]),  # raw 0.25 → 2.5 × 0.1
        (0, 0, [0, 0.25, 0.5, 0.75, 1]),  # empty range → [0, 1]
    ],
)
def test_nice_axis_widens_to_round_bounds(lo: float, hi: float, expected: list[float]) -> None:
    low, high, ticks = nice_axis(lo, hi)
    assert ticks == pytest.approx(expected)
    assert (low, high) == (ticks[0], ticks[-1])
    assert low <= lo and high >= hi


@pytest.mark.parametrize(
    ("start", "end", "max_ticks", "labels"),
    [
        (0, 6 * 3600, 9, ["0:00", "1:00", "2:00", "3:00", "4:00", "5:00", "6:00"]),  # 60 min: 7 ticks
        (0, 6 * 3600, 4, ["0:00", "2:00", "4:00", "6:00"]),  # 60 min gives 7 > 4; 120 min gives 4
        (0, 2 * 3600, 9, ["0:00", "0:15", "0:30", "0:45", "1:00", "1:15", "1:30", "1:45", "2:00"]),
        (0, 5400, 4, ["0:00", "0:30", "1:00", "1:30"]),  # 90 min: 30-minute ticks
        (0, 25 * 60, 6, ["0:00", "0:05", "0:10", "0:15", "0:20", "0:25"]),
        (600, 3000, 4, ["0:15", "0:30", "0:45"]),  # 15 min inside
    ],
)
def test_time_ticks_round_and_inside_the_run(start: float, end: float, max_ticks: int, labels: list[str]) -> None:
    ticks = time_ticks(start, end, max_ticks)
    assert [label for _, label in ticks] == labels
    assert all(start <= at <= end for at, _ in ticks)
    assert len(ticks) <= max_ticks


def test_time_ticks_never_leave_a_run_that_ends_between_round_values() -> None:
    # 6 h 10 min: the last tick is 6:00, not 7:00
    assert time_ticks(0, 6 * 3600 + 600, 9)[-1] == (6 * 3600, "6:00")


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (25.0, "25"), (2.5, "2.5"), (0.05, "0.05"), (1200, "1,200"), (6000.0, "6,000"), (-10, "-10")],
)
def test_tick_label(value: float, text: str) -> None:
    assert tick_label(value) == text


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (90 * 60, "1:30"), (86400, "24:00"), (300, "0:05")])
def test_clock_label(seconds: float, text: str) -> None:
    assert clock_label(seconds) == text


@pytest.mark.parametrize(
    ("lo", "hi", "step", "expected"),
    [
        (0.0, 1.0, 0.25, [0.0, 1.0]),  # all zeros: 0 and 1, never 0.25
        (0.0, 2.0, 0.5, [0.0, 1.0, 2.0]),
        (0.0, 10.0, 2.5, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),  # 2.5 → 2: the largest whole 1/2/5 step below
        (0.0, 1.5, 0.5, [0.0, 1.0, 2.0]),  # widened to a multiple of the step
        (0.0, 75.0, 25.0, [0.0, 20.0, 40.0, 60.0, 80.0]),
    ],
)
def test_whole_axis_has_whole_ticks_only(lo: float, hi: float, step: float, expected: list[float]) -> None:
    low, high, ticks = whole_axis(lo, hi, step)
    assert ticks == expected and (low, high) == (expected[0], expected[-1])
