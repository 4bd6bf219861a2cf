"""Round axis ticks for the report's plots and the heat-map picture.

* ``nice_axis``: a value axis widened to round bounds, ticks at 1, 2, 2.5 or 5 × 10^k apart
  (0, 25, 50, 75, 100 rather than 0, 23.7, 47.4, ...).
* ``whole_axis``: the same for counts: whole-number steps of 1, 2 or 5 × 10^k only.
* ``time_ticks``: ticks on round minutes or hours of elapsed time, inside the run only, labelled
  ``h:mm``.

Not guaranteed: an exact number of ticks; ``target`` and ``max_ticks`` are upper bounds only
roughly (a round step is preferred over the count).
"""

from __future__ import annotations

import math

__all__ = ["TIME_STEPS_MINUTES", "clock_label", "nice_axis", "nice_step", "tick_label", "time_ticks", "whole_axis"]

TIME_STEPS_MINUTES = (1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 720, 1440)
_MANTISSAS = (1.0, 2.0, 2.5, 5.0, 10.0)


def nice_step(span: float, target: int) -> float:
    """The smallest 1/2/2.5/5 × 10^k step that cuts ``span`` into at most ``target`` intervals."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(target, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for mantissa in _MANTISSAS:
        step = mantissa * magnitude
        if step >= raw * (1 - 1e-9):
            return step
    return 10.0 * magnitude  # pragma: no cover - 10 × magnitude always qualifies


def nice_axis(lo: float, hi: float, target: int = 4) -> tuple[float, float, list[float]]:
    """``(lo', hi', ticks)``: bounds widened to multiples of a nice step, every multiple in between."""
    if hi <= lo:
        hi = lo + 1.0
    step = nice_step(hi - lo, target)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    ticks = [_clean(k * step) for k in range(first, last + 1)]
    return ticks[0], ticks[-1], ticks


def whole_axis(lo: float, hi: float, step: float) -> tuple[float, float, list[float]]:
    """``(lo', hi', ticks)`` for a count axis: the largest 1/2/5 × 10^k step not above ``step`` (at
    least 1), bounds widened to its multiples, at least one step between them (0 and 1 for all zeros)."""
    whole, magnitude = 1.0, 1.0
    while magnitude <= step:
        whole = max([whole, *(m * magnitude for m in (1.0, 2.0, 5.0) if m * magnitude <= step)])
        magnitude *= 10.0
    first = math.floor(lo / whole + 1e-9)
    last = max(math.ceil(hi / whole - 1e-9), first + 1)
    ticks = [_clean(k * whole) for k in range(first, last + 1)]
    return ticks[0], ticks[-1], ticks


def _clean(value: float) -> float:
    cleaned = round(value, 9)
    return 0.0 if cleaned == 0 else cleaned


def tick_label(value: float) -> str:
    """``25``, ``2.5``, ``0.05``, ``1,200``: no trailing zeros, thousands separated."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return text


def clock_label(seconds: float) -> str:
    """Elapsed time as ``h:mm`` (``0:00``, ``1:30``, ``24:00``)."""
    minutes = round(seconds / 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def time_ticks(start: float, end: float, max_ticks: int = 8) -> list[tuple[float, str]]:
    """Ticks (seconds, ``h:mm``) on the smallest round minute/hour step giving at most ``max_ticks``
    ticks in ``[start, end]``; never outside that range."""
    if end <= start:
        return [(start, clock_label(start))]
    for minutes in TIME_STEPS_MINUTES:
        step = minutes * 60.0
        first = math.ceil(start / step - 1e-9)
        last = math.floor(end / step + 1e-9)
        if last - first + 1 <= max_ticks:
            break
    return [(k * step, clock_label(k * step)) for k in range(first, last + 1)]
