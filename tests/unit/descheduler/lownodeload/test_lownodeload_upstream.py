"""Koordinator's LowNodeLoad unit cases (v1.8.0, ``pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go``
``TestLowNodeLoad`` and ``TestMaxEvictionTotal``), translated.

Each case keeps upstream's nodes, pods, thresholds and expected count, with the arithmetic worked out above it. What
changes in the translation, for every case:

* upstream's ``BuildTestNode(name, 4000, 3000, pods)`` has 3000 *bytes* of memory; here 3000Mi (and a pod's 300 bytes
  300Mi), so the extender's estimate of a pod without a memory request (200Mi) fits: the ratios are upstream's;
* every NodeMetric is fresh (10 s old): upstream's have no ``updateTime`` and its args no expiration to check;
* upstream builds the args without defaults (one node pool, ``consecutiveAbnormalities: 1``, no resource weights);
  here they are loaded as a user's would be (weights 1 for cpu, memory and the threshold resources), which only
  orders pods upstream leaves in any order;
* a pod moves only where kube-scheduler and the extender would put it and that node stays at or below its high
  thresholds (koordpy's destination check, see ``koordpy.descheduler.lownodeload.destination``); upstream checks some
  idle node. Where that changes the count, the case says why.

Not translated:

* ``with extended resource`` and ``with extended resource in some of nodes``: thresholds on ``example.com/foo``;
  koordpy refuses resources other than cpu, memory and pods at load (its NodeMetric reports no other), see
  ``test_lownodeload_args.py``;
* ``TestLowNodeLoad``'s ``evictedPods`` lists are not checked upstream (only counts); here the moved pods are named
  where the order is upstream's too.

The other upstream files' cases are in ``test_lownodeload_thresholds.py`` (``TestResourceUsagePercentages``,
``TestOverUtilizedEvictionReason``, ``Test_GetNodeRawAllocatableForDescheduler``, ``Test_filterNodes``),
``test_lownodeload_ordering.py`` (``TestSortNodesByUsage*``, ``TestSortPodsOnOneOverloadedNode``),
``test_lownodeload_anomaly.py`` (``Test_resetNodesAsNormal``, ``Test_tryMarkNodesAsNormal``,
``Test_filterRealAbnormalNodes``), ``test_lownodeload_balance.py`` (``TestBalancePodsSkipsWhenNoTargetNodes``,
``TestPodFitsAnyNodeWithThreshold``) and ``tests/unit/config/test_lownodeload_args.py`` (validation and defaults).
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.descheduler.lownodeload import BalanceRound, EvictionLimits
from koordpy_testkit.balance import BalanceCluster

LOCAL = {"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {"sizeLimit": "10"}}
MIRROR = {"kubernetes.io/config.mirror": "mirror"}
WEST_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "datacenter", "operator": "In", "values": ["west"]}]}]
        }
    }
}


def pool(low: dict[str, float], high: dict[str, float], **extra: Any) -> dict[str, Any]:
    """Upstream's args: one node pool, acting in the first hot round."""
    return {
        "nodePools": [
            {"lowThresholds": low, "highThresholds": high, "anomalyCondition": {"consecutiveAbnormalities": 1}, **extra}
        ]
    }


def three_nodes(
    n1_pods: str = "9", others: str = "10", n3: bool = True, n3_unschedulable: bool = True
) -> BalanceCluster:
    cluster = BalanceCluster()
    cluster.node("n1", pods=n1_pods)
    cluster.node("n2", pods=others)
    if n3:
        cluster.node("n3", pods=others, unschedulable=n3_unschedulable)
    return cluster


def unmovable(cluster: BalanceCluster, memory: str | None = None) -> None:
    """Upstream's p6 (DaemonSet), p7 (a mirror pod with local storage) and p8 (system-critical, no owner) on n1."""
    cluster.pod("p6", "n1", memory=memory, owner="DaemonSet")
    cluster.pod("p7", "n1", memory=memory, owner="Pod", annotations=MIRROR, volumes=[LOCAL])
    cluster.pod("p8", "n1", memory=memory, owner=None, namespace="kube-system", priority=2_000_000_000)


