"""One arbitration round over the waiting PodMigrationJobs, as Koordinator merged it (PR #1651, v1.4).

**Order.** Four stable sorts, applied one after the other, so the **last is the primary key**:

1. :func:`sort_by_creation_time`: newer job first (whole Unix seconds);
2. :func:`sort_by_pod`: Koordinator's pod sorter (a job whose pod is missing first, then
   :attr:`MigrationPod.sort_key` ascending: the pod that matters least first);
3. :func:`sort_by_controller`: jobs whose pods share one controlling ``Job`` (ownerReference kind ``Job``,
   any group) move next to that Job's first job;
4. :func:`sort_by_migrating_count`: jobs of the Job with more migrating jobs (Running, or passed
   arbitration) first.

Effective precedence: migrating count > Job grouping > pod rank > newest job. Before the first pass the
jobs are ordered by name, so ties are deterministic (upstream's queue order is not).

**Filters**, in order, for each job in that order:

* ``TTL`` (koordpy): a job whose ``spec.ttl`` has run out at ``now`` fails with reason ``Timeout``;
* a job whose pod is not found passes (as upstream: the migration then reports ``MissingPod``);
* ``ExistingJob``: a pod that already has an active job cannot get a second (fail). koordpy checks this
  before the evict annotation, so the annotation never yields two evictions of one pod;
* the pod annotation ``descheduler.alpha.kubernetes.io/evict`` passes all remaining filters;
* non-retryable (verdict ``fail``, reason ``ForbiddenMigratePod``): ``EvictionCost`` (MaxInt32 never
  migrates), ``Namespaces``, ``BarePods``, ``DaemonSetPods``, ``MirrorPods``, ``SystemCritical``,
  ``LocalStorage``, ``PVC``, ``PriorityThreshold``, ``LabelSelector``, ``NodeSelector``,
  ``ExpectedReplicas`` (replicas == 1, == maxMigrating or == maxUnavailable, unless
  ``skipCheckExpectedReplicas``);
* retryable (verdict ``requeue``): ``ObjectLimiter`` (workload UIDs the caller says are rate limited),
  ``MaxMigratingGlobally``, ``MaxMigratingPerNode``, ``MaxMigratingPerNamespace``,
  ``MaxMigratingPerWorkload``, ``MaxUnavailablePerWorkload``. Rule: the number of OTHER pods with an
  active job (plus, for unavailability, other pods not Ready) >= limit -> requeue;
* otherwise ``pass``: the caller sets ``descheduler.koordinator.sh/passed-arbitration``.

Counting is arbitration-aware: a Pending job counts only once it passed, and a job that passes in this
round counts for the jobs after it (the fix for deadlock #1150). Filters named in ``skipEvictionGates``
are skipped.

Not guaranteed: per-workload limits for pods whose controller is missing from ``workloads`` or has no
replica count (Jobs, DaemonSets, custom kinds): those filters then pass. Paused jobs are arbitrated
like any other (as upstream); the lifecycle holds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from koordpy.config.migration import MigrationControllerArgs, node_selector_matches, parse_node_selector
from koordpy.descheduler.limits import MAX_INT32, workload_limit
from koordpy.descheduler.objects import (
    ANNOTATION_EVICT,
    SYSTEM_CRITICAL_CLASSES,
    SYSTEM_CRITICAL_PRIORITY,
    MigrationJob,
    MigrationPod,
    Workload,
    resolve_workload,
)

__all__ = [
    "NON_RETRYABLE_FILTERS",
    "REASON_FORBIDDEN",
    "REASON_TIMEOUT",
    "RETRYABLE_FILTERS",
    "ArbitrationResult",
    "Outcome",
    "Verdict",
    "arbitrate",
    "migrating_count_by_job_owner",
    "sort_by_controller",
    "sort_by_creation_time",
    "sort_by_migrating_count",
    "sort_by_pod",
    "sort_jobs",
]

Outcome = Literal["pass", "requeue", "fail"]
REASON_FORBIDDEN = "ForbiddenMigratePod"
REASON_TIMEOUT = "Timeout"

NON_RETRYABLE_FILTERS = (
    "EvictionCost",
    "Namespaces",
    "BarePods",
    "DaemonSetPods",
    "MirrorPods",
    "SystemCritical",
    "LocalStorage",
    "PVC",
    "PriorityThreshold",
    "LabelSelector",
    "NodeSelector",
    "ExpectedReplicas",
)
RETRYABLE_FILTERS = (
    "ObjectLimiter",
    "MaxMigratingGlobally",
    "MaxMigratingPerNode",
    "MaxMigratingPerNamespace",
    "MaxMigratingPerWorkload",
    "MaxUnavailablePerWorkload",
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one waiting job: ``pass`` (annotate and start), ``requeue`` (keep waiting) or
    ``fail`` (phase Failed with :attr:`job_reason`, an Event with :attr:`reason`)."""

    verdict: Outcome
    filter: str | None
    """The filter that decided, or None for a pass (and for a pass by the evict annotation)."""
    reason: str
    """Human-readable explanation naming the pod and the numbers compared."""

    @property
    def job_reason(self) -> str:
        """``status.reason`` for a failed job (upstream strings); empty for pass and requeue."""
        if self.verdict != "fail":
            return ""
        return REASON_TIMEOUT if self.filter == "TTL" else REASON_FORBIDDEN

    def as_json(self) -> dict[str, str | None]:
        return {"verdict": self.verdict, "filter": self.filter, "reason": self.reason}


