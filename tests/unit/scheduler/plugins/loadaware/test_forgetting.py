"""A node's load (its NodeMetric and its pods' estimates) goes once the node, its NodeMetric and its pods are
all gone, in whatever order the watches deliver them; it stays while any of them is left."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.config import LoadAwareSchedulingArgs, validate
from koordpy.model.objects import node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework import ClusterState
from koordpy.scheduler.plugins.loadaware import LoadAwarePlugin
from koordpy_testkit import FakeClock, NodeMetricBuilder, PodBuilder, make_node

ORDERS = [
    ("pod", "metric", "node"),
    ("node", "pod", "metric"),
    ("metric", "node", "pod"),
    ("node", "metric", "pod"),
]


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_the_load_of_a_node_goes_with_the_last_of_its_objects(order: tuple[str, str, str]) -> None:
    clock = FakeClock()
    plugin = LoadAwarePlugin(validate(LoadAwareSchedulingArgs, {}))
    state = ClusterState([plugin])
    for name in ("n1", "n2"):
        state.upsert_node(node_from_dict(make_node(name)))
        state.upsert_metric(nodemetric_from_dict(NodeMetricBuilder(name).updated(clock.now()).usage(cpu="1").build()))
    pod = pod_from_dict(PodBuilder("a").requests(cpu="1").node("n1").build())
    state.upsert_pod(pod, clock.now())
    assert set(plugin.loads) == {"n1", "n2"}
    gone = {
        "pod": lambda: state.remove_pod(pod.uid),
        "metric": lambda: state.remove_metric("n1"),
        "node": lambda: state.remove_node("n1"),
    }
    for step in order[:-1]:
        gone[step]()
        assert set(plugin.loads) == {"n1", "n2"}, step  # something of n1 is left
    gone[order[-1]]()
    assert set(plugin.loads) == {"n2"}


def test_removing_a_node_the_plugin_never_saw_changes_nothing() -> None:
    plugin = LoadAwarePlugin(validate(LoadAwareSchedulingArgs, {}))
    plugin.on_node_removed(3, "ghost")
    assert plugin.loads == {} and plugin.profiles == {}


def test_a_removed_nodes_index_answers_like_an_unused_one() -> None:
    # n sits at index 0 with a fresh NodeMetric (its thresholds are set), m at index 1 has never had a node
    # with a metric; once n is gone, index 0 must answer what index 1 answers, and nothing of n is kept.
    clock = FakeClock()
    plugin = LoadAwarePlugin(validate(LoadAwareSchedulingArgs, {}))
    state = ClusterState([plugin])
    state.upsert_node(node_from_dict(make_node("n")))
    state.upsert_metric(nodemetric_from_dict(NodeMetricBuilder("n").updated(clock.now()).usage(cpu="1").build()))
    state.upsert_node(node_from_dict(make_node("m")))
    (n, m) = state.index.lookup(["n", "m"]).tolist()
    pod = pod_from_dict(PodBuilder("incoming").build())
    assert plugin.detail(pod, n, clock.now()).has_metric
    state.remove_node("n")
    for index in (n, m):
        detail = plugin.detail(pod, index, clock.now())
        assert (detail.has_metric, detail.node) == (False, "" if index == n else "m")
        verdicts = plugin.filter(pod, np.array([index], np.int64), clock.now())
        assert verdicts.codes.tolist() == [0]
    assert "n" not in plugin.profiles and "n" not in plugin._alloc_of
    assert plugin.expired_metrics(clock.now() + 3600) == 0  # n's metric is kept (its node may come back)
