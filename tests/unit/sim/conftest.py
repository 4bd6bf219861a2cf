"""A small scenario builder for the simulator's unit tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario

SMALL: dict[str, Any] = {
    "apiVersion": "koordpy.io/v1alpha1",
    "kind": "Scenario",
    "name": "small",
    "seed": 3,
    "start": "2026-11-21T12:00:00Z",
    "duration": "1h",
    "step": "30s",
    "nodePools": [{"name": "n", "count": 6, "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
    "workloads": [
        {
            "name": "svc",
            "priority": 9500,
            "arrivals": {"count": 12, "end": "1m"},
            "requests": {"cpu": "2", "memory": "2Gi"},
            "limits": {"cpu": "4", "memory": "4Gi"},
            "usage": {"pattern": "diurnal", "cpu": {"mean": "2500m", "spread": 0.5}, "memory": {"mean": "1Gi"}},
        },
        {
            "name": "job",
            "priority": 5500,
            "arrivals": {"count": 30},
            "lifetime": {"min": "5m", "max": "20m"},
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "3", "memory": "2Gi"},
            "usage": {
                "pattern": "bursty",
                "burstEvery": "10m",
                "burstLength": "3m",
                "cpu": {"mean": "1"},
                "memory": {"mean": "1Gi"},
            },
        },
    ],
    "nodeMetric": {"reportInterval": "60s", "lag": "10s"},
}


@pytest.fixture
def small_raw() -> dict[str, Any]:
    """A fresh copy of the small scenario's raw mapping (mutate freely)."""
    return copy.deepcopy(SMALL)


@pytest.fixture
def small(small_raw: dict[str, Any]) -> Scenario:
    return validate(Scenario, small_raw)
