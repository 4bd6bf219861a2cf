"""A clock that only moves when told to."""

from __future__ import annotations

__all__ = ["FakeClock"]

# 2026-11-21T10:00:00Z, a fixed, readable instant for tests.
DEFAULT_START = 1795255200.0


class FakeClock:
    def __init__(self, start: float = DEFAULT_START) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        self._now += seconds
        return self._now

    def set(self, epoch: float) -> None:
        self._now = float(epoch)