def moved(result: BalanceRound) -> list[str]:
    return [move.pod.split("/")[1] for move in result.moves]


def test_no_evictable_pods() -> None:
    # n1: 6 pods x 400m = 2400m of 4000m (60 % > 50 %) and 6 of 9 pods (> int(0.5 x 9) = 4): hot. n2: 400m (10 %),
    # 1 pod: idle. Every pod of n1 is refused by the migrationController filters: 0 moved.
    cluster = three_nodes()
    for name in ("p1", "p2", "p3", "p4"):
        cluster.pod(name, "n1", owner="DaemonSet")
    cluster.pod("p5", "n1", owner="Pod", annotations=MIRROR, volumes=[LOCAL])
    cluster.pod("p6", "n1", owner=None, namespace="kube-system", priority=2_000_000_000)
    cluster.pod("p9", "n2")
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}))
    assert moved(result) == []
    assert {kept.pod: kept.why.split(":")[0] for kept in result.kept} == {
        "default/p1": "migrationController filter DaemonSetPods",
        "default/p2": "migrationController filter DaemonSetPods",
        "default/p3": "migrationController filter DaemonSetPods",
        "default/p4": "migrationController filter DaemonSetPods",
        "default/p5": "migrationController filter MirrorPods",
        "kube-system/p6": "migrationController filter BarePods",
    }


def without_priorities(cluster: BalanceCluster) -> BalanceCluster:
    for name in ("p1", "p2", "p3", "p4", "p5"):
        cluster.pod(name, "n1")
    unmovable(cluster)
    return cluster


def test_without_priorities() -> None:
    # n1: 8 x 400m = 3200m (80 % > 50 %), 8 pods > int(0.5 x 9) = 4: hot. n2: 400m, 1 pod: idle (<= 30 %,
    # <= int(0.3 x 10) = 3); n3 is cordoned: not idle. Capacity (n2): cpu int(0.5 x 4000) - 400 = 1600, pods 5 - 1 = 4.
    # p1: n1 3200 -> 2800, cap 1200/3; p2: 2400, 800/2; p3: 2000 (not > 2000) but 5 pods > 4, cap 400/1;
    # p4: 1600, 4 pods, cap 0/0; then n1 is back under: 4 moved. n2 ends at 2000m (50 %) and 5 pods: not above high.
    cluster = without_priorities(three_nodes())
    cluster.pod("p9", "n2")
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}))
    assert moved(result) == ["p1", "p2", "p3", "p4"]
    assert {move.landing.node for move in result.moves} == {"n2"}
    assert result.stops[0].why == "back at or below its high thresholds"


def test_max_eviction_total() -> None:
    # TestMaxEvictionTotal: the same cluster with maxNoOfPodsToEvictTotal 1: p1 moves, p2..p5 are refused by the
    # limit (the round goes on through the node's pods, as upstream's limiter returns false and the loop continues).
    cluster = without_priorities(three_nodes())
    cluster.pod("p9", "n2")
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}), limits=EvictionLimits(total=1))
    assert moved(result) == ["p1"]
    assert [kept.why for kept in result.kept if kept.pod == "default/p2"] == [
        "maxNoOfPodsToEvictTotal (1) reached this round"
    ]


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    [
        # p1..p5 in namespace1 (bare pods upstream; the namespace refuses them first): 0 moved.
        pytest.param({"exclude": ["namespace1"]}, [], id="excluding namespaces"),
        # p1, p2 in default, p3..p5 elsewhere: only p1 and p2 may move; after them n1 is at 2400m (60 %) and 6 pods,
        # still hot, but nothing else may move: 2 moved.
        pytest.param({"include": ["default"]}, ["p1", "p2"], id="include only default namespace"),
    ],
)
def test_evictable_namespaces(namespaces: dict[str, list[str]], expected: list[str]) -> None:
    cluster = three_nodes()
    if "exclude" in namespaces:
        for name in ("p1", "p2", "p3", "p4", "p5"):
            cluster.pod(name, "n1", namespace="namespace1", owner=None)
    else:
        cluster.pod("p1", "n1")
        cluster.pod("p2", "n1")
        for i, name in enumerate(("p3", "p4", "p5"), start=3):
            cluster.pod(name, "n1", namespace=f"namespace{i}", owner=None)
    unmovable(cluster)
    cluster.pod("p9", "n2")
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}) | {"evictableNamespaces": namespaces})
    assert moved(result) == expected


