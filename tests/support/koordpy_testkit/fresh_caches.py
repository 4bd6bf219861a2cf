"""A pytest plugin for the mutation run (``scripts/mutation.py`` loads it with ``-p``): each test session
starts with the memo caches of koordpy's functions empty.

mutmut forks every mutant's test process from one process that has run the tests unmutated, so a memoised
function (``functools.lru_cache``: ``koordpy.descheduler.limits.workload_limit``) would answer from what the
unmutated code computed there, and a mutant below it would survive unseen. Clearing the caches at the start
of each session makes the mutant's own code compute every answer.
"""

from __future__ import annotations

import sys

import pytest

__all__ = ["clear_koordpy_caches"]


def clear_koordpy_caches() -> int:
    """Empty every ``cache_clear``-able function defined at module level in a loaded ``koordpy`` module;
    how many there were."""
    cleared = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "koordpy" or name.startswith("koordpy.")):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()
                cleared += 1
    return cleared


def pytest_sessionstart(session: pytest.Session) -> None:
    clear_koordpy_caches()
