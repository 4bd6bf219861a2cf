"""The filter's verdict tables give exactly the verdicts of the rule computed afresh, after every event.

``LoadAwarePlugin.filter`` answers from a table per pod class (estimate, Prod) kept current by a change
log. Each test drives a ``ClusterState`` through events that can change a verdict and, after each one,
compares the table's answer with ``_verdicts`` (the rule itself, no table) for every node, for several
pod classes. A stale table shows as a mismatch naming the event.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import numpy as np
import pytest

from koordpy.config import validate
from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.objects import NodeMetricInfo, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.model.priority import PriorityClass
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.framework.status import Code
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder

NOW = 1_800_000_000.0
ARGS = {"usageThresholds": {"cpu": 65, "memory": 95}, "prodUsageThresholds": {"cpu": 55}}
PODS = [
    pod_from_dict(PodBuilder("small").requests(cpu="500m", memory="1Gi").build()),
    pod_from_dict(PodBuilder("big").requests(cpu="6", memory="8Gi").build()),
    pod_from_dict(PodBuilder("prod").requests(cpu="2", memory="2Gi").priority(9500).build()),
]


def check(state: ClusterState, plugin: LoadAwarePlugin, now: float, event: str) -> None:
    indices = np.array(sorted(state.index.get(name) for name in state.nodes), np.int64)  # type: ignore[type-var]
    for pod in PODS:
        got = plugin.filter(pod, indices, now)
        prod = pod.priority_class is PriorityClass.PROD
        codes, reason_ids, _ = plugin._verdicts(plugin.estimate(pod), prod, indices, now)
        assert got.codes.tolist() == codes.tolist(), f"{pod.name} after {event}"
        assert got.reason_ids.tolist() == reason_ids.tolist(), f"{pod.name} after {event}"


def node(name: str, cpu: int = 32, threshold: int | None = None) -> Any:
    builder = NodeBuilder(name).allocatable(cpu=str(cpu), memory="64Gi", pods="110")
    if threshold is not None:
        builder.annotation("scheduling.koordinator.sh/usage-thresholds", f'{{"usageThresholds":{{"cpu":{threshold}}}}}')
    return node_from_dict(builder.build())


def metric(name: str, cpu: float, age: float, now: float) -> NodeMetricInfo:
    raw = NodeMetricBuilder(name).updated(now - age).report_interval(60).usage(cpu=f"{cpu}", memory="20Gi").build()
    return nodemetric_from_dict(raw)


def assigned(name: str, node_name: str, cpu: str) -> Any:
    raw = PodBuilder(name, "apps").requests(cpu=cpu, memory="1Gi").node(node_name).build()
    raw["metadata"]["uid"] = f"uid-{name}"
    return pod_from_dict(raw)


def fresh_state() -> tuple[ClusterState, LoadAwarePlugin]:
    plugin = LoadAwarePlugin(validate(LoadAwareSchedulingArgs, ARGS))
    return ClusterState([plugin]), plugin


def test_each_kind_of_event_is_seen() -> None:
    state, plugin = fresh_state()
    now = NOW
    for i in range(6):
        state.upsert_node(node(f"n{i}"))
        state.upsert_metric(metric(f"n{i}", cpu=10 + i, age=30, now=now))
    check(state, plugin, now, "the first metrics")
    # n5: (15 + 6 estimate*) / 32 -> over 65 % for the big pod; each step below flips some verdict
    steps: list[tuple[str, Any]] = [
        ("metric raised", lambda: state.upsert_metric(metric("n0", cpu=25, age=30, now=now))),
        ("metric lowered", lambda: state.upsert_metric(metric("n0", cpu=2, age=30, now=now))),
        ("metric unreadable", lambda: state.upsert_metric(NodeMetricInfo.unreadable("n1", "bad quantity"))),
        ("metric deleted", lambda: state.remove_metric("n1")),
        ("pod assigned", lambda: state.upsert_pod(assigned("a", "n2", "12"), now)),
        ("pod assumed", lambda: state.assume(PODS[1], "n3", now)),
        ("pod unassigned", lambda: state.remove_pod("uid-a")),
        ("node threshold annotation", lambda: state.upsert_node(node("n4", threshold=20))),
        ("node allocatable", lambda: state.upsert_node(node("n3", cpu=8))),
        ("node removed", lambda: state.remove_node("n5")),
        ("index reused", lambda: state.upsert_node(node("n6", cpu=4))),
        ("reused index gets a metric", lambda: state.upsert_metric(metric("n6", cpu=3, age=30, now=now))),
        ("node invalid", lambda: state.invalidate_node("n2", "bad allocatable")),
    ]
    for event, apply in steps:
        apply()
        check(state, plugin, now, event)


def test_time_passing_an_expiry_and_the_clock_going_back() -> None:
    state, plugin = fresh_state()
    for i in range(4):
        state.upsert_node(node(f"n{i}"))
        state.upsert_metric(metric(f"n{i}", cpu=30, age=100 + 20 * i, now=NOW))  # expire 180 s after update
    check(state, plugin, NOW, "start")
    for later in (NOW + 50, NOW + 79.999, NOW + 80, NOW + 100, NOW + 1000, NOW, NOW - 500):
        check(state, plugin, later, f"now={later - NOW:+}")


def test_an_explicit_invalidation_is_seen() -> None:
    state, plugin = fresh_state()
    state.upsert_node(node("n0"))
    state.upsert_metric(metric("n0", cpu=10, age=30, now=NOW))
    check(state, plugin, NOW, "start")
    plugin.np_thr[state.index.get("n0")] = 1  # a source the plugin cannot see, e.g. a reservation hook
    plugin.invalidate(state.index.get("n0"))
    check(state, plugin, NOW, "invalidate(n0)")
    plugin.np_thr[state.index.get("n0")] = 99
    plugin.invalidate()
    check(state, plugin, NOW, "invalidate()")


def test_tables_are_kept_between_requests_and_rebuilt_only_when_needed() -> None:
    state, plugin = fresh_state()
    for i in range(200):
        state.upsert_node(node(f"n{i}"))
        state.upsert_metric(metric(f"n{i}", cpu=i % 30, age=30, now=NOW))
    indices = np.arange(200, dtype=np.int64)
    plugin.filter(PODS[0], indices, NOW)
    rebuilt = plugin.tables_rebuilt
    for k in range(20):  # one changed node per request, as binds and metrics arrive: patched, not rebuilt
        state.upsert_metric(metric(f"n{k}", cpu=29, age=30, now=NOW))
        plugin.filter(PODS[0], indices, NOW + k)
    assert plugin.tables_rebuilt == rebuilt
    check(state, plugin, NOW + 20, "twenty patched requests")


@pytest.mark.parametrize("seed", range(12))
def test_random_event_sequences(seed: int) -> None:
    rng = random.Random(seed)
    state, plugin = fresh_state()
    now = NOW
    names = [f"n{i}" for i in range(12)]
    pods: list[str] = []
    for step in range(150):
        kind = rng.randrange(7)
        name = rng.choice(names)
        if kind == 0:
            state.upsert_node(node(name, cpu=rng.choice([4, 16, 32]), threshold=rng.choice([None, 30, 80])))
        elif kind == 1:
            state.remove_node(name)
        elif kind == 2:
            state.upsert_metric(metric(name, cpu=rng.uniform(0, 30), age=rng.uniform(0, 300), now=now))
        elif kind == 3:
            state.remove_metric(name)
        elif kind == 4:
            pod = f"p{step}"
            state.upsert_pod(assigned(pod, name, rng.choice(["500m", "4", "10"])), now)
            pods.append(f"uid-{pod}")
        elif kind == 5 and pods:
            state.remove_pod(pods.pop(rng.randrange(len(pods))))
        else:
            now += rng.choice([-30.0, 1.0, 60.0, 200.0])
        check(state, plugin, now, f"seed {seed} step {step} kind {kind}")


def test_the_cluster_state_hook_reaches_the_plugin() -> None:
    state, plugin = fresh_state()
    for i in range(3):
        state.upsert_node(node(f"n{i}"))
        state.upsert_metric(metric(f"n{i}", cpu=10, age=30, now=NOW))
    check(state, plugin, NOW, "start")
    plugin.np_thr[state.index.get("n1")] = 1  # changed behind the plugin's back, as a reservation hook would
    state.invalidate_verdicts("n1")
    check(state, plugin, NOW, "invalidate_verdicts('n1')")
    plugin.np_thr[: state.index.capacity] = 2
    state.invalidate_verdicts()
    check(state, plugin, NOW, "invalidate_verdicts()")
    state.invalidate_verdicts("not-a-node")  # nothing kept for it: no error


ROWS = ("alloc", "np_base", "np_thr", "prod_base", "prod_thr", "score_np_base", "score_prod_base")
FLAGS = ("has_metric", "metric_invalid", "has_status", "np_aggregated", "prod_enabled", "np_enabled")


def metric_with_pods(name: str, rng: random.Random, now: float, pods: list[str]) -> dict[str, Any]:
    builder = NodeMetricBuilder(name).updated(now - rng.choice([0, 30, 90])).report_interval(60)
    builder.usage(cpu=f"{rng.randint(0, 30)}", memory="20Gi").system_usage(cpu="300m", memory="1Gi")
    for pod in pods:
        if rng.random() < 0.6:
            priority = rng.choice(["koord-prod", "koord-batch"])
            builder.pod("apps", pod, priority=priority, cpu=f"{rng.choice([0, 200, 3000])}m", memory="512Mi")
    return builder.build()


def with_entries_appended(raw: dict[str, Any], rng: random.Random, pods: list[str]) -> dict[str, Any]:
    """The same NodeMetric (updateTime included) with 1-3 podsMetric entries appended: pods of the node
    (reported again with another usage or priority, or for the first time), pods of no node, entries
    without usage."""
    raw = copy.deepcopy(raw)
    entries = raw["status"].setdefault("podsMetric", [])
    for _ in range(rng.randint(1, 3)):
        name = rng.choice([*pods, "elsewhere"]) if pods else "elsewhere"
        usage = {} if rng.random() < 0.2 else {"cpu": f"{rng.choice([0, 200, 3000])}m", "memory": "512Mi"}
        priority = rng.choice(["koord-prod", "koord-batch"])
        entries.append({"namespace": "apps", "name": name, "priority": priority, "podUsage": {"resources": usage}})
    return raw


@pytest.mark.parametrize("seed", range(6))
def test_rows_after_random_events_equal_those_of_a_state_fed_the_end_result(seed: int) -> None:
    # Pod events rewrite only the base rows (_refresh_sums) and a NodeMetric re-accounts only the pods
    # whose inputs changed: after any sequence, every row must equal that of a fresh state fed the final
    # nodes, metrics and assigned pods (at the same assignment times).
    rng = random.Random(seed)
    args = validate(LoadAwareSchedulingArgs, {**ARGS, "prodUsageIncludeSys": True})
    plugin = LoadAwarePlugin(args)
    state = ClusterState([plugin])
    now = NOW
    names = [f"n{i}" for i in range(6)]
    pods: dict[str, Any] = {}
    last: dict[str, dict[str, Any]] = {}  # node -> its last NodeMetric as sent
    for step in range(250):
        kind = rng.randrange(8)
        name = rng.choice(names)
        if kind == 0:
            state.upsert_node(node(name, cpu=rng.choice([4, 16, 32]), threshold=rng.choice([None, 30, 80])))
        elif kind == 1 and rng.random() < 0.3:
            state.remove_node(name)
        elif kind == 2 or (kind == 7 and name in last):
            on_node = [p.name for p in pods.values() if p.node_name == name]
            if kind == 2:
                last[name] = metric_with_pods(name, rng, now, on_node)
            else:  # the last report with entries appended: only those entries are applied
                last[name] = with_entries_appended(last[name], rng, on_node)
            state.upsert_metric(nodemetric_from_dict(last[name]))
        elif kind == 3 and rng.random() < 0.3:
            state.remove_metric(name)
        elif kind == 4:
            raw = PodBuilder(f"p{step}", "apps").requests(cpu=rng.choice(["500m", "4"]), memory="1Gi").node(name)
            if rng.random() < 0.4:
                raw.priority(9500)
            built = raw.build()
            built["metadata"]["uid"] = f"uid-p{step}"
            pod = pod_from_dict(built)
            state.upsert_pod(pod, now)
            pods[pod.uid] = pod
        elif kind == 5 and len(pods) > 2:  # some pods stay to the end
            uid = rng.choice(sorted(pods))
            state.remove_pod(uid)
            del pods[uid]
        else:
            now += rng.choice([1.0, 45.0])
    fresh_plugin = LoadAwarePlugin(args)
    fresh = ClusterState([fresh_plugin])
    for node_info in state.nodes.values():
        fresh.upsert_node(node_info)
    for metric_info in state.metrics.values():
        fresh.upsert_metric(metric_info)
    for uid, pod in state.assigned.items():
        fresh.upsert_pod(pod, state._assigned_at[uid])
    assert len(state.nodes) >= 3 and state.assigned and state.metrics  # not a comparison of empty states
    for name in state.nodes:
        i, j = state.index.get(name), fresh.index.get(name)
        assert i is not None and j is not None
        for flag in FLAGS:
            assert getattr(plugin, flag)[i] == getattr(fresh_plugin, flag)[j], f"{flag} of {name}"
        if not plugin.has_metric[i]:
            continue
        assert plugin.update_time[i] == fresh_plugin.update_time[j], name
        for row in ROWS:
            assert getattr(plugin, row)[i].tolist() == getattr(fresh_plugin, row)[j].tolist(), f"{row} of {name}"


def test_pod_events_after_the_arrays_grew_write_the_new_rows() -> None:
    # Pod events write the base rows through flat views of the matrices; the views are rebuilt when the
    # matrices are (capacity 64 -> 128 here). Stale views would leave the pods of nodes 64..69 unseen in
    # the rows while a fresh state (allocated for all 70 nodes before any pod) sees them.
    state, plugin = fresh_state()
    names = [f"n{i}" for i in range(70)]
    for i, name in enumerate(names[:60]):
        state.upsert_node(node(name))
        state.upsert_metric(metric(name, cpu=4 + i % 5, age=5, now=NOW))
    views = plugin._base_views
    for name in names[60:]:
        state.upsert_node(node(name))
        state.upsert_metric(metric(name, cpu=3, age=5, now=NOW))
    assert plugin._capacity > 64 and plugin._base_views is not views  # the arrays grew
    for i, name in enumerate(names):
        state.upsert_pod(assigned(f"p{i}", name, cpu=f"{1 + i % 3}"), NOW)
    state.remove_pod("uid-p66")  # and a pod taken back after the growth
    fresh_plugin = LoadAwarePlugin(plugin.args)
    fresh = ClusterState([fresh_plugin])
    fresh_plugin.on_capacity(plugin._capacity)
    for node_info in state.nodes.values():
        fresh.upsert_node(node_info)
    for metric_info in state.metrics.values():
        fresh.upsert_metric(metric_info)
    for pod in state.assigned.values():
        fresh.upsert_pod(pod, NOW)
    for name in names:
        i, j = state.index.get(name), fresh.index.get(name)
        assert i is not None and j is not None
        for row in ROWS:
            assert getattr(plugin, row)[i].tolist() == getattr(fresh_plugin, row)[j].tolist(), f"{row} of {name}"
    # p65 requests 1 + 65 % 3 = 3 cpu, estimated at the default 85%: 2550m on top of n65's 3 cpu of usage;
    # p66's share is taken back from n66
    assert plugin.np_base[state.index.get("n65")][0] == 3000 + 2550
    assert plugin.np_base[state.index.get("n66")][0] == 3000
    check(state, plugin, NOW, "pods after the arrays grew")


def test_a_node_whose_profile_changes_reads_the_new_usage_after_pod_events() -> None:
    # The usage a node's base reads (nodeUsage, or the p95 its profile names) is kept by node index for
    # pod events; a Node update that adds or drops the aggregated profile must change it. nodeUsage is
    # 4 cpu, p95 is 9 cpu; one pod of 2 cpu (estimated 1700m) lands after each change.
    aggregated = {"aggregatedUsage": {"usageThresholds": {"cpu": 70}, "usageAggregationType": "p95"}}
    plain = NodeBuilder("n").allocatable(cpu="32", memory="64Gi", pods="110")
    with_p95 = copy.deepcopy(plain).annotation("scheduling.koordinator.sh/usage-thresholds", json.dumps(aggregated))
    raw_metric = (
        NodeMetricBuilder("n")
        .updated(NOW - 5)
        .report_interval(60)
        .usage(cpu="4", memory="20Gi")
        .aggregated("5m", "p95", cpu="9", memory="20Gi")
        .build()
    )
    state, plugin = fresh_state()
    state.upsert_node(node_from_dict(plain.build()))
    state.upsert_metric(nodemetric_from_dict(raw_metric))
    expected_usage = []
    for step, builder in enumerate([with_p95, plain, with_p95]):
        state.upsert_node(node_from_dict(builder.build()))
        state.upsert_pod(assigned(f"p{step}", "n", cpu="2"), NOW)
        expected_usage.append(9000 if builder is with_p95 else 4000)
        index = state.index.get("n")
        assert index is not None
        # usage + the estimates of the pods so far (1700m each; all assigned within the report interval)
        assert plugin.np_base[index][0] == expected_usage[-1] + 1700 * (step + 1), f"after step {step}"
        check(state, plugin, NOW, f"node update {step} and a pod")


def test_an_index_reused_by_another_node_takes_that_nodes_pods() -> None:
    # Pod events find a node's NodeLoad by index; a removed node's index goes to the next new node, whose
    # pods must land on its own NodeLoad (not on the removed node's, still kept by name).
    state, plugin = fresh_state()
    for name in ("a", "b"):
        state.upsert_node(node(name))
        state.upsert_metric(metric(name, cpu=2, age=5, now=NOW))
    state.upsert_pod(assigned("on-a", "a", cpu="4"), NOW)
    index_a = state.index.get("a")
    state.remove_node("a")
    state.upsert_node(node("c"))
    state.upsert_metric(metric("c", cpu=1, age=5, now=NOW))
    assert state.index.get("c") == index_a  # the index was reused
    state.upsert_pod(assigned("on-c", "c", cpu="2"), NOW)
    assert set(plugin.loads["c"].pods) == {"uid-on-c"} and set(plugin.loads["a"].pods) == {"uid-on-a"}
    # c: 1 cpu of usage + 2 cpu estimated at 85% = 2700m (a's 4 cpu pod is not on it)
    assert plugin.np_base[index_a][0] == 1000 + 1700
    check(state, plugin, NOW, "a pod on a reused index")


@pytest.mark.parametrize(
    ("changes", "rebuilt"),
    [
        # capacity 64: a table may fall 64 // 4 = 16 changes behind and is patched; 17 and it is rebuilt whole
        (1, 0),
        (16, 0),
        (17, 1),
    ],
)
def test_a_table_far_behind_is_rebuilt_whole(changes: int, rebuilt: int) -> None:
    state, plugin = fresh_state()
    state.upsert_node(node("n0"))
    state.upsert_metric(metric("n0", cpu=10, age=30, now=NOW))
    index = np.array([state.index.get("n0")], np.int64)
    plugin.filter(PODS[0], index, NOW)
    plugin.filter(PODS[1], index, NOW)
    assert (plugin._capacity, plugin.tables_rebuilt) == (64, 2)  # one table per pod class
    for _ in range(changes):
        plugin.invalidate(int(index[0]))
    plugin.filter(PODS[0], index, NOW)
    assert plugin.tables_rebuilt == 2 + rebuilt
    check(state, plugin, NOW, f"{changes} changes")


def test_a_table_kept_across_a_shortened_change_log_is_patched_with_the_right_changes() -> None:
    # The change log keeps 4096 entries; the 4097th drops the older half (2048) and the log goes on from there.
    # At capacity 16384 a table may fall 4096 changes behind. Table x is built after 2047 changes, y after 2048:
    # after 4096 changes x is still patched (nothing dropped yet); after the 4097th y, current from the log's new
    # start, is patched from there, and the last change (n0's metric raised: 28c + 0.25c of 32 -> 88 % > 65)
    # shows. Pods of two classes, neither Prod (the usage thresholds apply): x BestEffort (250m), y Batch (85m).
    x = pod_from_dict(PodBuilder("x").build())
    y = pod_from_dict(PodBuilder("y").priority(5500).resource("requests", "kubernetes.io/batch-cpu", "100").build())
    state, plugin = fresh_state()
    plugin.on_capacity(16384)
    state.upsert_node(node("n0"))
    state.upsert_metric(metric("n0", cpu=10, age=30, now=NOW))
    index = np.array([state.index.get("n0")], np.int64)

    def log_up_to(head: int) -> None:  # each invalidation logs one change (a bounded loop: no hang if not)
        for _ in range(head - (plugin._changes_base + len(plugin._changes))):
            plugin.invalidate(int(index[0]))
        assert plugin._changes_base + len(plugin._changes) == head

    log_up_to(2047)
    assert plugin.filter(x, index, NOW).codes.tolist() == [0]
    log_up_to(2048)
    assert plugin.filter(y, index, NOW).codes.tolist() == [0]
    rebuilt = plugin.tables_rebuilt
    log_up_to(4096)
    assert (plugin._changes_base, plugin.filter(x, index, NOW).codes.tolist()) == (0, [0])
    log_up_to(4097)
    assert (plugin._changes_base, len(plugin._changes)) == (2048, 2049)
    state.upsert_metric(metric("n0", cpu=28, age=30, now=NOW))
    assert plugin.filter(y, index, NOW).codes.tolist() != [0]
    assert plugin.tables_rebuilt == rebuilt  # x and y patched, never rebuilt
    log_up_to(2048 + 4097)  # the log is full again: the next older half goes
    assert (plugin._changes_base, len(plugin._changes)) == (4096, 2049)


def _classes(count: int) -> list[Any]:
    """``count`` BestEffort pods of distinct classes (another estimate each: 100m, 200m, ... of cpu limit)."""
    return [pod_from_dict(PodBuilder(f"c{k}").limits(cpu=f"{100 * (k + 1)}m").build()) for k in range(count)]


def test_the_last_eight_pod_classes_keep_their_tables() -> None:
    # VERDICT_TABLES = 8: eight classes asked in turn are each built once and then served from their table;
    # a ninth drops the least recently used (the first), which is built again when asked, while the ninth,
    # just built, is kept
    state, plugin = fresh_state()
    state.upsert_node(node("n0"))
    state.upsert_metric(metric("n0", cpu=10, age=30, now=NOW))
    index = np.array([state.index.get("n0")], np.int64)
    classes = _classes(9)
    for pod in classes[:8] * 2:
        assert plugin.filter(pod, index, NOW).codes.dtype == np.int8
    assert plugin.tables_rebuilt == 8
    plugin.filter(classes[8], index, NOW)
    plugin.filter(classes[8], index, NOW)
    assert plugin.tables_rebuilt == 9
    plugin.filter(classes[0], index, NOW)
    assert plugin.tables_rebuilt == 10


def test_a_removed_metric_neither_expires_a_table_nor_is_checked() -> None:
    # n0 reported 30 s ago, n1 170 s ago, both 31 cores (31.25 of 32 -> 98 % > 65: fail); then n1's metric
    # goes before any request and n1 passes without a metric (its old rows are not checked). 20 s later n1's old report would be 190 s old (>= 180 s: expired), but it is
    # gone: the table stays current (n0's report is 50 s old) and is not rebuilt.
    state, plugin = fresh_state()
    for name, age in (("n0", 30), ("n1", 170)):
        state.upsert_node(node(name))
        state.upsert_metric(metric(name, cpu=31, age=age, now=NOW))
    best_effort = pod_from_dict(PodBuilder("be").build())
    indices = np.array([state.index.get("n0"), state.index.get("n1")], np.int64)
    state.remove_metric("n1")
    assert plugin.filter(best_effort, indices, NOW).codes.tolist() == [Code.UNSCHEDULABLE, 0]
    rebuilt = plugin.tables_rebuilt
    assert plugin.filter(best_effort, indices, NOW + 20).codes.tolist() == [Code.UNSCHEDULABLE, 0]
    assert plugin.tables_rebuilt == rebuilt


def test_the_same_capacity_again_keeps_the_tables() -> None:
    state, plugin = fresh_state()
    state.upsert_node(node("n0"))
    index = np.array([state.index.get("n0")], np.int64)
    plugin.filter(PODS[0], index, NOW)
    plugin.on_capacity(plugin._capacity)  # not a growth: nothing is reallocated, no table is dropped
    plugin.on_capacity(plugin._capacity - 1)
    plugin.filter(PODS[0], index, NOW)
    assert plugin.tables_rebuilt == 1