def test_stop_when_memory_capacity_is_depleted() -> None:
    # Pods 400m/300Mi, p9 on n2 400m/2100Mi of 3000Mi. Memory has no threshold: 100 %, so the capacity is
    # 3000Mi - 2100Mi = 900Mi: after 3 moves (3 x 300Mi) it is 0 and n1 stops (upstream: "only 3 pods can be evicted
    # before memory is depleted"). n2 reaches 2100 + 900 = 3000Mi: not above 100 %.
    cluster = three_nodes()
    for name in ("p1", "p2", "p3", "p4", "p5"):
        cluster.pod(name, "n1", memory="300Mi")
    unmovable(cluster, memory="300Mi")
    cluster.pod("p9", "n2", memory="2100Mi")
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}))
    assert moved(result) == ["p1", "p2", "p3"]
    assert result.stops[0].why == "the idle nodes' capacity is spent (memory)"
    assert result.pools[0].capacity["node"]["memory"] == (900 * 2**20, 0)


def test_with_priorities() -> None:
    # p1..p4 priority 10000, p5 priority 0 (all Prod by their QoS: the priority is outside Koordinator's ranges).
    # The lowest priority goes first: p5, then p1, p2, p3 (by name); the arithmetic of "without priorities": 4 moved.
    cluster = three_nodes()
    for name in ("p1", "p2", "p3", "p4"):
        cluster.pod(name, "n1", priority=10000)
    cluster.pod("p5", "n1", priority=0)
    cluster.pod("p6", "n1", owner="DaemonSet", priority=10000)
    cluster.pod("p7", "n1", owner="Pod", priority=0, annotations=MIRROR, volumes=[LOCAL])
    cluster.pod("p8", "n1", owner=None, namespace="kube-system", priority=2_000_000_000)
    cluster.pod("p9", "n2")
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}))
    assert moved(result) == ["p5", "p1", "p2", "p3"]


def test_evicting_best_effort_pods_only() -> None:
    # p1, p2, p4, p5 BestEffort (Batch), p3 Burstable (Prod). Upstream's usage is the requests: the BestEffort pods use
    # nothing. n1: (p3, p6, p7, p8) 1600m (40 %: not hot on cpu) but 8 pods > 4: hot on pods. Batch pods go first;
    # each move takes one pod off: after p1, p2, p4, p5 n1 has 4 pods (not > 4): 4 moved, the BestEffort ones.
    cluster = three_nodes()
    for name in ("p1", "p2", "p4", "p5"):
        cluster.pod(name, "n1", best_effort=True)
    cluster.pod("p3", "n1")
    unmovable(cluster)
    cluster.pod("p9", "n2")
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}))
    assert moved(result) == ["p1", "p2", "p4", "p5"]


def test_only_other_node_is_unschedulable() -> None:
    # n2 cordoned: no node is idle (a cordoned node never is): nothing moves.
    cluster = three_nodes(n3=False)
    cluster.nodes["n2"]["spec"]["unschedulable"] = True
    without_priorities(cluster)
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}))
    assert moved(result) == []
    assert result.pools[0].outcome == "no idle node to move pods to"


