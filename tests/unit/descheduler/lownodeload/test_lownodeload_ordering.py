"""Which hot node goes first and in which order its pods are tried.

Translated from Koordinator v1.8.0 (utilization_util_test.go): ``TestSortNodesByUsageDescendingOrder``,
``TestSortNodesByUsageAscendingOrder`` (the scores; koordpy sorts descending only, as the plugin does) and
``TestSortPodsOnOneOverloadedNode``. The piecewise cases below are koordpy's.
"""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.descheduler.lownodeload.ordering import node_scores, pod_order_key, usage_score
from koordpy.descheduler.objects import pod_sort_key
from koordpy.model.priority import KubeQoS, PriorityClass

GIB = 1024**3


def test_node_scores() -> None:
    # Allocatable 32 cores / 32Gi / 110 pods, weights 1 each; score_r = min(used, alloc) x 1000 // alloc:
    # node1: cpu 1730 -> 54, memory 3038982964 -> 88, pods 25 -> 227: (54 + 88 + 227) // 3 = 123
    # node2: 1220 -> 38, 88, 11 -> 100: 226 // 3 = 75
    # node3: 1530 -> 47, 5038982964 -> 146, 20 -> 181: 374 // 3 = 124
    # Descending: node3, node1, node2 (upstream's expected order); ascending the reverse.
    alloc = np.array([[32000, 32 * GIB, 110]] * 3, np.int64)
    usage = np.array([[1730, 3038982964, 25], [1220, 3038982964, 11], [1530, 5038982964, 20]], np.int64)
    scores = node_scores(usage, alloc, np.array([1, 1, 1], np.int64))
    assert list(scores) == [123, 75, 124]
    assert sorted(range(3), key=lambda i: -scores[i]) == [2, 0, 1]


def test_node_scores_cap_and_zero() -> None:
    # used above allocatable counts as allocatable (1000); a resource without allocatable scores 0 but its weight
    # still counts: (1000 x 2 + 0 x 1) // 3 = 666. No weight at all: 0.
    usage = np.array([[5000, 10]], np.int64)
    alloc = np.array([[4000, 0]], np.int64)
    assert list(node_scores(usage, alloc, np.array([2, 1], np.int64))) == [666]
    assert list(node_scores(usage, alloc, np.array([0, 0], np.int64))) == [0]


def key(name: str, score: float | None, klass: PriorityClass = PriorityClass.PROD) -> tuple[object, ...]:
    prefix = pod_sort_key(
        klass=klass,
        priority=None,
        qos=KubeQoS.BURSTABLE,
        koord_qos=None,
        deletion_cost=0,
        eviction_cost=0,
        creation_time=100.0,
    )
    return pod_order_key(prefix, score, name)


def test_pods_on_one_overloaded_node() -> None:
    # Node at 30000m of cpu, high 20000m: excess 10000m (memory under its threshold: weight 0). Scores = usage /
    # excess: pod1 1000 -> 0.1, pod2 3000 -> 0.3, pod3 2000 -> 0.2, pod4 4000 -> 0.4: pod4, pod2, pod3, pod1.
    excess = {0: 10000}
    weights = {0: 1}
    usages = {"pod1": (1000, 27487790694), "pod2": (3000, 27487790694), "pod3": (2000, 1), "pod4": (4000, 1)}
    scores = {name: usage_score(usage, excess, weights) for name, usage in usages.items()}
    assert scores == pytest.approx({"pod1": 0.1, "pod2": 0.3, "pod3": 0.2, "pod4": 0.4})
    assert sorted(usages, key=lambda n: key(n, scores[n])) == ["pod4", "pod2", "pod3", "pod1"]


@pytest.mark.parametrize(
    ("usage", "score"),
    [
        pytest.param(1000, 2.0, id="the size of the excess: 2 (the highest)"),
        pytest.param(1500, 1 / 1.5 + 1, id="1.5 x the excess: 1/1.5 + 1 = 1.667"),
        pytest.param(3000, 1 / 3 + 1, id="3 x the excess: 1.333"),
        pytest.param(500, 0.5, id="half the excess: 0.5"),
        pytest.param(0, 0.0, id="no usage: 0"),
    ],
)
def test_piecewise_score(usage: int, score: float) -> None:
    assert usage_score((usage, 0), {0: 1000}, {0: 1}) == pytest.approx(score)


def test_piecewise_order_and_weights() -> None:
    # Excess 1000m: the pod that alone brings the node back (1000m) first, then the larger ones closest first,
    # then the smaller ones largest first.
    scores = {n: usage_score((u, 0), {0: 1000}, {0: 1}) for n, u in (("a", 500), ("b", 3000), ("c", 1000), ("d", 1500))}
    assert sorted(scores, key=lambda n: key(n, scores[n])) == ["c", "d", "b", "a"]
    # Two over-used resources, weights cpu 2 / memory 1: cpu ratio 0.5, memory ratio 2 (score 1/2 + 1 = 1.5):
    # (0.5 x 2 + 1.5 x 1) / 3 = 0.833.
    assert usage_score((500, 2 * GIB), {0: 1000, 1: GIB}, {0: 2, 1: 1}) == pytest.approx((0.5 * 2 + 1.5) / 3)


def test_sorter_ranks_before_usage_and_unreported_last() -> None:
    # Koordinator's pod sorter decides before the usage score: a Batch pod goes before any Prod pod; among equal
    # ranks, a pod without reported usage goes after every pod with usage; equal otherwise: by name.
    order = sorted(
        [
            ("prod-big", key("prod-big", 2.0)),
            ("batch-small", key("batch-small", 0.01, PriorityClass.BATCH)),
            ("prod-unreported", key("prod-unreported", None)),
            ("prod-b", key("prod-b", 0.5)),
            ("prod-a", key("prod-a", 0.5)),
        ],
        key=lambda item: item[1],
    )
    assert [name for name, _ in order] == ["batch-small", "prod-big", "prod-a", "prod-b", "prod-unreported"]
