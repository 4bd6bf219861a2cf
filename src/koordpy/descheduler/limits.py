"""Per-workload limits as Koordinator computes them (``GetMaxMigrating`` / ``GetMaxUnavailable``).

The implicit rule when no value is configured:

* replicas > 10: ``10%`` of replicas, rounded down;
* 4 <= replicas <= 10: 2;
* replicas < 4: 1.

An explicit integer or percent (rounded down) that comes out as 0 becomes 1; the result is capped at the
replica count. So a workload with 0 replicas has limit 0.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["MAX_INT32", "scaled_value", "workload_limit"]

MAX_INT32 = 2**31 - 1


def scaled_value(value: int | str, replicas: int) -> int:
    """An int as is; a percent string ``"N%"`` as ``floor(N * replicas / 100)`` (Kubernetes, round down)."""
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError(f"{value!r}: expected an integer or a percent such as '10%'")
    return int(value[:-1]) * replicas // 100


def _workload_limit(replicas: int, configured: int | str | None) -> int:
    """The rule of :data:`workload_limit`, unmemoised."""
    if configured is None:
        if replicas > 10:
            configured = "10%"
        elif replicas >= 4:
            configured = 2
        else:
            configured = 1
    limit = scaled_value(configured, replicas)
    if limit <= 0:
        limit = 1
    return min(limit, replicas)


workload_limit = lru_cache(maxsize=4096)(_workload_limit)
"""Max migrating (or unavailable) pods of a workload with ``replicas`` expected replicas.

Memoised (a pure function of two small values): arbitration asks it for every workload each round. The rule
is the undecorated ``_workload_limit`` (so that the mutation run, which leaves decorated functions alone,
changes it too)."""
