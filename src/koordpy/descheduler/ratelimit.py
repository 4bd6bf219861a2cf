"""Eviction rate limits: client-go's token bucket (``evictQPS``/``evictBurst``), upstream's per-workload
object limiter (``objectLimiters.workload``) and the backoff after a refused call. Time is an argument.
"""

from __future__ import annotations

__all__ = [
    "RETRY_BASE_SECONDS",
    "RETRY_CAP_SECONDS",
    "ObjectLimiter",
    "TokenBucket",
    "eviction_retry_delay",
]

RETRY_BASE_SECONDS = 1.0
RETRY_CAP_SECONDS = 30.0


class TokenBucket:
    """client-go's ``NewTokenBucketRateLimiter(qps, burst)`` with ``TryAccept``; time is an argument.

    Starts full. Not guaranteed: fairness between callers.
    """

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._tokens = float(self.burst)
        self._at: float | None = None

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        if self._at is None or now > self._at:
            self._at = now

    def available(self, now: float) -> bool:
        """Whether one token is there now (without taking it)."""
        self._refill(now)
        return self._tokens >= 1.0

    def full(self, now: float) -> bool:
        """Whether the bucket holds ``burst`` tokens at ``now`` (as it starts)."""
        self._refill(now)
        return self._tokens >= float(self.burst)

    def try_accept(self, now: float) -> bool:
        """Take one token if there is one."""
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class ObjectLimiter:
    """Upstream ``objectLimiters.workload``: per workload, at most ``max_migrating`` evictions per
    ``duration`` (token bucket, rate max_migrating/duration, burst ``burst``). Keys are workload UIDs.

    ``max_migrating`` per workload comes from the caller (the arbitration's per-workload rule).
    :meth:`prune` drops the buckets that have refilled (a full bucket allows what a new one would), so the
    buckets of workloads that went away do not stay.
    """

    def __init__(self, duration_seconds: float, burst: int = 1) -> None:
        self.duration = float(duration_seconds)
        self.burst = max(1, int(burst))
        self._buckets: dict[str, TokenBucket] = {}

    def _bucket(self, workload: str, max_migrating: int) -> TokenBucket:
        qps = max(1, max_migrating) / self.duration if self.duration > 0 else float("inf")
        bucket = self._buckets.get(workload)
        if bucket is None or bucket.qps != qps:
            old = bucket
            bucket = TokenBucket(qps, self.burst)
            if old is not None:
                bucket._tokens, bucket._at = min(old._tokens, float(self.burst)), old._at
            self._buckets[workload] = bucket
        return bucket

    def allows(self, workload: str, max_migrating: int, now: float) -> bool:
        if self.duration <= 0:
            return True
        return self._bucket(workload, max_migrating).available(now)

    def record(self, workload: str, max_migrating: int, now: float) -> None:
        """Count one eviction of a pod of ``workload``."""
        if self.duration > 0:
            self._bucket(workload, max_migrating).try_accept(now)

    def forget(self, workload: str) -> None:
        self._buckets.pop(workload, None)

    def prune(self, now: float) -> None:
        """Drop every bucket that is full again at ``now``: the workload is then as free as one never seen."""
        full = [key for key, bucket in self._buckets.items() if bucket.full(now)]
        for key in full:
            del self._buckets[key]


def eviction_retry_delay(failures: int) -> float:
    """Backoff after ``failures`` failed evictions in a row: 1 s, 2 s, 4 s, ... capped at 30 s."""
    exponent = max(0, min(failures - 1, 16))
    return float(min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2**exponent))
