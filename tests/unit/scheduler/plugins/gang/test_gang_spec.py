"""Gang membership and parameters: resolution order, defaults, clamping, first writer wins (reference §2.1–2.2)."""

from __future__ import annotations

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache, gang_ref, spec_from_pod, spec_from_podgroup
from koordpy.scheduler.plugins.gang.spec import GangRef
from koordpy_testkit.gangs import member, podgroup

ARGS = CoschedulingArgs.model_validate({})
CROSS = CoschedulingArgs.model_validate({"crossNamespaceGroups": True})
SIGS = "pod-group.scheduling.sigs.k8s.io"
SIGS_NAME = "pod-group.scheduling.sigs.k8s.io/name"
X_K8S = "scheduling.x-k8s.io/pod-group"
A = "gang.scheduling.koordinator.sh/"


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        # Only the Koordinator annotation: an annotation-way gang, id = pod namespace / name.
        ({}, {A + "name": "ann"}, ("default/ann", "annotations")),
        # The deprecated /name label beats the annotation (step 3 before step 4).
        ({SIGS_NAME: "old"}, {A + "name": "ann"}, ("default/old", "annotations")),
        # The x-k8s.io label beats the deprecated label and the annotation (koordpy's step 2).
        ({X_K8S: "x", SIGS_NAME: "old"}, {A + "name": "ann"}, ("default/x", "scheduling.x-k8s.io")),
        # The sigs.k8s.io PodGroup label beats everything (step 1).
        ({SIGS: "pg", X_K8S: "x", SIGS_NAME: "old"}, {A + "name": "ann"}, ("default/pg", "scheduling.sigs.k8s.io")),
        # An empty label value counts as absent (Koordinator tests `== ""`), so the annotation decides.
        ({SIGS: ""}, {A + "name": "ann"}, ("default/ann", "annotations")),
        # Nothing: no gang.
        ({"app": "web"}, {}, None),
    ],
)
def test_resolution_order(
    labels: dict[str, str], annotations: dict[str, str], expected: tuple[str, str] | None
) -> None:
    ref = gang_ref(member("p", labels=labels, annotations=annotations))
    assert (None if ref is None else (ref.id, ref.source)) == expected


