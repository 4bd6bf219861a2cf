"""koordpy_testkit.fresh_caches (the mutation run's plugin): koordpy's memo caches emptied, nobody else's."""

from __future__ import annotations

import functools

from koordpy.descheduler.limits import workload_limit
from koordpy.model import quantity
from koordpy_testkit.fresh_caches import clear_koordpy_caches


@functools.lru_cache(maxsize=8)
def not_koordpys(value: int) -> int:
    return value * 2


def test_koordpys_memo_caches_are_emptied_and_others_kept() -> None:
    workload_limit(8, "50%")
    not_koordpys(3)
    memoised = [v for v in vars(quantity).values() if callable(getattr(v, "cache_clear", None))]
    assert workload_limit.cache_info().currsize >= 1
    assert clear_koordpy_caches() >= 1 + len(memoised)
    assert workload_limit.cache_info().currsize == 0
    assert all(v.cache_info().currsize == 0 for v in memoised)
    assert not_koordpys.cache_info().currsize == 1