@pytest.mark.parametrize("constraint", ["nodeSelector", "affinity"])
def test_other_node_does_not_match_p4_and_p5(constraint: str) -> None:
    # n2 is datacenter=east; p4 and p5 need west (a node selector, or required node affinity). p1..p3 move
    # (n1 3200 -> 2000m, 8 -> 5 pods: still above int(0.5 x 9) = 4 pods); p4 and p5 have no node kube-scheduler
    # would place them on; the rest are refused by the filters: 3 moved.
    cluster = three_nodes(n3=False)
    cluster.nodes["n2"]["metadata"]["labels"]["datacenter"] = "east"
    for name in ("p1", "p2", "p3"):
        cluster.pod(name, "n1")
    for name in ("p4", "p5"):
        if constraint == "nodeSelector":
            cluster.pod(name, "n1", owner="Pod", node_selector={"datacenter": "west"})
        else:
            cluster.pod(name, "n1", owner="Pod", affinity=WEST_AFFINITY)
    unmovable(cluster)
    if constraint == "affinity":
        cluster.pod("p9", "n2", cpu=None)
    result = cluster.run(pool({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}))
    assert moved(result) == ["p1", "p2", "p3"]
    why = {kept.pod: kept.why for kept in result.kept}
    assert why["default/p4"].startswith("no node the scheduler would place it on")
    assert "NodeAffinity" in why["default/p4"]


def test_deviation_thresholds() -> None:
    # Deviation 5 on cpu and pods around the mean of the three nodes: cpu (80 + 10 + 0) / 3 = 30 %, pods
    # (88.89 + 10 + 0) / 3 = 32.96 %. Low = mean - 5, high = mean + 5: cpu 25 % / 35 %, pods 27.96 % / 37.96 %.
    # n1 (80 %) hot; n2 (10 %, 10 %) idle. Amounts: high cpu int(0.35 x 4000) = 1400, pods int(0.3796 x 10) = 3 on n2.
    # Capacity (n2): cpu 1400 - 400 = 1000, pods 3 - 1 = 2. p1: cap 600/1; p2: cap 200/0; then pods are spent: 2 moved.
    cluster = without_priorities(three_nodes())
    cluster.pod("p9", "n2")
    result = cluster.run(pool({"cpu": 5, "pods": 5}, {"cpu": 5, "pods": 5}, useDeviationThresholds=True))
    assert moved(result) == ["p1", "p2"]
    n1 = result.pools[0].nodes[0]
    assert [round(r.high, 2) for r in n1.resources] == [35.0, 100.0, 37.96]
    assert result.stops[0].why == "the idle nodes' capacity is spent (pods)"


def prod_case(cluster: BalanceCluster, batch: tuple[str, ...]) -> BalanceCluster:
    for name in ("p1", "p2", "p3", "p4", "p5"):
        cluster.pod(name, "n1", labels={"koordinator.sh/priority-class": "koord-batch"} if name in batch else None)
    unmovable(cluster)
    cluster.pod("p9", "n2")
    return cluster


def test_node_under_thresholds_but_prod_over() -> None:
    # High cpu/pods 90 %: n1 (80 %, 8 pods = int(0.9 x 9) = 8, not above) is not hot. Prod pods: p1, p2, p6, p7, p8
    # (Burstable, so Prod; p3..p5 are koord-batch): 5 x 400 = 2000m > int(0.4 x 4000) = 1600, 5 pods > 3: Prod-hot.
    # n2: idle and Prod-idle (bothLow). Prod capacity = min(n2's Prod headroom, n2's node headroom): cpu
    # min(1600 - 400, 3600 - 400) = 1200, pods min(4 - 1, 9 - 1) = 3. p1: n1 Prod 1600m (not > 1600) but 4 pods > 3;
    # p2: 1200m, 3 pods: back under: 2 moved.
    cluster = prod_case(three_nodes(), batch=("p3", "p4", "p5"))
    result = cluster.run(
        pool(
            {"cpu": 30, "pods": 30},
            {"cpu": 90, "pods": 90},
            prodLowThresholds={"cpu": 20, "pods": 20},
            prodHighThresholds={"cpu": 40, "pods": 40},
        )
    )
    assert moved(result) == ["p1", "p2"]
    assert {move.kind for move in result.moves} == {"prod"}
    assert result.moves[0].reason == (
        "node is overutilized, prod cpu usage(50.00%)>threshold(40.00%), prod pods usage(55.56%)>threshold(40.00%)"
    )


