"""How ``pytest -n`` (pytest-xdist) shares the tests between its workers (``tests/conftest.py``).

A shared tier (:data:`SHARED_TIERS`) runs whole, in collection order, on one worker: its tests share one
expensive session (a control plane with the chart installed, a booted guest, a started emulator process),
and the real-cluster tier keeps its own order (its RBAC check of the whole session runs last). Every other
module is a unit of its own (its fixtures are set up once). The real-cluster tier, the longest, starts first.

Not xdist's ``--dist loadgroup``: it renames the tests of an ``xdist_group`` through ``Item._nodeid``,
which pytest 9 no longer reads, so the marks group nothing there. Not guaranteed: which worker runs what.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

__all__ = ["SHARED_TIERS", "TierScheduling", "shared_tiers_first", "work_unit"]

SHARED_TIERS = ("cluster", "guest", "system")


def work_unit(nodeid: str) -> str:
    """The unit one worker runs whole: ``tests/<tier>`` for a shared tier, else the test's module."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 and parts[1] in SHARED_TIERS else path


def shared_tiers_first(nodeids: list[str]) -> list[int]:
    """The order to run ``nodeids`` in (indexes): the shared tiers first, in :data:`SHARED_TIERS` order,
    everything else after them; collection order otherwise (a stable sort)."""
    rank = {f"tests/{tier}": index for index, tier in enumerate(SHARED_TIERS)}
    return sorted(range(len(nodeids)), key=lambda i: rank.get(work_unit(nodeids[i]), len(rank)))


class TierScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
    """xdist's load-scope scheduling over :func:`work_unit`, the units in collection order."""

    def __init__(self, config: Any, log: Any = None) -> None:
        config.option.loadscopereorder = False  # collection order: the real-cluster tier starts at once
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)
