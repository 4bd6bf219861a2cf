"""The offline report's pure parts: the default instant and the pod order (first writer wins by creation)."""

from __future__ import annotations

from typing import Any

from koordpy.config.gang import CoschedulingArgs
from koordpy.model.dumps import newest_timestamp
from koordpy.model.durations import parse_rfc3339
from koordpy.scheduler.plugins.gang.offline import gang_report

ARGS = CoschedulingArgs.model_validate({})


def pod(name: str, created: str, min_available: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": created,
            "annotations": {
                "gang.scheduling.koordinator.sh/name": "g",
                "gang.scheduling.koordinator.sh/min-available": min_available,
            },
        },
        "spec": {"containers": [{"name": "c"}]},
        "status": {
            "conditions": [{"type": "PodScheduled", "status": "False", "lastTransitionTime": "2026-11-23T12:00:05Z"}]
        },
    }


def test_newest_timestamp_looks_everywhere_and_skips_garbage() -> None:
    docs = [
        ("a.yaml", {"kind": "List", "items": [pod("p1", "2026-11-23T12:00:00Z", "1")]}),
        ("b.yaml", {"kind": "NodeMetric", "status": {"updateTime": "2026-11-23T12:00:09Z", "badTime": "never"}}),
    ]
    # 12:00:09 (a nested updateTime) beats 12:00:05 (a condition) and 12:00:00 (creation); "never" is skipped.
    assert newest_timestamp(docs) == parse_rfc3339("2026-11-23T12:00:09Z")
    assert newest_timestamp([("x", {"kind": "Pod"})]) is None


def test_first_created_member_sets_the_parameters_whatever_the_file_order() -> None:
    # p-late appears first in the file but was created later: the oldest member (min 2) wins, not min 9.
    docs = [
        (
            "d.yaml",
            {
                "kind": "List",
                "items": [pod("p-late", "2026-11-23T12:00:02Z", "9"), pod("p-early", "2026-11-23T12:00:01Z", "2")],
            },
        )
    ]
    report, ignored = gang_report(docs, ARGS, 0.0)
    (gang,) = report["gangs"]
    assert (gang["id"], gang["minMember"], ignored) == ("ns/g", 2, {})
