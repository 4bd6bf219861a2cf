"""The optimised round equals a straightforward composition of the same rules (random inputs, fixed seeds).

The reference sorts with the four public pass functions applied one after the other and, for every job in
that order, applies the TTL / missing-pod / existing-job / evict-annotation checks as the module docstring
states them, then calls the non-retryable filters unconditionally (no hazard-bit shortcut) and the
retryable ones, counting each pass before the next job. ``arbitrate`` must give the same order and the same
verdicts (outcome, filter and reason).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import (
    _non_retryable,
    _Requeues,
    _retryable,
    _Round,
    arbitrate,
    migrating_count_by_job_owner,
    sort_by_controller,
    sort_by_creation_time,
    sort_by_migrating_count,
    sort_by_pod,
)
from koordpy.descheduler.limits import MAX_INT32
from koordpy.descheduler.objects import MigrationJob, MigrationPod, OwnerRef, Workload

NOW = 50_000.0

CONFIGS: list[dict[str, Any]] = [
    {},
    {"maxMigratingPerNamespace": 3, "maxMigratingGlobally": 25},
    {"evictLocalStoragePods": True, "ignorePvcPods": True, "skipCheckExpectedReplicas": True},
    {"priorityThreshold": {"value": 5000}, "namespaces": {"exclude": ["ns-1"]}},
    {
        "skipEvictionGates": ["MaxMigratingPerNode", "ExpectedReplicas", "LocalStorage"],
        "evictSystemCriticalPods": True,
        "evictAllBarePods": True,
    },
    {"maxMigratingPerWorkload": "50%", "maxUnavailablePerWorkload": 3, "evictFailedBarePods": True},
    {"maxMigratingPerNode": 1, "labelSelector": {"matchLabels": {"tier": "web"}}},
]


def random_inputs(
    rng: random.Random,
) -> tuple[list[MigrationJob], dict[str, MigrationPod], dict[str, Workload], frozenset[str]]:
    workloads: dict[str, Workload] = {}
    owners: list[OwnerRef | None] = [None]
    for i in range(8):
        ns = f"ns-{i % 3}"
        deploy = Workload("Deployment", ns, f"d{i}", f"uid-d{i}", rng.choice([1, 2, 3, 4, 6, 10, 12, 30]))
        replica_set = Workload("ReplicaSet", ns, f"d{i}-1", f"uid-rs{i}", 0, OwnerRef("Deployment", "d", deploy.uid))
        workloads[deploy.uid] = deploy
        workloads[replica_set.uid] = replica_set
        owners.append(OwnerRef("ReplicaSet", replica_set.name, replica_set.uid))
    for i in range(3):
        batch = Workload("Job", f"ns-{i}", f"b{i}", f"uid-b{i}", None)
        workloads[batch.uid] = batch
        owners.append(OwnerRef("Job", batch.name, batch.uid))
    owners.append(OwnerRef("DaemonSet", "ds", "uid-ds"))
    owners.append(OwnerRef("ReplicaSet", "gone", "uid-gone"))  # not in workloads
    pods: dict[str, MigrationPod] = {}
    for i in range(120):
        owner = rng.choice(owners)
        namespace = workloads[owner.uid].namespace if owner is not None and owner.uid in workloads else "ns-1"
        eviction_cost = MAX_INT32 if rng.random() < 0.03 else rng.randrange(3)
        phase = rng.choice(["Running"] * 8 + ["Pending", "Failed"])
        created = float(rng.randrange(100))
        new = MigrationPod(
            uid=f"uid-p{i}",
            namespace=namespace,
            name=f"p{i}",
            node_name=rng.choice(["n1", "n2", "n3", "n4", ""]),
            labels={"tier": rng.choice(["web", "db"])},
            controller=owner,
            owner_kinds=(owner.kind,) if owner is not None else (),
            priority=rng.choice([None, 0, 100, 9000, 2_000_000_000]),
            priority_class_name=rng.choice([""] * 9 + ["system-node-critical"]),
            phase=phase,
            available=phase == "Running" and rng.random() < 0.85,
            evict_annotation=rng.random() < 0.05,
            eviction_cost=eviction_cost,
            mirror=rng.random() < 0.03,
            local_storage=rng.random() < 0.08,
            pvc=rng.random() < 0.08,
            sort_key=(rng.randrange(4), rng.randrange(3), rng.randrange(3), 4, 0, eviction_cost, -created),
        )
        pods[new.key] = new
    names = [f"p{i}" for i in range(130)]  # ten jobs name pods that do not exist
    jobs = []
    for i in range(160):
        pod_name = rng.choice(names)
        target = pods.get(f"ns-{i % 3}/{pod_name}") or next((p for p in pods.values() if p.name == pod_name), None)
        namespace = target.namespace if target is not None else "ns-0"
        phase, passed = rng.choice([("Pending", False)] * 6 + [("Pending", True), ("Running", False), ("", False)])
        jobs.append(
            MigrationJob(
                name=f"j{i:03d}",
                uid=f"uid-j{i}",
                creation_time=float(rng.randrange(40_000, 50_000, 500)),
                pod_namespace=namespace,
                pod_name=pod_name,
                phase=phase,
                passed_arbitration=passed,
                ttl_seconds=rng.choice([None, None, None, 3000.0, 20_000.0]),
                deleting=rng.random() < 0.03,
            )
        )
    limited = frozenset(uid for uid in workloads if rng.random() < 0.1)
    return jobs, pods, workloads, limited


def reference_round(
    jobs: list[MigrationJob],
    pods: dict[str, MigrationPod],
    workloads: dict[str, Workload],
    config: MigrationControllerArgs,
    limited: frozenset[str],
) -> tuple[list[str], dict[str, tuple[str, str | None, str | None]]]:
    order = sorted((j for j in jobs if j.waiting), key=lambda j: j.name)
    sort_by_creation_time(order)
    sort_by_pod(order, pods)
    sort_by_controller(order, pods)
    sort_by_migrating_count(order, pods, migrating_count_by_job_owner(jobs, pods))
    state = _Round([job for job in jobs if job.active], pods, workloads, config, nodes={}, limited_workloads=limited)
    requeues = _Requeues()
    verdicts: dict[str, tuple[str, str | None, str | None]] = {}
    for j in order:
        target = pods.get(j.pod_key)
        reason: str | None = None  # checked only where the reference asks the module's filters
        if j.ttl_seconds is not None and NOW - j.creation_time >= j.ttl_seconds:
            outcome, name = "fail", "TTL"
        elif target is None:
            outcome, name = "pass", None
        elif j.pod_key in state.active_pods:
            outcome, name = "fail", "ExistingJob"
        elif target.evict_annotation:
            outcome, name = "pass", None
        else:
            info = state.owner_of(target)
            found = _non_retryable(target, info, state) or _retryable(target, info, state, requeues)
            if found is None:
                outcome, name, reason = "pass", None, "passed all filters"
            else:
                outcome, name, reason = found.verdict, found.filter, found.reason
        if outcome == "pass":
            state.count(j.pod_key, target, j.pod_namespace)
        verdicts[j.name] = (outcome, name, reason)
    return [j.name for j in order], verdicts


@pytest.mark.parametrize("seed", range(12))
def test_arbitrate_equals_the_reference_composition(seed: int) -> None:
    rng = random.Random(seed)
    jobs, pods, workloads, limited = random_inputs(rng)
    config = MigrationControllerArgs.model_validate(CONFIGS[seed % len(CONFIGS)])
    expected_order, expected = reference_round(jobs, pods, workloads, config, limited)
    result = arbitrate(jobs, pods, workloads, config, NOW, limited_workloads=limited)
    assert list(result.order) == expected_order
    got = {
        name: (v.verdict, v.filter, v.reason if expected[name][2] is not None else None)
        for name, v in result.verdicts.items()
    }
    assert got == expected
    # the inputs exercise what the shortcut skips: some non-retryable failures and some passes
    outcomes = [v[0] for v in expected.values()]
    assert "fail" in outcomes
    assert "pass" in outcomes
