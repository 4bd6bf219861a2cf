"""``koordpy descheduler arbitrate``: one arbitration round on a dump, as the report the CLI prints.

The dump holds PodMigrationJobs, Pods, their controllers (Deployment, ReplicaSet, StatefulSet,
ReplicationController, Job, DaemonSet, ...) and optionally Nodes (read for ``nodeSelector``), PodGroups
of any API koordpy reads (the gangs the arbitration keeps whole, with the pods that name a gang) and
Namespaces (accepted; no rule reads them). Other kinds are counted as ignored.

Output::

    {"order": [job name, ...],
     "verdicts": {job name: {"verdict": "pass"|"requeue"|"fail", "filter": str|null, "reason": str}}}

Not guaranteed: the object limiter's state (it depends on past evictions, which a dump does not show):
no workload is treated as rate limited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordpy.config.gang import CoschedulingArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import arbitrate
from koordpy.descheduler.objects import (
    MigrationJob,
    MigrationObjectError,
    MigrationPod,
    Workload,
    job_from_dict,
    pod_from_dict,
    workload_from_dict,
)
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import ObjectError, PodInfo
from koordpy.model.objects import pod_from_dict as pod_info_from_dict
from koordpy.scheduler.plugins.gang import GangCache, PodGroupError, podgroup_from_dict
from koordpy.scheduler.plugins.gang.disruption import GangTable, gang_table, member_running, names_a_gang

__all__ = ["WORKLOAD_KINDS", "ArbitrationReportError", "arbitration_report"]

WORKLOAD_KINDS = (
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "Job",
    "DaemonSet",
    "CronJob",
)
KINDS = ("PodMigrationJob", "Pod", "Node", "Namespace", "PodGroup", *WORKLOAD_KINDS)


class ArbitrationReportError(ValueError):
    """Bad input: the message names the file and the field."""


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "<unnamed>"
    name = str(meta.get("name") or "<unnamed>")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def arbitration_report(
    documents: Iterable[tuple[str, Any]], args: MigrationControllerArgs, now: float
) -> tuple[dict[str, Any], dict[str, int]]:
    """The report and the count of ignored objects by kind."""
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise ArbitrationReportError(str(exc)) from None
    jobs: dict[str, MigrationJob] = {}
    for where, obj in dump.of("PodMigrationJob"):
        try:
            job = job_from_dict(obj)
        except MigrationObjectError as exc:
            raise ArbitrationReportError(f"{where}: PodMigrationJob {_name(obj)}: {exc}") from None
        if job.name in jobs:
            raise ArbitrationReportError(f"{where}: PodMigrationJob {job.name}: appears twice in the input")
        jobs[job.name] = job
    pods: dict[str, MigrationPod] = {}
    for where, obj in dump.of("Pod"):
        try:
            pod = pod_from_dict(obj)
        except MigrationObjectError as exc:
            raise ArbitrationReportError(f"{where}: Pod {_name(obj)}: {exc}") from None
        pods[pod.key] = pod
    workloads: dict[str, Workload] = {}
    for kind in WORKLOAD_KINDS:
        for where, obj in dump.of(kind):
            try:
                workload = workload_from_dict(obj)
            except MigrationObjectError as exc:
                raise ArbitrationReportError(f"{where}: {kind} {_name(obj)}: {exc}") from None
            workloads[workload.uid] = workload
    nodes: dict[str, Mapping[str, str]] = {}
    for where, obj in dump.of("Node"):
        meta = obj.get("metadata")
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if labels is not None and not isinstance(labels, Mapping):
            raise ArbitrationReportError(f"{where}: Node {_name(obj)}: metadata.labels: expected a mapping")
        nodes[_name(obj)] = {str(k): str(v) for k, v in (labels or {}).items()}
    gangs = _gangs(dump.of("PodGroup"), dump.of("Pod"), [job.pod_key for job in jobs.values()])
    result = arbitrate(list(jobs.values()), pods, workloads, args, now, nodes=nodes, gangs=gangs)
    return result.as_json(), dict(dump.ignored)


def _gangs(podgroups: Iterable[tuple[str, Any]], pods: Iterable[tuple[str, Any]], job_pods: Iterable[str]) -> GangTable:
    """The gangs of the jobs' pods: PodGroups first, then the pods that name a gang in creation order
    (an annotation gang takes its oldest member's parameters), as the gang report reads a dump."""
    cache = GangCache(CoschedulingArgs.model_validate({}))
    for where, obj in podgroups:
        try:
            cache.upsert_podgroup(podgroup_from_dict(obj))
        except PodGroupError as exc:
            raise ArbitrationReportError(f"{where}: PodGroup {_name(obj)}: {exc}") from None
    members: list[PodInfo] = []
    for where, obj in pods:
        if not names_a_gang(obj):
            continue
        try:
            members.append(pod_info_from_dict(obj))
        except ObjectError as exc:
            raise ArbitrationReportError(f"{where}: Pod {_name(obj)}: {exc}") from None
    members.sort(key=lambda p: (p.creation_time is None, p.creation_time or 0.0, p.key))
    running: dict[str, bool] = {}
    for pod in members:
        cache.upsert_pod(pod)
        running[pod.key] = member_running(pod.phase, pod.node_name, pod.deletion_time is not None)
    return gang_table(cache, job_pods, lambda key: running.get(key, False))
