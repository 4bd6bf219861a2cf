"""Property: over repeated passes on random clusters, starving-job reservations never hold more than
``floor(reservedNodePercent × schedulable nodes / 100)`` nodes, and every create lands on a node whose
allocatable (minus the other reservations) can hold it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.model.durations import format_rfc3339
from koordpy.scheduler.plugins.reservation.controller import ReservationInputs, decide
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, reservation_from_dict
from koordpy.scheduler.plugins.reservation.starving import allowed_node_count
from koordpy_testkit.reservations import T0, node, pod
from koordpy_testkit.reservations import settings as reservation_settings

LATER = T0 + 3600.0


@settings(max_examples=60, deadline=None)
@given(
    node_cpus=st.lists(st.integers(1, 8), min_size=2, max_size=8),
    cordoned=st.integers(0, 2),
    busy=st.lists(st.integers(0, 8), min_size=8, max_size=8),
    jobs=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 3)), min_size=1, max_size=8),
    percent=st.sampled_from([0, 25, 34, 50, 100]),
)
def test_cap_and_capacity_hold_on_random_clusters(
    node_cpus: list[int], cordoned: int, busy: list[int], jobs: list[tuple[int, int]], percent: int
) -> None:
    nodes = [node(f"n{i}", cpu=str(c), cordoned=i < cordoned) for i, c in enumerate(node_cpus)]
    pods = [
        pod(f"f{i}", str(min(busy[i], c)), "1Mi", node=f"n{i}", created=T0 - 10)
        for i, c in enumerate(node_cpus)
        if busy[i]
    ]
    pods += [pod(f"j{k}", str(cpu), "1Mi", priority=prio) for k, (cpu, prio) in enumerate(jobs)]
    config = reservation_settings(reservedNodePercent=percent)
    allowed = allowed_node_count(nodes, percent)
    held: list[ReservationInfo] = []
    for step in range(len(jobs) + 1):
        now = LATER + step
        decision = decide(ReservationInputs(nodes, pods, [], held), config, now)
        for create in decision.creates:
            meta = {**create.manifest["metadata"], "creationTimestamp": format_rfc3339(now)}
            held.append(reservation_from_dict({**create.manifest, "metadata": meta, "status": create.status}))
        assert len({r.node_name for r in held}) <= allowed
        for name in {r.node_name for r in held}:
            alloc = next(n for n in nodes if n.name == name).allocatable["cpu"]
            assert sum(r.requests["cpu"] for r in held if r.node_name == name) <= alloc
    if allowed == 0:
        assert held == []