@dataclass(frozen=True)
class ArbitrationResult:
    order: tuple[str, ...]
    """Names of the waiting jobs in arbitration order."""
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)
    """One verdict per waiting job, by name."""

    def names(self, outcome: Outcome) -> list[str]:
        """Job names with ``outcome``, in arbitration order."""
        return [name for name in self.order if self.verdicts[name].verdict == outcome]

    def as_json(self) -> dict[str, object]:
        return {"order": list(self.order), "verdicts": {name: self.verdicts[name].as_json() for name in self.order}}


# ---------------------------------------------------------------- sort passes (each stable, in place)


def sort_by_creation_time(jobs: list[MigrationJob]) -> None:
    """Pass 1: newer job first (whole seconds, so jobs created in one second keep their order)."""
    jobs.sort(key=lambda job: -int(job.creation_time))


def sort_by_pod(jobs: list[MigrationJob], pods: Mapping[str, MigrationPod]) -> None:
    """Pass 2: a job whose pod is missing first, then by the pod sorter's key (lowest first)."""
    missing: tuple[int | float, ...] = (0,)

    def key(job: MigrationJob) -> tuple[int | float, ...]:
        pod = pods.get(job.pod_key)
        return missing if pod is None else (1, *pod.sort_key)

    jobs.sort(key=key)


def sort_by_controller(jobs: list[MigrationJob], pods: Mapping[str, MigrationPod]) -> None:
    """Pass 3: jobs whose pods share a controlling ``Job`` move right after that Job's first job."""
    first: dict[str, int] = {}
    keys: list[int] = []
    for index, job in enumerate(jobs):
        pod = pods.get(job.pod_key)
        owner = pod.job_owner_uid if pod is not None else None
        keys.append(index if owner is None else first.setdefault(owner, index))
    order = sorted(range(len(jobs)), key=keys.__getitem__)
    jobs[:] = [jobs[i] for i in order]


def migrating_count_by_job_owner(jobs: Iterable[MigrationJob], pods: Mapping[str, MigrationPod]) -> dict[str, int]:
    """Active (migrating) jobs per controlling ``Job`` UID of their pods."""
    counts: dict[str, int] = {}
    for job in jobs:
        if not job.active:
            continue
        pod = pods.get(job.pod_key)
        owner = pod.job_owner_uid if pod is not None else None
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + 1
    return counts


def sort_by_migrating_count(
    jobs: list[MigrationJob], pods: Mapping[str, MigrationPod], migrating: Mapping[str, int]
) -> None:
    """Pass 4 (primary): jobs of the Job with more migrating jobs first; jobs of no Job count 0."""

    def key(job: MigrationJob) -> int:
        pod = pods.get(job.pod_key)
        owner = pod.job_owner_uid if pod is not None else None
        return -migrating.get(owner, 0) if owner is not None else 0

    jobs.sort(key=key)


