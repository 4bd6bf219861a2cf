"""Demand curves, with the arithmetic worked in comments."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.sim.trace import build_trace
from koordpy.sim.usage import UsageModel


def _model(raw: dict[str, Any], **usage_override: object) -> tuple[UsageModel, Scenario]:
    raw["workloads"] = [raw["workloads"][0]]
    raw["workloads"][0]["usage"] = {"cpu": {"mean": "1"}, "memory": {"mean": "1Gi"}, **usage_override}
    scenario = validate(Scenario, raw)
    return UsageModel(scenario, build_trace(scenario, 1), 1), scenario


def test_diurnal_peak_and_trough(small_raw: dict[str, Any]) -> None:
    # start 12:00 UTC; peakHour 14, amplitude 0.5: at 14:00 demand = 1000 × 1.5; at 02:00 (14h later) × 0.5
    model, _ = _model(small_raw, pattern="diurnal", peakHour=14, amplitude=0.5)
    cpu, memory = model.demand(2 * 3600, 0)
    assert cpu == pytest.approx(np.full(12, 1500.0))
    cpu, _ = model.demand(14 * 3600, 1)
    assert cpu == pytest.approx(np.full(12, 500.0))
    assert memory == pytest.approx(np.full(12, 1024.0**3))


def test_bursty_on_and_off_per_pod_phase(small_raw: dict[str, Any]) -> None:
    # burst 5m out of every 20m at ×4; over a full cycle each pod spends 1/4 of samples bursting
    model, _ = _model(small_raw, pattern="bursty", burstEvery="20m", burstLength="5m", burstFactor=4)
    samples = np.stack([model.demand(t, k)[0] for k, t in enumerate(range(0, 1200, 10))])
    assert set(np.unique(samples)) == {1000.0, 4000.0}
    assert (samples == 4000.0).mean(axis=0) == pytest.approx(np.full(12, 0.25), abs=0.01)


def test_noise_is_seeded_per_sample_and_mean_preserving(small_raw: dict[str, Any]) -> None:
    model, _ = _model(small_raw, pattern="steady", cpu={"mean": "1", "noise": 0.3})
    a, _ = model.demand(60, 7)
    b, _ = model.demand(60, 7)
    c, _ = model.demand(60, 8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    many = np.concatenate([model.demand(0, k)[0] for k in range(400)])
    assert many.mean() == pytest.approx(1000, rel=0.03)
