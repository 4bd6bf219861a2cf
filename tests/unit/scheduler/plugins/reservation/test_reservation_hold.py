"""The hold against every scheduler: which nodes carry koordpy's taint, which pods get the toleration.

Nodes n1, n2, n3 (3 cpu). ``starving`` is a starving-job Reservation (label ``koordpy.io/starving-job``)
for pending pod ``default/big``; ``user`` a user Reservation for ``default/web``.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.model.objects import NodeInfo, node_from_dict
from koordpy.scheduler.plugins.reservation.hold import (
    ANNOTATION_TAINT_NODE,
    TAINT,
    TOLERATION,
    hold_plan,
    taints_with,
    taints_without,
    tolerates_hold,
    tolerations_with,
)
from koordpy.scheduler.plugins.reservation.placement import constraints, tolerating_hold
from koordpy.scheduler.plugins.reservation.starving import LABEL_STARVING_JOB
from koordpy_testkit.builders import NodeBuilder
from koordpy_testkit.reservations import T0, allocated, pod, reservation

OTHER_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def node(name: str, *taints: dict[str, str]) -> NodeInfo:
    raw = NodeBuilder(name).allocatable(cpu="3", memory="3Gi", pods="110").build()
    raw["spec"] = {"taints": [dict(t) for t in taints]}
    return node_from_dict(raw)


def held(name: str, node_name: str, owner: str, *, starving: bool = True, annotated: bool = False, **kw: Any) -> Any:
    return reservation(
        name,
        owners=[{"object": {"namespace": "default", "name": owner}}],
        phase=kw.pop("phase", "Waiting"),
        node=node_name,
        labels={LABEL_STARVING_JOB: f"default.{owner}"} if starving else {},
        annotations={ANNOTATION_TAINT_NODE: "true"} if annotated else {},
        **kw,
    )


@pytest.mark.parametrize(
    ("case", "nodes", "pods", "reservations", "tolerations", "taint", "untaint", "tolerate"),
    [
        # a starving-job Reservation Waiting on n2 for pending big: tolerate big, taint n2
        ("starving", [node("n1"), node("n2")], [pod("big", "3")], [held("s", "n2", "big")], {}, ["n2"], [], ["big"]),
        # big already tolerates (an earlier round): only the taint is missing
        (
            "already-tolerated",
            [node("n1"), node("n2")],
            [pod("big", "3")],
            [held("s", "n2", "big")],
            {"big": [dict(TOLERATION)]},
            ["n2"],
            [],
            [],
        ),
        # n1 still tainted from a Reservation deleted since; n2 tainted and held: untaint n1 only
        (
            "stale-taint",
            [node("n1", TAINT), node("n2", TAINT)],
            [pod("big", "3")],
            [held("s", "n2", "big")],
            {"big": [dict(TOLERATION)]},
            [],
            ["n1"],
            [],
        ),
        # big bound through it: consumed (allocateOnce), n2 holds nothing any more: untaint
        (
            "consumed",
            [node("n2", TAINT)],
            [pod("big", "3", node="n2", annotations=allocated("s"))],
            [held("s", "n2", "big")],
            {},
            [],
            ["n2"],
            [],
        ),
        # a user Reservation taints nothing unless it opts in
        ("user", [node("n1")], [pod("web")], [held("u", "n1", "web", starving=False)], {}, [], [], []),
        (
            "user-opt-in",
            [node("n1")],
            [pod("web")],
            [held("u", "n1", "web", starving=False, annotated=True, phase="Available")],
            {},
            ["n1"],
            [],
            ["web"],
        ),
        # expired (24 h default ttl) or Pending (no node): holds nothing, nothing tainted
        (
            "expired",
            [node("n1", TAINT)],
            [pod("big", "3")],
            [held("s", "n1", "big", created=T0 - 86_400)],
            {},
            [],
            ["n1"],
            [],
        ),
        ("pending", [node("n1")], [pod("big", "3")], [held("s", "", "big", phase="Pending")], {}, [], [], []),
        # a pod that tolerates every taint needs nothing; a pod already bound elsewhere is not touched
        (
            "tolerates-all",
            [node("n1")],
            [pod("big", "3")],
            [held("s", "n1", "big")],
            {"big": [{"operator": "Exists"}]},
            ["n1"],
            [],
            [],
        ),
        (
            "bound-elsewhere",
            [node("n1"), node("n2")],
            [pod("big", "3", node="n2")],
            [held("s", "n1", "big")],
            {},
            ["n1"],
            [],
            [],
        ),
        # other taints on the node are never touched by the plan (only ours counts as "tainted")
        ("other-taint", [node("n1", OTHER_TAINT)], [], [], {}, [], [], []),
    ],
)
def test_hold_plan(
    case: str,
    nodes: list[NodeInfo],
    pods: list[Any],
    reservations: list[Any],
    tolerations: dict[str, list[dict[str, str]]],
    taint: list[str],
    untaint: list[str],
    tolerate: list[str],
) -> None:
    by_uid = {p.uid: tolerations.get(p.name, []) for p in pods}
    plan = hold_plan(nodes, pods, reservations, by_uid, T0 + 60, enabled=True)
    assert (list(plan.taint), list(plan.untaint), [p.name for p in plan.tolerate]) == (taint, untaint, tolerate)


def test_switched_off_every_taint_of_ours_goes_and_nothing_is_tolerated() -> None:
    plan = hold_plan(
        [node("n1", TAINT), node("n2", OTHER_TAINT)], [pod("big", "3")], [held("s", "n1", "big")], {}, T0, enabled=False
    )
    assert (plan.taint, plan.untaint, plan.tolerate) == ((), ("n1",), ())


def test_taint_lists_keep_every_other_taint() -> None:
    assert taints_with([OTHER_TAINT]) == [OTHER_TAINT, dict(TAINT)]
    assert taints_with([OTHER_TAINT, dict(TAINT)]) == [OTHER_TAINT, dict(TAINT)]  # present: unchanged
    assert taints_without([dict(TAINT), OTHER_TAINT]) == [OTHER_TAINT]
    # a NoExecute taint with our key is not ours (we only ever write NoSchedule)
    foreign = {"key": TAINT["key"], "effect": "NoExecute"}
    assert taints_without([foreign]) == [foreign]


@pytest.mark.parametrize(
    ("tolerations", "tolerates"),
    [
        ([], False),
        ([dict(TOLERATION)], True),
        ([{"operator": "Exists"}], True),  # empty key + Exists: every taint
        ([{"key": "koordpy.io/reserved", "operator": "Equal", "value": ""}], True),  # our taint has no value
        ([{"key": "koordpy.io/reserved", "operator": "Equal", "value": "x"}], False),
        ([{"key": "koordpy.io/reserved", "operator": "Exists", "effect": "NoExecute"}], False),
        ([{"key": "other", "operator": "Exists"}], False),
    ],
)
def test_toleration_matching(tolerations: list[dict[str, str]], tolerates: bool) -> None:
    assert tolerates_hold(tolerations) is tolerates
    added = tolerations_with(tolerations)
    assert added[: len(tolerations)] == tolerations  # only an addition (what a pod update allows)
    assert tolerates_hold(added)


def test_placement_ignores_the_hold_taint_but_no_other() -> None:
    # placement accounts for a held node through its Reservations: our taint never fails a template
    template = reservation("r").placement
    assert constraints(template, node("n1", TAINT)).is_success
    assert not constraints(template, node("n1", OTHER_TAINT)).is_success
    assert tolerating_hold(tolerating_hold(template)) == tolerating_hold(template)
