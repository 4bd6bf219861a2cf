"""The watch-event -> ClusterState conversion, without HTTP, with an injected clock."""

from __future__ import annotations

import io
import json
import logging

import structlog

from koordpy.config import LoadAwareSchedulingArgs, validate
from koordpy.model.objects import pod_from_dict as pod_info
from koordpy.runtime.logging import configure_logging, get_logger
from koordpy.scheduler.extender.cache import ClusterCache
from koordpy.scheduler.framework import ClusterState
from koordpy.scheduler.plugins.loadaware import LoadAwarePlugin
from koordpy_testkit import FakeClock, NodeMetricBuilder, PodBuilder, make_node


def new_cache() -> tuple[ClusterCache, FakeClock, LoadAwarePlugin]:
    plugin = LoadAwarePlugin(validate(LoadAwareSchedulingArgs, {}))
    clock = FakeClock()
    return ClusterCache(ClusterState([plugin]), clock), clock, plugin


def test_node_metric_and_pod_events_reach_the_state() -> None:
    cache, clock, _plugin = new_cache()
    cache.handler("nodes")("ADDED", make_node("n1"))
    cache.handler("nodemetrics")("ADDED", NodeMetricBuilder("n1").updated(clock.now()).usage(cpu="1").build())
    cache.handler("pods")("ADDED", PodBuilder("a").requests(cpu="1").node("n1").build())
    assert list(cache.state.nodes) == ["n1"]
    assert list(cache.state.metrics) == ["n1"]
    assert [p.name for p in cache.state.assigned.values()] == ["a"]
    assert cache.sizes() == {"nodes": 1, "assigned_pods": 1, "pending_pods": 0, "nodemetrics": 1}
    cache.handler("nodemetrics")("DELETED", NodeMetricBuilder("n1").build())
    cache.handler("nodes")("DELETED", make_node("n1"))
    assert cache.sizes()["nodes"] == 0 and cache.sizes()["nodemetrics"] == 0
    assert cache.events["nodes", "ADDED"] == 1 and cache.events["nodes", "DELETED"] == 1


def test_assignment_time_comes_from_the_injected_clock() -> None:
    cache, clock, plugin = new_cache()
    cache.handler("nodes")("ADDED", make_node("n1"))
    clock.set(1000.0)
    cache.handler("pods")("ADDED", PodBuilder("a").node("n1").build())
    (assigned,) = plugin.loads["n1"].pods.values()
    assert assigned.timestamp == 1000.0


def test_pending_pods_are_tracked_until_assigned_or_deleted() -> None:
    cache, _clock, _ = new_cache()
    pending = PodBuilder("a").requests(cpu="1").build()
    uid = pending["metadata"]["uid"]
    cache.handler("pods")("ADDED", pending)
    assert list(cache.pending) == [uid] and cache.state.assigned == {}
    cache.handler("pods")("MODIFIED", PodBuilder("a").requests(cpu="1").node("n1").build())
    assert cache.pending == {} and uid in cache.state.assigned
    cache.handler("pods")("DELETED", PodBuilder("a").requests(cpu="1").node("n1").build())
    assert cache.state.assigned == {}
    cache.handler("pods")("ADDED", PodBuilder("b").build())
    cache.handler("pods")("MODIFIED", PodBuilder("b").phase("Failed").build())
    assert cache.pending == {}


def test_conversion_errors_are_logged_counted_and_do_not_raise() -> None:
    stream = io.StringIO()
    root_handlers = logging.getLogger().handlers[:]
    configure_logging("info", stream)
    try:
        check_conversion_errors(stream)
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers[:] = root_handlers


def check_conversion_errors(stream: io.StringIO) -> None:
    plugin = LoadAwarePlugin(validate(LoadAwareSchedulingArgs, {}))
    cache = ClusterCache(ClusterState([plugin]), FakeClock(), get_logger("test"))
    cache.handler("nodes")("ADDED", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "lots"}}})
    cache.handler("pods")("ADDED", {"metadata": {"namespace": "ns"}, "spec": {}})
    cache.handler("nodemetrics")("MODIFIED", {"metadata": {"name": "m"}, "status": {"podsMetric": "x"}})
    cache.handler("pods")("ADDED", "not even an object")  # type: ignore[arg-type]
    assert cache.conversion_errors == {"nodes": 1, "pods": 2, "nodemetrics": 1}
    assert cache.state.nodes == {}
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["watch.object_skipped"] * 4
    assert lines[0]["resource"] == "nodes" and lines[0]["object"] == "n1"
    assert "status.allocatable" in lines[0]["error"]
    assert lines[1]["object"] == "ns/None"


def test_other_event_types_are_ignored() -> None:
    cache, _, _ = new_cache()
    cache.handler("nodes")("BOOKMARK", make_node("n1"))
    cache.handler("nodes")("ERROR", {"kind": "Status"})
    assert cache.state.nodes == {} and cache.conversion_errors == {}


def test_a_late_event_of_the_pending_pod_keeps_the_placement_a_bind_assumed() -> None:
    """The watch can show a pod's creation after kube-scheduler already had the extender bind it (a loaded
    extender's watch lags behind kube-scheduler's). A pod once bound never shows unbound again, so a pending
    event for a pod the state holds assigned is older than the bind: the assumed placement stays counted
    (Koordinator's scheduler cache keeps an assumed pod until the informer shows it bound)."""
    cache, clock, plugin = new_cache()
    cache.handler("nodes")("ADDED", make_node("n1"))
    pending = PodBuilder("a").requests(cpu="1").build()
    uid = pending["metadata"]["uid"]
    cache.state.assume(pod_info(pending), "n1", clock.now())  # the bind
    cache.handler("pods")("ADDED", pending)  # the creation, seen late
    assert cache.state.assigned[uid].node_name == "n1"
    assert [p.pod.uid for p in plugin.loads["n1"].pods.values()] == [uid]
    cache.handler("pods")("MODIFIED", PodBuilder("a").requests(cpu="1").node("n1").build())  # the binding
    assert cache.state.assigned[uid].node_name == "n1" and cache.pending == {}
    # A pod nobody bound stays pending; a terminated one is dropped even if assumed.
    cache.handler("pods")("ADDED", PodBuilder("b").build())
    assert [p.name for p in cache.state.assigned.values()] == ["a"]
    other = PodBuilder("c").build()
    cache.state.assume(pod_info(other), "n1", clock.now())
    cache.handler("pods")("MODIFIED", PodBuilder("c").phase("Failed").build())
    assert [p.name for p in cache.state.assigned.values()] == ["a"]


def test_an_assumed_placement_kept_over_a_late_pending_event_is_still_taken_back_by_a_failed_bind() -> None:
    cache, clock, _plugin = new_cache()
    cache.handler("nodes")("ADDED", make_node("n1"))
    pending = PodBuilder("a").requests(cpu="1").build()
    placed = cache.state.assume(pod_info(pending), "n1", clock.now())
    cache.handler("pods")("ADDED", pending)
    assert cache.state.assigned[placed.uid] is placed  # untouched: the bind's un-assume recognises it
    cache.state.remove_pod(placed.uid)  # what ExtenderService does when the binding call fails
    cache.handler("pods")("MODIFIED", pending)  # the pod is still pending: nothing counts it
    assert cache.state.assigned == {} and list(cache.pending) == [placed.uid]
