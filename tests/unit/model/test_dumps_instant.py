"""``newest_timestamp``: the newest timestamp in a dump, the default evaluation instant of explain and gangs."""

from __future__ import annotations

from koordpy.model.dumps import newest_timestamp
from koordpy.model.durations import parse_rfc3339
from koordpy_testkit import NodeMetricBuilder, PodBuilder

T0 = parse_rfc3339("2026-11-21T10:00:00Z")


def test_newest_of_metrics_pods_and_node_heartbeats() -> None:
    metric = NodeMetricBuilder("n").updated(T0 + 30).usage(cpu="1").build()
    pod = PodBuilder("p").scheduled_at(T0 + 45).build()
    node = {"kind": "Node", "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-11-21T10:00:20Z"}]}}
    # 30 s (metric updateTime) < 45 s (pod PodScheduled lastTransitionTime): the pod wins
    assert newest_timestamp([("a", node), ("b", pod), ("c", metric)]) == T0 + 45
    late = {"kind": "Node", "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-11-21T10:01:00Z"}]}}
    assert newest_timestamp([("a", node), ("a", late), ("b", pod), ("c", metric)]) == T0 + 60
    # unreadable heartbeats are skipped, not fatal
    bad = {"kind": "Node", "status": {"conditions": [{"lastHeartbeatTime": "soon"}]}}
    assert newest_timestamp([("a", bad), ("c", metric)]) == T0 + 30


def test_no_timestamp_at_all() -> None:
    assert newest_timestamp([("a", {"kind": "Node", "status": {}}), ("b", PodBuilder("p").build())]) is None
