"""Which threshold set Filter uses, and that an all-zero set skips Filter before the NodeMetric checks.

Koordinator (load_aware.go Filter): ``prodPod := !ProdUsageThresholds.Empty() && pod is Prod``, where
``Empty()`` means "every *vectorised* threshold is 0"; then ``if usageThresholds.Empty() { return nil }``
comes before the NodeMetric lookup and the expiry check. Found while replaying upstream cases
(tests/fixtures/koordinator/filter-*-thresholds-*.yaml).

Node n: 10 cpu / 100Gi. Incoming pods have no requests: estimate 250m / 200Mi.
"""

from __future__ import annotations

import json

import pytest

from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.scheduling import NOW
from koordpy_testkit.scheduling import ClusterHarness as Harness

EXPIRED = "node(s) nodeMetric expired"
CPU = "node(s) cpu usage exceed threshold"
BE_POD = PodBuilder("be").build()  # BestEffort -> batch, not Prod
PROD_POD = PodBuilder("prod").priority(9500).build()  # priority band 9000-9999 -> Prod


def node(**annotations: str) -> dict[str, object]:
    builder = NodeBuilder("n").allocatable(cpu="10", memory="100Gi")
    for key, value in annotations.items():
        builder.annotation(key, value)
    return builder.build()


def metric(cpu: str, age: float) -> dict[str, object]:
    return NodeMetricBuilder("n").updated(NOW - age).usage(cpu=cpu, memory="1Gi").build()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        # default thresholds 65/95 are set: a 600 s old metric (>= 180 s) blocks the node
        ({}, EXPIRED),
        # every threshold 0: Filter returns before looking at the NodeMetric, so expiry does not matter
        ({"usageThresholds": {"cpu": 0, "memory": 0}}, None),
        # an aggregated set with only zeros replaces usageThresholds for this non-prod pod: also skipped
        (
            {"aggregated": {"usageThresholds": {"cpu": 0}, "usageAggregationType": "p95"}},
            None,
        ),
    ],
)
def test_all_zero_thresholds_skip_filter_even_when_metric_expired(args: dict[str, object], reason: str | None) -> None:
    h = Harness(**args).node(node()).metric(metric("9", age=600))
    assert h.reason(BE_POD, "n") == reason


@pytest.mark.parametrize(
    ("args", "annotations", "reason"),
    [
        # prodUsageThresholds {cpu: 0} is "empty": the prod pod falls back to usageThresholds (cpu 65):
        # (7 + 0.25) / 10 = 72.5% -> 73 > 65 -> fail on cpu
        ({"prodUsageThresholds": {"cpu": 0}}, {}, CPU),
        # prod thresholds set (cpu 80): 73 <= 80 -> pass, usageThresholds are not consulted
        ({"prodUsageThresholds": {"cpu": 80}}, {}, None),
        # annotation prod thresholds only name a resource the plugin does not vectorise: empty again -> cpu 65
        (
            {"prodUsageThresholds": {"cpu": 80}},
            {"scheduling.koordinator.sh/usage-thresholds": json.dumps({"prodUsageThresholds": {"example.com/x": 5}})},
            CPU,
        ),
    ],
)
def test_prod_path_needs_a_nonzero_vectorised_prod_threshold(
    args: dict[str, object], annotations: dict[str, str], reason: str | None
) -> None:
    h = Harness(**args).node(node(**annotations)).metric(metric("7", age=10))
    assert h.reason(PROD_POD, "n") == reason


def test_zero_prod_thresholds_do_not_skip_filter_for_prod_pods() -> None:
    # prod set all zero and usageThresholds default: the prod pod is still filtered, so expiry applies
    h = Harness(prodUsageThresholds={"cpu": 0, "memory": 0}).node(node()).metric(metric("1", age=600))
    assert h.reason(PROD_POD, "n") == EXPIRED
