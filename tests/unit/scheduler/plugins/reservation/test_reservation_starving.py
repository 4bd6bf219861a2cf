"""Starving jobs: who starves, which job is reserved for, the node cap, releases, names and labels."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from koordpy.model.durations import format_rfc3339
from koordpy.scheduler.plugins.reservation.controller import ReservationInputs, decide
from koordpy.scheduler.plugins.reservation.ledger import holdings_on_node, reserved_verdict
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, reservation_from_dict
from koordpy.scheduler.plugins.reservation.starving import (
    allowed_node_count,
    jobs_of,
    label_value,
    reservation_name,
)
from koordpy_testkit.gangs import native_podgroup, podgroup
from koordpy_testkit.reservations import T0, decide_on, node, pod, reservation, settings

LATER = T0 + 3600.0  # one hour after every pod below was created (threshold in settings(): 60 s)


def busy(name: str, cpu: str = "3") -> list[Any]:
    """A node ``name`` (3 cpu, 3Gi) fully used by one running pod."""
    return [node(name), pod(f"filler-{name}", cpu, "1Gi", node=name, created=T0 - 10)]


def applied(decision: Any, now: float) -> list[ReservationInfo]:
    out = []
    for create in decision.creates:
        raw = {**create.manifest, "status": create.status}
        raw["metadata"] = {**raw["metadata"], "creationTimestamp": format_rfc3339(now)}
        out.append(reservation_from_dict(raw))
    return out


@pytest.mark.parametrize(
    ("nodes", "cordoned", "percent", "allowed"),
    [
        (10, 0, 30, 3),  # 10 × 30 / 100 = 3
        (5, 0, 20, 1),  # 5 × 20 / 100 = 1
        (4, 0, 20, 0),  # 4 × 20 / 100 = 0.8 → floor 0: nothing is reserved
        (10, 0, 25, 2),  # 2.5 → 2
        (3, 0, 100, 3),
        (7, 0, 0, 0),
        (10, 4, 50, 3),  # cordoned nodes do not count: 6 × 50 / 100 = 3
    ],
)
def test_allowed_node_count_is_a_floor_of_schedulable_nodes(
    nodes: int, cordoned: int, percent: int, allowed: int
) -> None:
    infos = [node(f"n{i}", cordoned=i < cordoned) for i in range(nodes)]
    assert allowed_node_count(infos, percent) == allowed


def test_percent_cap_is_never_exceeded_over_many_passes() -> None:
    # 10 busy nodes, 30 % → at most 3 held. Six starving 3-cpu pods, one new reservation per pass.
    nodes, pods = [], []
    for i in range(10):
        n, filler = busy(f"n{i}")
        nodes.append(n)
        pods.append(filler)
    pods += [pod(f"big-{j}", "3", "1Gi", priority=100 - j) for j in range(6)]
    held: list[ReservationInfo] = []
    config = settings(reservedNodePercent=30)
    created = []
    for step in range(8):
        now = LATER + step * 10
        decision = decide(ReservationInputs(nodes, pods, [], held), config, now)
        held += applied(decision, now)
        created += [c.job for c in decision.creates]
        assert len({r.node_name for r in held}) <= 3
    # 3 cpu each: a held node (3 − 0 reserved by others ≥ 3) takes one big pod, so only 3 jobs get one.
    assert created == ["default/big-0", "default/big-1", "default/big-2"]
    assert len({r.node_name for r in held}) == 3


def test_a_job_may_add_reservations_on_nodes_already_held() -> None:
    # One 6-cpu node held by big-0 (3 cpu); cap 1 node; big-1 fits beside it on the same node.
    n1 = node("n1", cpu="6", memory="6Gi")
    pods = [pod("filler", "6", "1Gi", node="n1", created=T0 - 10), pod("big-0", "3", priority=9), pod("big-1", "3")]
    config = settings(reservedNodePercent=50, maxHoldSeconds=86400)
    first = decide(ReservationInputs([n1, node("n2", cpu="1")], pods, [], []), config, LATER)
    assert [(c.job, c.node) for c in first.creates] == [("default/big-0", "n1")]
    second = decide(ReservationInputs([n1, node("n2", cpu="1")], pods, [], applied(first, LATER)), config, LATER + 1)
    assert [(c.job, c.node) for c in second.creates] == [("default/big-1", "n1")]


def test_highest_priority_then_longest_waiting_is_picked() -> None:
    nodes, pods = busy("n1")
    pods = [
        pods,
        pod("low", "2", priority=1, created=T0 - 500),
        pod("high-new", "2", priority=7, created=T0),
        pod("high-old", "2", priority=7, created=T0 - 100),
    ]
    decision = decide_on([nodes], pods, LATER)
    assert [s.job for s in decision.starving] == ["default/high-old", "default/high-new", "default/low"]
    assert [(s.waiting_seconds, s.priority) for s in decision.starving] == [(3700, 7), (3600, 7), (4100, 1)]
    assert [c.job for c in decision.creates] == ["default/high-old"]


def test_a_higher_priority_pending_job_that_fits_now_is_not_delayed() -> None:
    # starving: big (priority 10, waited 1 h). n2 has 1 cpu free; "urgent" (priority 100, 1 cpu, created
    # 10 s ago: not starving) fits there now → no reservation this pass.
    n1, filler = busy("n1")
    n2 = node("n2")
    pods = [filler, pod("half", "2", node="n2", created=T0 - 10), pod("big", "3", priority=10)]
    urgent = pod("urgent", "1", priority=100, created=LATER - 10)
    deferred = decide_on([n1, n2], [*pods, urgent], LATER)
    assert [s.job for s in deferred.starving] == ["default/big"]
    assert deferred.creates == ()
    assert [(e.regarding.name, e.reason) for e in deferred.events] == [("big", "ReservationDeferred")]
    assert "default/urgent (priority 100) can be placed now" in deferred.events[0].message
    # The same job of higher priority that does not fit anywhere (2 cpu) does not stop the reservation.
    stuck = pod("urgent", "2", priority=100, created=LATER - 10)
    reserved = decide_on([n1, n2], [*pods, stuck], LATER)
    assert [c.job for c in reserved.creates] == ["default/big"]
    # A job of equal or lower priority that fits never defers it.
    lower = pod("urgent", "1", priority=10, created=LATER - 10)
    assert [c.job for c in decide_on([n1, n2], [*pods, lower], LATER).creates] == ["default/big"]


def test_best_effort_pods_never_starve_and_are_never_blocked() -> None:
    n1, filler = busy("n1")
    best_effort = pod("be", None, None, priority=100)
    decision = decide_on([n1], [filler, best_effort, pod("big", "3")], LATER)
    assert [s.job for s in decision.starving] == ["default/big"]  # no requests: nothing to starve for
    held = applied(decision, LATER)
    holdings = holdings_on_node(held, [filler], LATER)
    requested = {"cpu": 3000, "memory": 1024**3}
    assert reserved_verdict(best_effort, n1.allocatable, requested, holdings).is_success
    tiny = pod("tiny", "1m", None)
    assert reserved_verdict(tiny, n1.allocatable, requested, holdings).reason == "node(s) resource was(were) reserved"


@pytest.mark.parametrize(
    ("case", "created", "priority", "threshold", "starving"),
    [
        ("waited exactly the threshold", LATER - 60, 0, 0, False),  # strictly more than the threshold
        ("waited one second more", LATER - 61, 0, 0, True),
        ("below the priority threshold", T0, 4, 5, False),
        ("at the priority threshold", T0, 5, 5, True),
    ],
)
def test_threshold_and_priority_threshold(
    case: str, created: float, priority: int, threshold: int, starving: bool
) -> None:
    n1, filler = busy("n1")
    decision = decide_on(
        [n1],
        [filler, pod("big", "3", priority=priority, created=created)],
        LATER,
        config=settings(priorityThreshold=threshold),
    )
    assert bool(decision.starving) is starving, case


@pytest.mark.parametrize(
    ("case", "scheduler_names", "pod_scheduler", "starving"),
    [
        ("no list: every pod", (), "default-scheduler", True),
        ("the listed profile", ("koordpy-scheduler",), "koordpy-scheduler", True),
        ("another scheduler's pod", ("koordpy-scheduler",), "default-scheduler", False),
        ("one of several", ("koord-scheduler", "koordpy-scheduler"), "koord-scheduler", True),
    ],
)
def test_only_pods_of_the_listed_schedulers_starve(
    case: str, scheduler_names: tuple[str, ...], pod_scheduler: str, starving: bool
) -> None:
    # another scheduler's pod never binds through the extender, so a Reservation would only hold its node
    n1, filler = busy("n1")
    big = dataclasses.replace(pod("big", "3"), scheduler_name=pod_scheduler)
    decision = decide_on([n1], [filler, big], LATER, config=settings(schedulerNames=list(scheduler_names)))
    assert [s.job for s in decision.starving] == (["default/big"] if starving else []), case
    assert len(decision.creates) == (1 if starving else 0), case


def test_a_pod_without_priority_is_not_a_job_but_a_gang_member_is() -> None:
    pods = [pod("plain", "3", priority=None)]
    pods += [pod(f"w-{i}", "2", priority=None, labels={"pod-group.scheduling.sigs.k8s.io": "train"}) for i in range(3)]
    jobs = jobs_of(pods, [podgroup("train", 2)])
    assert [(j.id, j.kind, j.min_member, len(j.members)) for j in jobs] == [("default/train", "gang", 2, 3)]


def test_a_gang_gets_one_reservation_per_missing_member_and_is_then_condition_ready() -> None:
    # minMember 3, one member bound: 2 missing → 2 reservations (by member index), not 3.
    nodes = [node(f"n{i}", cpu="4", memory="4Gi") for i in range(3)]
    label = {"pod-group.scheduling.sigs.k8s.io": "train"}
    pods = [pod(f"filler-{i}", "3", node=f"n{i}", created=T0 - 10) for i in range(3)]
    pods += [pod("w-0", "2", node="n0", labels=label, phase="Running"), pod("w-1", "2", labels=label)]
    pods += [pod("w-2", "2", labels=label), pod("w-3", "2", labels=label)]
    groups = [podgroup("train", 3)]
    first = decide_on(nodes, pods, LATER, podgroups=groups)
    assert [(s.job, s.min_member, s.ready, s.reserved) for s in first.starving] == [("default/train", 3, 1, 0)]
    assert [c.name for c in first.creates] == ["starving-default-train-1", "starving-default-train-2"]
    # Scores (requests 2 cpu, 1Gi): n0 free cpu 4 − 3 − 2 = −1 → 0, memory 2Gi → 10: (0 + 10) / 2 = 5;
    # n1, n2 free cpu 1 → 5, memory 10: 7.5 → n1 (tie by name). Then n1 has 2 reserved: free −1 → 5; n2 7.5.
    assert [c.node for c in first.creates] == ["n1", "n2"]
    again = decide_on(nodes, pods, LATER + 10, podgroups=groups, reservations=applied(first, LATER))
    assert again.starving == () and again.creates == ()  # bound 1 + reserved 2 ≥ 3: Condition Ready


def test_a_native_gang_gets_room_held_for_its_minimum_as_a_crd_gang_does() -> None:
    """A ``scheduling.k8s.io`` PodGroup (gang minCount 3) whose members joined by ``spec.schedulingGroup``;
    the same nodes and pods as the CRD gang above: one member bound, 3 − 1 = 2 reservations, then Condition
    Ready (1 bound + 2 reserved ≥ 3). A ``basic`` PodGroup's pods are a job of minimum 1 (no all-or-nothing)."""
    nodes = [node(f"n{i}", cpu="4", memory="4Gi") for i in range(3)]
    pods = [pod(f"filler-{i}", "3", node=f"n{i}", created=T0 - 10) for i in range(3)]
    pods += [pod("w-0", "2", node="n0", group="train", phase="Running"), pod("w-1", "2", group="train")]
    pods += [pod("w-2", "2", group="train"), pod("w-3", "2", group="train")]
    groups = [native_podgroup("train", 3, disruption="all")]
    assert [(j.id, j.kind, j.min_member, len(j.members)) for j in jobs_of(pods, groups)][-1:] == [
        ("default/train", "gang", 3, 4)
    ]
    first = decide_on(nodes, pods, LATER, podgroups=groups)
    assert [(s.job, s.min_member, s.ready, s.reserved) for s in first.starving] == [("default/train", 3, 1, 0)]
    assert [c.name for c in first.creates] == ["starving-default-train-1", "starving-default-train-2"]
    assert [c.node for c in first.creates] == ["n1", "n2"]  # the CRD gang's arithmetic above
    again = decide_on(nodes, pods, LATER + 10, podgroups=groups, reservations=applied(first, LATER))
    assert again.starving == () and again.creates == ()
    basic = jobs_of([pod("b-0", "1", group="free"), pod("b-1", "1", group="free")], [native_podgroup("free", None)])
    assert [(j.id, j.min_member) for j in basic] == [("default/free", 1)]
    # its PodGroup not (yet) known: not a job, as for a CRD gang whose PodGroup is missing
    assert jobs_of([pod("m-0", "1", group="missing")], []) == []


