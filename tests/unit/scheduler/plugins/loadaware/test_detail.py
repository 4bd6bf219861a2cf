"""``LoadAwarePlugin.detail``: the numbers behind the filter's verdict, from the same arrays.

Node n: 10 cpu / 100Gi allocatable. Incoming pod: no requests, estimate 250m cpu / 200Mi memory.
"""

from __future__ import annotations

import pytest

from koordpy.model.objects import pod_from_dict
from koordpy.scheduler.plugins.loadaware.plugin import LoadDetail
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.scheduling import NOW
from koordpy_testkit.scheduling import ClusterHarness as Harness

BE_POD = PodBuilder("incoming").build()
MI = 2**20


def _detail(h: Harness, node: str = "n", now: float = NOW):  # type: ignore[no-untyped-def]
    index = int(h.state.index.lookup([node])[0])
    return h.plugin.detail(pod_from_dict(BE_POD), index, now)


@pytest.mark.parametrize(
    ("cpu", "percent", "over"),
    [
        # 6.25c + 0.25c = 6.5c of 10 → 65% → not over 65
        ("6250m", 65, False),
        # 6.3c + 0.25c = 6.55c → 65.5 → Go rounds half away → 66 > 65
        ("6300m", 66, True),
    ],
)
def test_detail_agrees_with_the_filter(cpu: str, percent: int, over: bool) -> None:
    h = Harness().node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    h.metric(NodeMetricBuilder("n").updated(NOW - 30).usage(cpu=cpu, memory="10Gi").build())
    detail = _detail(h)
    by = {r.resource: r for r in detail.resources}
    assert (by["cpu"].usage, by["cpu"].estimate, by["cpu"].allocatable) == (int(cpu[:-1]), 250, 10000)
    assert (by["cpu"].percent, by["cpu"].threshold, by["cpu"].over) == (percent, 65, over)
    # memory: 10Gi + 200Mi of 100Gi → 10.2% → 10, threshold 95
    assert (by["memory"].estimate, by["memory"].percent, by["memory"].over) == (200 * MI, 10, False)
    assert (h.reason(BE_POD, "n") is not None) is over
    assert detail.has_metric and detail.has_status and not detail.expired and detail.age == 30


def test_detail_without_metric_and_expired() -> None:
    h = Harness().node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    assert _detail(h).has_metric is False
    h.metric(NodeMetricBuilder("n").updated(NOW - 600).usage(cpu="1", memory="1Gi").build())
    # 600 s ≥ 180 s expiration
    detail = _detail(h)
    assert detail.expired and detail.age == 600
    assert h.reason(BE_POD, "n") == "node(s) nodeMetric expired"


def test_detail_stops_where_the_filter_stops() -> None:
    # no NodeMetric: nothing else is known; a NodeMetric without status.nodeMetric (600 s old, expired):
    # its age and expiry, no resources
    h = Harness().node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    assert _detail(h) == LoadDetail("n", has_metric=False)
    h.metric(NodeMetricBuilder("n").updated(NOW - 600).build())
    assert _detail(h) == LoadDetail("n", has_metric=True, has_status=False, age=600, expired=True)


@pytest.mark.parametrize(
    ("priority", "prod", "threshold"),
    [
        # a Prod pod (priority 9500) is measured against prodUsageThresholds (cpu 80) ...
        (9500, True, 80),
        # ... any other pod against usageThresholds (cpu 65)
        (5500, False, 65),
    ],
)
def test_detail_names_the_threshold_set_of_the_pods_class(priority: int, prod: bool, threshold: int) -> None:
    h = Harness(prodUsageThresholds={"cpu": 80}).node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    h.metric(NodeMetricBuilder("n").updated(NOW - 30).usage(cpu="1", memory="10Gi").build())
    index = int(h.state.index.lookup(["n"])[0])
    detail = h.plugin.detail(pod_from_dict(PodBuilder("p").priority(priority).build()), index, NOW)
    by = {r.resource: r for r in detail.resources}
    assert (detail.prod, by["cpu"].threshold) == (prod, threshold)


@pytest.mark.parametrize(
    ("annotate", "priority", "prod", "aggregated"),
    [
        # a node whose profile has aggregated thresholds: the BE pod is checked against the p95 usage ...
        (True, 5500, False, True),
        # ... a Prod pod against the prod thresholds (prodUsage), not the aggregated ones
        (True, 9500, True, False),
        # a node without aggregated thresholds: plain usage for either
        (False, 5500, False, False),
        (False, 9500, True, False),
    ],
)
def test_detail_says_which_usage_the_filter_read(annotate: bool, priority: int, prod: bool, aggregated: bool) -> None:
    builder = NodeBuilder("n").allocatable(cpu="10", memory="100Gi")
    if annotate:
        thresholds = '{"aggregatedUsage": {"usageThresholds": {"cpu": 70}, "usageAggregationType": "p95"}}'
        builder.annotation("scheduling.koordinator.sh/usage-thresholds", thresholds)
    h = Harness(prodUsageThresholds={"cpu": 80}).node(builder.build())
    h.metric(
        NodeMetricBuilder("n").updated(NOW - 30).usage(cpu="1", memory="10Gi").aggregated("5m", "p95", cpu="2").build()
    )
    index = int(h.state.index.lookup(["n"])[0])
    detail = h.plugin.detail(pod_from_dict(PodBuilder("p").priority(priority).build()), index, NOW)
    assert (detail.node, detail.prod, detail.aggregated) == ("n", prod, aggregated)


def test_detail_percent_is_none_only_without_allocatable() -> None:
    # cpu allocatable 1m: (1000m + 250m) / 1m = 125000 %; memory allocatable 0: no percent (not checked)
    h = Harness().node(NodeBuilder("n").allocatable(cpu="1m", memory="0").build())
    h.metric(NodeMetricBuilder("n").updated(NOW - 30).usage(cpu="1", memory="10Gi").build())
    by = {r.resource: r for r in _detail(h).resources}
    assert (by["cpu"].allocatable, by["cpu"].percent, by["cpu"].over) == (1, 125000, True)
    assert (by["memory"].allocatable, by["memory"].percent, by["memory"].over) == (0, None, False)