def sort_jobs(
    waiting: Iterable[MigrationJob], pods: Mapping[str, MigrationPod], migrating: Mapping[str, int]
) -> list[MigrationJob]:
    """The four passes in upstream order (the last is primary), from a by-name order."""
    jobs = sorted(waiting, key=lambda job: job.name)
    sort_by_creation_time(jobs)
    sort_by_pod(jobs, pods)
    sort_by_controller(jobs, pods)
    sort_by_migrating_count(jobs, pods, migrating)
    return jobs


# ---------------------------------------------------------------- filters


class _Round:
    """Counters of one round, updated as jobs pass."""

    def __init__(
        self,
        jobs: Sequence[MigrationJob],
        pods: Mapping[str, MigrationPod],
        workloads: Mapping[str, Workload],
        args: MigrationControllerArgs,
    ) -> None:
        self.pods = pods
        self.workloads = workloads
        self.args = args
        self._workload_cache: dict[str, Workload | None] = {}
        self.active_pods: set[str] = set()
        self.per_node: dict[str, int] = {}
        self.per_namespace: dict[str, int] = {}
        self.migrating: dict[str, int] = {}
        self.unavailable: dict[str, int] = {}
        for pod in pods.values():
            if not pod.available and pod.phase not in ("Succeeded", "Failed"):
                owner = self.workload_of(pod)
                if owner is not None:
                    self.unavailable[owner.uid] = self.unavailable.get(owner.uid, 0) + 1
        for job in jobs:
            if job.active:
                self.count(job.pod_key, pods.get(job.pod_key), job.pod_namespace)

    def workload_of(self, pod: MigrationPod) -> Workload | None:
        owner = pod.controller
        if owner is None:
            return None
        try:
            return self._workload_cache[owner.uid]
        except KeyError:
            found = self._workload_cache[owner.uid] = resolve_workload(pod, self.workloads)
            return found

    def count(self, pod_key: str, pod: MigrationPod | None, namespace: str) -> None:
        """Record one more pod with an active job (once per pod)."""
        if pod_key in self.active_pods:
            return
        self.active_pods.add(pod_key)
        self.per_namespace[namespace] = self.per_namespace.get(namespace, 0) + 1
        if pod is None:
            return
        if pod.node_name:
            self.per_node[pod.node_name] = self.per_node.get(pod.node_name, 0) + 1
        owner = self.workload_of(pod)
        if owner is not None:
            self.migrating[owner.uid] = self.migrating.get(owner.uid, 0) + 1
            if pod.available:  # an unready pod is already counted as unavailable
                self.unavailable[owner.uid] = self.unavailable.get(owner.uid, 0) + 1


def _fail(name: str, reason: str) -> Verdict:
    return Verdict("fail", name, reason)


def _requeue(name: str, reason: str) -> Verdict:
    return Verdict("requeue", name, reason)


