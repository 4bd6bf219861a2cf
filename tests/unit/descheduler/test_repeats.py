"""Repeat moves: which move repeats an earlier one of its workload, and which eviction follows a placement too soon."""

from __future__ import annotations

import pytest

from koordpy.descheduler.repeats import MoveHistory, WorkloadMove, evicted_after_placement

T = 1_800_000_000.0
WINDOW = 600.0


def history(*moves: WorkloadMove) -> MoveHistory:
    found = MoveHistory(WINDOW)
    for move in moves:
        found.record(move)
    return found


# An earlier move of workload "w" at T, pod web-1 off n1 to n2 (destination None: not known yet).
EARLIER = WorkloadMove("w", "job-1", "shop/web-1", "n1", "n2", T)


@pytest.mark.parametrize(
    ("workload", "created", "node", "now", "repeat"),
    [
        # the replacement (created 30 s after the move) moved off n2 at T + 300: inside the window
        ("w", T + 30, "n2", T + 300, True),
        # the window is [at, at + 600): at T + 599 it counts, at T + 600 it no longer does
        ("w", T + 30, "n2", T + 599, True),
        ("w", T + 30, "n2", T + 600, False),
        # a pod of w that already ran before the move is not its replacement
        ("w", T - 3600, "n2", T + 300, False),
        # created in the move's second (creation times are whole seconds): counts
        ("w", T, "n2", T + 300, True),
        # moved off another node than the one the earlier move put its pod on
        ("w", T + 30, "n3", T + 300, False),
        # another workload
        ("v", T + 30, "n2", T + 300, False),
        # unknown creation time: never judged a replacement
        ("w", None, "n2", T + 300, False),
    ],
)
def test_a_move_repeats_a_recent_move_of_its_workload_onto_its_node(
    workload: str, created: float | None, node: str, now: float, repeat: bool
) -> None:
    found = history(EARLIER).repeat_of(workload, created, node, now)
    assert (found == EARLIER) is repeat and (found is None) is not repeat


def test_an_unknown_destination_matches_any_node_and_the_latest_move_is_named() -> None:
    # EvictDirectly: no status.nodeName, so the destination stays unknown
    direct = WorkloadMove("w", "job-1", "shop/web-1", "n1", None, T)
    later = WorkloadMove("w", "job-2", "shop/web-2", "n1", None, T + 60)
    found = history(direct, later)
    assert found.repeat_of("w", T + 90, "n7", T + 120) == later
    # a pod created between the two moves is the first one's replacement only
    assert found.repeat_of("w", T + 30, "n7", T + 120) == direct


def test_a_landing_and_a_failed_job_change_what_repeats() -> None:
    found = history(WorkloadMove("w", "job-1", "shop/web-1", "n1", None, T))
    found.landed("job-1", "n4")
    assert found.repeat_of("w", T + 30, "n5", T + 60) is None  # landed on n4, not n5
    assert found.repeat_of("w", T + 30, "n4", T + 60) is not None
    found.forget("job-1")  # it failed: it moved nothing
    assert found.repeat_of("w", T + 30, "n4", T + 60) is None
    assert len(found) == 0


def test_prune_drops_the_moves_older_than_the_window() -> None:
    found = history(EARLIER, WorkloadMove("w", "job-2", "shop/web-2", "n1", "n2", T + 500))
    found.prune(T + 650)  # job-1 is 650 s old, job-2 150 s
    assert len(found) == 1
    assert found.repeat_of("w", T + 520, "n2", T + 650) is not None
    found.prune(T + 1100)
    assert len(found) == 0


@pytest.mark.parametrize(
    ("placed", "now", "repeat"),
    [
        (T, T + 120, True),  # placed 2 minutes ago
        (T, T + 599, True),
        (T, T + 600, False),  # exactly the window: no longer
        (T, T + 3600, False),
        (None, T, False),  # never placed (no PodScheduled, no creation time)
        (T + 10, T, False),  # placed "in the future" (clock skew): not judged
    ],
)
def test_an_eviction_soon_after_placement_is_a_repeat(placed: float | None, now: float, repeat: bool) -> None:
    assert evicted_after_placement(placed, now, WINDOW) is repeat
