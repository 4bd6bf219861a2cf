"""Equivalence: ``decide`` with the pass's shared :class:`NodeTables` (pods bound once, constraint
verdicts once per placement, the best node by name rank) decides exactly what a straightforward
composition of the same rules decides: ``reference_place`` and ``reference_placeable`` below build
fresh tables per call and walk every node, as the first implementation did. Random clusters, several
passes each (creates applied), user reservations placed and pending, preAllocation, node selectors,
cordoned nodes, pending pods with a node selector, the load-aware filter on and off (some nodes measured
hot, so it fails them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import NodeInfo, PodInfo, nodemetric_from_dict
from koordpy.model.placement import PodPlacement
from koordpy.model.resources import ResourceList
from koordpy.scheduler.framework.fit import filter_node
from koordpy.scheduler.plugins.reservation import controller
from koordpy.scheduler.plugins.reservation.controller import ReservationDecision, ReservationInputs, decide
from koordpy.scheduler.plugins.reservation.ledger import Holding, reserved_against
from koordpy.scheduler.plugins.reservation.placement import (
    Candidate,
    LoadFilter,
    NodeUse,
    PlacementResult,
    constraints,
    node_scores,
    requests_table,
    reservation_pod,
    reserved_by_others,
    template_vector,
    unavailable_summary,
)
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, reservation_from_dict
from koordpy.scheduler.plugins.reservation.starving import Job
from koordpy_testkit.builders import NodeMetricBuilder
from koordpy_testkit.reservations import T0, node, pod, reservation
from koordpy_testkit.reservations import settings as reservation_settings

LATER = T0 + 3600.0


def _sum(*lists: Mapping[str, int]) -> ResourceList:
    out: ResourceList = {}
    for resources in lists:
        for name, amount in resources.items():
            out[name] = out.get(name, 0) + amount
    return out


def reference_place(
    res: ReservationInfo,
    nodes: Sequence[NodeInfo],
    uses: Mapping[str, NodeUse],
    holdings: Mapping[str, Sequence[Holding]],
    *,
    load_filter: LoadFilter | None = None,
    only_nodes: frozenset[str] | None = None,
    **_: object,
) -> PlacementResult:
    """Fresh tables per call, constraints per fitting node, the best by a key per candidate."""
    failures: dict[str, str] = {}
    candidates: list[Candidate] = []
    others = {n.name: reserved_by_others(res.name, holdings.get(n.name, ())) for n in nodes}
    requested = {n.name: (uses[n.name].requested if n.name in uses else {}) for n in nodes}
    busy = {n.name: _sum(requested[n.name], others[n.name]) for n in nodes}
    table = requests_table(nodes, others if res.pre_allocation else busy, res.requests)
    now_table = requests_table(nodes, busy, res.requests) if res.pre_allocation else table
    vec = template_vector(table, res.requests)
    covered_rows = now_table.feasible(vec)
    scores = node_scores(now_table.free, now_table.resources, res.requests)
    fitting = table.feasible(vec)
    for row, one in enumerate(nodes):
        if only_nodes is not None and one.name not in only_nodes:
            failures[one.name] = "node(s) exceed the reserved node limit"
            continue
        if not fitting[row]:
            failures[one.name] = ""
            continue
        status = constraints(res.placement, one)
        if not status.is_success:
            failures[one.name] = status.reason
            continue
        candidates.append(Candidate(one.name, bool(covered_rows[row]), float(scores[row])))
    if load_filter is not None and not res.pre_allocation and candidates:
        failing = load_filter(reservation_pod(res), [c.node for c in candidates])
        for name, status in failing.items():
            failures[name] = status.reason
        candidates = [c for c in candidates if c.node not in failing]
    if not candidates:
        for row, one in enumerate(nodes):
            if failures.get(one.name) == "":
                failures[one.name] = filter_node(res.placement, one, table, row, vec).reason
        return PlacementResult(None, "Pending", unavailable_summary(len(nodes), failures.values()))
    best = min(candidates, key=lambda c: (-round(c.score, 6), c.node))
    phase: Literal["Available", "Waiting"] = "Available" if best.covered else "Waiting"
    why = "free resources cover the template" if best.covered else "waiting for the node's pods to leave"
    message = f"placed on {best.node} (node score {best.score:.2f}): {why}"
    found = tuple(candidates)
    return PlacementResult(best.node, phase, message, lambda: found)


def reference_placeable(
    job: Job,
    nodes: Sequence[NodeInfo],
    uses: Mapping[str, NodeUse],
    holdings: Mapping[str, Sequence[Holding]],
    placements: Mapping[str, PodPlacement],
    **_: object,
) -> bool:
    """Fresh tables per missing member over every node, the first fitting node that passes constraints."""
    need = job.min_member - len(job.bound)
    if need <= 0:
        return False
    assumed: dict[str, ResourceList] = {}
    placed = 0
    for member in job.unbound:
        if placed >= need:
            break
        used: dict[str, ResourceList] = {}
        for one in nodes:
            taken: ResourceList = dict(uses[one.name].requested) if one.name in uses else {}
            for extra in (assumed.get(one.name, {}), reserved_against(member, holdings.get(one.name, ()))):
                for name, amount in extra.items():
                    taken[name] = taken.get(name, 0) + amount
            used[one.name] = taken
        table = requests_table(nodes, used, member.requests)
        vec = template_vector(table, member.requests)
        placement = placements.get(member.uid, PodPlacement())
        for row in np.flatnonzero(table.feasible(vec)).tolist():
            if constraints(placement, nodes[row]).is_success:
                extra = assumed.setdefault(nodes[row].name, {})
                for name, amount in member.requests.items():
                    extra[name] = extra.get(name, 0) + amount
                placed += 1
                break
        else:
            return False
    return placed >= need


def _passes(
    inputs: ReservationInputs, loadaware: LoadAwareSchedulingArgs | None, percent: int, steps: int
) -> list[ReservationDecision]:
    config = reservation_settings(reservedNodePercent=percent)
    held = list(inputs.reservations)
    out = []
    for step in range(steps):
        now = LATER + step
        decision = decide(dataclasses.replace(inputs, reservations=held), config, now, loadaware=loadaware)
        out.append(decision)
        by_name = {r.name: r for r in held}
        for update in decision.statuses:
            old = by_name[update.name]
            by_name[update.name] = dataclasses.replace(
                old, phase=update.status["phase"], node_name=update.status.get("nodeName", "")
            )
        for gone in decision.deletes:
            by_name.pop(gone.name, None)
        for create in decision.creates:
            meta = {**create.manifest["metadata"], "creationTimestamp": format_rfc3339(now)}
            by_name[create.name] = reservation_from_dict({**create.manifest, "metadata": meta, "status": create.status})
        held = list(by_name.values())
    return out


@settings(max_examples=80, deadline=None)
@given(
    node_cpus=st.lists(st.integers(1, 8), min_size=1, max_size=9),
    cordoned=st.integers(0, 2),
    zone_a=st.lists(st.booleans(), min_size=9, max_size=9),
    busy=st.lists(st.integers(0, 8), min_size=9, max_size=9),
    users=st.lists(
        st.tuples(st.integers(1, 6), st.booleans(), st.booleans(), st.integers(-1, 8)), min_size=0, max_size=6
    ),
    jobs=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 600), st.booleans()), min_size=0, max_size=6),
    percent=st.sampled_from([0, 34, 50, 100]),
    load_aware=st.booleans(),
    hot=st.lists(st.booleans(), min_size=9, max_size=9),
)
def test_pass_decides_as_the_reference_composition(
    node_cpus: list[int],
    cordoned: int,
    zone_a: list[bool],
    busy: list[int],
    users: list[tuple[int, bool, bool, int]],
    jobs: list[tuple[int, int, bool]],
    percent: int,
    load_aware: bool,
    hot: list[bool],
) -> None:
    nodes = [
        dataclasses.replace(
            node(f"n{i}", cpu=str(c), cordoned=i < cordoned), labels={"zone": "a" if zone_a[i] else "b"}
        )
        for i, c in enumerate(node_cpus)
    ]
    pods: list[PodInfo] = [
        pod(f"f{i}", str(min(busy[i], c)), "1Mi", node=f"n{i}", created=T0 - 10)
        for i, c in enumerate(node_cpus)
        if busy[i]
    ]
    pending = [pod(f"j{k}", str(cpu), "1Mi", priority=prio) for k, (cpu, prio, _) in enumerate(jobs)]
    zoned_pods = {
        p.uid: PodPlacement(node_selector={"zone": "a"}) for p, job in zip(pending, jobs, strict=True) if job[2]
    }
    pods += pending
    # hot nodes: measured 90 % busy (above the default 65 % cpu threshold), so the load-aware filter fails them
    metrics = {
        f"n{i}": nodemetric_from_dict(
            NodeMetricBuilder(f"n{i}").updated(LATER).usage(cpu=f"{c * 900}m", memory="1Mi").build()
        )
        for i, c in enumerate(node_cpus)
        if hot[i]
    }
    # a user reservation: cpu, preAllocation, zone a only, placed on node i (-1: pending)
    held = [
        reservation(
            f"u{k}",
            cpu=str(cpu),
            memory="1Mi",
            created=T0 + k,
            pre_allocation=pre or None,
            node_selector={"zone": "a"} if zoned else None,
            phase="Available" if 0 <= on < len(nodes) else None,
            node=f"n{on}" if 0 <= on < len(nodes) else None,
        )
        for k, (cpu, pre, zoned, on) in enumerate(users)
    ]
    inputs = ReservationInputs(nodes, pods, [], held, metrics=metrics, placements=zoned_pods)
    args = LoadAwareSchedulingArgs.model_validate({}) if load_aware else None
    steps = len(jobs) + 2
    fast = _passes(inputs, args, percent, steps)
    with (
        mock.patch.object(controller, "place", reference_place),
        mock.patch.object(controller, "placeable", reference_placeable),
    ):
        slow = _passes(inputs, args, percent, steps)
    assert fast == slow  # every status, create, delete, event, view and action, pass by pass


def test_reference_is_what_the_pass_replaced() -> None:
    """The patch reaches the pass: with a reference that never places, nothing is placed."""
    nodes = [node("n0", cpu="4")]
    inputs = ReservationInputs(nodes, [], [], [reservation("u0", cpu="1", memory="1Mi")])

    def nowhere(*_: object, **__: object) -> PlacementResult:
        return PlacementResult(None, "Pending", "0/1 nodes are available.")

    placed = decide(inputs, reservation_settings(), LATER)
    with mock.patch.object(controller, "place", nowhere):
        pending = decide(inputs, reservation_settings(), LATER)
    assert [v.phase for v in placed.reservations] == ["Available"]
    assert [v.phase for v in pending.reservations] == ["Pending"]
