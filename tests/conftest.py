"""Shared test configuration. Tier-specific fixtures live in each tier's own conftest.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from koordpy_testkit.workers import TierScheduling, shared_tiers_first

TESTS = Path(__file__).resolve().parent


def own_modules() -> list[str]:
    """The module names of the tests and their helpers as pytest imports them (by file name: the test
    folders are not packages), plus the test support package."""
    names = {path.stem for path in TESTS.rglob("*.py") if "support" not in path.relative_to(TESTS).parts}
    return sorted(names | {"koordpy_testkit"})


def pytest_configure(config: pytest.Config) -> None:
    # pyproject.toml's filterwarnings lets third-party deprecations through (shown, not fatal); one
    # attributed to the tests' own code stays an error, as for koordpy's (later lines take precedence).
    modules = "|".join(re.escape(name) for name in own_modules())
    for category in ("DeprecationWarning", "PendingDeprecationWarning"):
        config.addinivalue_line("filterwarnings", f"error::{category}:({modules})$")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker: the shared tiers first (``koordpy_testkit.workers``); every worker
    collects alike, as xdist requires."""
    if hasattr(config, "workerinput"):
        order = shared_tiers_first([item.nodeid for item in items])
        items[:] = [items[i] for i in order]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Each shared tier on one worker, whole and in order (``koordpy_testkit.workers``)."""
    return TierScheduling(config, log)
