"""Volcano's ``scheduling.volcano.sh/v1beta1`` PodGroup read as a third PodGroup API."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import (
    API_VOLCANO,
    GangCache,
    MemberCounts,
    gang_ref,
    podgroup_from_dict,
    volcano_phase,
)
from koordpy_testkit.gangs import T0, member

ARGS = CoschedulingArgs.model_validate({})


def volcano(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, **spec},
    }


@pytest.mark.parametrize(
    ("annotations", "labels", "source"),
    [
        ({"scheduling.k8s.io/group-name": "job"}, {}, API_VOLCANO),
        ({"scheduling.volcano.sh/group-name": "job"}, {}, API_VOLCANO),
        # The PodGroup labels come first; Volcano's annotation before Koordinator's annotation way.
        (
            {"scheduling.k8s.io/group-name": "job"},
            {"pod-group.scheduling.sigs.k8s.io": "job"},
            "scheduling.sigs.k8s.io",
        ),
        ({"scheduling.k8s.io/group-name": "job", "gang.scheduling.koordinator.sh/name": "x"}, {}, API_VOLCANO),
        ({"scheduling.k8s.io/group-name": ""}, {}, None),
    ],
)
def test_membership(annotations: dict[str, str], labels: dict[str, str], source: str | None) -> None:
    ref = gang_ref(member("p", annotations=annotations, labels=labels))
    assert (ref.source if ref else None) == source


def test_parameters_and_what_is_not_honoured() -> None:
    pg = podgroup_from_dict(
        volcano("job", 3, queue="research", minTaskMember={"ps": 1, "worker": 2}, minResources={"cpu": "4"})
    )
    assert (pg.api, pg.min_member, pg.schedule_timeout_seconds) == (API_VOLCANO, 3, None)
    assert pg.ignored == ("spec.queue=research", 'spec.minTaskMember={"ps": 1, "worker": 2}')
    # Volcano's default queue is no deviation.
    assert podgroup_from_dict(volcano("job", 3, queue="default")).ignored == ()
    cache = GangCache(ARGS)
    cache.upsert_podgroup(pg)
    view = cache.view("default/job")
    assert view is not None
    # Strict, waiting-and-running (Volcano counts running members), the default wait time.
    assert (view.spec.mode, view.spec.match_policy, view.spec.wait_seconds) == ("Strict", "waiting-and-running", 600.0)


def test_a_volcano_gang_is_all_or_nothing_and_counts_running_members() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup_from_dict(volcano("job", 3)))
    pods = [member(f"w{i}", annotations={"scheduling.k8s.io/group-name": "job"}) for i in range(3)]
    for pod in pods[:2]:
        assert not cache.admit_request(pod).ok  # fewer than 3 members exist
    assert cache.admit_request(pods[2]).ok
    for i in range(2):
        cache.hold(f"default/w{i}", f"u{i}", "n1", T0)
    assert cache.take_ready(T0) == []
    cache.hold("default/w2", "u2", "n1", T0)
    (batch,) = cache.take_ready(T0)
    assert [h.pod for h in batch.holds] == ["default/w0", "default/w1", "default/w2"]
    for hold in batch.holds:
        cache.bound(hold.pod, "n1")
    # w0 fails and is replaced: 2 bound + the replacement held = 3 (waiting-and-running): it binds alone.
    cache.delete_pod("default", "w0")
    cache.upsert_pod(member("w3", annotations={"scheduling.k8s.io/group-name": "job"}))
    _, permit = cache.hold("default/w3", "u3", "n1", T0 + 60)
    assert (permit.verdict, permit.reason) == ("allow", "gang default/job: 1 waiting + 2 bound of 3 members")


@pytest.mark.parametrize(
    ("previous", "counts", "phase"),
    [
        # A new PodGroup: Pending for one sync, then Inqueue (no queues: admitted at once).
        ("", MemberCounts(0, 0, 0, 0, 0), "Pending"),
        ("Pending", MemberCounts(1, 0, 0, 0, 0), "Inqueue"),
        # 2 of min 3 bound: still Inqueue; 3 bound (running or not): Running.
        ("Inqueue", MemberCounts(3, 2, 2, 0, 0), "Unknown"),
        ("Inqueue", MemberCounts(3, 2, 0, 0, 0), "Inqueue"),
        ("Inqueue", MemberCounts(3, 3, 0, 0, 0), "Running"),
        ("Running", MemberCounts(3, 3, 3, 0, 0), "Running"),
        # Every allocated member succeeded: Completed.
        ("Running", MemberCounts(3, 3, 0, 3, 0), "Completed"),
        # One of three bound failed: 2 allocated < 3, 2 running → Unknown (Volcano's "part running").
        ("Running", MemberCounts(3, 3, 2, 0, 1), "Unknown"),
    ],
)
def test_volcano_phase(previous: str, counts: MemberCounts, phase: str) -> None:
    assert volcano_phase(previous, 3, counts) == phase


def test_gang_phase_of_a_volcano_podgroup_settles_in_volcano_phases() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup_from_dict(volcano("job", 2)))
    for i in range(2):
        cache.upsert_pod(member(f"w{i}", annotations={"scheduling.k8s.io/group-name": "job"}))
    assert cache.phase("default/job", "") == "Inqueue"
    for i in range(2):
        cache.upsert_pod(member(f"w{i}", annotations={"scheduling.k8s.io/group-name": "job"}, node="n1"))
    assert cache.phase("default/job", "Inqueue") == "Running"