@pytest.mark.parametrize(
    ("case", "big_node", "big_exists", "now", "reason"),
    [
        ("job Ready", "n1", True, LATER + 10, "job default/big is Ready (1/1 members bound)"),
        ("job deleted", None, False, LATER + 10, "job default/big is gone (deleted or finished)"),
        ("held too long", None, True, LATER + 1800, "held 1800s, maxHoldSeconds is 1800"),
    ],
)
def test_starving_reservations_are_released(
    case: str, big_node: str | None, big_exists: bool, now: float, reason: str
) -> None:
    n1, filler = busy("n1")
    first = decide_on([n1], [filler, pod("big", "3")], LATER)
    held = applied(first, LATER)
    assert [r.name for r in held] == ["starving-default-big-0"]
    pods = [filler] + ([pod("big", "3", node=big_node)] if big_exists else [])
    later = decide_on([n1], pods, now, reservations=held)
    assert [(d.name, d.job, d.reason) for d in later.deletes] == [("starving-default-big-0", "default/big", reason)], (
        case
    )
    assert any(e.reason == "StarvingJobReleased" and "n1" in e.message for e in later.events)


def test_adoption_never_duplicates_and_a_deleting_one_is_not_recreated() -> None:
    n1, filler = busy("n1")
    pods = [filler, pod("big", "3")]
    first = decide_on([n1], pods, LATER)
    held = applied(first, LATER)
    assert decide_on([n1], pods, LATER + 5, reservations=held).creates == ()
    raw_deleting = {**first.creates[0].manifest, "status": first.creates[0].status}
    raw_deleting["metadata"] = {**raw_deleting["metadata"], "deletionTimestamp": format_rfc3339(LATER + 1)}
    deleting = reservation_from_dict(raw_deleting)
    assert decide_on([n1], pods, LATER + 5, reservations=[deleting]).creates == ()


