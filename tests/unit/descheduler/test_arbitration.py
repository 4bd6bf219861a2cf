"""Arbitration: the four sort passes, the filters in order and the limits (reference §2.4-2.5)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import (
    ArbitrationResult,
    arbitrate,
)
from koordpy.descheduler.objects import MigrationJob, MigrationPod, OwnerRef, Workload

NOW = 10_000.0


def pod(
    name: str, *, node: str = "n1", namespace: str = "default", owner: OwnerRef | None = None, **kw: Any
) -> MigrationPod:
    base = MigrationPod(
        uid=f"uid-{name}",
        namespace=namespace,
        name=name,
        node_name=node,
        labels={},
        controller=owner,
        owner_kinds=(owner.kind,) if owner is not None else (),
        priority=None,
        priority_class_name="",
        phase="Running",
        available=True,
        evict_annotation=False,
        eviction_cost=0,
        mirror=False,
        local_storage=False,
        pvc=False,
        sort_key=(3, 0, 1, 4, 0, 0, -1000.0),
    )
    return replace(base, **kw)


def job(name: str, pod_name: str, *, created: float = 1000.0, namespace: str = "default", **kw: Any) -> MigrationJob:
    base = MigrationJob(
        name=name,
        uid=f"uid-{name}",
        creation_time=created,
        pod_namespace=namespace,
        pod_name=pod_name,
        phase="Pending",
        passed_arbitration=False,
    )
    return replace(base, **kw)


def running(name: str, pod_name: str, **kw: Any) -> MigrationJob:
    return job(name, pod_name, phase="Running", **kw)


def pods_by_key(*pods: MigrationPod) -> dict[str, MigrationPod]:
    return {p.key: p for p in pods}


def args(**fields: Any) -> MigrationControllerArgs:
    return MigrationControllerArgs.model_validate(fields)


def rs(name: str, replicas: int, namespace: str = "default") -> tuple[OwnerRef, Workload]:
    ref = OwnerRef("ReplicaSet", name, f"uid-{name}")
    return ref, Workload("ReplicaSet", namespace, name, ref.uid, replicas)


def run(
    jobs: list[MigrationJob],
    pods: list[MigrationPod],
    workloads: list[Workload] = (),  # type: ignore[assignment]
    **config: Any,
) -> ArbitrationResult:
    return arbitrate(jobs, pods_by_key(*pods), {w.uid: w for w in workloads}, args(**config), NOW)


def outcomes(result: ArbitrationResult) -> dict[str, tuple[str, str | None]]:
    return {name: (v.verdict, v.filter) for name, v in result.verdicts.items()}


def test_one_free_pod_passes() -> None:
    owner, workload = rs("web", 5)
    result = run([job("j1", "p1")], [pod("p1", owner=owner)], [workload])
    assert result.order == ("j1",)
    assert outcomes(result) == {"j1": ("pass", None)}
    assert result.as_json() == {
        "order": ["j1"],
        "verdicts": {"j1": {"verdict": "pass", "filter": None, "reason": "pod default/p1: passed all filters"}},
    }
