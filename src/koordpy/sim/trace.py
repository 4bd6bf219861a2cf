"""The workload trace: every pod a scenario will ever submit, drawn once from the seed.

Both runs of ``--compare`` replay the same ``Trace``, so they see the same arrivals, lifetimes
and per-pod demand; only the policies differ. Pods are numbered in arrival order.

Not guaranteed: the trace of a seed is stable across koordpy versions (numpy's generators are,
but the recipe may change).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.config.scenario import GANG_ANNOTATION_PREFIX, Scenario, Workload
from koordpy.model.objects import PodInfo, pod_from_dict
from koordpy.model.quantity import format_cpu_millis

__all__ = ["GangJobs", "Trace", "build_trace", "gang_groups", "pod_template"]

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class Trace:
    arrival: F64
    """Seconds after the scenario start, non-decreasing."""
    lifetime: F64
    """Seconds of running time; ``inf`` = until the end."""
    workload: I32
    """Index into ``Scenario.workloads``."""
    ordinal: I32
    """Pod number within its workload (names are ``<workload>-<ordinal>``)."""
    cpu_mean: F64
    """Per-pod mean CPU demand, millicores (workload mean × the pod's own factor)."""
    memory_mean: F64
    burst_phase: F64
    """Seconds: where in its burst cycle each pod starts (bursty pattern only)."""
    templates: tuple[PodInfo, ...]
    """One pod view per workload; instances are copies with their own name and uid."""
    gangs: GangJobs | None = None
    """The gang jobs, when a workload has ``gang`` (None otherwise)."""

    def __len__(self) -> int:
        return int(self.arrival.size)

    def pod(self, pod_id: int, attempt: int = 0) -> PodInfo:
        """The pod view of one trace entry (``attempt`` > 0 for a pod recreated after eviction)."""
        template = self.templates[int(self.workload[pod_id])]
        suffix = f"-r{attempt}" if attempt else ""
        if self.gangs is not None and (job := int(self.gangs.job[pod_id])) >= 0:
            name = f"{self.gangs.names[job]}-{int(self.gangs.member[pod_id])}{suffix}"
            annotations = {**template.annotations, **self.gangs.annotations[job]}
            return dataclasses.replace(template, uid=f"{template.namespace}/{name}", name=name, annotations=annotations)
        name = f"{template.name}-{int(self.ordinal[pod_id])}{suffix}"
        return dataclasses.replace(template, uid=f"{template.namespace}/{name}", name=name)


@dataclass(frozen=True, slots=True)
class GangJobs:
    """Which pod is which member of which gang job (jobs numbered across workloads)."""

    job: I32
    """Per pod: its job, or -1 for a pod of a workload without ``gang``."""
    member: I32
    """Per pod: its member number within the job (-1 outside gangs)."""
    names: tuple[str, ...]
    """Per job: ``<workload>-<j>``, the gang name (gang id ``<namespace>/<name>``)."""
    members: I32
    """Per job: its pod count."""
    quorum: I32
    """Per job: its ``minMember`` (the members that must run for the job to run)."""
    first_arrival: F64
    """Per job: the earliest arrival of its members (seconds after the start)."""
    annotations: tuple[dict[str, str], ...]
    """Per job: Koordinator's gang annotations its pods carry."""


def _quantities(values: dict[str, int]) -> dict[str, str]:
    return {k: format_cpu_millis(v) if k == "cpu" else str(v) for k, v in values.items()}


def pod_template(workload: Workload) -> PodInfo:
    """The pod a workload submits, through the same raw-object conversion as real pods."""
    resources: dict[str, Any] = {}
    if workload.requests:
        resources["requests"] = _quantities(workload.requests)
    if workload.limits:
        resources["limits"] = _quantities(workload.limits)
    spec: dict[str, Any] = {
        "schedulerName": "koordpy-scheduler",
        "containers": [{"name": "main", "image": "sim", "resources": resources}],
    }
    if workload.priority is not None:
        spec["priority"] = workload.priority
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "labels": {"app": workload.name, **workload.labels},
            "annotations": dict(workload.annotations),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    return pod_from_dict(raw)


def _factor(rng: np.random.Generator, sigma: float, count: int) -> F64:
    """Log-normal factors with mean 1."""
    if sigma == 0:
        return np.ones(count)
    out: F64 = np.exp(sigma * rng.standard_normal(count) - sigma * sigma / 2)
    return out


def gang_groups(scenario: Scenario) -> dict[str, list[str]]:
    """Each gang workload's GangGroup: the workloads linked to it by ``groupWith`` in either direction,
    transitively (itself included), sorted."""
    parent = {w.name: w.name for w in scenario.workloads if w.gang is not None}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    for w in scenario.workloads:
        if w.gang is not None:
            for other in w.gang.group_with:
                if other in parent:
                    parent[root(other)] = root(w.name)
    out: dict[str, list[str]] = {}
    for name in parent:
        out.setdefault(root(name), []).append(name)
    return {name: sorted(out[root(name)]) for name in parent}


def _gang_annotations(scenario: Scenario, workload: Workload, job: int, groups: dict[str, list[str]]) -> dict[str, str]:
    gang = workload.gang
    assert gang is not None
    by_name = {w.name: w for w in scenario.workloads}
    annotations = {
        f"{GANG_ANNOTATION_PREFIX}name": f"{workload.name}-{job}",
        f"{GANG_ANNOTATION_PREFIX}min-available": str(gang.min_available),
        f"{GANG_ANNOTATION_PREFIX}total-number": str(gang.members),
        f"{GANG_ANNOTATION_PREFIX}mode": gang.mode,
    }
    if gang.wait_time is not None:
        annotations[f"{GANG_ANNOTATION_PREFIX}waiting-time"] = f"{round(gang.wait_time * 1000)}ms"
    group = groups[workload.name]
    if len(group) > 1:
        ids = [f"{by_name[name].namespace}/{name}-{job}" for name in group]
        annotations[f"{GANG_ANNOTATION_PREFIX}groups"] = json.dumps(ids)
    return annotations


def build_trace(scenario: Scenario, seed: int) -> Trace:
    """Draws per workload, in order; a workload without ``gang`` draws exactly as it always did."""
    rng = np.random.default_rng([seed, 0])
    parts: list[tuple[F64, F64, I32, I32, F64, F64, F64]] = []
    gang_parts: list[tuple[I32, I32]] = []
    job_names: list[str] = []
    job_members: list[int] = []
    job_quorum: list[int] = []
    job_annotations: list[dict[str, str]] = []
    groups = gang_groups(scenario)
    job_arrivals: dict[str, F64] = {}
    for index, workload in enumerate(scenario.workloads):
        count = workload.arrivals.count
        start = workload.arrivals.start
        end = workload.arrivals.end if workload.arrivals.end is not None else scenario.duration
        arrival = np.sort(start + rng.random(count) * (end - start))
        if workload.lifetime is None:
            lifetime = np.full(count, np.inf)
        else:
            low, high = np.log(workload.lifetime.min), np.log(workload.lifetime.max)
            lifetime = np.exp(low + rng.random(count) * (high - low))
        if workload.gang is None:
            gang_parts.append((np.full(count, -1, np.int32), np.full(count, -1, np.int32)))
        else:
            size = workload.gang.members
            leader = next(w.name for w in scenario.workloads if w.name in groups[workload.name])
            if leader in job_arrivals:  # a GangGroup's jobs arrive together: job j when the leader's job j does
                arrival = job_arrivals[leader]
            job_arrivals[workload.name] = arrival
            first_job = len(job_names)
            for j in range(count):
                job_names.append(f"{workload.name}-{j}")
                job_members.append(size)
                job_quorum.append(workload.gang.min_available)
                job_annotations.append(_gang_annotations(scenario, workload, j, groups))
            offsets = rng.random(count * size) * workload.gang.member_spread
            arrival = np.minimum(np.repeat(arrival, size) + offsets, scenario.duration)
            lifetime = np.repeat(lifetime, size)
            jobs = np.repeat(np.arange(first_job, first_job + count, dtype=np.int32), size)
            gang_parts.append((jobs, np.tile(np.arange(size, dtype=np.int32), count)))
            count *= size
        usage = workload.usage
        cpu = usage.cpu.mean * _factor(rng, usage.cpu.spread, count)
        memory = usage.memory.mean * _factor(rng, usage.memory.spread, count)
        phase = rng.random(count) * usage.burst_every
        parts.append(
            (arrival, lifetime, np.full(count, index, np.int32), np.arange(count, dtype=np.int32), cpu, memory, phase)
        )
    arrival = np.concatenate([p[0] for p in parts])
    order = np.argsort(arrival, kind="stable")

    def take(i: int) -> Any:
        return np.concatenate([p[i] for p in parts])[order]

    gangs = None
    if job_names:
        job = np.concatenate([g[0] for g in gang_parts])[order]
        first = np.full(len(job_names), np.inf)
        np.minimum.at(first, job[job >= 0], arrival[order][job >= 0])
        gangs = GangJobs(
            job=job,
            member=np.concatenate([g[1] for g in gang_parts])[order],
            names=tuple(job_names),
            members=np.array(job_members, np.int32),
            quorum=np.array(job_quorum, np.int32),
            first_arrival=first,
            annotations=tuple(job_annotations),
        )
    return Trace(
        gangs=gangs,
        arrival=arrival[order],
        lifetime=take(1),
        workload=take(2),
        ordinal=take(3),
        cpu_mean=take(4),
        memory_mean=take(5),
        burst_phase=take(6),
        templates=tuple(pod_template(w) for w in scenario.workloads),
    )
