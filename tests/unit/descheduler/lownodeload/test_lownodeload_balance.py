"""One balance round: what koordpy decides beyond (or differently from) upstream's cases.

Also translated from Koordinator v1.8.0 (utilization_util_test.go): ``TestBalancePodsSkipsWhenNoTargetNodes``
(no idle node: no pod is even tried) and ``TestPodFitsAnyNodeWithThreshold`` (a node the pod fits by affinity
but that would exceed its threshold: the pod stays).
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.descheduler.lownodeload import AnomalyState, EvictionLimits, RecentMove, plan_round, prune
from koordpy_testkit.balance import NOW, BalanceCluster, hot_for

ONCE = {"anomalyCondition": {"consecutiveAbnormalities": 1}}
CPU = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50}, **ONCE}


def hot_and_idle(**hot_node: Any) -> BalanceCluster:
    """n1 (4 cores): 4 x 600m = 2400m (60 % > 50 %): hot. n2: 400m (10 %): idle."""
    cluster = BalanceCluster()
    cluster.node("n1", **hot_node)
    cluster.node("n2")
    for name in ("a", "b", "c", "d"):
        cluster.pod(name, "n1", cpu="600m")
    cluster.pod("z", "n2")
    return cluster


def test_moves_and_the_reason() -> None:
    # Capacity (n2): int(0.5 x 4000) - 400 = 1600m. a alone takes n1 from 2400m to 1800m (<= 2000m): 1 moved,
    # capacity 1600 - 600 = 1000m left.
    result = hot_and_idle().run(CPU)
    assert [(m.pod, m.node, m.landing.node, m.reason) for m in result.moves] == [
        ("default/a", "n1", "n2", "node is overutilized, cpu usage(60.00%)>threshold(50.00%)")
    ]
    assert result.pools[0].capacity["node"]["cpu"] == (1600, 1000)
    n1, n2 = result.pools[0].nodes
    assert (n1.state, n1.acted, n2.state) == ("hot", True, "idle")


def test_stale_metric_is_neither_hot_nor_idle() -> None:
    # n1's NodeMetric is 181 s old (expiration 180 s): stale, never hot, even at 60 %; n3's is 100 s old and shows
    # 10 %: idle. A stale node is no destination's capacity either.
    cluster = hot_and_idle(age=181.0)
    cluster.node("n3", age=None)
    result = cluster.run(CPU)
    states = {node.name: node.state for node in result.pools[0].nodes}
    assert states == {"n1": "stale", "n2": "idle", "n3": "unknown"}
    assert result.moves == () and result.pools[0].outcome == "no hot node"
    # ... and a stale idle-looking node is no idle node: with n2 stale too there is nothing to move to.
    cluster = hot_and_idle()
    cluster.age["n2"] = 500.0
    result = cluster.run(CPU)
    assert result.pools[0].outcome == "no idle node to move pods to"
    assert result.kept == ()  # TestBalancePodsSkipsWhenNoTargetNodes: no pod was even tried


def test_not_hot_long_enough() -> None:
    # consecutiveAbnormalities 5 (default): the first hot round only counts; the state goes to the next round.
    cluster = hot_and_idle()
    args = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50}}
    result = cluster.run(args)
    assert result.pools[0].outcome == "no node hot long enough (anomalyCondition)"
    assert result.anomalies[("node", "n1")].abnormal == 1
    # Five hot rounds before: this one (the sixth) acts.
    result = cluster.run(args, anomalies=hot_for(["n1"], 5))
    assert [m.pod for m in result.moves] == ["default/a"]


def test_number_of_nodes() -> None:
    # One idle node (n2), numberOfNodes 1: not more idle nodes than that: nothing.
    result = hot_and_idle().run({**CPU, "numberOfNodes": 1})
    assert result.pools[0].outcome == "1 idle node(s), not more than numberOfNodes (1)"
    assert result.moves == ()


def test_paused_keeps_the_state_and_decides_nothing() -> None:
    anomalies = hot_for(["n1"], 3)
    result = hot_and_idle().run({**CPU, "paused": True}, anomalies=anomalies)
    assert (result.paused, result.pools, result.moves) == (True, (), ())
    assert result.anomalies == anomalies


def test_dry_run_decides_the_same() -> None:
    wet, dry = hot_and_idle().run(CPU), hot_and_idle().run({**CPU, "dryRun": True})
    assert (wet.dry_run, dry.dry_run) == (False, True)
    assert [m.as_json() for m in wet.moves] == [m.as_json() for m in dry.moves]


def test_destination_that_would_exceed_its_threshold() -> None:
    # TestPodFitsAnyNodeWithThreshold: the only node the pod may go to (affinity) is at 1000m of 4000m; high 50 %
    # (2000m); the pod uses 1500m: 2500m > 2000m. Upstream: does not fit; koordpy: the pod stays, and why.
    cluster = BalanceCluster()
    cluster.node("n1")
    cluster.node("n2", labels={"test-node-type": "test-node-type-A"})
    cluster.node("n3")
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "test-node-type", "operator": "In", "values": ["test-node-type-A"]}]}
                ]
            }
        }
    }
    cluster.pod("test-pod-1", "n1", cpu="1500m", affinity=affinity)
    cluster.pod("other", "n1", cpu="1000m", priority=100)  # a higher priority: tried after test-pod-1
    cluster.pod("w", "n2", cpu="1000m")
    result = cluster.run({"lowThresholds": {"cpu": 25}, "highThresholds": {"cpu": 50}, **ONCE})
    kept = {k.pod: k.why for k in result.kept}
    assert kept["default/test-pod-1"].startswith(
        "no destination that stays cool: the scheduler would place it on n2 (extender score"
    )
    assert "cpu would reach 2500 (62.50%) > its high threshold 50.00%" in kept["default/test-pod-1"]
    # the other pod may go anywhere: the extender prefers the empty n3
    assert [(m.pod, m.landing.node) for m in result.moves] == [("default/other", "n3")]


def test_node_fit_false_moves_without_the_check() -> None:
    # The same pod with nodeFit: false: moved, its destination reported unchecked.
    cluster = hot_and_idle()
    cluster.pod("big", "n1", cpu="1900m", usage=(1900, 0))
    # n1: 4 x 600 + 1900 = 4300m; the big pod alone takes it under 2000m but would take n2 to 2300m > 2000m.
    checked = cluster.run(CPU)
    assert "default/big" in {k.pod for k in checked.kept}
    unchecked = cluster.run({**CPU, "nodeFit": False})
    big = next(m for m in unchecked.moves if m.pod == "default/big")
    assert (big.checked, big.landing.node) == (False, "n2")
    assert [load.state for load in big.destination_after if load.resource == "cpu"] == ["hot"]


def test_the_extender_refuses_every_node() -> None:
    # The extender's usageThresholds cpu 10 %: n2 (400m + the pod's estimate 510m of 4000m = 23 %) fails its filter.
    result = hot_and_idle().run(CPU, scheduler={"loadAware": {"usageThresholds": {"cpu": 10}}})
    why = {k.pod: k.why for k in result.kept}["default/a"]
    assert why == "no node the scheduler would place it on (1 node(s) cpu usage exceed threshold)"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param({"reported": False}, "its usage is not in NodeMetric n1", id="usage not reported"),
        pytest.param(
            {"scheduler": "default-scheduler"},
            "schedulerName default-scheduler is not in migrationController.schedulerNames (koordpy-scheduler): "
            "a ReservationFirst migration needs it",
            id="another scheduler",
        ),
        pytest.param({"owner": None}, "migrationController filter BarePods", id="bare pod"),
        pytest.param({"namespace": "kube-system"}, "namespace kube-system is in lowNodeLoad", id="excluded namespace"),
        pytest.param({"labels": {"app": "db"}}, "no lowNodeLoad.podSelectors entry matches", id="pod selector"),
    ],
)
def test_pods_that_stay(change: dict[str, Any], why: str) -> None:
    cluster = BalanceCluster()
    cluster.node("n1")
    cluster.node("n2")
    cluster.pod("x", "n1", cpu="1000m", **({"labels": {"app": "web"}} | change))
    cluster.pod("sys", "n1", cpu="2400m", namespace="kube-system")  # keeps n1 hot (>= 60 %), never moves
    args = {
        **CPU,
        "evictableNamespaces": {"exclude": ["kube-system"]},
        "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
    }
    result = cluster.run(args)
    assert result.moves == ()
    assert {k.pod: k.why for k in result.kept}[f"{change.get('namespace', 'default')}/x"].startswith(why)


def test_a_pod_already_migrating_stays() -> None:
    result = hot_and_idle().run(CPU, migrating=["default/a"])
    assert [m.pod for m in result.moves] == ["default/b"]
    assert {k.pod: k.why for k in result.kept}["default/a"].startswith("it is already moving")


def test_per_node_and_per_namespace_limits() -> None:
    # n1: 4 x 900m = 3600m (90 %); two idle nodes, capacity 2 x 2000m = 4000m. a and b take n1 to 1800m (<= 2000m):
    # 2 moved without limits, 1 with at most one per node or per namespace, none with a total of 0.
    cluster = BalanceCluster()
    cluster.node("n1")
    cluster.node("n2")
    cluster.node("n3")
    for name in ("a", "b", "c", "d"):
        cluster.pod(name, "n1", cpu="900m")
    assert len(cluster.run(CPU).moves) == 2
    assert len(cluster.run(CPU, limits=EvictionLimits(per_node=1)).moves) == 1
    assert len(cluster.run(CPU, limits=EvictionLimits(per_namespace=1)).moves) == 1
    assert cluster.run(CPU, limits=EvictionLimits(total=0)).moves == ()


def test_unpooled_nodes() -> None:
    # A pool of the nodes labelled pool=a only: n2 is in no pool; it is reported, never hot nor idle, and a
    # destination there has no thresholds to exceed.
    cluster = hot_and_idle()
    cluster.nodes["n1"]["metadata"]["labels"]["pool"] = "a"
    cluster.node("n3", labels={"pool": "a"})
    cluster.pod("y", "n3", cpu="1600m")  # n3 40 %: normal, not idle
    args = {"nodePools": [{"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, **CPU}]}
    result = cluster.run(args)
    assert result.unpooled == ("n2",)
    assert result.pools[0].outcome == "no idle node to move pods to"


def ledger_cluster() -> BalanceCluster:
    """n1 (4 cores) 3 x 1000m = 3000m (75 % > 50 %), n2 empty: idle."""
    cluster = BalanceCluster()
    cluster.node("n1")
    cluster.node("n2")
    for name in ("a", "b", "c"):
        cluster.pod(name, "n1", cpu="1000m")
    return cluster


def test_ledger_counts_a_move_until_the_node_metric_shows_it() -> None:
    cluster = ledger_cluster()
    first = cluster.run(CPU)
    # a moves (n1 3000 -> 2000m, not above 2000m).
    assert [m.pod for m in first.moves] == ["default/a"]
    ledger = [move.recent(NOW) for move in first.moves]
    # 10 s later, same NodeMetrics (updated before the move): with the ledger, n1 is at 2000m: not hot, no move.
    cluster.now = NOW + 10
    cluster.age = {"n1": 20.0, "n2": 20.0}
    second = cluster.run(CPU, ledger=ledger)
    assert second.moves == ()
    states = {n.name: n for n in second.pools[0].nodes}
    assert states["n1"].state == "normal" and states["n1"].resources[0].usage == 2000
    assert states["n2"].resources[0].usage == 1000  # the moved pod counts on its destination
    # Without the ledger (upstream): n1 still looks hot and b would be moved as well.
    assert [m.pod for m in cluster.run(CPU).moves] == ["default/a"]  # a has no job known: picked again
    assert [m.pod for m in cluster.run(CPU, migrating=["default/a"]).moves] == ["default/b"]


def test_ledger_stops_counting_with_a_newer_node_metric() -> None:
    cluster = ledger_cluster()
    move = RecentMove("default/a", "n1", "n2", NOW - 30, 1000, 0, prod=True)
    # NodeMetrics 10 s old: newer than the move 30 s ago; the pod is still listed on n1 (not yet evicted): still
    # taken off n1. On n2 the newer NodeMetric counts as it is.
    result = cluster.run(CPU, ledger=[move])
    nodes = {n.name: n for n in result.pools[0].nodes}
    assert nodes["n1"].resources[0].usage == 2000
    assert nodes["n2"].resources[0].usage == 0
    # Once the pod has left n1 (gone from the pods and the NodeMetric), the newer NodeMetric is the truth.
    cluster.pods = [pod for pod in cluster.pods if pod["metadata"]["name"] != "a"]
    cluster.usage.pop("default/a")
    result = cluster.run(CPU, ledger=[move])
    assert {n.name: n.resources[0].usage for n in result.pools[0].nodes} == {"n1": 2000, "n2": 0}
    assert prune([move], {"n1": NOW - 10, "n2": NOW - 10}, set(), NOW, 600) == []
    assert prune([move], {"n1": NOW - 40, "n2": NOW - 10}, set(), NOW, 600) == [move]  # n1's is older: counts
    assert prune([move], {"n1": NOW - 10, "n2": NOW - 10}, {("n1", "default/a")}, NOW, 600) == [move]
    assert prune([move], {"n1": NOW - 40}, set(), NOW, 20) == []  # older than the horizon


def test_the_round_takes_its_additions_back() -> None:
    # The extender's view after a round is the one before: the moves were added for the round only.
    cluster = hot_and_idle()
    from koordpy.config.errors import validate
    from koordpy.config.lownodeload import LowNodeLoadArgs
    from koordpy.config.migration import MigrationControllerArgs

    args = validate(LowNodeLoadArgs, CPU)
    state, view = cluster.views(args)
    before = dict(view.assigned)
    result = plan_round(
        state, view, args, validate(MigrationControllerArgs, {"schedulerNames": ["koordpy-scheduler"]}), now=NOW
    )
    assert result.moves
    assert view.assigned == before


def test_anomaly_states_of_gone_or_unobserved_nodes_are_dropped() -> None:
    # A state for a node the cluster no longer has, and one not observed for longer than detectorCacheTimeout (a
    # stale node keeps its state only that long), are not handed to the next round.
    cluster = hot_and_idle()
    cluster.age["n2"] = 500.0  # stale: not observed this round
    states = hot_for(["n1", "gone"], 2) | {("node", "n2"): AnomalyState(None, 2, 0, NOW - 400)}
    result = cluster.run({**CPU, "detectorCacheTimeout": "5m"}, anomalies=states)
    assert set(result.anomalies) == {("node", "n1")}
