"""Status transitions of placed reservations: Waiting → Available, allocateOnce → Succeeded, expiry → Failed."""

from __future__ import annotations

from typing import Any

from koordpy_testkit.reservations import T0, allocated, decide_on, node, pod, reservation

GI = 1024**3


def owned_by(*names: str) -> list[dict[str, Any]]:
    return [{"object": {"namespace": "default", "name": n}} for n in names]


def statuses(decision: Any) -> dict[str, dict[str, Any]]:
    return {s.name: s.status for s in decision.statuses}


def test_waiting_becomes_available_when_the_node_drains() -> None:
    res = reservation("r", cpu="3", owners=owned_by("big"), phase="Waiting", node="n1", pre_allocation=True)
    busy = decide_on([node("n1")], [pod("small", node="n1")], T0 + 10, reservations=[res])
    assert busy.statuses == ()  # 3 − 1 < 3: still Waiting, nothing written
    drained = decide_on([node("n1")], [pod("small", node="n1", phase="Succeeded")], T0 + 20, reservations=[res])
    status = statuses(drained)["r"]
    assert status["phase"] == "Available"
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Scheduled", "True", "Scheduled"),
        ("Ready", "True", "Available"),
    ]
    assert drained.report()["actions"] == [
        {
            "action": "place",
            "reservation": "r",
            "node": "n1",
            "reason": "Available: free resources on n1 now cover the template",
        }
    ]


def test_allocate_once_owner_bound_makes_it_succeeded_with_current_owners() -> None:
    res = reservation("r", cpu="2", memory="2Gi", owners=owned_by("web"), phase="Available", node="n1")
    owner = pod("web", "1", "1Gi", node="n1", annotations=allocated("r"))
    status = statuses(decide_on([node("n1")], [owner], T0 + 10, reservations=[res]))["r"]
    assert status["phase"] == "Succeeded"
    assert status["currentOwners"] == [{"kind": "Pod", "namespace": "default", "name": "web", "uid": owner.uid}]
    assert status["allocated"] == {"cpu": "1", "memory": "1Gi"}
    assert status["allocatable"] == {"cpu": "2", "memory": "2Gi"}
    assert status["conditions"][-1]["reason"] == "Succeeded"


def test_without_allocate_once_owners_are_tracked_and_it_stays_available() -> None:
    res = reservation(
        "r", cpu="2", memory="2Gi", owners=owned_by("a", "b"), phase="Available", node="n1", allocate_once=False
    )
    pods = [
        pod("a", "1", "1Gi", node="n1", created=T0 + 1, annotations=allocated("r")),
        pod("b", "500m", "1Gi", node="n1", created=T0 + 2, annotations=allocated("r")),
    ]
    status = statuses(decide_on([node("n1")], pods, T0 + 10, reservations=[res]))["r"]
    assert status["phase"] == "Available"
    assert [o["name"] for o in status["currentOwners"]] == ["a", "b"]
    assert status["allocated"] == {"cpu": "1500m", "memory": "2Gi"}


def test_an_owner_on_the_node_that_did_not_bind_through_it_is_no_current_owner() -> None:
    # the sibling case: the owner runs on the reservation's node but was bound without it
    res = reservation("r", cpu="2", memory="2Gi", owners=owned_by("web"), phase="Available", node="n1")
    sibling = pod("web", "1", "1Gi", node="n1", created=T0 - 600)
    decision = decide_on([node("n1")], [sibling], T0 + 10, reservations=[res])
    assert "r" not in statuses(decision)  # nothing to write: still Available, no owner, nothing allocated


def test_expired_reservations_fail_with_reason_expired() -> None:
    placed = reservation("placed", phase="Available", node="n1", ttl="1h")
    pending = reservation("pending", ttl="1h", cpu="99")
    decision = decide_on([node("n1")], [], T0 + 3600, reservations=[placed, pending])
    got = statuses(decision)
    assert (got["placed"]["phase"], got["placed"]["nodeName"]) == ("Failed", "n1")
    assert got["placed"]["conditions"][-1] | {"lastProbeTime": "", "lastTransitionTime": ""} == {
        "type": "Ready",
        "status": "False",
        "reason": "Expired",
        "message": "expired at 2027-01-15T09:00:00Z",
        "lastProbeTime": "",
        "lastTransitionTime": "",
    }
    assert got["pending"]["phase"] == "Failed" and "nodeName" not in got["pending"]
    assert decision.deletes == ()  # user reservations are marked, never deleted
    # terminal ones are left alone on the next pass
    done = reservation("placed", phase="Failed", node="n1", ttl="1h")
    assert decide_on([node("n1")], [], T0 + 7200, reservations=[done]).statuses == ()


def test_a_placed_reservation_whose_node_is_gone_fails() -> None:
    res = reservation("r", phase="Available", node="gone")
    status = statuses(decide_on([node("n1")], [], T0 + 10, reservations=[res]))["r"]
    assert status["phase"] == "Failed"
    assert status["conditions"][-1]["message"] == "node gone no longer exists"


def test_a_steady_reservation_writes_nothing() -> None:
    res = reservation("r", phase="Available", node="n1")
    decision = decide_on([node("n1")], [], T0 + 10, reservations=[res])
    assert (decision.statuses, decision.creates, decision.deletes) == ((), (), ())
    assert decision.report()["reservations"] == [
        {"name": "r", "job": None, "node": "n1", "phase": "Available", "requests": {"cpu": "1", "memory": "1Gi"}}
    ]


def test_apply_decision_creates_patches_and_deletes() -> None:
    from koordpy.scheduler.plugins.reservation.controller import apply_decision
    from koordpy.scheduler.plugins.reservation.spec import reservation_from_dict
    from koordpy_testkit.reservations import reservation_dict, settings

    objects = {
        "user": reservation_dict("user", cpu="1"),
        "starving-default-gone-0": reservation_dict(
            "starving-default-gone-0",
            phase="Waiting",
            node="n1",
            labels={"koordpy.io/starving-job": "default.gone"},
            annotations={"koordpy.io/starving-job": "default/gone"},
        ),
    }
    pods = [pod("filler", "3", node="n1", created=T0 - 10), pod("big", "3")]
    now = T0 + 3600
    decision = decide_on(
        [node("n1")], pods, now, reservations=[reservation_from_dict(o) for o in objects.values()], config=settings()
    )
    after = apply_decision(objects, decision, now)
    assert sorted(after) == ["starving-default-big-0", "user"]
    assert after["user"]["status"]["phase"] == "Pending"  # 3 − 3 < 1: Unschedulable
    created = after["starving-default-big-0"]
    assert created["metadata"]["creationTimestamp"] == "2027-01-15T09:00:00Z"
    assert reservation_from_dict(created).phase == "Waiting"
    assert objects["user"].get("status") == {}  # the input is not modified