def _non_retryable(
    pod: MigrationPod,
    owner: Workload | None,
    args: MigrationControllerArgs,
    *,
    skip: frozenset[str],
    node_requirements: tuple[tuple[str, str, str | None], ...] | None,
    nodes: Mapping[str, Mapping[str, str]],
) -> Verdict | None:
    who = f"pod {pod.key}"
    if pod.eviction_cost == MAX_INT32:
        return _fail("EvictionCost", f"{who}: eviction cost is MaxInt32 ({MAX_INT32}), it never migrates")
    namespaces = args.namespaces
    if namespaces is not None and "Namespaces" not in skip:
        if namespaces.include and pod.namespace not in namespaces.include:
            return _fail("Namespaces", f"{who}: namespace {pod.namespace} is not in namespaces.include")
        if namespaces.exclude and pod.namespace in namespaces.exclude:
            return _fail("Namespaces", f"{who}: namespace {pod.namespace} is in namespaces.exclude")
    if not pod.owner_kinds and "BarePods" not in skip:
        failed_ok = args.evict_failed_bare_pods and pod.phase == "Failed"
        if not (args.evict_all_bare_pods or failed_ok):
            return _fail("BarePods", f"{who}: has no owner (evictAllBarePods is false)")
    if "DaemonSet" in pod.owner_kinds:
        return _fail("DaemonSetPods", f"{who}: is owned by a DaemonSet")
    if pod.mirror:
        return _fail("MirrorPods", f"{who}: is a mirror (static) pod")
    critical = (pod.priority or 0) >= SYSTEM_CRITICAL_PRIORITY or pod.priority_class_name in SYSTEM_CRITICAL_CLASSES
    if critical and not args.evict_system_critical_pods and "SystemCritical" not in skip:
        return _fail("SystemCritical", f"{who}: is system-critical (evictSystemCriticalPods is false)")
    if pod.local_storage and not args.evict_local_storage_pods and "LocalStorage" not in skip:
        return _fail("LocalStorage", f"{who}: has emptyDir or hostPath volumes (evictLocalStoragePods is false)")
    if pod.pvc and args.ignore_pvc_pods and "PVC" not in skip:
        return _fail("PVC", f"{who}: has PersistentVolumeClaim volumes (ignorePvcPods is true)")
    threshold = args.priority_threshold
    threshold_value = threshold.value if threshold is not None else None
    if threshold_value is not None and "PriorityThreshold" not in skip and (pod.priority or 0) >= threshold_value:
        return _fail("PriorityThreshold", f"{who}: priority {pod.priority or 0} >= priorityThreshold {threshold_value}")
    if args.label_selector is not None and "LabelSelector" not in skip and not args.label_selector.matches(pod.labels):
        return _fail("LabelSelector", f"{who}: labels do not match labelSelector")
    if node_requirements and not node_selector_matches(node_requirements, nodes.get(pod.node_name, {})):
        return _fail("NodeSelector", f"{who}: node {pod.node_name or '(none)'} does not match nodeSelector")
    guarded = not args.skip_check_expected_replicas and "ExpectedReplicas" not in skip
    if guarded and owner is not None and owner.replicas is not None:
        replicas = owner.replicas
        max_migrating = workload_limit(replicas, args.max_migrating_per_workload)
        max_unavailable = workload_limit(replicas, args.max_unavailable_per_workload)
        if replicas in (1, max_migrating, max_unavailable):
            return _fail(
                "ExpectedReplicas",
                f"{who}: {owner.key} expects {replicas} replicas, maxMigrating {max_migrating}, "
                f"maxUnavailable {max_unavailable}: migrating would leave none",
            )
    return None


def _retryable(
    pod: MigrationPod,
    owner: Workload | None,
    state: _Round,
    skip: frozenset[str],
    limited_workloads: frozenset[str],
) -> Verdict | None:
    args = state.args
    who = f"pod {pod.key}"
    if owner is not None and owner.uid in limited_workloads:
        return _requeue("ObjectLimiter", f"{who}: {owner.key} is rate limited by objectLimiters")
    limit = args.max_migrating_globally
    if limit is not None and limit > 0 and "MaxMigratingGlobally" not in skip:
        count = len(state.active_pods)
        if count >= limit:
            return _requeue("MaxMigratingGlobally", f"{who}: {count} pods migrating >= maxMigratingGlobally {limit}")
    limit = args.max_migrating_per_node
    if limit is not None and limit > 0 and pod.node_name and "MaxMigratingPerNode" not in skip:
        count = state.per_node.get(pod.node_name, 0)
        if count >= limit:
            return _requeue(
                "MaxMigratingPerNode",
                f"{who}: {count} pods migrating on node {pod.node_name} >= maxMigratingPerNode {limit}",
            )
    limit = args.max_migrating_per_namespace
    if limit is not None and limit > 0 and "MaxMigratingPerNamespace" not in skip:
        count = state.per_namespace.get(pod.namespace, 0)
        if count >= limit:
            return _requeue(
                "MaxMigratingPerNamespace",
                f"{who}: {count} pods migrating in namespace {pod.namespace} >= maxMigratingPerNamespace {limit}",
            )
    if owner is None or owner.replicas is None:
        return None
    replicas = owner.replicas
    if "MaxMigratingPerWorkload" not in skip:
        limit = workload_limit(replicas, args.max_migrating_per_workload)
        count = state.migrating.get(owner.uid, 0)
        if count >= limit:
            return _requeue(
                "MaxMigratingPerWorkload",
                f"{who}: {count} pods of {owner.key} migrating >= maxMigratingPerWorkload {limit} "
                f"({replicas} replicas)",
            )
    if "MaxUnavailablePerWorkload" not in skip:
        limit = workload_limit(replicas, args.max_unavailable_per_workload)
        count = state.unavailable.get(owner.uid, 0)
        if not pod.available and pod.phase not in ("Succeeded", "Failed"):
            count -= 1  # the pod itself is not one of the OTHER pods
        if count >= limit:
            return _requeue(
                "MaxUnavailablePerWorkload",
                f"{who}: {count} other pods of {owner.key} unavailable or migrating >= "
                f"maxUnavailablePerWorkload {limit} ({replicas} replicas)",
            )
    return None


