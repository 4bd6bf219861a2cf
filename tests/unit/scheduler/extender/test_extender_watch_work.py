"""Watch events and verbs do no work that changes nothing: what each skips, and that the outcome is the same.

* A pod the watch converted is not converted again by ``/filter`` when kube-scheduler sends the same
  version (uid and resourceVersion), and is when the version differs.
* A ``DELETED`` event of a cached pod is applied without converting the object.
* The update that confirms a placement we assumed (``spec.nodeName`` already counted, only the
  ``PodScheduled`` time is new) is not replayed to the plugins; any other change is.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from koordpy.config import SchedulerConfiguration, validate
from koordpy.model import objects
from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo, pod_from_dict
from koordpy.scheduler.extender.server import build_extender
from koordpy.scheduler.framework import ClusterState
from koordpy_testkit import FakeClock, NodeMetricBuilder, PodBuilder, make_node


class Recorder:
    """A plugin that records the pod events it is told about."""

    name = "test.Recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float | None]] = []

    def on_capacity(self, capacity: int) -> None: ...
    def on_node(self, index: int, node: NodeInfo) -> None: ...
    def on_node_removed(self, index: int, name: str) -> None: ...
    def on_metric(self, name: str, metric: NodeMetricInfo | None) -> None: ...

    def on_pod_assigned(self, index: int | None, node_name: str, pod: PodInfo, now: float) -> None:
        self.calls.append(("assigned", pod.name, now))

    def on_pod_unassigned(self, index: int | None, node_name: str, pod: PodInfo) -> None:
        self.calls.append(("unassigned", pod.name, None))


def versioned(builder: PodBuilder, version: str) -> dict[str, Any]:
    raw = builder.build()
    raw["metadata"]["resourceVersion"] = version
    return raw


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the pods converted by the cache and the service (both call objects.pod_from_dict)."""
    seen: list[str] = []

    def counting(raw: Any) -> PodInfo:
        seen.append(raw["metadata"]["name"])
        return pod_from_dict(raw)

    from koordpy.scheduler.extender import cache, service

    monkeypatch.setattr(cache, "pod_from_dict", counting)
    monkeypatch.setattr(service, "pod_from_dict", counting)
    assert objects.pod_from_dict is pod_from_dict
    return seen


def test_filter_takes_the_pod_the_watch_converted_for_the_same_version(conversions: list[str]) -> None:
    clock = FakeClock()
    extender = build_extender(validate(SchedulerConfiguration, {}), None, clock=clock)
    cache, service = extender.cache, extender.service
    cache.handler("nodes")("ADDED", make_node("n1"))
    cache.handler("nodemetrics")("ADDED", NodeMetricBuilder("n1").updated(clock.now()).usage(cpu="1").build())
    pending = versioned(PodBuilder("a").uid("u-a").requests(cpu="1"), "10")
    cache.handler("pods")("ADDED", pending)
    assert conversions == ["a"] and cache.pending_versions == {"u-a": "10"}

    body = orjson.dumps({"Pod": pending, "Nodes": None, "NodeNames": ["n1"]})
    assert orjson.loads(service.filter(body).body)["NodeNames"] == ["n1"]
    assert service._recent["u-a"][1] is cache.pending["u-a"]
    assert conversions == ["a"]  # not converted again

    changed = versioned(PodBuilder("a").uid("u-a").requests(cpu="2"), "11")  # kube-scheduler saw a newer one
    body = orjson.dumps({"Pod": changed, "Nodes": None, "NodeNames": ["n1"]})
    service.filter(body)
    assert conversions == ["a", "a"]
    assert service._recent["u-a"][1].requests["cpu"] == 2000

    bound = versioned(PodBuilder("a").uid("u-a").requests(cpu="2").node("n1"), "12")
    cache.handler("pods")("MODIFIED", bound)
    assert cache.pending == {} and cache.pending_versions == {}


def test_a_deletion_of_a_cached_pod_needs_no_conversion(conversions: list[str]) -> None:
    state = ClusterState([])
    extender = build_extender(validate(SchedulerConfiguration, {}), None, clock=FakeClock())
    cache = extender.cache
    del state
    cache.handler("nodes")("ADDED", make_node("n1"))
    cache.handler("pods")("ADDED", PodBuilder("a").uid("u-a").node("n1").build())
    cache.handler("pods")("ADDED", PodBuilder("p").uid("u-p").build())
    assert conversions == ["a", "p"]
    garbage = {"metadata": {"name": "a", "namespace": "default", "uid": "u-a"}, "spec": {"containers": 5}}
    cache.handler("pods")("DELETED", garbage)  # the object is not read beyond its identity
    cache.handler("pods")("DELETED", {"metadata": {"name": "p", "namespace": "default", "uid": "u-p"}})
    assert conversions == ["a", "p"]
    assert cache.state.assigned == {} and cache.pending == {}
    assert cache.events["pods", "DELETED"] == 2
    # a known uid under another name is converted as before (a listener may key pods by name)
    cache.handler("pods")("ADDED", PodBuilder("b").uid("u-b").node("n1").build())
    cache.handler("pods")("DELETED", PodBuilder("other").uid("u-b").node("n1").build())
    assert conversions == ["a", "p", "b", "other"]


def test_confirming_an_assumed_placement_is_not_replayed_to_the_plugins() -> None:
    recorder = Recorder()
    state = ClusterState([recorder])
    state.upsert_node(objects.node_from_dict(make_node("n1")))
    pending = pod_from_dict(PodBuilder("a").uid("u-a").requests(cpu="1").build())
    state.assume(pending, "n1", 100.0)
    assert recorder.calls == [("assigned", "a", 100.0)]

    confirmed = pod_from_dict(
        PodBuilder("a").uid("u-a").requests(cpu="1").node("n1").phase("Pending").scheduled_at(99.0).build()
    )
    state.upsert_pod(confirmed, 101.0)
    assert recorder.calls == [("assigned", "a", 100.0)]  # the assume stands, timed when we bound it
    assert state.assigned["u-a"] is confirmed

    relabelled = pod_from_dict(
        PodBuilder("a")
        .uid("u-a")
        .requests(cpu="1")
        .node("n1")
        .phase("Pending")
        .scheduled_at(99.0)
        .label("x", "1")
        .build()
    )
    state.upsert_pod(relabelled, 102.0)  # anything else that changes is replayed, as before
    assert recorder.calls[1:] == [("unassigned", "a", None), ("assigned", "a", 99.0)]

    other = pod_from_dict(PodBuilder("b").uid("u-b").requests(cpu="1").node("n1").build())
    state.upsert_pod(other, 103.0)  # seen assigned, never assumed: every change is replayed
    later = pod_from_dict(PodBuilder("b").uid("u-b").requests(cpu="1").node("n1").scheduled_at(104.0).build())
    state.upsert_pod(later, 105.0)
    assert recorder.calls[3:] == [("assigned", "b", 103.0), ("unassigned", "b", None), ("assigned", "b", 104.0)]
