"""The disruption rule shared by arbitration and the preempt verb: which takings keep a running gang."""

from __future__ import annotations

from typing import Any, cast

import pytest

from koordpy.scheduler.plugins.gang.disruption import (
    GangTable,
    gang_table_from_specs,
    keeps_gang,
    preemption_refusal,
)
from koordpy.scheduler.plugins.gang.spec import API_SIGS, GangRef, GangSource, GangSpec, missing_spec

NS = "ml"
NATIVE = cast(GangSource, "scheduling.k8s.io")


def spec(name: str, minimum: int, disruption: str = "minimum", group: tuple[str, ...] = ()) -> GangSpec:
    ref = GangRef(NS, name, NATIVE if disruption != "minimum" else API_SIGS)
    return GangSpec(
        ref=ref,
        initialised=True,
        min_member=minimum,
        total_number=minimum,
        mode="Strict",
        match_policy="once-satisfied",
        wait_seconds=60.0,
        group=tuple(sorted({ref.id, *(f"{NS}/{g}" for g in group)})),
        create_time=None,
        disruption=cast(Any, disruption),
    )


NOT_FOUND = "gang ml/train: PodGroup ml/train (scheduling.k8s.io) not found"


def unseen(name: str = "train") -> GangSpec:
    """A native gang whose PodGroup the cache has not seen (as ``GangCache`` keeps it: not initialised)."""
    ref = GangRef(NS, name, NATIVE)
    return missing_spec(ref, f"gang {ref.id}: PodGroup {ref.id} ({NATIVE}) not found")


def table(*gangs: tuple[GangSpec, list[str]], pending: tuple[str, ...] = ()) -> GangTable:
    return gang_table_from_specs(
        ((s, [f"{NS}/{m}" for m in members]) for s, members in gangs), lambda key: key.split("/")[1] not in pending
    )


W = ["w0", "w1", "w2", "w3"]


@pytest.mark.parametrize(
    ("minimum", "disruption", "taken", "keeps"),
    [
        (4, "minimum", 0, True),  # nothing taken
        (4, "minimum", 1, False),  # 4-1 = 3 < 4
        (3, "minimum", 1, True),  # 4-1 = 3 >= 3
        (3, "minimum", 2, False),  # 4-2 = 2 < 3
        (0, "minimum", 4, True),  # 0 >= 0
        (4, "minimum", 4, False),  # 0 < 4: the whole gang, which callers allow as a unit
        (1, "all", 1, False),  # all: any member takes the gang apart
        (4, "single", 3, True),  # single: members are disrupted independently
    ],
)
def test_keeps_gang(minimum: int, disruption: str, taken: int, keeps: bool) -> None:
    gang = table((spec("train", minimum, disruption), W)).gangs[f"{NS}/train"]
    assert keeps_gang(gang, taken) is keeps


@pytest.mark.parametrize(
    ("taken", "keeps"),
    [
        (0, True),  # nothing taken
        (1, False),  # minimum unknown (the un-initialised spec says 0): 4-1 = 3 >= 0 would pass; held
        (4, False),  # every member seen: the PodGroup may count more, and its mode may be single or all
    ],
)
def test_a_gang_whose_podgroup_is_not_seen_keeps_no_disruption(taken: int, keeps: bool) -> None:
    gang = table((unseen(), W)).gangs[f"{NS}/train"]
    assert (gang.unknown, gang.min_member, len(gang.running)) == (NOT_FOUND, 0, 4)
    assert keeps_gang(gang, taken) is keeps


@pytest.mark.parametrize(
    ("problem", "unknown"),
    [
        # the cache's own words
        (NOT_FOUND, NOT_FOUND),
        # an un-initialised spec without a problem (as a dropped gang's) still says why
        ("", "gang ml/train: PodGroup ml/train (scheduling.k8s.io) not seen yet"),
    ],
)
def test_an_unknown_gang_says_why(problem: str, unknown: str) -> None:
    found = table((missing_spec(GangRef(NS, "train", NATIVE), problem), W))
    assert found.gangs[f"{NS}/train"].unknown == unknown
    assert table((spec("train", 4), W)).gangs[f"{NS}/train"].unknown == ""


@pytest.mark.parametrize(
    ("pending", "victims", "refused"),
    [
        # one running member of four
        ((), ["w0"], f"preempting would break gang ml/train ({NOT_FOUND}: its minimum is unknown)"),
        # all four seen: still refused (a gang of minimum 0 would let them go whole)
        ((), W, f"preempting would break gang ml/train ({NOT_FOUND}: its minimum is unknown)"),
        # a pending member takes nothing that runs
        (("w3",), ["w3"], None),
    ],
)
def test_a_gang_whose_podgroup_is_not_seen_refuses_preemption(
    pending: tuple[str, ...], victims: list[str], refused: str | None
) -> None:
    found = table((unseen(), W), pending=pending)
    assert preemption_refusal([f"{NS}/{v}" for v in victims], found) == refused


@pytest.mark.parametrize(
    ("gangs", "pending", "victims", "refused"),
    [
        # minimum 4, 4 run: one victim leaves 3 < 4
        ("strict4", (), ["w0"], "preempting would break gang ml/train (Strict, minimum 4: 3 of 4 would keep running)"),
        # all four victims: 0 left, the whole gang goes
        ("strict4", (), W, None),
        # w3 pending: 3 run; all three running ones are victims: the gang goes whole
        ("strict4", ("w3",), ["w0", "w1", "w2"], None),
        # minimum 2: 4-2 = 2 >= 2
        ("strict2", (), ["w0", "w1"], None),
        # a victim in no gang
        ("strict4", (), ["other"], None),
        # all: one of four
        (
            "all",
            (),
            ["w0"],
            "preempting would break gang ml/train (disruptionMode all: 1 of its 4 running members would go)",
        ),
        ("all", (), W, None),
        # single: any number
        ("single", (), ["w0", "w1", "w2"], None),
        # GangGroup [a, b] (minimum 2 each): a whole while b keeps running breaks the group
        (
            "group",
            (),
            ["a0", "a1"],
            "preempting would break gang ml/a (its 2 running members would go while 2 of GangGroup [ml/a,ml/b] keep running)",
        ),
        # the whole group
        ("group", (), ["a0", "a1", "b0", "b1"], None),
        # one of a: 2-1 = 1 < 2
        ("group", (), ["a0"], "preempting would break gang ml/a (Strict, minimum 2: 1 of 2 would keep running)"),
    ],
)
def test_preemption_refusal(gangs: str, pending: tuple[str, ...], victims: list[str], refused: str | None) -> None:
    built = {
        "strict4": [(spec("train", 4), W)],
        "strict2": [(spec("train", 2), W)],
        "all": [(spec("train", 2, "all"), W)],
        "single": [(spec("train", 4, "single"), W)],
        "group": [(spec("a", 2, group=("b",)), ["a0", "a1"]), (spec("b", 2, group=("a",)), ["b0", "b1"])],
    }[gangs]
    found = table(*built, pending=pending)
    assert preemption_refusal([f"{NS}/{v}" for v in victims], found) == refused
