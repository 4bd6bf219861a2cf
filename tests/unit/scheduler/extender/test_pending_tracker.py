"""``PendingTracker`` and ``refusal_reason``: how long the profile's pods have been refused, and why."""

from __future__ import annotations

import pytest

from koordpy.scheduler.extender.pending import PendingTracker, refusal_reason
from koordpy.scheduler.plugins.loadaware.plugin import (
    REASON_AGGREGATED_USAGE_EXCEED,
    REASON_NODEMETRIC_EXPIRED,
    REASON_USAGE_EXCEED,
)


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        ([REASON_USAGE_EXCEED.format("cpu"), REASON_NODEMETRIC_EXPIRED], "load"),
        ([REASON_AGGREGATED_USAGE_EXCEED.format("memory")], "load"),
        ([REASON_USAGE_EXCEED.format("cpu"), "node(s) reserved for another pod"], "other"),
        ([], "other"),
    ],
)
def test_refusal_reason(reasons: list[str], expected: str) -> None:
    assert refusal_reason(reasons) == expected


def test_the_first_refusal_of_a_run_is_kept_and_an_admission_ends_the_run() -> None:
    tracker = PendingTracker()
    tracker.refuse("a", "load", now=100.0)
    tracker.refuse("a", "load", now=160.0)  # refused again: still since 100
    tracker.refuse("b", "gang", now=150.0)
    summary = tracker.summary({"a", "b"}, now=200.0)
    # a: 200 - 100 = 100 s; b: 200 - 150 = 50 s
    assert summary == {"gang": (1, 50.0), "load": (1, 100.0), "other": (0, 0.0)}
    tracker.admit("a")  # a filter found it a node
    tracker.refuse("a", "other", now=210.0)  # a new run of refusals starts
    assert tracker.summary({"a", "b"}, now=220.0) == {"gang": (1, 70.0), "load": (0, 0.0), "other": (1, 10.0)}


def test_pods_bound_or_deleted_since_are_forgotten_at_the_next_summary() -> None:
    tracker = PendingTracker()
    tracker.refuse("a", "load", now=0.0)
    tracker.refuse("b", "load", now=0.0)
    assert tracker.summary({"b"}, now=10.0)["load"] == (1, 10.0)
    assert list(tracker.refused) == ["b"]
