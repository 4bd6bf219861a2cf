"""Fixtures of the system tier: the rendered chart, one emulated cluster per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from system_cluster import Cluster, RenderedChart, default_chart


@pytest.fixture(scope="session")
def chart() -> RenderedChart:
    return default_chart()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    env = Cluster(workdir=tmp_path, record_file=tmp_path / "api-record.jsonl")
    try:
        env.start_emulator()
        yield env
    finally:
        env.close()
