"""The seed's Time0–Time6 story (Volcano reserve, seed 002) as a table, on the real rules.

One node 3C3G; small pods 1C1G; the big pod-4 (3C3G) is behind pod-1..3 in the queue and ahead of
the small stream pod-5..pod-9. Every step (100 s): pods that finished leave, then a scheduler model
binds pending pods in priority order with kube-scheduler's fit (``framework.fit.resources_fit``) and
the reserved verdict the extender enforces (``reservation.ledger.reserved_verdict``), then the
manager's ``decide`` runs and its creates/status writes/deletes are applied.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import PodInfo
from koordpy.scheduler.framework.fit import resources_fit
from koordpy.scheduler.plugins.reservation.controller import ReservationInputs, apply_decision, decide
from koordpy.scheduler.plugins.reservation.ledger import holdings_on_node, reserved_verdict
from koordpy.scheduler.plugins.reservation.spec import reservation_from_dict
from koordpy_testkit.reservations import T0, node, pod, settings

STEP = 100.0
# name -> (cpu/memory units, priority, steps it runs once bound)
PODS = {
    "pod-1": (1, 200, 2),
    "pod-2": (1, 200, 4),
    "pod-3": (1, 200, 4),
    "pod-4": (3, 100, 2),
    "pod-5": (1, 0, 3),
    "pod-6": (1, 0, 3),
    "pod-7": (1, 0, 3),
    "pod-8": (1, 0, 3),
    "pod-9": (1, 0, 3),
}


def run_story(enabled: bool, steps: int = 14) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Bind step of every pod, and the manager's actions per step (step, action, reservation, node)."""
    n1 = node("n1")
    config = settings(enabled=enabled, starvingJobTimeThreshold=150, priorityThreshold=50)
    pods = {
        name: pod(name, f"{units}", f"{units}Gi", priority=prio, created=T0) for name, (units, prio, _) in PODS.items()
    }
    bound_at: dict[str, int] = {}
    reservations: dict[str, dict[str, Any]] = {}
    log: list[dict[str, Any]] = []
    for step in range(steps):
        now = T0 + step * STEP
        for name, at in bound_at.items():
            if step >= at + PODS[name][2] and not pods[name].terminated:
                pods[name] = dataclasses.replace(pods[name], phase="Succeeded")
        infos = [reservation_from_dict(r) for r in reservations.values()]
        queue = sorted((p for p in pods.values() if not p.node_name), key=lambda p: (-(p.priority or 0), p.name))
        for candidate in queue:
            assigned = [p for p in pods.values() if p.node_name == "n1" and not p.terminated]
            requested: dict[str, int] = {}
            for p in assigned:
                for r, v in p.requests.items():
                    requested[r] = requested.get(r, 0) + v
            fit = resources_fit(n1.allocatable, requested, len(assigned), candidate.requests)
            holdings = holdings_on_node(infos, assigned, now)
            if fit.is_success and reserved_verdict(candidate, n1.allocatable, requested, holdings).is_success:
                pods[candidate.name] = dataclasses.replace(candidate, node_name="n1", phase="Running")
                bound_at[candidate.name] = step
        decision = decide(ReservationInputs([n1], list(pods.values()), [], infos), config, now)
        reservations = apply_decision(reservations, decision, now)
        log.extend({"step": step, **a} for a in decision.report()["actions"])
    return bound_at, log


def test_without_reservations_the_big_pod_starts_after_the_whole_stream() -> None:
    bound_at, log = run_story(enabled=False)
    # t0: pod-1..3 fill the node.  t2: pod-1 leaves → pod-5.  t4: pod-2, pod-3 leave → pod-6, pod-7.
    # t5: pod-5 leaves → pod-8.  t7: pod-6, pod-7 leave → pod-9 (1 cpu free, pod-4 needs 3).
    # t8: pod-8 leaves (2 free).  t10: pod-9 leaves → pod-4 at last.
    assert bound_at == {
        "pod-1": 0,
        "pod-2": 0,
        "pod-3": 0,
        "pod-5": 2,
        "pod-6": 4,
        "pod-7": 4,
        "pod-8": 5,
        "pod-9": 7,
        "pod-4": 10,
    }
    assert log == []  # enabled false: starving jobs are reported, nothing is reserved


def test_with_the_reserve_the_big_pod_starts_when_the_node_drains() -> None:
    bound_at, log = run_story(enabled=True)
    # t2: pod-1 leaves → pod-5 binds first (no reservation yet); then pod-4 has waited 200 s > 150 s:
    #     starving → a preAllocation reservation on n1 (allocatable 3 − reserved by others 0 ≥ 3), Waiting.
    # t4: pod-2, pod-3 leave: free 3 − 1 = 2 cpu, but 3 are reserved for pod-4 → pod-6..9 are blocked.
    # t5: pod-5 leaves → pod-4 (the owner) binds; the job is Ready → the reservation is deleted.
    # t7: pod-4 leaves → the stream resumes.
    assert bound_at == {
        "pod-1": 0,
        "pod-2": 0,
        "pod-3": 0,
        "pod-5": 2,
        "pod-4": 5,
        "pod-6": 7,
        "pod-7": 7,
        "pod-8": 7,
        "pod-9": 10,
    }
    assert [(e["step"], e["action"], e["reservation"], e["node"]) for e in log] == [
        (2, "create", "starving-default-pod-4-0", "n1"),
        (5, "delete", "starving-default-pod-4-0", "n1"),
    ]
    assert log[0]["reason"].endswith("waiting for the node's pods to leave")
    assert log[1]["reason"] == "job default/pod-4 is Ready (1/1 members bound)"


@pytest.mark.parametrize("step", [3, 4])
def test_while_held_small_pods_get_the_seeds_reason(step: int) -> None:
    # Re-run to the held state and ask the extender's verdict for a small pod directly.
    n1 = node("n1")
    held = reservation_from_dict(
        {
            "metadata": {"name": "starving-default-pod-4-0", "creationTimestamp": format_rfc3339(T0 + 2 * STEP)},
            "spec": {
                "template": {"spec": {"containers": [{"name": "r", "resources": {"requests": {"cpu": "3"}}}]}},
                "owners": [{"object": {"namespace": "default", "name": "pod-4"}}],
                "preAllocation": True,
            },
            "status": {"phase": "Waiting", "nodeName": "n1"},
        }
    )
    running: list[PodInfo] = [pod("pod-5", node="n1")]
    if step == 3:
        running += [pod("pod-2", node="n1"), pod("pod-3", node="n1")]
    requested = {"cpu": 1000 * len(running), "memory": 1024**3 * len(running)}
    holdings = holdings_on_node([held], running, T0 + step * STEP)
    small = reserved_verdict(pod("pod-6"), n1.allocatable, requested, holdings)
    # step 3: 3 − 3 − 3 = −3; step 4: 3 − 1 − 3 = −1 < 1 → blocked
    assert (small.reason, small.plugin) == ("node(s) resource was(were) reserved", "Reservation")
    owner = reserved_verdict(pod("pod-4", "3", "3Gi"), n1.allocatable, requested, holdings)
    assert owner.is_success
