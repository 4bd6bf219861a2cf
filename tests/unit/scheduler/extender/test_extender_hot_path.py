"""The fast paths the extender relies on give exactly what the plain definitions give.

* ``NodeIndex.lookup`` on long lists, with churn, junk and NUL in names == a dict lookup per name;
* ``ClusterState.filter``'s grouped bookkeeping == one status per failing node, in any reason mix.
"""

from __future__ import annotations

import random

import pytest

from koordpy.model.objects import node_from_dict, pod_from_dict
from koordpy.scheduler.framework import ClusterState, NodeIndex
from koordpy.scheduler.framework.cluster import REASON_NODE_UNKNOWN
from koordpy_testkit import NodeMetricBuilder, PodBuilder, make_node
from koordpy_testkit.scheduling import NOW, ClusterHarness


def naive(index: NodeIndex, names: list[object]) -> list[int]:
    return [index.get(n) if isinstance(n, str) and index.get(n) is not None else -1 for n in names]  # type: ignore[misc]


def test_long_lookups_match_the_dict_including_unknowns_duplicates_and_churn() -> None:
    rng = random.Random(5)
    index = NodeIndex()
    names = [f"ip-10-{i // 200}-{i % 200}.eu-west-1.compute.internal" for i in range(600)]
    for name in names:
        index.add(name)
    for name in names[::7]:
        index.remove(name)  # free slots, then reuse some of them
    for name in ("new-a", "new-b"):
        index.add(name)
    query: list[object] = [*rng.sample(names, 300), "new-b", "ghost", "", "new-a", names[3], names[3]]
    rng.shuffle(query)
    assert index.lookup(query).tolist() == naive(index, query)  # type: ignore[arg-type]
    query_with_junk = [*query, 5, None, 3.5]
    assert index.lookup(query_with_junk).tolist() == naive(index, query_with_junk)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        index.lookup([*query, ["unhashable"]])  # type: ignore[list-item]


def test_filter_bookkeeping_matches_per_node_statuses() -> None:
    # cpu 32 cores, thresholds cpu 65 / memory 95; usage varies so three groups fail differently:
    # cpu over, memory over, expired metric; the rest pass; plus unknown names.
    h = ClusterHarness(usageThresholds={"cpu": 65, "memory": 95})
    expected: dict[str, str | None] = {}
    for i in range(120):
        name = f"n{i}"
        h.node(make_node(name, cpu="32", memory="100Gi"))
        kind = i % 4
        metric = NodeMetricBuilder(name)
        if kind == 0:
            metric.updated(NOW - 10).usage(cpu="30", memory="10Gi")
            expected[name] = "node(s) cpu usage exceed threshold"
        elif kind == 1:
            metric.updated(NOW - 10).usage(cpu="1", memory="99Gi")
            expected[name] = "node(s) memory usage exceed threshold"
        elif kind == 2:
            metric.updated(NOW - 1000).usage(cpu="1", memory="1Gi")
            expected[name] = "node(s) nodeMetric expired"
        else:
            metric.updated(NOW - 10).usage(cpu="1", memory="1Gi")
            expected[name] = None
        h.metric(metric.build())
    query = [*h.names, "ghost-1", "ghost-2"]
    random.Random(2).shuffle(query)
    outcome = h.state.filter(pod_from_dict(PodBuilder("p").requests(cpu="100m").build()), query, NOW)
    assert outcome.passed == [n for n in query if n.startswith("n") and expected[n] is None]
    assert outcome.passed_indices.tolist() == [h.state.index.get(n) for n in outcome.passed]
    failed = {n: r for n, r in expected.items() if r is not None}
    assert outcome.failed == {**failed, "ghost-1": REASON_NODE_UNKNOWN, "ghost-2": REASON_NODE_UNKNOWN}
    assert {n: s.reason for n, s in outcome.statuses.items()} == outcome.failed
    assert all(s.plugin == "LoadAwareScheduling" for n, s in outcome.statuses.items() if not n.startswith("ghost"))
    assert outcome.unresolvable == {}


def test_state_without_nodes_answers_unknown() -> None:
    state = ClusterState([])
    names = [f"x{i}" for i in range(100)]
    outcome = state.filter(pod_from_dict(PodBuilder("p").build()), names, NOW)
    assert outcome.passed == [] and set(outcome.failed) == set(names)
    state.upsert_node(node_from_dict(make_node("x5")))
    assert state.filter(pod_from_dict(PodBuilder("p").build()), names, NOW).passed == ["x5"]


def test_names_with_nul_use_the_dict_and_stay_exact() -> None:
    index = NodeIndex()
    names = [f"n{i}" for i in range(80)] + ["a\x00b", "a", "b"]
    for name in names:
        index.add(name)
    query = ["a", "b", "a\x00b", *names[:70], "a\x00b\x00a"]
    assert index.lookup(query).tolist() == naive(index, query)  # type: ignore[arg-type]
