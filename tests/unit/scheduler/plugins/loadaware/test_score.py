"""Score arithmetic: s_r = (cap - used) * 100 // cap; score = (sum w*s + D*min s) // (sum w + D)."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.scheduling import NOW
from koordpy_testkit.scheduling import ClusterHarness as Harness

GUARANTEED_16C_32G = PodBuilder("p").requests(cpu="16", memory="32Gi").limits(cpu="16", memory="32Gi").build()


def big_node() -> dict[str, object]:
    return NodeBuilder("n").allocatable(cpu="96", memory="512Gi").build()


def usage(cpu: str = "32", memory: str = "10Gi", at: float = NOW - 30) -> dict[str, object]:
    return NodeMetricBuilder("n").updated(at).usage(cpu=cpu, memory=memory).build()


def test_reference_worked_example() -> None:
    # est 16c*85% = 13.6c, 32Gi*70% = 22.4Gi; used cpu 45.6c of 96 -> (50.4*100)//96 = 52
    # memory 32.4Gi of 512Gi -> (479.6*100)//512 = 93; (52 + 93) // 2 = 72
    h = Harness(usageThresholds={"cpu": 100, "memory": 100}).node(big_node()).metric(usage())
    assert h.score(GUARANTEED_16C_32G, "n") == 72


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # weights cpu 3, memory 1: (3*52 + 93) // 4 = 249 // 4 = 62
        ({"resourceWeights": {"cpu": 3, "memory": 1}}, 62),
        # dominant 1 with default weights: (52 + 93 + 1*min(52, 93)) // 3 = 197 // 3 = 65
        ({"dominantResourceWeight": 1, "resourceWeights": {"cpu": 1, "memory": 1}}, 65),
        # dominant only (weights not defaulted when D != 0): (1*52) // 1 = 52
        ({"dominantResourceWeight": 1}, 52),
    ],
)
def test_weights_and_dominant_resource(args: dict[str, object], expected: int) -> None:
    h = Harness(**args).node(big_node()).metric(usage())
    assert h.score(GUARANTEED_16C_32G, "n") == expected


def test_zero_without_metric_or_when_expired_or_without_status() -> None:
    assert Harness().node(big_node()).score(GUARANTEED_16C_32G, "n") == 0
    # expiry applies to score even when filterExpiredNodeMetrics is false
    h = Harness(filterExpiredNodeMetrics=False).node(big_node()).metric(usage(at=NOW - 1000))
    assert h.score(GUARANTEED_16C_32G, "n") == 0
    h = Harness().node(big_node()).metric(NodeMetricBuilder("n").updated(NOW).build())
    assert h.score(GUARANTEED_16C_32G, "n") == 0


def test_over_capacity_scores_zero_for_that_resource() -> None:
    # cpu used 90c + 13.6c > 96 -> 0; memory 93 -> (0 + 93) // 2 = 46
    h = Harness().node(big_node()).metric(usage(cpu="90"))
    assert h.score(GUARANTEED_16C_32G, "n") == 46


def test_score_according_prod_usage() -> None:
    # prod pod "a" reports 10c; node usage 80c (batch). Prod scoring: used = 10c + 13.6c = 23.6c
    # cpu (72.4*100)//96 = 75; memory: prod pod usage 0 + 22.4Gi -> (489.6*100)//512 = 95; (75+95)//2 = 85
    metric = (
        NodeMetricBuilder("n")
        .updated(NOW - 30)
        .usage(cpu="80", memory="10Gi")
        .pod("default", "a", priority="koord-prod", cpu="10")
        .build()
    )
    a = PodBuilder("a").requests(cpu="10").node("n").scheduled_at(NOW - 3600).build()
    h = Harness(scoreAccordingProdUsage=True).node(big_node()).metric(metric).assigned(a)
    assert h.score(GUARANTEED_16C_32G, "n") == 85
    # the same pod without prod scoring sees 80c: cpu (2.4*100)//96 = 2; (2 + 93) // 2 = 47
    h = Harness().node(big_node()).metric(metric).assigned(a)
    assert h.score(GUARANTEED_16C_32G, "n") == 47


def test_aggregated_scoring() -> None:
    # p95 over 30m = 60c: cpu used 73.6c -> (22.4*100)//96 = 23; memory 5Gi p95 -> 27.4Gi -> 94; (23+94)//2 = 58
    metric = (
        NodeMetricBuilder("n")
        .updated(NOW - 30)
        .usage(cpu="10", memory="10Gi")
        .aggregated("30m", "p95", cpu="60", memory="5Gi")
        .build()
    )
    h = (
        Harness(aggregated={"scoreAggregationType": "p95", "scoreAggregatedDuration": "30m"})
        .node(big_node())
        .metric(metric)
    )
    assert h.score(GUARANTEED_16C_32G, "n") == 58


def test_extender_score_is_integer_divided_by_ten() -> None:
    h = Harness().node(big_node()).metric(usage())
    from koordpy.model.objects import pod_from_dict

    outcome = h.state.score(pod_from_dict(GUARANTEED_16C_32G), ["n"], NOW)
    assert int(outcome.per_plugin["LoadAwareScheduling"][0]) == 72
    assert int(outcome.extender[0]) == 7


def test_several_nodes_in_one_call_each_get_their_own_score() -> None:
    # dominant weight 1, weights 1/1: score = (s_cpu + s_mem + min) // 3, min taken per node
    # a: cpu 45.6c of 96 -> 52, memory 93 -> (52 + 93 + 52) // 3 = 65
    # b: no NodeMetric -> 0 (and a, c are still scored in the same call)
    # c: cpu 10c + 13.6c = 23.6c -> (72.4*100)//96 = 75, memory 93 -> (75 + 93 + 75) // 3 = 81
    # z: memory allocatable 0 scores 0 for memory (no division): cpu 52 -> (52 + 0 + 0) // 3 = 17
    h = Harness(dominantResourceWeight=1, resourceWeights={"cpu": 1, "memory": 1})
    for name in ("a", "b", "c"):
        h.node(NodeBuilder(name).allocatable(cpu="96", memory="512Gi").build())
    h.node(NodeBuilder("z").allocatable(cpu="96", memory="0").build())
    for name, cpu in (("a", "32"), ("c", "10"), ("z", "32")):
        h.metric(NodeMetricBuilder(name).updated(NOW - 30).usage(cpu=cpu, memory="10Gi").build())
    from koordpy.model.objects import pod_from_dict

    outcome = h.state.score(pod_from_dict(GUARANTEED_16C_32G), ["a", "b", "c", "z"], NOW)
    assert outcome.per_plugin["LoadAwareScheduling"].tolist() == [65, 0, 81, 17]
    own = h.plugin.score(pod_from_dict(GUARANTEED_16C_32G), h.state.index.lookup(["a", "b", "c", "z"]), NOW)
    assert own.dtype == np.int64 and own.tolist() == [65, 0, 81, 17]  # integers, as the extender sums them


def test_the_smallest_allocatable_scores_what_is_left() -> None:
    # cpu allocatable 1m, nothing used and a Mid pod estimated at 0: (1 - 0) * 100 // 1 = 100;
    # memory 512Gi, nothing used: 100 -> (100 + 100) // 2 = 100
    mid = PodBuilder("mid").label("koordinator.sh/priority-class", "koord-mid").build()
    h = Harness().node(NodeBuilder("n").allocatable(cpu="1m", memory="512Gi").build())
    h.metric(NodeMetricBuilder("n").updated(NOW - 30).usage(cpu="0", memory="0").build())
    assert h.score(mid, "n") == 100
