"""An unreadable NodeMetric (``NodeMetricInfo.unreadable``): unknown usage is never a load-aware pass.

Node n: 10 cpu / 100Gi; the incoming pod is BestEffort (estimate 250m / 200Mi).
"""

from __future__ import annotations

from koordpy.model.objects import NodeMetricInfo
from koordpy.scheduler.framework.cluster import REASON_NODE_INVALID
from koordpy.scheduler.plugins.loadaware.plugin import REASON_NODEMETRIC_INVALID
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.scheduling import NOW
from koordpy_testkit.scheduling import ClusterHarness as Harness

BE_POD = PodBuilder("incoming").build()
DAEMON_POD = PodBuilder("ds").owner("DaemonSet", "ds").build()


def _harness(**args: object) -> Harness:
    h = Harness(**args).node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    h.state.upsert_metric(NodeMetricInfo.unreadable("n", "status.nodeMetric.nodeUsage.resources.cpu: out of range"))
    return h


def test_unreadable_metric_fails_the_filter_and_scores_zero() -> None:
    h = _harness()
    assert h.reason(BE_POD, "n") == REASON_NODEMETRIC_INVALID
    assert h.score(BE_POD, "n") == 0


def test_daemonset_pods_and_disabled_thresholds_still_pass() -> None:
    # DaemonSet pods pass first (Koordinator rule 1); with every threshold 0 load awareness is off.
    assert _harness().reason(DAEMON_POD, "n") is None
    assert _harness(usageThresholds={"cpu": 0, "memory": 0}).reason(BE_POD, "n") is None


def test_a_readable_metric_lifts_it_and_a_deleted_one_fails_open_again() -> None:
    h = _harness()
    # 1c + 250m = 1.25c of 10c -> 12.5% -> 13 <= 65: pass once readable.
    h.metric(NodeMetricBuilder("n").updated(NOW - 30).usage(cpu="1", memory="10Gi").build())
    assert h.reason(BE_POD, "n") is None
    h.state.upsert_metric(NodeMetricInfo.unreadable("n", "bad"))
    assert h.reason(BE_POD, "n") == REASON_NODEMETRIC_INVALID
    h.state.remove_metric("n")  # no NodeMetric at all: Koordinator's fail-open pass
    assert h.reason(BE_POD, "n") is None


def test_metric_before_node_is_remembered() -> None:
    h = Harness()
    h.state.upsert_metric(NodeMetricInfo.unreadable("n", "bad"))
    h.node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    assert h.reason(BE_POD, "n") == REASON_NODEMETRIC_INVALID


def test_unreadable_node_fails_with_its_own_reason_until_readable() -> None:
    h = _harness()
    h.state.invalidate_node("n", "status.allocatable.cpu: out of range")
    assert h.reason(BE_POD, "n") == REASON_NODE_INVALID
    assert h.score(BE_POD, "n") == 0
    h.node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    assert h.state.invalid_nodes == {}
    assert h.reason(BE_POD, "n") == REASON_NODEMETRIC_INVALID  # the metric is still unreadable


def test_huge_but_valid_quantities_saturate_instead_of_overflowing() -> None:
    # usage 9e15 cores = 9e18 millicores (fits int64), allocatable 10c: clamped at 2^53 millicores,
    # still far above 65 % of 10,000m -> fails on cpu; int64 arithmetic never wraps to a low usage.
    h = Harness().node(NodeBuilder("n").allocatable(cpu="10", memory="100Gi").build())
    h.metric(NodeMetricBuilder("n").updated(NOW - 30).usage(cpu="9e15", memory="8Ei").build())
    assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"
    assert h.score(BE_POD, "n") == 0
