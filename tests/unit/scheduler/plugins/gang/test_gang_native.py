"""Kubernetes' own ``scheduling.k8s.io/v1beta1`` PodGroup read as a fourth PodGroup API (kube-scheduler's
``GangScheduling`` admits its members; the barrier binds them together)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import (
    API_NATIVE,
    GangCache,
    MemberCounts,
    PodGroupError,
    gang_phase,
    gang_ref,
    ignored_gang_keys,
    podgroup_from_dict,
)
from koordpy_testkit.gangs import T0, annotated, member, native_podgroup, native_podgroup_object

ARGS = CoschedulingArgs.model_validate({})


@pytest.mark.parametrize(
    ("labels", "annotations", "ignored"),
    [
        ({}, {}, ()),
        # spec.schedulingGroup comes before every label and annotation: kube-scheduler gates the pod by it.
        ({"pod-group.scheduling.sigs.k8s.io": "crd"}, {}, ("label pod-group.scheduling.sigs.k8s.io",)),
        ({}, annotated("koord", 2), ("annotation gang.scheduling.koordinator.sh/name",)),
        (
            {"scheduling.x-k8s.io/pod-group": "x"},
            {"scheduling.k8s.io/group-name": "v"},
            ("annotation scheduling.k8s.io/group-name", "label scheduling.x-k8s.io/pod-group"),
        ),
    ],
)
def test_the_scheduling_group_wins_and_the_other_gang_keys_are_named(
    labels: dict[str, str], annotations: dict[str, str], ignored: tuple[str, ...]
) -> None:
    pod = member("p", group="job", labels=labels, annotations=annotations)
    ref = gang_ref(pod)
    assert ref is not None and (ref.source, ref.id) == (API_NATIVE, "default/job")
    assert ignored_gang_keys(pod) == ignored
    # the same keys without a scheduling group are read as before
    assert ignored_gang_keys(member("p", labels=labels, annotations=annotations)) == ()


@pytest.mark.parametrize(
    ("obj", "min_member", "policy", "disruption", "phase"),
    [
        (native_podgroup_object("job", 4), 4, "gang", "single", ""),  # disruptionMode unset: the API's default
        (native_podgroup_object("job", 4, disruption="all"), 4, "gang", "all", ""),
        (native_podgroup_object("job", 4, disruption="single"), 4, "gang", "single", ""),
        # basic: no all-or-nothing; kube-scheduler's GangScheduling counts 1 for it
        (native_podgroup_object("job", None), 1, "basic", "single", ""),
        (native_podgroup_object("job", 4, scheduled="True"), 4, "gang", "single", "Scheduled"),
        (native_podgroup_object("job", 4, scheduled="Unschedulable"), 4, "gang", "single", "Unschedulable"),
    ],
)
def test_a_native_podgroup_is_read(
    obj: dict[str, Any], min_member: int, policy: str, disruption: str, phase: str
) -> None:
    pg = podgroup_from_dict(obj)
    assert (pg.api, pg.min_member, pg.policy, pg.disruption, pg.phase) == (
        API_NATIVE,
        min_member,
        policy,
        disruption,
        phase,
    )
    assert pg.schedule_timeout_seconds is None and pg.ignored == ()


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({}, "spec.schedulingPolicy: required (gang or basic)"),
        ({"schedulingPolicy": {}}, "spec.schedulingPolicy: expected gang or basic"),
        ({"schedulingPolicy": {"gang": {}}}, "spec.schedulingPolicy.gang.minCount: required"),
        ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount: must be at least 1"),
        ({"schedulingPolicy": {"gang": {"minCount": "4"}}}, "spec.schedulingPolicy.gang.minCount: expected an integer"),
        ({"schedulingPolicy": {"basic": {}}, "disruptionMode": {}}, "spec.disruptionMode: expected all or single"),
    ],
)
def test_a_native_podgroup_that_cannot_be_read_names_the_field(spec: dict[str, Any], error: str) -> None:
    obj = {**native_podgroup_object("job", 4), "spec": spec}
    with pytest.raises(PodGroupError, match=error.replace("(", r"\(").replace(")", r"\)")):
        podgroup_from_dict(obj)


def test_kubernetes_semantics_and_no_koordinator_annotation_applies() -> None:
    obj = native_podgroup_object("job", 3, disruption="all")
    prefix = "gang.scheduling.koordinator.sh/"
    obj["metadata"]["annotations"] = {prefix + "mode": "NonStrict", prefix + "groups": '["default/other"]'}
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup_from_dict(obj))
    view = cache.view("default/job")
    assert view is not None
    spec = view.spec
    # Strict, waiting-and-running (kube-scheduler's Permit counts assumed and bound members), the gang alone,
    # the default wait (the API has none), its disruption mode.
    assert (spec.mode, spec.match_policy, spec.group, spec.wait_seconds, spec.disruption) == (
        "Strict",
        "waiting-and-running",
        ("default/job",),
        600.0,
        "all",
    )
    assert spec.native and spec.total_number == 3


def test_the_filter_never_refuses_a_native_member_and_the_report_shows_kube_schedulers_quorum() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(native_podgroup("job", 3))
    first = member("w0", group="job")
    admission = cache.admit_request(first)
    assert admission is not None and admission.ok  # kube-scheduler's PreEnqueue already gated it
    assert cache.parked() == [] and cache.take_wakeups() == []
    # What kube-scheduler's PreEnqueue decides, for the offline report: 1 of 3 members exist.
    assert (cache.admit("default/w0").ok, cache.admit("default/w0").detail) == (
        False,
        "gang default/job: 1 of 3 members exist (kube-scheduler's GangScheduling)",
    )
    for name in ("w1", "w2"):
        cache.upsert_pod(member(name, group="job"))
    assert cache.admit("default/w0").ok


def test_members_bind_together_once_min_count_binds_are_held() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(native_podgroup("job", 3))
    for i in range(3):
        cache.upsert_pod(member(f"w{i}", group="job"))
    for i in range(2):
        _, permit = cache.hold(f"default/w{i}", f"u{i}", "n1", T0)
        assert permit.verdict == "wait"
    assert cache.take_ready(T0) == []
    # 2 held + 1 = 3 waiting + 0 bound ≥ minCount 3: one batch of three
    cache.hold("default/w2", "u2", "n2", T0)
    (batch,) = cache.take_ready(T0)
    assert [h.pod for h in batch.holds] == ["default/w0", "default/w1", "default/w2"]
    assert batch.reason == "gang default/job: 3 waiting + 0 bound of 3 members"


def test_a_member_beyond_the_minimum_that_fits_nowhere_releases_nothing() -> None:
    """5 members, minCount 4: 3 held, w4 fails scheduling. 5 members − 1 failed = 4 ≥ 4: the gang can still
    make its minimum (kube-scheduler binds a gang of 4 of 5), so nothing is released and w3's hold completes it."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(native_podgroup("job", 4))
    for i in range(5):
        cache.upsert_pod(member(f"w{i}", group="job"))
    for i in range(3):
        cache.hold(f"default/w{i}", f"u{i}", "n1", T0)
    cache.scheduling_failed("default/w4", "0/2 nodes are available")
    assert cache.take_releases(T0) == []
    _, permit = cache.hold("default/w3", "u3", "n2", T0)
    assert permit.verdict == "allow"
    (batch,) = cache.take_ready(T0)
    assert len(batch.holds) == 4