def arbitrate(
    jobs: Sequence[MigrationJob],
    pods: Mapping[str, MigrationPod],
    workloads: Mapping[str, Workload],
    args: MigrationControllerArgs,
    now: float,
    *,
    nodes: Mapping[str, Mapping[str, str]] | None = None,
    limited_workloads: frozenset[str] = frozenset(),
) -> ArbitrationResult:
    """One round: sort the waiting jobs among ``jobs`` and give each a verdict (see the module docstring).

    ``jobs``: every PodMigrationJob known (waiting ones are decided, active ones are counted);
    ``pods``: by ``namespace/name``; ``workloads``: controllers by UID (ReplicaSets, Deployments, ...);
    ``nodes``: node labels by node name, read only for ``nodeSelector`` (an unknown node has no labels);
    ``limited_workloads``: workload UIDs whose object limiter has no token now.
    """
    waiting = [job for job in jobs if job.waiting]
    if not args.arbitration_args.enabled:
        ordered = sorted(waiting, key=lambda job: (job.creation_time, job.name))
        reason = "arbitration disabled (arbitrationArgs.enabled: false): passes unfiltered"
        return ArbitrationResult(
            tuple(job.name for job in ordered), {job.name: Verdict("pass", None, reason) for job in ordered}
        )
    migrating = migrating_count_by_job_owner(jobs, pods)
    ordered = sort_jobs(waiting, pods, migrating)
    state = _Round(jobs, pods, workloads, args)
    skip = frozenset(args.skip_eviction_gates)
    node_requirements = parse_node_selector(args.node_selector) if args.node_selector else None
    node_labels: Mapping[str, Mapping[str, str]] = nodes or {}
    verdicts: dict[str, Verdict] = {}
    for job in ordered:
        verdicts[job.name] = verdict = _decide(
            job,
            state,
            skip=skip,
            node_requirements=node_requirements,
            nodes=node_labels,
            now=now,
            limited_workloads=limited_workloads,
        )
        if verdict.verdict == "pass":
            state.count(job.pod_key, pods.get(job.pod_key), job.pod_namespace)
    return ArbitrationResult(tuple(job.name for job in ordered), verdicts)


def _decide(
    job: MigrationJob,
    state: _Round,
    *,
    skip: frozenset[str],
    node_requirements: tuple[tuple[str, str, str | None], ...] | None,
    nodes: Mapping[str, Mapping[str, str]],
    now: float,
    limited_workloads: frozenset[str],
) -> Verdict:
    if job.ttl_seconds is not None and now - job.creation_time >= job.ttl_seconds:
        return _fail("TTL", f"job {job.name}: ttl {job.ttl_seconds:g}s ran out before it passed arbitration")
    pod = state.pods.get(job.pod_key)
    if pod is None:
        return Verdict("pass", None, f"pod {job.pod_key} not found: passes as upstream (the migration reports it)")
    if job.pod_key in state.active_pods:
        return _fail("ExistingJob", f"pod {pod.key}: already has an active PodMigrationJob")
    if pod.evict_annotation:
        return Verdict("pass", None, f"pod {pod.key}: annotation {ANNOTATION_EVICT} bypasses the filters")
    owner = state.workload_of(pod)
    found = _non_retryable(pod, owner, state.args, skip=skip, node_requirements=node_requirements, nodes=nodes)
    if found is None:
        found = _retryable(pod, owner, state, skip, limited_workloads)
    return found or Verdict("pass", None, f"pod {pod.key}: passed all filters")
