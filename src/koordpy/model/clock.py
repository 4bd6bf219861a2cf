"""The clock seen by the pure core: anything with ``now() -> float`` (epoch seconds).

The core never reads the system time itself; adapters pass a real clock and tests a fake one
(a fake clock).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Clock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch. Not guaranteed monotonic (wall clock semantics)."""
        ...
