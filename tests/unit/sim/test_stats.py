"""RunStats: the cluster-wide CPU ratio (Σ usage / Σ allocatable) next to the mean of nodes."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.sim.stats import RunStats


@pytest.mark.parametrize(
    ("capacity", "utilisation", "cluster", "mean_of_nodes"),
    [
        # identical nodes: both agree. usage 8 + 24 = 32 of 64 → 0.5; (0.25 + 0.75) / 2 = 0.5
        ([32, 32], [0.25, 0.75], 0.5, 0.5),
        # a big busy node and a small idle one: usage 0.9 × 64 + 0.1 × 8 = 57.6 + 0.8 = 58.4 of 72 → 0.8111;
        # the mean of nodes weighs them alike: (0.9 + 0.1) / 2 = 0.5
        ([64, 8], [0.9, 0.1], 58.4 / 72, 0.5),
        # the other way round: 0.1 × 64 + 0.9 × 8 = 6.4 + 7.2 = 13.6 of 72 → 0.1889; mean of nodes still 0.5
        ([64, 8], [0.1, 0.9], 13.6 / 72, 0.5),
        # three nodes: 4 × 0.5 + 16 × 0.25 + 12 × 1.0 = 2 + 4 + 12 = 18 of 32 → 0.5625; (0.5 + 0.25 + 1) / 3 = 0.5833
        ([4, 16, 12], [0.5, 0.25, 1.0], 18 / 32, 1.75 / 3),
    ],
)
def test_cluster_ratio_weighs_nodes_by_capacity(
    capacity: list[float], utilisation: list[float], cluster: float, mean_of_nodes: float
) -> None:
    stats = RunStats("p", len(capacity), 30.0, 65)
    stats.sample(0.0, np.array(utilisation), 0, np.array(capacity, np.float64))
    assert stats.cluster == [pytest.approx(cluster)]
    assert stats.mean == [pytest.approx(mean_of_nodes)]


def test_summary_averages_the_ratio_over_time_and_keeps_the_old_key() -> None:
    stats = RunStats("p", 2, 30.0, 65)
    capacity = np.array([64.0, 8.0])
    # sample 1: (57.6 + 0.8) / 72 = 0.8111; sample 2: (6.4 + 7.2) / 72 = 0.1889; mean (58.4 + 13.6) / 144 = 0.5
    stats.sample(0.0, np.array([0.9, 0.1]), 0, capacity)
    stats.sample(30.0, np.array([0.1, 0.9]), 0, capacity)
    # a third sample at an idle cluster: 0 → mean over three (58.4 + 13.6 + 0) / 216 = 0.3333
    stats.sample(60.0, np.array([0.0, 0.0]), 0, capacity)
    summary = stats.summary([])
    assert summary["cpuUtilisationClusterMean"] == round(72 / 216, 4)
    assert summary["cpuUtilisationMean"] == round((0.5 + 0.5 + 0.0) / 3, 4)  # mean of nodes per sample, then time


def test_zero_capacity_counts_as_idle_instead_of_dividing_by_zero() -> None:
    stats = RunStats("p", 1, 30.0, 65)
    stats.sample(0.0, np.array([0.0]), 0, np.array([0.0]))
    assert stats.cluster == [0.0]