def test_a_needed_member_that_fits_nowhere_releases_the_held_ones() -> None:
    """4 members, minCount 4: 3 held, w3 fails scheduling. 4 − 1 failed = 3 < 4: the gang cannot make its
    minimum now, so the three held binds are released (the room they hold goes back)."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(native_podgroup("job", 4))
    for i in range(4):
        cache.upsert_pod(member(f"w{i}", group="job"))
    for i in range(3):
        cache.hold(f"default/w{i}", f"u{i}", "n1", T0)
    cache.scheduling_failed("default/w3", "0/2 nodes are available")
    released = cache.take_releases(T0)
    assert sorted((r.hold.pod, r.cause) for r in released) == [
        ("default/w0", "strict"),
        ("default/w1", "strict"),
        ("default/w2", "strict"),
    ]
    # kube-scheduler places the gang again later (its pod group cycle found room for all four): the failures
    # of the last attempt reject nothing, and the fourth hold binds all four.
    for i in range(3):
        _, permit = cache.hold(f"default/w{i}", f"u{i}", "n1", T0 + 60)
        assert permit.verdict == "wait", permit
    _, permit = cache.hold("default/w3", "u3", "n2", T0 + 60)
    assert permit.verdict == "allow", permit
    assert cache.take_releases(T0 + 60) == []
    (batch,) = cache.take_ready(T0 + 60)
    assert len(batch.holds) == 4


def test_a_gang_that_was_unschedulable_binds_at_its_next_cycle_without_a_rejection_round() -> None:
    """Every member failed the last pod group cycle (no room); room appears and all four reach /bind, in
    any order: 4 − 3 failed = 1 < 4 at the first hold, but nothing is rejected (a CRD Strict gang would
    reject until each failed member is held)."""
    cache = GangCache(ARGS)
    cache.upsert_podgroup(native_podgroup("job", 4))
    for i in range(4):
        cache.upsert_pod(member(f"w{i}", group="job"))
    for i in range(4):
        cache.scheduling_failed(f"default/w{i}", "minCount (4) cannot be satisfied")
    cache.take_releases(T0)
    verdicts = [cache.hold(f"default/w{i}", f"u{i}", "n1", T0)[1].verdict for i in range(4)]
    assert verdicts == ["wait", "wait", "wait", "allow"]
    assert cache.take_releases(T0) == []


def test_a_basic_podgroup_binds_each_member_alone() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(native_podgroup("job", None))
    cache.upsert_pod(member("w0", group="job"))
    cache.upsert_pod(member("w1", group="job"))
    _, permit = cache.hold("default/w0", "u0", "n1", T0)
    assert permit.verdict == "allow"  # 1 waiting ≥ 1
    (batch,) = cache.take_ready(T0)
    assert [h.pod for h in batch.holds] == ["default/w0"]


def test_a_native_podgroup_not_seen_yet_releases_the_hold_at_once() -> None:
    """The API is served and the PodGroup not seen yet (this process's watch lags kube-scheduler's): the hold
    is released at once (wait time 0) and kube-scheduler retries the member."""
    cache = GangCache(ARGS)
    cache.upsert_pod(member("w0", group="job"))
    assert cache.phase("default/job", "") == "NotFound"
    _, permit = cache.hold("default/w0", "u0", "n1", T0)
    assert (permit.verdict, permit.reason) == (
        "wait",
        "gang default/job: PodGroup default/job (scheduling.k8s.io) not found",
    )
    assert [r.cause for r in cache.take_releases(T0)] == ["expired"]


def test_where_the_api_is_not_served_a_member_kube_scheduler_admitted_binds_alone() -> None:
    """v1.35 and v1.36 serve alpha versions of the API that koordpy does not read: kube-scheduler gated the
    member with its own GangScheduling, and the barrier, which cannot count the gang, lets it bind."""
    cache = GangCache(ARGS)
    cache.native_unserved = True
    cache.upsert_pod(member("w0", group="job"))
    _, permit = cache.hold("default/w0", "u0", "n1", T0)
    assert permit.verdict == "allow", permit
    (batch,) = cache.take_ready(T0)
    assert [h.pod for h in batch.holds] == ["default/w0"]


@pytest.mark.parametrize(
    ("stored", "phase"),
    [("", "Pending"), ("Scheduled", "Scheduled"), ("Unschedulable", "Unschedulable")],
)
def test_the_phase_is_kube_schedulers_condition(stored: str, phase: str) -> None:
    # koordpy writes no phase for a native PodGroup: it shows what kube-scheduler's condition says.
    assert gang_phase(API_NATIVE, True, stored, 3, MemberCounts(3, 3, 3, 0, 0)) == phase
