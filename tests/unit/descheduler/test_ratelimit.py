"""Eviction rate limits: the evictQPS token bucket, the per-workload object limiter, the retry backoff."""

from __future__ import annotations

import pytest

from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket, eviction_retry_delay

T0 = 1795255200.0  # 2026-11-21T10:00:00Z


@pytest.mark.parametrize(("failures", "delay"), [(1, 1.0), (2, 2.0), (5, 16.0), (6, 30.0), (100, 30.0)])
def test_retry_delay(failures: int, delay: float) -> None:
    # 1 s * 2^(n-1), capped at 30 s: 2^5 = 32 > 30
    assert eviction_retry_delay(failures) == delay


def test_token_bucket_qps_and_burst() -> None:
    # evictQPS 10, burst 1: one now, the next after 0.1 s
    bucket = TokenBucket(10, 1)
    assert bucket.try_accept(0.0)
    assert not bucket.try_accept(0.05)
    assert bucket.try_accept(0.1)
    # burst 3 after a long idle: three at once, not four
    burst = TokenBucket(1, 3)
    assert [burst.try_accept(100.0) for _ in range(4)] == [True, True, True, False]


def test_object_limiter_drops_the_buckets_that_refilled() -> None:
    # duration 300 s, maxMigrating 2 -> 2/300 per s, burst 1: one eviction empties w1's bucket, which holds a
    # whole token again 150 s later; w2's, emptied 100 s after, is full at 250 s. A full bucket allows what
    # a new one would, so it goes: the buckets of workloads that went away do not stay.
    limiter = ObjectLimiter(300, burst=1)
    limiter.record("w1", 2, T0)
    limiter.record("w2", 2, T0 + 100)
    limiter.prune(T0 + 149)
    assert len(limiter._buckets) == 2
    limiter.prune(T0 + 150)
    assert len(limiter._buckets) == 1 and limiter.allows("w1", 2, T0 + 150)
    assert not limiter.allows("w2", 2, T0 + 150)  # still waiting: its bucket was kept
    limiter.prune(T0 + 250)
    assert len(limiter._buckets) == 0
