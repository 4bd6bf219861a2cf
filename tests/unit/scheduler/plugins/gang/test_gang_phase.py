"""PodGroup phases: Koordinator's controller (sigs.k8s.io, reference §2.7) and scheduler-plugins' (x-k8s.io).

Each row is one sync from a stored phase with the member counts (pods, scheduled = bound, running,
succeeded, failed) and minMember 3.
"""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import (
    GangCache,
    MemberCounts,
    converge,
    gang_phase,
    koordinator_phase,
    x_k8s_phase,
)
from koordpy_testkit.gangs import member, podgroup


def counts(pods: int, scheduled: int = 0, running: int = 0, succeeded: int = 0, failed: int = 0) -> MemberCounts:
    return MemberCounts(pods, scheduled, running, succeeded, failed)


@pytest.mark.parametrize(
    ("previous", "c", "expected"),
    [
        ("", counts(5), "Pending"),  # "" always becomes Pending first
        ("Pending", counts(2), "Pending"),  # 2 < 3 members
        ("Pending", counts(3), "PreScheduling"),  # 3 ≥ 3 members
        ("PreScheduling", counts(3, scheduled=1), "Scheduling"),  # 1 bound < 3
        ("Scheduling", counts(3, scheduled=3), "Scheduled"),  # 3 bound ≥ 3
        ("Scheduling", counts(3, scheduled=3, running=3), "Running"),  # Scheduled ∧ 3 running ≥ 3
        ("Running", counts(3, scheduled=3, running=2, failed=1), "Failed"),  # failed ≠ 0 ∧ 1+2+0 ≥ 3
        ("Running", counts(3, scheduled=3, succeeded=3), "Finished"),  # 3 succeeded ≥ 3
        ("Running", counts(0), "Pending"),  # every member gone
        ("Finished", counts(0), "Finished"),  # final: never reconciled again
        ("Failed", counts(3, scheduled=3, running=3), "Failed"),
    ],
)
def test_koordinator_phase(previous: str, c: MemberCounts, expected: str) -> None:
    assert koordinator_phase(previous, 3, c) == expected


def test_koordinator_min_zero_stays_pending() -> None:
    # Pending → PreScheduling needs minMember > 0: a gang of min 0 never leaves Pending.
    assert converge(koordinator_phase, "", 0, counts(4, scheduled=4, running=4)) == "Pending"


@pytest.mark.parametrize(
    ("previous", "c", "expected"),
    [
        ("", counts(5), "Pending"),
        ("Pending", counts(3), "Scheduling"),  # no PreScheduling in this API
        ("Scheduling", counts(3, running=2), "Scheduling"),  # 2 running < 3
        ("Scheduling", counts(3, running=2, succeeded=1), "Running"),  # 2 + 1 ≥ 3
        ("Running", counts(2, running=2), "Pending"),  # 2 pods < 3
        ("Running", counts(3, running=2, failed=1), "Failed"),
        ("Running", counts(3, succeeded=3), "Finished"),
    ],
)
def test_x_k8s_phase(previous: str, c: MemberCounts, expected: str) -> None:
    assert x_k8s_phase(previous, 3, c) == expected


def test_converge_walks_the_machine() -> None:
    # "" → Pending → PreScheduling → Running takes three syncs; converge returns where it settles.
    assert converge(koordinator_phase, "", 3, counts(3, scheduled=3, running=3)) == "Running"
    assert converge(x_k8s_phase, "", 3, counts(3, running=3)) == "Running"


def test_gang_phase_not_found_and_annotation_gangs() -> None:
    assert gang_phase("scheduling.sigs.k8s.io", False, "", 0, counts(2)) == "NotFound"
    assert gang_phase("scheduling.x-k8s.io", False, "Running", 0, counts(2)) == "NotFound"
    # An annotation-way gang uses Koordinator's machine from "" (it has no stored status).
    assert gang_phase("annotations", True, "", 2, counts(2, scheduled=1)) == "Scheduling"


def test_cache_phase_counts_members() -> None:
    cache = GangCache(CoschedulingArgs.model_validate({}))
    cache.upsert_podgroup(podgroup("pg", 2, api="scheduling.x-k8s.io"))
    label = {"scheduling.x-k8s.io/pod-group": "pg"}
    cache.upsert_pod(member("p0", labels=label, node="n1"))  # Running (the builder sets it with a node)
    cache.upsert_pod(member("p1", labels=label, node="n1", phase="Succeeded"))
    # x-k8s.io: Pending → Scheduling (2 ≥ 2 pods) → Running (1 running + 1 succeeded ≥ 2).
    assert cache.phase("default/pg", "Pending") == "Running"
    assert cache.phase("default/nope", "") is None
