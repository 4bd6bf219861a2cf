"""A node's load (its NodeMetric and its pods' estimates) goes once the node, its NodeMetric and its pods are
all gone, in whatever order the watches deliver them; it stays while any of them is left."""

from __future__ import annotations

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
