"""Fixtures of the system tier: the rendered chart, one emulated cluster per test, the session's API record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rbac_check import Call
from system_cluster import Cluster, RenderedChart, default_chart

RBAC_TEST_FILE = "test_rbac_against_reality.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """RBAC-against-reality runs after the scenarios, so it sees the calls they made."""
    items.sort(key=lambda item: item.path.name == RBAC_TEST_FILE)


@pytest.fixture(scope="session")
def chart() -> RenderedChart:
    return default_chart()


@pytest.fixture(scope="session")
def session_calls() -> list[Call]:
    """Every API call recorded by every cluster of this pytest session (filled as clusters close)."""
    return []


@pytest.fixture
def cluster(tmp_path: Path, session_calls: list[Call]) -> Iterator[Cluster]:
    env = Cluster(workdir=tmp_path, record_file=tmp_path / "api-record.jsonl")
    try:
        env.start_emulator()
        yield env
    finally:
        try:
            env.close()
        finally:
            session_calls.extend(env.recorded_calls())
