from __future__ import annotations

import dataclasses

from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo, node_from_dict, pod_from_dict
from koordpy.scheduler.framework import ClusterState, NodeIndex
from koordpy_testkit import PodBuilder, make_node


class Recorder:
    """A plugin that records the events it receives."""

    name = "Recorder"

    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []
        self.capacity = 0

    def on_capacity(self, capacity: int) -> None:
        self.capacity = capacity

    def on_node(self, index: int, node: NodeInfo) -> None:
        self.events.append(("node", node.name, str(index)))

    def on_node_removed(self, index: int, name: str) -> None:
        self.events.append(("node-removed", name, str(index)))

    def on_metric(self, name: str, metric: NodeMetricInfo | None) -> None:
        self.events.append(("metric", name, str(metric is not None)))

    def on_pod_assigned(self, index: int | None, node_name: str, pod: PodInfo, now: float) -> None:
        self.events.append(("assigned", pod.name, node_name, str(now)))

    def on_pod_unassigned(self, index: int | None, node_name: str, pod: PodInfo) -> None:
        self.events.append(("unassigned", pod.name, node_name))


def test_node_index_reuses_slots() -> None:
    index = NodeIndex()
    assert [index.add(n) for n in ("a", "b", "c")] == [0, 1, 2]
    assert index.remove("b") == 1
    assert index.add("d") == 1
    assert index.lookup(["a", "zz", "d"]).tolist() == [0, -1, 1]
    assert index.names() == ["a", "d", "c"]
    assert index.capacity == 3


def test_assignment_lifecycle() -> None:
    recorder = Recorder()
    state = ClusterState([recorder])  # type: ignore[list-item]
    state.upsert_node(node_from_dict(make_node("n1")))
    assert recorder.capacity >= 1
    pending = pod_from_dict(PodBuilder("p").requests(cpu="1").build())
    state.upsert_pod(pending, 10.0)  # not assigned: nothing happens
    assert [e for e in recorder.events if e[0] != "node"] == []
    state.assume(pending, "n1", 20.0)  # our bind
    bound = pod_from_dict(PodBuilder("p").requests(cpu="1").node("n1").build())
    state.upsert_pod(bound, 30.0)  # the watch catches up: re-assigned, keeps first-seen time 20
    finished = dataclasses.replace(bound, phase="Succeeded")
    state.upsert_pod(finished, 40.0)
    assert [e for e in recorder.events if e[0] != "node"] == [
        ("assigned", "p", "n1", "20.0"),
        ("unassigned", "p", "n1"),
        ("assigned", "p", "n1", "20.0"),
        ("unassigned", "p", "n1"),
    ]
    assert state.assigned == {}


def test_scheduled_condition_time_wins_over_first_seen() -> None:
    recorder = Recorder()
    state = ClusterState([recorder])  # type: ignore[list-item]
    pod = pod_from_dict(PodBuilder("p").node("n1").scheduled_at(5.0).build())
    state.upsert_pod(pod, 99.0)
    assert recorder.events == [("assigned", "p", "n1", "5.0")]


def test_identical_update_is_a_no_op_and_delete_unassigns() -> None:
    recorder = Recorder()
    state = ClusterState([recorder])  # type: ignore[list-item]
    pod = pod_from_dict(PodBuilder("p").node("n1").build())
    state.upsert_pod(pod, 1.0)
    state.upsert_pod(pod, 2.0)
    state.remove_pod(pod.uid)
    assert recorder.events == [("assigned", "p", "n1", "1.0"), ("unassigned", "p", "n1")]


def test_node_removal_and_unknown_nodes() -> None:
    recorder = Recorder()
    state = ClusterState([recorder])  # type: ignore[list-item]
    state.upsert_node(node_from_dict(make_node("n1")))
    state.remove_node("n1")
    outcome = state.filter(pod_from_dict(PodBuilder("p").build()), ["n1"], 0.0)
    assert outcome.passed == [] and "n1" in outcome.failed
    assert ("node-removed", "n1", "0") in recorder.events