def test_node_and_prod_over_only_node_pass() -> None:
    # High cpu 70 / pods 80: n1 (3200 > 2800m) is hot; a hot node is not Prod-hot as well (upstream's classes). Batch
    # pods go first: p4 moves, n1 is at 2800m (not > 2800) and 7 pods (not > int(0.8 x 9) = 7): 1 moved.
    cluster = prod_case(three_nodes(), batch=("p4", "p5"))
    result = cluster.run(
        pool(
            {"cpu": 30, "pods": 30},
            {"cpu": 70, "pods": 80},
            prodLowThresholds={"cpu": 20, "pods": 20},
            prodHighThresholds={"cpu": 40, "pods": 40},
        )
    )
    assert moved(result) == ["p4"]
    assert result.moves[0].kind == "node"


def test_reschedule_prod_pods_only() -> None:
    # Node thresholds 0 / 100: no node is idle nor hot. Prod: n1 3200m (80 % > 50 %) Prod-hot; n2 400m, 1 pod:
    # Prod-idle (prodLow). Prod capacity (n2): cpu 2000 - 400 = 1600, pods 5 - 1 = 4: p1..p4 move (cap 0/0), n1
    # Prod 1600m, 4 pods: back under. n2 ends at 2000m and 5 pods: not above its Prod high: 4 moved.
    cluster = without_priorities(three_nodes())
    cluster.pod("p9", "n2")
    result = cluster.run(
        pool(
            {"cpu": 0, "pods": 0},
            {"cpu": 100, "pods": 100},
            prodLowThresholds={"cpu": 30, "pods": 30},
            prodHighThresholds={"cpu": 50, "pods": 50},
        )
    )
    assert moved(result) == ["p1", "p2", "p3", "p4"]


def test_both_low_used_by_the_hot_node_prod_pass_left_with_little() -> None:
    # All nodes 20 pods. n1: 10 x 400 = 4000m (100 % > 60 %): hot. n2: 400m: idle and Prod-idle (bothLow). n3: 6 x 400 =
    # 2400m (= int(0.6 x 4000): not hot), Prod 2400m > int(0.3 x 4000) = 1200: Prod-hot.
    # Upstream moves 5: p1, p16, p17, p2 to n2 in the node pass (node capacity 2400 - 400 = 2000), then p10 in the Prod
    # pass. That leaves n2 at 2400m of Prod pods, twice its Prod high threshold (1200m): a new Prod hotspot, which the
    # next round's Prod pass would drain again. koordpy checks the pick against both: n2 takes p1 and p16 (Prod
    # 400 + 800 = 1200m, not above 1200m), p17 would make it 1600m (40 % > 30 %): kept, and so are the others.
    # Prod pass: n2's Prod headroom is 1200 - 1200 = 0 after the node pass: the capacity is spent at once: 2 moved.
    cluster = BalanceCluster()
    for name in ("n1", "n2", "n3"):
        cluster.node(name, pods="20")
    for name in ("p1", "p2", "p3", "p4", "p5", "p16", "p17"):
        cluster.pod(name, "n1")
    unmovable(cluster)
    cluster.pod("p9", "n2")
    for name in ("p10", "p11", "p12", "p13", "p14", "p15"):
        cluster.pod(name, "n3")
    result = cluster.run(
        pool(
            {"cpu": 30, "pods": 50},
            {"cpu": 60, "pods": 80},
            prodLowThresholds={"cpu": 20, "pods": 30},
            prodHighThresholds={"cpu": 30, "pods": 50},
        )
    )
    assert moved(result) == ["p1", "p16"]
    p17 = next(kept for kept in result.kept if kept.pod == "default/p17")
    assert p17.why.startswith("no destination that stays cool: the scheduler would place it on n2")
    assert "prod cpu would reach 1600 (40.00%) > its high threshold 30.00%" in p17.why
    assert result.pools[0].capacity["prod"]["cpu"] == (0, 0)
    assert result.stops[-1].why == "the idle nodes' capacity is spent (cpu)"


