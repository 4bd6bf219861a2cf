"""The real clock, for adapters. The pure core only ever sees a ``koordpy.model.clock.Clock``."""

from __future__ import annotations

import time

__all__ = ["SystemClock"]


class SystemClock:
    """Wall-clock epoch seconds. Not guaranteed monotonic: NTP steps show through."""

    def now(self) -> float:
        return time.time()
