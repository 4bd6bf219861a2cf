"""The loop that runs the manager's periodic work: one round over every object, every ``interval``.

One :class:`RoundLoop` per kind of round (migration, reservation), started once on the active replica
(see :mod:`koordpy.manager.operator`): never one timer per object, so 10,000 PodMigrationJobs cost one
round every 500 ms, not 10,000 timers that each wake up and log.

Rounds run start to start every ``interval``; a round longer than that delays the next one (rounds never
overlap). A round that raises is counted (``outcome("error")``) and logged, at most once a minute for the
same message (with its traceback the first time); the loop goes on. ``due`` (when given) is asked before
each round: False skips it (nothing changed and nothing is due), without counting.

Not guaranteed: a round at a fixed rate under load (a late round is not made up for); rounds survive
nothing across a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

__all__ = ["ROUND_ERROR_LOG_SECONDS", "RoundLoop"]

ROUND_ERROR_LOG_SECONDS = 60.0


class RoundLoop:
    """Runs ``round`` every ``interval`` seconds while :meth:`run` runs (see the module docstring)."""

    def __init__(
        self,
        name: str,
        round: Callable[[], Awaitable[object]],
        interval: float,
        *,
        due: Callable[[], bool] | None = None,
        outcome: Callable[[str], None] | None = None,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.round = round
        self.interval = interval
        self.due = due
        self.outcome = outcome
        self.clock = clock
        self._logger = logger or logging.getLogger("koordpy.manager")
        self._logged: dict[str, float] = {}
        self.rounds = 0
        """Rounds run (skipped ones not counted)."""
        self.errors = 0
        self.running = False
        self.last_outcome: str | None = None
        """``done`` or ``error``: how the last round that ran ended (None before the first ended)."""
        self._last_started: float | None = None

    async def run_once(self) -> bool:
        """One round now unless ``due`` says no; True when it ran (even if it failed)."""
        if self.due is not None and not self.due():
            return False
        self.rounds += 1
        self._last_started = self.clock()
        try:
            await self.round()
        except Exception as exc:  # why: a failed round is retried next interval, never ends the loop
            self.errors += 1
            self._ended("error")
            self._log(exc)
            return True
        self._ended("done")
        return True

    def _ended(self, outcome: str) -> None:
        self.last_outcome = outcome
        if self.outcome is not None:
            self.outcome(outcome)

    def health(self) -> dict[str, object]:
        """What ``/healthz`` reports about these rounds: whether they run on this replica, the interval, how
        the last one ended and how long ago the last one started (None: none yet). Only reads values, so
        the health thread may call it."""
        started = self._last_started
        ago = None if started is None else round(self.clock() - started, 1)
        return {
            "running": self.running,
            "intervalSeconds": self.interval,
            "lastOutcome": self.last_outcome,
            "lastStartedSecondsAgo": ago,
        }

    def _log(self, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"[:300]
        now = self.clock()
        last = self._logged.get(message)
        if last is not None and now - last < ROUND_ERROR_LOG_SECONDS:
            return
        self._logged = {m: t for m, t in self._logged.items() if now - t < ROUND_ERROR_LOG_SECONDS}
        self._logged[message] = now
        if last is None:
            self._logger.error("%s round failed; the next one runs in %.1fs", self.name, self.interval, exc_info=exc)
        else:
            self._logger.error("%s round failed again: %s", self.name, message)

    async def run(self, stopped: Callable[[], bool], sleep: Callable[[float], Awaitable[object]]) -> None:
        """Run rounds until ``stopped()`` (checked between rounds); ``sleep(seconds)`` waits between them
        and may return early when stopping (a kopf daemon's ``stopped.wait``)."""
        self.running = True
        self._logger.info("%s rounds started (every %gs)", self.name, self.interval)
        try:
            while not stopped():
                started = self.clock()
                await self.run_once()
                if stopped():
                    break
                await sleep(max(0.0, self.interval - (self.clock() - started)))
        finally:
            self.running = False
            self._logger.info("%s rounds stopped", self.name)