def test_manifest_labels_owner_and_ttl() -> None:
    n1, filler = busy("n1")
    decision = decide_on([n1], [filler, pod("big", "3", "2Gi")], LATER, config=settings(maxHoldSeconds=900))
    (create,) = decision.creates
    big = pod("big", "3", "2Gi")
    assert create.manifest["metadata"] == {
        "name": "starving-default-big-0",
        "labels": {"koordpy.io/starving-job": "default.big", "app.kubernetes.io/managed-by": "koordpy"},
        "annotations": {"koordpy.io/starving-job": "default/big"},
    }
    spec = create.manifest["spec"]
    assert spec["owners"] == [{"object": {"kind": "Pod", "namespace": "default", "name": "big", "uid": big.uid}}]
    assert (spec["ttl"], spec["preAllocation"], spec["allocateOnce"]) == ("900s", True, True)
    assert spec["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "3", "memory": "2Gi"}
    assert create.status["phase"] == "Waiting" and create.status["nodeName"] == "n1"
    assert create.status["conditions"][0]["type"] == "Scheduled"
    # the manifest reads back as a reservation owned by the pod
    info = reservation_from_dict(create.manifest)
    assert info.pre_allocation and info.ttl_seconds == 900


@pytest.mark.parametrize(
    ("job", "index", "name", "label"),
    [
        ("default/big", 0, "starving-default-big-0", "default.big"),
        ("team.a/job_x", 2, "starving-team-a-job-x-2", "team.a.job_x"),
    ],
)
def test_names_and_labels_are_dns_safe(job: str, index: int, name: str, label: str) -> None:
    assert reservation_name(job, index) == name
    assert label_value(job) == label


def test_long_names_are_hashed_and_stay_unique() -> None:
    a = reservation_name("ns/" + "a" * 80, 1)
    b = reservation_name("ns/" + "a" * 79 + "b", 1)
    assert len(a) <= 63 and len(b) <= 63 and a != b and a.endswith("-1")
    assert len(label_value("ns/" + "x" * 80)) <= 63


def test_disabled_reports_but_never_creates() -> None:
    n1, filler = busy("n1")
    decision = decide_on([n1], [filler, pod("big", "3")], LATER, config=settings(enabled=False))
    assert [s.job for s in decision.starving] == ["default/big"] and decision.creates == ()


def test_user_reservation_helper_is_not_a_starving_one() -> None:
    n1, filler = busy("n1")
    user = reservation("mine", cpu="1", phase="Waiting", node="n1", pre_allocation=True)
    decision = decide_on([n1], [filler], LATER, reservations=[user])
    assert decision.deletes == ()


def test_member_placement_constraints_go_into_the_template_and_pick_the_node() -> None:
    from koordpy.model.placement import placement_from_dict

    nodes = [node("n1"), node("n2")]
    fillers = [pod("f1", "3", node="n1", created=T0 - 10), pod("f2", "3", node="n2", created=T0 - 10)]
    big = pod("big", "3")
    raw_spec = {
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "n2"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        }
    }
    inputs = ReservationInputs(nodes, [*fillers, big], [], [], placements={big.uid: placement_from_dict(raw_spec)})
    decision = decide(inputs, settings(), LATER)
    (create,) = decision.creates
    assert create.node == "n2"  # n1 would win the tie by name without the selector
    template = create.manifest["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"kubernetes.io/hostname": "n2"}
    assert template["tolerations"] == [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]


def test_events_say_which_job_holds_which_node_and_why() -> None:
    n1, filler = busy("n1")
    decision = decide_on([n1], [filler, pod("big", "3", priority=5)], LATER)
    assert [(e.regarding.kind, e.regarding.name, e.type, e.reason) for e in decision.events] == [
        ("Reservation", "starving-default-big-0", "Normal", "StarvingJobReserved"),
        ("Pod", "big", "Normal", "Reserved"),
    ]
    # score: cpu free 3 − 3 = 0 → 0; memory free 3Gi − 1Gi = 2Gi ≥ 1Gi → 10; (0 + 10) / 2 = 5
    assert decision.events[0].message == (
        "node n1 held for default/big: starving job default/big (priority 5, waiting 3600s): "
        "placed on n1 (node score 5.00): waiting for the node's pods to leave"
    )


def test_no_node_can_hold_it_warns_on_the_pod() -> None:
    n1, filler = busy("n1")
    decision = decide_on([n1], [filler, pod("huge", "4")], LATER)
    assert decision.creates == ()
    (event,) = decision.events
    assert (event.regarding.name, event.type, event.reason) == ("huge", "Warning", "ReservationUnschedulable")
    assert event.message.endswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_an_annotation_gang_is_a_job_with_the_oldest_members_min_available() -> None:
    from koordpy_testkit.gangs import annotated

    pods = [
        pod("a-1", "2", annotations=annotated("ring", 3), created=T0 + 5),
        pod("a-0", "2", annotations=annotated("ring", 2), created=T0),  # oldest: its min-available wins
    ]
    (job,) = jobs_of(pods, [])
    assert (job.id, job.kind, job.min_member, job.created) == ("default/ring", "gang", 2, T0)


def test_a_pending_starving_reservation_is_placed_within_the_cap() -> None:
    # A manager that died between create and status patch left two starving reservations Pending.
    # n1 is full (6 of 6 cpu), n2 has 2 of 6 free. Scores for a 3-cpu, 1Gi member: n1 (0 + 10) / 2 = 5,
    # n2 (6.67 + 10) / 2 = 8.33 → n2 first; then n2 has 3 reserved: free 2 − 3 < 0 → 5, a tie with n1.
    nodes = [node("n1", cpu="6"), node("n2", cpu="6")]
    fillers = [pod("f1", "6", node="n1", created=T0 - 10), pod("f2", "4", node="n2", created=T0 - 10)]
    label = {"pod-group.scheduling.sigs.k8s.io": "train"}
    members = [pod(f"w-{i}", "3", labels=label) for i in range(2)]
    groups = [podgroup("train", 2)]
    first = decide_on(nodes, [*fillers, *members], LATER, podgroups=groups)  # 100 %: both nodes allowed
    assert [c.node for c in first.creates] == ["n2", "n1"]  # the tie goes to n1 by name
    pending = []
    for create in first.creates:
        meta = {**create.manifest["metadata"], "creationTimestamp": format_rfc3339(LATER)}
        pending.append(reservation_from_dict({**create.manifest, "metadata": meta}))
    # 2 nodes × 50 % = 1 node: once train-0 holds n2, train-1 may only go to n2 (6 − 3 ≥ 3 with preAllocation).
    capped = settings(reservedNodePercent=50)
    adopted = decide_on(nodes, [*fillers, *members], LATER + 5, podgroups=groups, reservations=pending, config=capped)
    assert adopted.creates == ()
    assert [(s.name, s.status["phase"], s.status["nodeName"]) for s in adopted.statuses] == [
        ("starving-default-train-0", "Waiting", "n2"),
        ("starving-default-train-1", "Waiting", "n2"),
    ]
