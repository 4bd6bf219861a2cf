"""Shared test configuration. Tier-specific fixtures live in each tier's own conftest.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


SHARED_TIERS = ("cluster", "guest", "system")
"""Tiers whose tests share one expensive session (a control plane with the chart installed, a booted guest,
a started emulator process): under ``pytest -n`` (scripts/run-tests.sh) each runs whole, in order, on one
worker."""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One xdist group per shared tier and per module elsewhere (a module's fixtures are set up once), so
    ``--dist loadgroup`` gives the real-cluster tier a worker of its own while the other one runs the rest.
    Without xdist the groups are inert marks."""
    for item in items:
        parts = Path(str(item.path)).resolve().relative_to(TESTS).parts
        group = parts[0] if parts[0] in SHARED_TIERS else "/".join(parts)
        item.add_marker(pytest.mark.xdist_group(group))
