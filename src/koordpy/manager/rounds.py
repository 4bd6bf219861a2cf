"""The gate the manager's periodic work knocks on: one round per interval, however many timers knock.

kopf timers are per object (one per PodMigrationJob, one per Node), but a migration or reservation round
covers every object at once, so every timer knocks on one :class:`RoundGate` and at most one round runs
per ``interval``.

Not guaranteed: a round at a fixed rate (a round runs only when a timer knocks, at least ``interval`` after
the previous one started); rounds survive nothing across a restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["RoundGate"]


class RoundGate:
    """Runs ``round`` at most once per ``interval``; ``outcome`` (when given) hears ``done`` or ``error``
    after each round that ran (an error is raised on to the knocking timer)."""

    def __init__(
        self,
        round: Callable[[], Awaitable[object]],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        outcome: Callable[[str], None] | None = None,
    ) -> None:
        self.round = round
        self.interval = interval
        self.clock = clock
        self.outcome = outcome
        self._lock = asyncio.Lock()
        self._last: float | None = None
        self.last_outcome: str | None = None
        """``done`` or ``error``: how the last round that ran ended (None before the first ended)."""

    async def knock(self) -> bool:
        """Run a round unless one runs now or ran less than ``interval`` ago; True when this call ran it."""
        if self._lock.locked():
            return False
        async with self._lock:
            now = self.clock()
            if self._last is not None and now - self._last < self.interval:
                return False
            self._last = now
            try:
                await self.round()
            except Exception:
                self._ended("error")
                raise
            self._ended("done")
            return True

    def _ended(self, outcome: str) -> None:
        self.last_outcome = outcome
        if self.outcome is not None:
            self.outcome(outcome)

    def health(self) -> dict[str, object]:
        """What ``/healthz`` reports about these rounds: the interval, how the last one ended and how long
        ago the last one started (None: none yet)."""
        ago = None if self._last is None else round(self.clock() - self._last, 1)
        return {"intervalSeconds": self.interval, "lastOutcome": self.last_outcome, "lastStartedSecondsAgo": ago}
