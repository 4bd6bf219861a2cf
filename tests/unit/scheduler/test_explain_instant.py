"""``dump_instant``: the newest timestamp in a dump, the default evaluation instant of explain."""

from __future__ import annotations

from koordpy.model.durations import parse_rfc3339
from koordpy.model.objects import nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.explain import dump_instant
from koordpy.testing import NodeMetricBuilder, PodBuilder

T0 = parse_rfc3339("2026-11-21T10:00:00Z")


def test_newest_of_metrics_pods_and_node_heartbeats() -> None:
    metric = nodemetric_from_dict(NodeMetricBuilder("n").updated(T0 + 30).usage(cpu="1").build())
    pod = pod_from_dict(PodBuilder("p").scheduled_at(T0 + 45).build())
    node = {"status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-11-21T10:00:20Z"}]}}
    # 30 s (metric) < 45 s (pod scheduled): the pod wins
    assert dump_instant([node], [pod], [metric]) == T0 + 45
    late = {"status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-11-21T10:01:00Z"}]}}
    assert dump_instant([node, late], [pod], [metric]) == T0 + 60
    # unreadable heartbeats are skipped, not fatal
    assert dump_instant([{"status": {"conditions": [{"lastHeartbeatTime": "soon"}]}}], [], [metric]) == T0 + 30


def test_no_timestamp_at_all() -> None:
    assert dump_instant([{"status": {}}], [pod_from_dict(PodBuilder("p").build())], []) is None
