"""Thresholds as amounts, node classes, pools, and the reason string.

Translated from Koordinator v1.8.0: ``TestResourceUsagePercentages`` (utilization_util_test.go),
``TestOverUtilizedEvictionReason``, ``Test_GetNodeRawAllocatableForDescheduler`` and ``Test_filterNodes``
(low_node_load_test.go). Differences: the reason reads ``cpu usage(...)`` for node usage (upstream: ``node cpu
usage``); a raw-allocatable annotation that cannot be read makes the Node unreadable (upstream falls back to the
amplified allocatable, which makes the node look emptier); an invalid selector is refused when the configuration
loads (``test_lownodeload_args.py``), not when the round runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from koordpy.config.errors import validate
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.descheduler.lownodeload import BalanceState, overutilized_reason
from koordpy.descheduler.lownodeload.thresholds import classify, pool_thresholds, usage_percent
from koordpy.model.objects import ObjectError, node_from_dict
from koordpy_testkit.builders import NodeBuilder

GIB = 1024**3


def args(**fields: Any) -> LowNodeLoadArgs:
    return validate(LowNodeLoadArgs, fields)


def rows(*values: tuple[int, int, int]) -> np.ndarray:
    return np.array(values, np.int64)


def test_usage_percentages() -> None:
    # TestResourceUsagePercentages: allocatable 1930m / 3287692Ki / 29 pods; usage 1220m / 3038982964 B / 11 pods.
    # 1220 / 1930 = 63.2 %, 3038982964 / 3366596608 = 90.3 %, 11 / 29 = 37.9 %: floored 63, 90, 37.
    percent = usage_percent(rows((1220, 3038982964, 11)), rows((1930, 3287692 * 1024, 29)))
    assert [math.floor(p) for p in percent[0]] == [63, 90, 37]
    assert math.isnan(usage_percent(rows((5, 5, 5)), rows((0, 10, 10)))[0, 0])


SHIPPED = {"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80}}
ALLOC = (32000, 128 * GIB, 110)


@pytest.mark.parametrize(
    ("usage", "schedulable", "expected"),
    [
        # low cpu int(0.45 x 32000) = 14400, memory int(0.55 x 128Gi); high 24000 / int(0.8 x 128Gi).
        pytest.param((14400, 70 * GIB, 1), True, "idle", id="at low on cpu, under on memory: idle (<=)"),
        pytest.param((14401, 10 * GIB, 1), True, "normal", id="one millicore above low: normal"),
        pytest.param((24000, 10 * GIB, 1), True, "normal", id="at high: not hot (> only)"),
        pytest.param((24001, 10 * GIB, 1), True, "hot", id="one millicore above high: hot"),
        pytest.param((1000, 103 * GIB, 1), True, "hot", id="memory 80.5 % > 80 %: hot on memory alone"),
        pytest.param((1000, GIB, 1), False, "normal", id="cordoned: never idle"),
    ],
)
def test_node_classes(usage: tuple[int, int, int], schedulable: bool, expected: str) -> None:
    pool = args(**SHIPPED).pools[0]
    alloc, used = rows(ALLOC), rows(usage)
    th = pool_thresholds(pool, alloc, used, used)
    assert th.resources == ("cpu", "memory")
    assert th.low[0, 0] == 14400 and th.high[0, 0] == 24000
    classes = classify(th, used, used, np.array([schedulable]), prod_classes=False)
    state = "hot" if classes.hot[0] else "idle" if classes.idle[0] else "normal"
    assert state == expected
    assert not classes.prod_idle.any() and not classes.prod_hot.any()  # no Prod thresholds: no Prod classes


def test_a_resource_left_out_of_low_is_idle_up_to_its_high() -> None:
    # highThresholds {cpu: 80} alone: cpu low = 80 % too (upstream: low 100 % and high overwritten to 100 %, so never
    # hot on cpu). 25000m of 32000m (78 %) is idle; 25700m (80.3 %) hot.
    pool = args(highThresholds={"cpu": 80}).pools[0]
    alloc = rows(ALLOC, ALLOC)
    used = rows((25000, GIB, 1), (25700, GIB, 1))
    th = pool_thresholds(pool, alloc, used, used)
    assert list(th.low_percent) == [80.0, 100.0] and list(th.high_percent) == [80.0, 100.0]
    classes = classify(th, used, used, np.array([True, True]), prod_classes=False)
    assert list(classes.idle) == [True, False] and list(classes.hot) == [False, True]


def test_deviation_thresholds_around_the_mean() -> None:
    # cpu usage 10 %, 30 %, 80 % (mean 40 %); deviation low 10, high 20: low 30 %, high 60 %. Memory 0 (not given): the
    # whole node. A node without cpu allocatable is left out of the mean (upstream counts it as 0 %, mean 30 %).
    pool = args(useDeviationThresholds=True, lowThresholds={"cpu": 10}, highThresholds={"cpu": 20}).pools[0]
    alloc = rows((10000, GIB, 10), (10000, GIB, 10), (10000, GIB, 10), (0, GIB, 10))
    used = rows((1000, 0, 1), (3000, 0, 1), (8000, 0, 1), (0, 0, 0))
    th = pool_thresholds(pool, alloc, used, used)
    assert list(th.low_percent) == pytest.approx([30.0, 100.0])
    assert list(th.high_percent) == pytest.approx([60.0, 100.0])
    classes = classify(th, used, used, np.ones(4, np.bool_), prod_classes=False)
    assert list(classes.idle[:3]) == [True, True, False]  # 10 % and 30 % <= 30 %
    assert list(classes.hot[:3]) == [False, False, True]  # 80 % > 60 %


def test_deviation_clamped_to_0_and_100() -> None:
    # mean 90 %: high 90 + 20 = 110 -> 100; low 90 - 95 = -5 -> 0.
    pool = args(useDeviationThresholds=True, lowThresholds={"cpu": 95}, highThresholds={"cpu": 20}).pools[0]
    used = rows((9000, 0, 1))
    th = pool_thresholds(pool, rows((10000, GIB, 10)), used, used)
    assert (th.low_percent[0], th.high_percent[0]) == (0.0, 100.0)


def test_prod_classes() -> None:
    # Prod high cpu 40 %: Prod usage 13000m of 32000m (40.6 %) is Prod-hot; 6000m (18.75 %) Prod-idle (<= 20 %).
    pool = args(
        lowThresholds={"cpu": 10},
        highThresholds={"cpu": 90},
        prodLowThresholds={"cpu": 20},
        prodHighThresholds={"cpu": 40},
    ).pools[0]
    alloc = rows(ALLOC, ALLOC)
    used = rows((20000, GIB, 2), (20000, GIB, 2))
    prod = rows((13000, GIB, 1), (6000, GIB, 1))
    th = pool_thresholds(pool, alloc, used, prod)
    classes = classify(th, used, prod, np.array([True, True]), prod_classes=True)
    assert list(classes.prod_sources) == [True, False]
    assert list(classes.prod_low) == [False, True]


RAW = {"node.koordinator.sh/raw-allocatable": '{"cpu":96,"memory":"512Gi"}'}


@pytest.mark.parametrize(
    ("prefix", "usage", "expected"),
    [
        # 64 of 96 cores = 66.67 % > 50 %; 32Gi of 512Gi = 6.25 %.
        pytest.param("", (64000, 32 * GIB), "node is overutilized, cpu usage(66.67%)>threshold(50.00%)", id="cpu"),
        # 400Gi / 512Gi = 78.12 % (78.125 printed with %.2f, round-half-even).
        pytest.param(
            "",
            (64000, 400 * GIB),
            "node is overutilized, cpu usage(66.67%)>threshold(50.00%), memory usage(78.12%)>threshold(50.00%)",
            id="cpu and memory",
        ),
        # Prod usage 45 of 96 cores = 46.88 % > 40 %; 200Gi = 39.06 %.
        pytest.param(
            "prod ", (45000, 200 * GIB), "node is overutilized, prod cpu usage(46.88%)>threshold(40.00%)", id="prod cpu"
        ),
        pytest.param(
            "prod ",
            (45000, 250 * GIB),
            "node is overutilized, prod cpu usage(46.88%)>threshold(40.00%), prod memory usage(48.83%)>threshold(40.00%)",
            id="prod cpu and memory",
        ),
    ],
)
def test_overutilized_reason(prefix: str, usage: tuple[int, int], expected: str) -> None:
    # TestOverUtilizedEvictionReason: the node's allocatable is 96 cores / 512Gi, its raw-allocatable annotation the
    # same; thresholds 50 % (Prod 40 %).
    node = node_from_dict(
        NodeBuilder("test-node").allocatable(cpu="96", memory="512Gi").annotation(*next(iter(RAW.items()))).build()
    )
    high = {"cpu": 50, "memory": 50}
    pool = args(highThresholds=high, prodHighThresholds={"cpu": 40, "memory": 40}).pools[0]
    alloc = rows((96000, node.allocatable["memory"], 0))
    used = rows((*usage, 0))
    th = pool_thresholds(pool, alloc, used, used)
    amounts, percents = (th.prod_high, th.prod_high_percent) if prefix else (th.high, th.high_percent)
    reason = overutilized_reason(
        prefix,
        resources=th.resources,
        usage=list(usage),
        alloc=[96000, 512 * GIB],
        high=[int(v) for v in amounts[0]],
        high_percent=list(percents),
    )
    assert reason == expected


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, (16000, 32 * GIB), id="no annotation: allocatable"),
        pytest.param(
            {"node.koordinator.sh/raw-allocatable": '{"cpu":"8","memory":"16Gi"}'},
            (8000, 16 * GIB),
            id="raw allocatable",
        ),
    ],
)
def test_raw_allocatable(annotations: dict[str, str], expected: tuple[int, int]) -> None:
    # Test_GetNodeRawAllocatableForDescheduler: thresholds are percentages of the raw allocatable when annotated.
    builder = NodeBuilder("test-node").allocatable(
        cpu="16" if not annotations else "32", memory="32Gi" if not annotations else "64Gi"
    )
    for key, value in annotations.items():
        builder.annotation(key, value)
    state = BalanceState(args(**SHIPPED))
    state.upsert_node(node_from_dict(builder.build()))
    row = state.row("test-node")
    assert row is not None
    assert tuple(int(v) for v in state.alloc[row, :2]) == expected


def test_unreadable_raw_allocatable_refuses_the_node() -> None:
    raw = NodeBuilder("test-node").allocatable(cpu="16").annotation("node.koordinator.sh/raw-allocatable", "invalid")
    with pytest.raises(ObjectError, match="raw-allocatable"):
        node_from_dict(raw.build())


@pytest.mark.parametrize(
    ("selector", "in_pool"),
    [
        pytest.param(None, {"test-node-1", "test-node-2"}, id="empty selector"),
        pytest.param({"matchLabels": {"test": "true"}}, {"test-node-2"}, id="matched selector"),
        pytest.param({"matchLabels": {"test": "false"}}, set(), id="unmatched selector"),
    ],
)
def test_pool_membership(selector: dict[str, Any] | None, in_pool: set[str]) -> None:
    # Test_filterNodes: a pool's nodeSelector picks its nodes.
    pool: dict[str, Any] = {"name": "p", "highThresholds": {"cpu": 80}}
    if selector is not None:
        pool["nodeSelector"] = selector
    state = BalanceState(args(nodePools=[pool]))
    state.upsert_node(node_from_dict(NodeBuilder("test-node-1").allocatable(cpu="4").build()))
    state.upsert_node(node_from_dict(NodeBuilder("test-node-2").allocatable(cpu="4").label("test", "true").build()))
    members = {name for name in ("test-node-1", "test-node-2") if state.pool[state.row(name)] == 0}
    assert members == in_pool


def test_named_pools_first_then_the_default_pool() -> None:
    # The default pool (top-level thresholds, its nodeSelector) takes the nodes no named pool selects.
    parsed = args(
        highThresholds={"cpu": 70},
        nodeSelector={"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["system"]}]},
        nodePools=[
            {"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}}, "highThresholds": {"cpu": 90}}
        ],
    )
    assert [(p.name, p.high) for p in parsed.pools] == [
        ("__default_node_pool__", {"cpu": 70.0}),
        ("batch", {"cpu": 90.0}),
    ]
    state = BalanceState(parsed)
    for name, labels in (("a", {}), ("b", {"pool": "batch"}), ("c", {"tier": "system"})):
        builder = NodeBuilder(name).allocatable(cpu="4")
        for key, value in labels.items():
            builder.label(key, value)
        state.upsert_node(node_from_dict(builder.build()))
    assert [int(state.pool[state.row(n)]) for n in ("a", "b", "c")] == [0, 1, -1]
