"""The Reservation view: owners (entries ORed, fields ANDed), ttl/expires, defaults, field-path errors."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.model.objects import ObjectError, pod_from_dict
from koordpy.scheduler.plugins.reservation.spec import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ReservationAllocated,
    allocated_annotations,
    expiry,
    is_expired,
    is_owner,
    reservation_allocated,
    reservation_from_dict,
)
from koordpy_testkit.builders import PodBuilder
from koordpy_testkit.reservations import T0, reservation, reservation_dict


def web_pod(**labels: str) -> Any:
    raw = PodBuilder("web-1", "shop").uid("uid-web-1").owner("ReplicaSet", "web-rs").build()
    raw["metadata"]["ownerReferences"][0].update({"uid": "uid-rs", "controller": True})
    raw["metadata"]["labels"] = dict(labels)
    return pod_from_dict(raw)


@pytest.mark.parametrize(
    ("owners", "owns"),
    [
        ([{"object": {"namespace": "shop", "name": "web-1"}}], True),
        ([{"object": {"namespace": "other", "name": "web-1"}}], False),
        ([{"object": {"uid": "uid-web-1", "name": "renamed"}}], True),  # uid wins over name
        ([{"object": {"uid": "nope", "namespace": "shop", "name": "web-1"}}], False),
        ([{"controller": {"kind": "ReplicaSet", "name": "web-rs"}}], True),
        ([{"controller": {"uid": "uid-rs"}}], True),
        ([{"controller": {"kind": "ReplicaSet", "name": "web-rs", "namespace": "other"}}], False),
        ([{"controller": {"kind": "StatefulSet", "name": "web-rs"}}], False),
        ([{"labelSelector": {"matchLabels": {"app": "web"}}}], True),
        ([{"labelSelector": {"matchLabels": {"app": "db"}}}], False),
        ([{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]}}], True),
        ([{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}}], False),
        ([{"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}}], True),
        ([{"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}], False),
        # fields of one owner ANDed: object matches, selector does not → no
        ([{"object": {"namespace": "shop", "name": "web-1"}, "labelSelector": {"matchLabels": {"app": "db"}}}], False),
        ([{"object": {"namespace": "shop", "name": "web-1"}, "labelSelector": {"matchLabels": {"app": "web"}}}], True),
        # owners ORed: the second entry matches
        (
            [{"object": {"namespace": "shop", "name": "other"}}, {"labelSelector": {"matchLabels": {"app": "web"}}}],
            True,
        ),
        ([{}], False),  # an entry with no field matches nothing
    ],
)
def test_owner_matching(owners: list[dict[str, Any]], owns: bool) -> None:
    assert is_owner(reservation("r", owners=owners), web_pod(app="web")) is owns


@pytest.mark.parametrize(
    ("ttl", "expires", "deadline"),
    [
        (None, None, T0 + 86400),  # default ttl 24h from creation
        ("1h", None, T0 + 3600),
        ("0s", None, None),  # ttl 0 never expires
        ("1h", T0 + 60, T0 + 60),  # expires wins over ttl
        ("0s", T0 + 60, T0 + 60),
    ],
)
def test_expiry(ttl: str | None, expires: float | None, deadline: float | None) -> None:
    res = reservation("r", ttl=ttl, expires=expires)
    assert expiry(res) == deadline
    if deadline is not None:
        assert not is_expired(res, deadline - 1) and is_expired(res, deadline)
    else:
        assert not is_expired(res, T0 + 10 * 365 * 86400)


def test_defaults_and_template_requests_follow_the_pod_rule() -> None:
    raw = reservation_dict("r")
    raw["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}
    ]
    res = reservation_from_dict(raw)
    # max(init 2 cpu, containers 1 cpu) = 2 cpu; memory max(512Mi, 1Gi) = 1Gi
    assert res.requests == {"cpu": 2000, "memory": 1024**3}
    assert (res.allocate_once, res.pre_allocation, res.unschedulable, res.ttl_seconds) == (True, False, False, None)
    assert res.phase == "" and not res.is_active


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("spec", "ttl"), "soon", "spec.ttl"),
        (("spec", "expires"), "tomorrow", "spec.expires"),
        (("spec", "owners"), {"a": 1}, "spec.owners: expected a list"),
        (("spec", "allocateOnce"), "yes", "spec.allocateOnce: expected true or false"),
        (("status", "phase"), "Running", "status.phase: 'Running' is not a Reservation phase"),
        (("status", "allocatable"), {"cpu": "lots"}, "status.allocatable"),
        (("status", "allocated"), {"cpu": "-1"}, "status.allocated.cpu: negative quantity"),
    ],
)
def test_malformed_fields_name_their_path(path: tuple[str, str], value: Any, message: str) -> None:
    raw = reservation_dict("r")
    raw.setdefault(path[0], {})[path[1]] = value
    with pytest.raises(ObjectError, match=message.replace(".", r"\.").replace("(", r"\(")):
        reservation_from_dict(raw)


def test_bad_selector_operator_names_the_owner_entry() -> None:
    owners = [{"object": {"name": "x"}}, {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}]
    with pytest.raises(ObjectError, match=r"spec\.owners\[1\]\.labelSelector\.matchExpressions\[0\]\.operator"):
        reservation_from_dict(reservation_dict("r", owners=owners))


def test_allocated_annotation_is_koordinators_key_and_json() -> None:
    # Koordinator apis/extension/reservation.go: SchedulingDomainPrefix + "/reservation-allocated",
    # json.Marshal(ReservationAllocated{Name, UID}) with omitempty: no spaces, name first
    assert ANNOTATION_RESERVATION_ALLOCATED == "scheduling.koordinator.sh/reservation-allocated"
    res = reservation("web-hold")
    assert allocated_annotations(res) == {ANNOTATION_RESERVATION_ALLOCATED: '{"name":"web-hold","uid":"uid-web-hold"}'}
    assert reservation_allocated(allocated_annotations(res)) == ReservationAllocated("web-hold", "uid-web-hold")


@pytest.mark.parametrize(
    ("value", "record"),
    [
        ('{"name":"r","uid":"u"}', ReservationAllocated("r", "u")),
        ('{"name":"r"}', ReservationAllocated("r", "")),
        ('{"uid":"u"}', ReservationAllocated("", "u")),
        ('{"name": "r", "uid": "u", "extra": 1}', ReservationAllocated("r", "u")),  # unknown keys ignored
        ("", None),
        ("{}", None),
        ("[]", None),
        ("not json", None),
        ('{"name": 3}', None),
    ],
)
def test_reservation_allocated_reads_the_record_or_nothing(value: str, record: ReservationAllocated | None) -> None:
    assert reservation_allocated({ANNOTATION_RESERVATION_ALLOCATED: value}) == record


@pytest.mark.parametrize(
    ("record", "names"),
    [
        (ReservationAllocated("r", "uid-r"), True),
        (ReservationAllocated("other", "uid-r"), True),  # the uid decides
        (ReservationAllocated("r", "uid-old"), False),  # same name, another object
        (ReservationAllocated("r", ""), True),  # no uid: by name
        (ReservationAllocated("", ""), False),
    ],
)
def test_a_record_names_a_reservation_by_uid_else_by_name(record: ReservationAllocated, names: bool) -> None:
    assert record.names(reservation("r")) is names
