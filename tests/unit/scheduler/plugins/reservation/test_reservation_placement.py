"""Placement of Pending reservations and the node score (seed's map step)."""

from __future__ import annotations

import pytest

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.objects import nodemetric_from_dict
from koordpy.scheduler.plugins.reservation.controller import ReservationInputs, decide
from koordpy.scheduler.plugins.reservation.placement import node_score, node_uses, place, unavailable_summary
from koordpy_testkit.builders import NodeMetricBuilder
from koordpy_testkit.reservations import T0, node, pod, reservation, settings

GI = 1024**3


@pytest.mark.parametrize(
    ("free", "requests", "score"),
    [
        # the docstring's worked example: ((6.67 + 3.33) / 2 + 2 × 10) / 3 = 8.33
        ({"cpu": 2000, "memory": GI, "nvidia.com/gpu": 1}, {"cpu": 3000, "memory": 3 * GI, "nvidia.com/gpu": 1}, 8.33),
        ({"cpu": 4000, "memory": 4 * GI}, {"cpu": 3000, "memory": 3 * GI}, 10.0),  # capped at 10
        ({"cpu": -1000, "memory": 0}, {"cpu": 3000, "memory": 3 * GI}, 0.0),  # negative free counts as 0
        ({"cpu": 1500, "memory": 3 * GI}, {"cpu": 3000}, 7.5),  # memory not requested: 10; (5 + 10) / 2
        (
            {"cpu": 3000, "memory": 3 * GI, "nvidia.com/gpu": 0},
            {"cpu": 3000, "nvidia.com/gpu": 2},
            3.33,
        ),  # (10 + 0) / 3
    ],
)
def test_node_score(free: dict[str, int], requests: dict[str, int], score: float) -> None:
    assert round(node_score(free, requests), 2) == score


def test_without_pre_allocation_free_must_cover_it_and_the_best_scored_node_wins() -> None:
    nodes = [node("n1"), node("n2"), node("n3", cpu="8")]
    pods = [pod("a", "2", node="n1"), pod("b", "1", node="n2")]
    res = reservation("r", cpu="2")
    # n1 free 1 cpu < 2: Insufficient cpu. n2 free 2: score 10. n3 free 8: score 10 → tie, by name: n2.
    result = place(res, nodes, node_uses(nodes, pods), {})
    assert (result.node, result.phase) == ("n2", "Available")
    assert [c.node for c in result.candidates] == ["n2", "n3"]


def test_pre_allocation_counts_allocatable_minus_other_reservations_only() -> None:
    nodes = [node("n1")]
    pods = [pod("a", "2", node="n1")]
    uses = node_uses(nodes, pods)
    waiting = place(reservation("r", cpu="3", pre_allocation=True), nodes, uses, {})
    assert (waiting.node, waiting.phase) == ("n1", "Waiting")  # 3 − 0 ≥ 3, but 3 − 2 < 3 free now
    available = place(reservation("r", cpu="1", pre_allocation=True), nodes, uses, {})
    assert (available.node, available.phase) == ("n1", "Available")
    too_big = place(reservation("r", cpu="4", pre_allocation=True), nodes, uses, {})
    assert (too_big.node, too_big.phase) == (None, "Pending")
    assert too_big.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_pending_reservations_are_placed_oldest_first_each_seeing_the_previous() -> None:
    # one 3-cpu node; three 2-cpu reservations: the oldest fits, the next two do not (3 − 2 < 2).
    nodes = [node("n1")]
    rs = [reservation(f"r{i}", cpu="2", created=T0 + 10 - i) for i in range(3)]
    decision = decide(ReservationInputs(nodes, [], [], rs), settings(), T0 + 20)
    phases = {s.name: (s.status["phase"], s.status.get("nodeName")) for s in decision.statuses}
    assert phases == {"r2": ("Available", "n1"), "r1": ("Pending", None), "r0": ("Pending", None)}
    pending = next(s for s in decision.statuses if s.name == "r1").status["conditions"][0]
    assert (pending["type"], pending["status"], pending["reason"]) == ("Scheduled", "False", "Unschedulable")
    assert pending["message"] == "0/1 nodes are available: 1 Insufficient cpu."


def test_template_placement_constraints_are_filters() -> None:
    nodes = [node("n1"), node("n2")]
    res = reservation("r", node_selector={"kubernetes.io/hostname": "n2"})
    assert place(res, nodes, node_uses(nodes, []), {}).node == "n2"
    nowhere = reservation("r", node_selector={"pool": "gpu"})
    result = place(nowhere, nodes, node_uses(nodes, []), {})
    assert result.message == "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def test_cordoned_nodes_are_skipped() -> None:
    nodes = [node("n1", cordoned=True), node("n2")]
    assert place(reservation("r"), nodes, node_uses(nodes, []), {}).node == "n2"


def test_the_load_aware_filter_applies_without_pre_allocation_only() -> None:
    nodes = [node("n1", cpu="4"), node("n2", cpu="4")]
    # n1 is 90 % busy by measurement (threshold cpu 65 %); n2 has no NodeMetric: passes (fail open).
    hot = nodemetric_from_dict(NodeMetricBuilder("n1").updated(T0).usage(cpu="3600m", memory="1Gi").build())
    args = LoadAwareSchedulingArgs.model_validate({})
    plain = reservation("plain", cpu="1", created=T0)
    inputs = ReservationInputs(nodes, [], [], [plain], metrics={"n1": hot})
    decision = decide(inputs, settings(), T0 + 10, loadaware=args)
    assert [(s.name, s.status["nodeName"]) for s in decision.statuses] == [("plain", "n2")]
    # without the args the tie (both empty, score 10) goes to n1 by name
    assert [s.status["nodeName"] for s in decide(inputs, settings(), T0 + 10).statuses] == ["n1"]
    # preAllocation: not applied, the busy node stays a candidate
    only_hot = ReservationInputs(
        [nodes[0]], [], [], [reservation("pre", cpu="1", pre_allocation=True)], metrics={"n1": hot}
    )
    assert [s.status["nodeName"] for s in decide(only_hot, settings(), T0 + 10, loadaware=args).statuses] == ["n1"]


def test_unavailable_summary_counts_reasons() -> None:
    assert unavailable_summary(3, ["b", "a", "b"]) == "0/3 nodes are available: 1 a, 2 b."
    assert unavailable_summary(0, []) == "0/0 nodes are available."