def test_node_always_appropriate_prod_rebalanced_with_deviation() -> None:
    # Deviation; node thresholds 0 (= the whole node) / 100: every schedulable node is idle, none hot. Prod deviation 10
    # around the Prod means cpu (80 + 10 + 20) / 3 = 36.67 %, pods (40 + 5 + 10) / 3 = 18.33 %: Prod high 46.67 % /
    # 28.33 % (1866m, 5 pods), Prod low 26.67 % / 8.33 % (1066m, 1 pod). n1 (3200m) Prod-hot; n2 (400m, 1 pod)
    # Prod-idle; n3 (800m, 2 pods > 1) node-idle only.
    # Prod capacity = n2's Prod headroom: cpu 1866 - 400 = 1466, pods 5 - 1 = 4.
    # Upstream: 3. Its fit check, run over every candidate before any move, adds each fitting candidate's usage to
    # n2 and never takes it back: p1..p3 take n2 to 1600m, p4 (2000m > 1866m) and p5 do not fit, so only 3 are
    # removable. koordpy checks the scheduler's pick when each pod's turn comes: n2 for p1 and p2 (the least used),
    # n3 for p3 (its 800m beside n2's 400m and two estimated pods), n2 for p4; each stays at or below 1866m and 5 Prod
    # pods. After 3 moves n1 is still Prod-hot (2000m > 1866m) and capacity is left (cpu 1466 - 1200 = 266, 1 pod):
    # p4 moves, n1 is at 1600m and 4 pods: 4 moved, and no node became Prod-hot.
    cluster = BalanceCluster()
    for name in ("n1", "n2", "n3"):
        cluster.node(name, pods="20")
    without_priorities(cluster)
    cluster.pod("p9", "n2")
    cluster.pod("p10", "n3")
    cluster.pod("p11", "n3")
    result = cluster.run(
        pool(
            {"cpu": 0, "pods": 0},
            {"cpu": 100, "pods": 100},
            useDeviationThresholds=True,
            prodLowThresholds={"cpu": 10, "pods": 10},
            prodHighThresholds={"cpu": 10, "pods": 10},
        )
    )
    assert moved(result) == ["p1", "p2", "p3", "p4"]
    assert [move.landing.node for move in result.moves] == ["n2", "n2", "n3", "n2"]
    assert all(load.state != "hot" for move in result.moves for load in move.destination_after)
    assert result.pools[0].capacity["prod"]["cpu"] == (1466, 1466 - 4 * 400)


def test_stop_prod_eviction_when_the_node_recovers() -> None:
    # Prod high 70 %: n1 Prod 3200m > 2800m; n2 Prod-idle. p1 moves: 2800m, not above: 1 moved, the node's Prod
    # anomaly state is reset.
    cluster = BalanceCluster()
    cluster.node("n1", pods="20")
    cluster.node("n2", pods="20")
    without_priorities(cluster)
    cluster.pod("p9", "n2")
    result = cluster.run(
        pool(
            {"cpu": 0, "pods": 0},
            {"cpu": 100, "pods": 100},
            prodLowThresholds={"cpu": 60, "pods": 60},
            prodHighThresholds={"cpu": 70, "pods": 70},
        )
    )
    assert moved(result) == ["p1"]
    assert result.stops[0].why == "back at or below its high thresholds"
    assert ("prod", "n1") not in result.anomalies