REF = GangRef("default", "g", "annotations")


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"),
    [
        # min 5, nothing else: total = min = 5, Strict, once-satisfied (args default), wait 600 s (args
        # default), group = just itself.
        ({A + "min-available": "5"}, {}, (True, 5, 5, "Strict", "once-satisfied", 600.0, ("default/g",))),
        # 0 is accepted as min (Koordinator parses it and does not clamp).
        ({A + "min-available": "0"}, {}, (True, 0, 0, "Strict", "once-satisfied", 600.0, ("default/g",))),
        # The deprecated min-available label wins over the annotation: min 3, not 5.
        (
            {A + "min-available": "5"},
            {"pod-group.scheduling.sigs.k8s.io/min-available": "3"},
            (True, 3, 3, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        # total-number below min is clamped up to min (4 < 5 → 5); an unparseable one → min too.
        (
            {A + "min-available": "5", A + "total-number": "4"},
            {},
            (True, 5, 5, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "5", A + "total-number": "x"},
            {},
            (True, 5, 5, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        # total-number above min is kept; an explicit "0" is kept as 0 (Koordinator: `!= 0 && < min`).
        (
            {A + "min-available": "5", A + "total-number": "8"},
            {},
            (True, 5, 8, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "5", A + "total-number": "0"},
            {},
            (True, 5, 0, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        # mode: exactly "NonStrict" switches; "nonstrict" (wrong case) → Strict.
        (
            {A + "min-available": "1", A + "mode": "NonStrict"},
            {},
            (True, 1, 1, "NonStrict", "once-satisfied", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "mode": "nonstrict"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        # waiting-time: a Go duration; 0, negative, bare number or garbage → defaultTimeout 600 s.
        (
            {A + "min-available": "1", A + "waiting-time": "3600s"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 3600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "waiting-time": "1h30m"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 5400.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "waiting-time": "0s"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "waiting-time": "-5m"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "waiting-time": "90"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        # match-policy: the main key, else the alias key; unknown → args default (once-satisfied).
        (
            {A + "min-available": "1", A + "match-policy": "only-waiting"},
            {},
            (True, 1, 1, "Strict", "only-waiting", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", "pod-group.scheduling.sigs.k8s.io/match-policy": "waiting-and-running"},
            {},
            (True, 1, 1, "Strict", "waiting-and-running", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "match-policy": "sometimes"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        # groups: a JSON array, sorted (the GangGroup id joins them with ","); invalid JSON → itself; the
        # gang itself is always added (Koordinator keeps an array that omits it as given); entries in
        # another namespace are left out (gang.crossNamespaceGroups is off by default).
        (
            {A + "min-available": "1", A + "groups": '["default/b", "default/g"]'},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/b", "default/g")),
        ),
        (
            {A + "min-available": "1", A + "groups": '["ns-b/b", "default/g"]'},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "groups": "[ns-b/b"},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g",)),
        ),
        (
            {A + "min-available": "1", A + "groups": '["default/y"]'},
            {},
            (True, 1, 1, "Strict", "once-satisfied", 600.0, ("default/g", "default/y")),
        ),
        # min-available missing or not a decimal int32 → not initialised (Koordinator keeps HasGangInit false).
        ({}, {}, (False, 0, 0, "Strict", "once-satisfied", 0.0, ("default/g",))),
        ({A + "min-available": "five"}, {}, (False, 0, 0, "Strict", "once-satisfied", 0.0, ("default/g",))),
        ({A + "min-available": "3000000000"}, {}, (False, 0, 0, "Strict", "once-satisfied", 0.0, ("default/g",))),
    ],
)
def test_annotation_way_defaults_and_clamping(
    annotations: dict[str, str], labels: dict[str, str], expected: tuple[object, ...]
) -> None:
    spec = spec_from_pod(REF, member("p", labels=labels, annotations=annotations), ARGS)
    got = (
        spec.initialised,
        spec.min_member,
        spec.total_number,
        spec.mode,
        spec.match_policy,
        spec.wait_seconds,
        spec.group,
    )
    assert got == expected


def test_group_id_is_the_sorted_ids_joined_with_commas() -> None:
    spec = spec_from_pod(
        REF, member("p", annotations={A + "min-available": "1", A + "groups": '["z/z","a/a","default/g"]'}), CROSS
    )
    assert spec.group_id == "a/a,default/g,z/z"


@pytest.mark.parametrize(
    ("args", "group", "left_out"),
    [
        # Off (the default): other namespaces' gangs are left out of the group, and said so.
        (ARGS, ("default/a", "default/g"), ("x/b", "y/c")),
        # On: every entry is kept; each named gang must still declare the same group to count (GangCache).
        (CROSS, ("default/a", "default/g", "x/b", "y/c"), ()),
    ],
)
def test_cross_namespace_entries(args: CoschedulingArgs, group: tuple[str, ...], left_out: tuple[str, ...]) -> None:
    raw = '["y/c", "default/a", "x/b"]'
    spec = spec_from_pod(REF, member("p", annotations={A + "min-available": "1", A + "groups": raw}), args)
    assert (spec.group, spec.left_out) == (group, left_out)


def test_args_default_match_policy_and_timeout_apply() -> None:
    args = CoschedulingArgs.model_validate({"defaultTimeout": "20m", "defaultMatchPolicy": "only-waiting"})
    spec = spec_from_pod(REF, member("p", annotations={A + "min-available": "2"}), args)
    # 20m = 1200 s; policy from the args because the pod names none.
    assert (spec.wait_seconds, spec.match_policy) == (1200.0, "only-waiting")


@pytest.mark.parametrize(
    ("min_member", "timeout", "annotations", "expected"),
    [
        # minMember 4, no timeout → defaultTimeout 600 s; total = min.
        (4, None, {}, (4, 4, 600.0, "Strict")),
        # scheduleTimeoutSeconds > 0 is used; 0 → default (reference: used only if > 0).
        (4, 30, {}, (4, 4, 30.0, "Strict")),
        (4, 0, {}, (4, 4, 600.0, "Strict")),
        # Koordinator annotations on the PodGroup apply with the same rules.
        (4, None, {A + "total-number": "6", A + "mode": "NonStrict"}, (4, 6, 600.0, "NonStrict")),
        # minMember unset → 0.
        (None, None, {}, (0, 0, 600.0, "Strict")),
    ],
)
def test_podgroup_way(
    min_member: int | None, timeout: int | None, annotations: dict[str, str], expected: tuple[object, ...]
) -> None:
    pg = podgroup("g", min_member, timeout=timeout, annotations=annotations)
    spec = spec_from_podgroup(GangRef("default", "g", "scheduling.sigs.k8s.io"), pg, ARGS)
    assert (spec.min_member, spec.total_number, spec.wait_seconds, spec.mode) == expected


def test_first_writer_wins_for_annotation_gangs() -> None:
    cache = GangCache(ARGS)
    # p1 arrives first with min 3; p2 says min 5 and NonStrict: ignored, the gang keeps p1's values.
    cache.upsert_pod(member("p1", annotations={A + "name": "g", A + "min-available": "3"}))
    cache.upsert_pod(member("p2", annotations={A + "name": "g", A + "min-available": "5", A + "mode": "NonStrict"}))
    view = cache.view("default/g")
    assert view is not None
    assert (view.spec.min_member, view.spec.mode, view.children) == (3, "Strict", ("default/p1", "default/p2"))


def test_first_parseable_writer_wins() -> None:
    cache = GangCache(ARGS)
    # p1 has no parseable min → the gang stays un-initialised; p2 initialises it; p3 is ignored.
    cache.upsert_pod(member("p1", annotations={A + "name": "g", A + "min-available": "lots"}))
    assert cache.view("default/g").spec.initialised is False  # type: ignore[union-attr]
    cache.upsert_pod(member("p2", annotations={A + "name": "g", A + "min-available": "2"}))
    cache.upsert_pod(member("p3", annotations={A + "name": "g", A + "min-available": "7"}))
    assert cache.view("default/g").spec.min_member == 2  # type: ignore[union-attr]


def test_podgroup_update_is_reread() -> None:
    cache = GangCache(ARGS)
    cache.upsert_podgroup(podgroup("g", 3))
    cache.upsert_pod(member("p1", labels={SIGS: "g"}))
    cache.upsert_podgroup(podgroup("g", 5, annotations={A + "mode": "NonStrict"}))
    spec = cache.view("default/g").spec  # type: ignore[union-attr]
    # Unlike annotation gangs, a PodGroup's new spec replaces the old one.
    assert (spec.min_member, spec.mode) == (5, "NonStrict")


def test_label_naming_a_missing_podgroup_is_not_initialised() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("p1", labels={X_K8S: "nope"}))
    spec = cache.view("default/nope").spec  # type: ignore[union-attr]
    assert (spec.initialised, spec.wait_seconds) == (False, 0.0)
    assert spec.problem == "gang default/nope: PodGroup default/nope (scheduling.x-k8s.io) not found"
