"""One arbitration round over the waiting PodMigrationJobs, as Koordinator merged it (v1.4,
``pkg/descheduler/controllers/migration/arbitrator``).

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
round counts for the jobs after it (how Koordinator ended a deadlock between Pending jobs). Filters named in
``skipEvictionGates`` are skipped.

**Gangs** (koordpy; no upstream descheduler has it): a job for a running member of a gang
(:mod:`koordpy.scheduler.plugins.gang.disruption`) passes alone only while the gang keeps enough running
members (:func:`~koordpy.scheduler.plugins.gang.disruption.keeps_gang`): at least its minimum for a
``minimum`` gang (every CRD and annotation gang), none other for an ``all`` gang (a native PodGroup's
``disruptionMode: all``); a ``single`` gang's members are judged alone. A job that would take
its gang lower moves only with every running member of its unit (the gang, or its whole GangGroup) that
is not leaving already: when each of them has a waiting job, those jobs are judged together in this round,
each by every filter above and counted against every limit, and all pass or none does (the counts of a
unit that does not pass are taken back). Otherwise the job is requeued by ``GangBelowMinimum`` (an ``all``
gang: ``GangDisruptionAll``) naming the members without a job, or, when the unit is complete but one of
its jobs is held or refused, by ``GangMemberWaiting`` naming that job. A running member of a gang whose
parameters are not known (its PodGroup not seen yet, or no member with a valid ``min-available``:
:attr:`~koordpy.scheduler.plugins.gang.disruption.DisruptionGang.unknown`) is requeued by ``GangUnknown``
until they are, whatever jobs its mates have (fail closed: neither its minimum nor its disruption mode, nor
every member it has, is known). The gate ``GangDisruption`` in
``skipEvictionGates`` turns the rule off; the evict annotation bypasses it, as it bypasses the limits; a
job whose ttl ran out, whose pod is missing or already migrating, or whose pod does not run, is judged
as any other.

Cost (``bench/arbitration.py``): each job's pod is looked up once; the sorts are stable sorts of one
index permutation (a pass whose key is equal for all jobs is skipped); a workload's limits are resolved
once per controller per round; the non-retryable filters run only for a pod with one of its
:attr:`MigrationPod.hazards` bits, a workload whose replica count ``ExpectedReplicas`` refuses, or a
configuration with a namespace, priority, label or node filter; requeue reasons are formatted once per
(filter, subject, count, limit). ``tests/unit/descheduler/test_arbitration_equivalence.py`` checks the
result against the passes and filters applied one by one.

Not guaranteed: per-workload limits for pods whose controller is missing from ``workloads`` or has no
replica count (Jobs, DaemonSets, custom kinds): those filters then pass. Paused jobs are arbitrated
like any other (as upstream); the lifecycle holds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal

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
from koordpy.scheduler.plugins.gang.disruption import DisruptionGang, GangTable, keeps_gang

__all__ = [
    "GANG_FILTERS",
    "NON_RETRYABLE_FILTERS",
    "REASON_FORBIDDEN",
    "REASON_TIMEOUT",
    "RETRYABLE_FILTERS",
    "ArbitrationResult",
    "EvictionFilter",
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
GANG_BELOW_MINIMUM = "GangBelowMinimum"
GANG_DISRUPTION_ALL = "GangDisruptionAll"
GANG_MEMBER_WAITING = "GangMemberWaiting"
GANG_UNKNOWN = "GangUnknown"
GANG_FILTERS = (GANG_BELOW_MINIMUM, GANG_DISRUPTION_ALL, GANG_MEMBER_WAITING, GANG_UNKNOWN)
"""The gang rule's requeue reasons (see the module docstring); ``skipEvictionGates: [GangDisruption]`` skips them."""
GANG_GATE = "GangDisruption"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one waiting job: ``pass`` (annotate and start), ``requeue`` (keep waiting) or
    ``fail`` (phase Failed with :attr:`job_reason`, an Event with :attr:`reason`)."""

    verdict: Outcome
    filter: str | None
    """The filter that decided, or None for a pass (and for a pass by the evict annotation)."""
    reason: str
    """Human-readable explanation naming the pod and the numbers compared."""
    gang: str = ""
    """For a job that passed with its gang's other jobs: the gang (or GangGroup) they move as, else ""."""

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


# ---------------------------------------------------------------- sort passes
#
# Each pass is one stable sort of (job, pod) entries by one key; the public pass functions sort jobs
# with the same keys, and sort_jobs applies the four in order.

_Entry = tuple[MigrationJob, MigrationPod | None]


def _job_owner(pod: MigrationPod | None) -> str | None:
    return pod.job_owner_uid if pod is not None else None


def _stable_sort(entries: list[_Entry], keys: list[int]) -> None:
    """Reorder ``entries`` by ``keys`` (one per entry), keeping the order of equal keys."""
    order = sorted(range(len(entries)), key=keys.__getitem__)
    entries[:] = [entries[i] for i in order]


def _by_creation_time(entries: list[_Entry]) -> None:
    """Pass 1: newer job first, in whole seconds (jobs created in one second keep their order)."""
    _stable_sort(entries, [-int(job.creation_time) for job, _ in entries])


def _by_pod(entries: list[_Entry]) -> None:
    """Pass 2: a missing pod first (-1), then the pod sorter's packed key, lowest first."""
    _stable_sort(entries, [-1 if pod is None else pod.rank for _, pod in entries])


def _by_controller(entries: list[_Entry]) -> None:
    """Pass 3: the key of a job of a ``Job`` is the position of that Job's first job; others keep their own."""
    first: dict[str, int] = {}
    keys = [
        index if owner is None else first.setdefault(owner, index)
        for index, owner in enumerate(_job_owner(pod) for _, pod in entries)
    ]
    _stable_sort(entries, keys)


def _by_migrating_count(entries: list[_Entry], migrating: Mapping[str, int]) -> None:
    """Pass 4: minus the Job's migrating count (0 for a pod of no Job): more migrating first."""
    owners = [_job_owner(pod) for _, pod in entries]
    _stable_sort(entries, [0 if owner is None else -migrating.get(owner, 0) for owner in owners])


def _apply(jobs: list[MigrationJob], pods: Mapping[str, MigrationPod], sort: Callable[[list[_Entry]], None]) -> None:
    entries: list[_Entry] = [(job, pods.get(job.pod_key)) for job in jobs]
    sort(entries)
    jobs[:] = [job for job, _ in entries]


def sort_by_creation_time(jobs: list[MigrationJob]) -> None:
    """Pass 1: newer job first (whole seconds, so jobs created in one second keep their order)."""
    _apply(jobs, {}, _by_creation_time)


def sort_by_pod(jobs: list[MigrationJob], pods: Mapping[str, MigrationPod]) -> None:
    """Pass 2: a job whose pod is missing first, then by the pod sorter's key (lowest first)."""
    _apply(jobs, pods, _by_pod)


def sort_by_controller(jobs: list[MigrationJob], pods: Mapping[str, MigrationPod]) -> None:
    """Pass 3: jobs whose pods share a controlling ``Job`` move right after that Job's first job."""
    _apply(jobs, pods, _by_controller)


def sort_by_migrating_count(
    jobs: list[MigrationJob], pods: Mapping[str, MigrationPod], migrating: Mapping[str, int]
) -> None:
    """Pass 4 (primary): jobs of the Job with more migrating jobs first; jobs of no Job count 0."""
    _apply(jobs, pods, lambda entries: _by_migrating_count(entries, migrating))


def migrating_count_by_job_owner(jobs: Iterable[MigrationJob], pods: Mapping[str, MigrationPod]) -> dict[str, int]:
    """Active (migrating) jobs per controlling ``Job`` UID of their pods."""
    counts: dict[str, int] = {}
    for job in jobs:
        if not job.active:
            continue
        owner = _job_owner(pods.get(job.pod_key))
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + 1
    return counts


def sort_jobs(
    waiting: Iterable[MigrationJob], pods: Mapping[str, MigrationPod], migrating: Mapping[str, int]
) -> list[MigrationJob]:
    """The four passes in upstream order (the last is primary), starting from the jobs' name order."""
    return [job for job, _ in _sorted_with_pods(waiting, pods, migrating)]


def _sorted_with_pods(
    waiting: Iterable[MigrationJob], pods: Mapping[str, MigrationPod], migrating: Mapping[str, int]
) -> list[_Entry]:
    """The four passes as stable sorts of one index permutation over per-job key lists built once.

    Same keys as the pass functions; a pass whose key is equal for every job is an identity (a stable
    sort) and is skipped: pass 3 when no pod has a ``Job`` owner, pass 4 when no such Job is migrating.
    """
    jobs = sorted(waiting, key=attrgetter("name"))
    get = pods.get
    found = [get(job.pod_key) for job in jobs]
    perm = list(range(len(jobs)))
    created = [-int(job.creation_time) for job in jobs]
    perm.sort(key=created.__getitem__)  # pass 1
    ranks = [-1 if pod is None else pod.rank for pod in found]
    perm.sort(key=ranks.__getitem__)  # pass 2
    owners = [None if pod is None else pod.job_owner_uid for pod in found]
    if any(owner is not None for owner in owners):
        first: dict[str, int] = {}
        grouped = [0] * len(jobs)
        for position, index in enumerate(perm):  # pass 3: a Job's jobs take its first job's position
            owner = owners[index]
            grouped[index] = position if owner is None else first.setdefault(owner, position)
        perm.sort(key=grouped.__getitem__)
        counts = [0 if owner is None else -migrating.get(owner, 0) for owner in owners]
        if any(counts):
            perm.sort(key=counts.__getitem__)  # pass 4 (primary)
    return [(jobs[index], found[index]) for index in perm]


# ---------------------------------------------------------------- filters

_TERMINAL = frozenset({"Succeeded", "Failed"})


_OwnerInfo = tuple[Workload, int, int, bool]
"""(workload, maxMigrating, maxUnavailable, whether its replica count is one the ExpectedReplicas filter
refuses: 1, maxMigrating or maxUnavailable)."""


class _Round:
    """What one round knows: the configuration read once, and counters updated as jobs pass.

    ``active``: the jobs that already count against the limits (``MigrationJob.active``).
    """

    def __init__(
        self,
        active: Sequence[MigrationJob],
        pods: Mapping[str, MigrationPod],
        workloads: Mapping[str, Workload],
        args: MigrationControllerArgs,
        *,
        nodes: Mapping[str, Mapping[str, str]],
        limited_workloads: frozenset[str],
    ) -> None:
        self.workloads = workloads
        self.args = args
        self.nodes = nodes
        self.limited_workloads = limited_workloads
        skip = frozenset(args.skip_eviction_gates)
        self.skip = skip
        self.node_requirements = parse_node_selector(args.node_selector) if args.node_selector else None
        self.check_namespaces = args.namespaces is not None and "Namespaces" not in skip
        self.check_bare = "BarePods" not in skip and not args.evict_all_bare_pods
        self.check_critical = "SystemCritical" not in skip and not args.evict_system_critical_pods
        self.check_local = "LocalStorage" not in skip and not args.evict_local_storage_pods
        self.check_pvc = "PVC" not in skip and args.ignore_pvc_pods
        threshold = args.priority_threshold.value if args.priority_threshold is not None else None
        self.threshold = threshold if "PriorityThreshold" not in skip else None
        self.label_selector = args.label_selector if "LabelSelector" not in skip else None
        self.check_replicas = not args.skip_check_expected_replicas and "ExpectedReplicas" not in skip
        self.always_non_retryable = bool(
            self.check_namespaces or self.threshold is not None or self.label_selector is not None
        ) or bool(self.node_requirements)
        self.global_limit = _limit(args.max_migrating_globally, "MaxMigratingGlobally", skip)
        self.node_limit = _limit(args.max_migrating_per_node, "MaxMigratingPerNode", skip)
        self.namespace_limit = _limit(args.max_migrating_per_namespace, "MaxMigratingPerNamespace", skip)
        self.check_workload_migrating = "MaxMigratingPerWorkload" not in skip
        self.check_workload_unavailable = "MaxUnavailablePerWorkload" not in skip
        self._workload_cache: dict[str, Workload | None] = {}
        self.owner_cache: dict[str, _OwnerInfo | None] = {}
        self.active_pods: set[str] = set()
        self.per_node: dict[str, int] = {}
        self.per_namespace: dict[str, int] = {}
        self.migrating: dict[str, int] = {}
        self.unavailable: dict[str, int] = {}
        unavailable = self.unavailable
        workload_of = self.workload_of
        for pod in pods.values():
            if pod.available or pod.phase in _TERMINAL:
                continue
            owner = workload_of(pod)
            if owner is not None:
                unavailable[owner.uid] = unavailable.get(owner.uid, 0) + 1
        for job in active:
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

    def owner_of(self, pod: MigrationPod) -> _OwnerInfo | None:
        """(workload, maxMigrating, maxUnavailable) of the pod's workload, once per controller per round;
        the limits are 0 for a workload without a replica count."""
        controller = pod.controller
        if controller is None:
            return None
        try:
            return self.owner_cache[controller.uid]
        except KeyError:
            owner = self.workload_of(pod)
            found: _OwnerInfo | None = None
            if owner is not None:
                if owner.replicas is None:
                    found = (owner, 0, 0, False)
                else:
                    max_migrating, max_unavailable = self.limits(owner, owner.replicas)
                    found = (
                        owner,
                        max_migrating,
                        max_unavailable,
                        owner.replicas in (1, max_migrating, max_unavailable),
                    )
            self.owner_cache[controller.uid] = found
            return found

    def limits(self, owner: Workload, replicas: int) -> tuple[int, int]:
        """(maxMigrating, maxUnavailable) of a workload (``workload_limit`` is memoised)."""
        args = self.args
        return (
            workload_limit(replicas, args.max_migrating_per_workload),
            workload_limit(replicas, args.max_unavailable_per_workload),
        )

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

    def uncount(self, pod_key: str, pod: MigrationPod | None, namespace: str) -> None:
        """Take back one :meth:`count` (a gang's jobs that were tried together and did not all pass)."""
        if pod_key not in self.active_pods:
            return
        self.active_pods.discard(pod_key)
        _decrement(self.per_namespace, namespace)
        if pod is None:
            return
        if pod.node_name:
            _decrement(self.per_node, pod.node_name)
        owner = self.workload_of(pod)
        if owner is not None:
            _decrement(self.migrating, owner.uid)
            if pod.available:
                _decrement(self.unavailable, owner.uid)


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def _limit(value: int | None, gate: str, skip: frozenset[str]) -> int | None:
    """A count limit, or None when unset, 0 or less (off, as upstream) or skipped."""
    return value if value is not None and value > 0 and gate not in skip else None


def _fail(name: str, reason: str) -> Verdict:
    return Verdict("fail", name, reason)


def _non_retryable(pod: MigrationPod, info: _OwnerInfo | None, state: _Round) -> Verdict | None:
    args = state.args
    if pod.eviction_cost == MAX_INT32:
        return _fail(
            "EvictionCost",
            f"pod {pod.namespace}/{pod.name}: eviction cost is MaxInt32 ({MAX_INT32}), it never migrates",
        )
    namespaces = args.namespaces
    if state.check_namespaces and namespaces is not None:
        if namespaces.include and pod.namespace not in namespaces.include:
            return _fail(
                "Namespaces", f"pod {pod.namespace}/{pod.name}: namespace {pod.namespace} is not in namespaces.include"
            )
        if namespaces.exclude and pod.namespace in namespaces.exclude:
            return _fail(
                "Namespaces", f"pod {pod.namespace}/{pod.name}: namespace {pod.namespace} is in namespaces.exclude"
            )
    kinds = pod.owner_kinds
    if not kinds and state.check_bare and not (args.evict_failed_bare_pods and pod.phase == "Failed"):
        return _fail("BarePods", f"pod {pod.namespace}/{pod.name}: has no owner (evictAllBarePods is false)")
    if "DaemonSet" in kinds:
        return _fail("DaemonSetPods", f"pod {pod.namespace}/{pod.name}: is owned by a DaemonSet")
    if pod.mirror:
        return _fail("MirrorPods", f"pod {pod.namespace}/{pod.name}: is a mirror (static) pod")
    priority = pod.priority or 0
    if state.check_critical and (
        priority >= SYSTEM_CRITICAL_PRIORITY or pod.priority_class_name in SYSTEM_CRITICAL_CLASSES
    ):
        return _fail(
            "SystemCritical", f"pod {pod.namespace}/{pod.name}: is system-critical (evictSystemCriticalPods is false)"
        )
    if pod.local_storage and state.check_local:
        return _fail(
            "LocalStorage",
            f"pod {pod.namespace}/{pod.name}: has emptyDir or hostPath volumes (evictLocalStoragePods is false)",
        )
    if pod.pvc and state.check_pvc:
        return _fail(
            "PVC", f"pod {pod.namespace}/{pod.name}: has PersistentVolumeClaim volumes (ignorePvcPods is true)"
        )
    if state.threshold is not None and priority >= state.threshold:
        return _fail(
            "PriorityThreshold",
            f"pod {pod.namespace}/{pod.name}: priority {priority} >= priorityThreshold {state.threshold}",
        )
    if state.label_selector is not None and not state.label_selector.matches(pod.labels):
        return _fail("LabelSelector", f"pod {pod.namespace}/{pod.name}: labels do not match labelSelector")
    requirements = state.node_requirements
    if requirements and not node_selector_matches(requirements, state.nodes.get(pod.node_name, {})):
        return _fail(
            "NodeSelector",
            f"pod {pod.namespace}/{pod.name}: node {pod.node_name or '(none)'} does not match nodeSelector",
        )
    if state.check_replicas and info is not None and info[0].replicas is not None:
        owner, max_migrating, max_unavailable, _ = info
        replicas = owner.replicas
        if replicas in (1, max_migrating, max_unavailable):
            return _fail(
                "ExpectedReplicas",
                f"pod {pod.namespace}/{pod.name}: {owner.key} expects {replicas} replicas, "
                f"maxMigrating {max_migrating}, maxUnavailable {max_unavailable}: migrating would leave none",
            )
    return None


class _Requeues:
    """Requeue verdicts are shared between jobs stopped by the same limit at the same count; the reason
    is formatted once per (filter, subject, count, limit), when first needed."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str, int, int], Verdict] = {}

    def get(
        self, name: str, scope: str, subject: str, count: int, limit: int, *, replicas: int | None = None
    ) -> Verdict:
        """``scope`` is a template with ``{}`` for ``subject`` (a node, namespace or workload)."""
        key = (name, subject, count, limit)
        found = self._made.get(key)
        if found is None:
            extra = "" if replicas is None else f" ({replicas} replicas)"
            found = self._made[key] = Verdict(
                "requeue", name, f"{count} {scope.format(subject)} >= {name[0].lower()}{name[1:]} {limit}{extra}"
            )
        return found


def _retryable(pod: MigrationPod, info: _OwnerInfo | None, state: _Round, requeues: _Requeues) -> Verdict | None:
    owner = info[0] if info is not None else None
    if owner is not None and owner.uid in state.limited_workloads:
        return Verdict("requeue", "ObjectLimiter", f"{owner.key} is rate limited by objectLimiters")
    limit = state.global_limit
    if limit is not None:
        count = len(state.active_pods)
        if count >= limit:
            return requeues.get("MaxMigratingGlobally", "pods migrating{}", "", count, limit)
    limit = state.node_limit
    if limit is not None and pod.node_name:
        count = state.per_node.get(pod.node_name, 0)
        if count >= limit:
            return requeues.get("MaxMigratingPerNode", "pods migrating on node {}", pod.node_name, count, limit)
    limit = state.namespace_limit
    if limit is not None:
        count = state.per_namespace.get(pod.namespace, 0)
        if count >= limit:
            return requeues.get(
                "MaxMigratingPerNamespace", "pods migrating in namespace {}", pod.namespace, count, limit
            )
    if info is None or info[0].replicas is None:
        return None
    owner, max_migrating, max_unavailable, _ = info
    replicas = owner.replicas
    if state.check_workload_migrating:
        count = state.migrating.get(owner.uid, 0)
        if count >= max_migrating:
            return requeues.get(
                "MaxMigratingPerWorkload", "pods of {} migrating", owner.key, count, max_migrating, replicas=replicas
            )
    if state.check_workload_unavailable:
        count = state.unavailable.get(owner.uid, 0)
        if not pod.available and pod.phase not in _TERMINAL:
            count -= 1  # the pod itself is not one of the OTHER pods
        if count >= max_unavailable:
            return requeues.get(
                "MaxUnavailablePerWorkload",
                "other pods of {} unavailable or migrating",
                owner.key,
                count,
                max_unavailable,
                replicas=replicas,
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
    gangs: GangTable | None = None,
) -> ArbitrationResult:
    """One round: sort the waiting jobs among ``jobs`` and give each a verdict (see the module docstring).

    ``jobs``: every PodMigrationJob known (waiting ones are decided, active ones are counted);
    ``pods``: by ``namespace/name``; ``workloads``: controllers by UID (ReplicaSets, Deployments, ...);
    ``nodes``: node labels by node name, read only for ``nodeSelector`` (an unknown node has no labels);
    ``limited_workloads``: workload UIDs whose object limiter has no token now; ``gangs``: the gangs of
    the jobs' pods (None or empty: no pod is in a gang).
    """
    waiting: list[MigrationJob] = []
    active: list[MigrationJob] = []
    for job in jobs:  # one pass for both: the same tests as MigrationJob.waiting and .active
        phase = job.phase
        if phase == "Running":
            active.append(job)
        elif phase in ("", "Pending"):
            if job.passed_arbitration:
                active.append(job)
            elif not job.deleting:
                waiting.append(job)
    if not args.arbitration_args.enabled:
        by_age = sorted(waiting, key=lambda job: (job.creation_time, job.name))
        reason = "arbitration disabled (arbitrationArgs.enabled: false): passes unfiltered"
        return ArbitrationResult(
            tuple(job.name for job in by_age), {job.name: Verdict("pass", None, reason) for job in by_age}
        )
    ordered = _sorted_with_pods(waiting, pods, migrating_count_by_job_owner(active, pods))
    state = _Round(active, pods, workloads, args, nodes=nodes or {}, limited_workloads=limited_workloads)
    requeues = _Requeues()
    verdicts: dict[str, Verdict] = {}
    units = None
    if gangs is not None and gangs.pod_gang and GANG_GATE not in state.skip:
        units = _Units(gangs, ordered, verdicts, state=state, requeues=requeues, now=now)
    for job, pod in ordered:
        if units is not None and pod is not None:
            if job.name in verdicts:
                continue  # decided with its gang
            gang = units.of(job.pod_key)
            if gang is not None:
                together = units.decide(job, pod, gang)
                if together is not None:
                    verdicts.update(together)
                    continue
        verdict = verdicts[job.name] = _decide(job, pod, state, requeues, now)
        if verdict.verdict == "pass":
            state.count(job.pod_key, pod, job.pod_namespace)
    return ArbitrationResult(tuple([job.name for job, _ in ordered]), verdicts)


class EvictionFilter:
    """The non-retryable filters for one pod at a time, outside a round: what a balance plugin asks before it
    files a job, so that it never files one arbitration would fail (a gap Koordinator users reported in its
    balance plugins). The same filters, options and order as :func:`arbitrate` (``EvictionCost`` to
    ``ExpectedReplicas``); the evict annotation passes them as there. ``ExistingJob`` and the limits are the
    caller's (a round of its own)."""

    def __init__(
        self,
        args: MigrationControllerArgs,
        workloads: Mapping[str, Workload],
        nodes: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._state = _Round((), {}, workloads, args, nodes=nodes or {}, limited_workloads=frozenset())

    def refuse(self, pod: MigrationPod) -> Verdict | None:
        """The failing filter's verdict, or None when the pod may migrate."""
        if pod.evict_annotation:
            return None
        return _non_retryable(pod, self._state.owner_of(pod), self._state)


class _Units:
    """The gang rule of one round (see the module docstring): which jobs a gang's member must move with."""

    def __init__(
        self,
        gangs: GangTable,
        ordered: Sequence[_Entry],
        verdicts: dict[str, Verdict],
        *,
        state: _Round,
        requeues: _Requeues,
        now: float,
    ) -> None:
        self.gangs = gangs
        self.verdicts = verdicts
        self.state = state
        self.requeues = requeues
        self.now = now
        self.jobs: dict[str, list[tuple[int, MigrationJob, MigrationPod]]] = {}
        """Waiting jobs of gang members by pod key, in arbitration order."""
        self.of = gangs.of
        self.incomplete: dict[tuple[str, ...], tuple[int, list[str], list[str]]] = {}
        """GangGroup -> (active pods counted, members needed, members without a job) when last found lacking
        jobs: a gang of 1,000 with 500 jobs is looked at once per round, not 500 times."""
        pod_gang = gangs.pod_gang
        found = [(index, job, pod) for index, (job, pod) in enumerate(ordered) if job.pod_key in pod_gang]
        for index, job, pod in found:
            if pod is not None:
                self.jobs.setdefault(job.pod_key, []).append((index, job, pod))

    def _job_for(self, pod_key: str) -> tuple[int, MigrationJob, MigrationPod] | None:
        """The member's first job without a verdict in this round, else its first job (decided)."""
        found = self.jobs.get(pod_key)
        if not found:
            return None
        return next((entry for entry in found if entry[1].name not in self.verdicts), found[0])

    def decide(self, job: MigrationJob, pod: MigrationPod, gang: DisruptionGang) -> dict[str, Verdict] | None:
        """Verdicts for ``job`` and the jobs that move with it, or None when the job is judged alone."""
        state, requeues, now = self.state, self.requeues, self.now
        key = job.pod_key
        active = state.active_pods
        if (
            gang.disruption == "single"
            or key not in gang.running
            or key in active
            or pod.evict_annotation
            or (job.ttl_seconds is not None and now - job.creation_time >= job.ttl_seconds)
        ):
            return None
        if gang.unknown:
            return {job.name: _unknown(pod, gang)}
        leaving = len(gang.running & active)
        stays = len(gang.running) - leaving - 1
        unit = self.gangs.unit(gang)
        if keeps_gang(gang, leaving + 1) and (stays > 0 or len(unit) == 1):
            return None  # alone, it leaves the gang its minimum
        seen = self.incomplete.get(gang.group)
        if seen is not None and seen[0] == len(active):
            # the unit lacked jobs when judged for another member, and nothing passed since
            needed, missing = seen[1], seen[2]
            verdict = _incomplete(pod, gang, len(unit), stays=stays, leaving=leaving, needed=needed, missing=missing)
            return {job.name: verdict}
        needed = sorted({k for g in unit for k in g.running if k not in active})
        if needed == [key]:
            return None  # every other running member of its unit is migrating already: the unit moves whole
        entries = [self._job_for(k) for k in needed]
        missing = [k for k, entry in zip(needed, entries, strict=True) if entry is None]
        if missing:
            self.incomplete[gang.group] = (len(active), needed, missing)
            verdict = _incomplete(pod, gang, len(unit), stays=stays, leaving=leaving, needed=needed, missing=missing)
            return {job.name: verdict}
        members = sorted((e for e in entries if e is not None), key=lambda e: e[0])
        label = gang.label
        blocked = next(((j, self.verdicts[j.name]) for _, j, _ in members if j.name in self.verdicts), None)
        if blocked is not None:  # a member's job was judged earlier in this round, and did not pass
            return {job.name: _member_waiting(label, len(members), *blocked)}
        own: dict[str, Verdict] = {}
        counted: list[tuple[str, MigrationPod, str]] = []
        first_refused: tuple[MigrationJob, Verdict] | None = None
        for _, member, member_pod in members:
            verdict = own[member.name] = _decide(member, member_pod, state, requeues, now)
            if verdict.verdict != "pass":
                first_refused = first_refused or (member, verdict)
            elif member.pod_key not in state.active_pods:
                state.count(member.pod_key, member_pod, member.pod_namespace)
                counted.append((member.pod_key, member_pod, member.pod_namespace))
        if first_refused is None:
            reason = (
                f"passed all filters; moves with {label} together: "
                f"{len(members)} PodMigrationJobs admitted in one round"
            )
            return {member.name: Verdict("pass", None, reason, label) for _, member, _ in members}
        for counted_key, counted_pod, namespace in reversed(counted):
            state.uncount(counted_key, counted_pod, namespace)
        waits = _member_waiting(label, len(members), *first_refused)
        return {name: verdict if verdict.verdict != "pass" else waits for name, verdict in own.items()}


def _incomplete(
    pod: MigrationPod,
    gang: DisruptionGang,
    unit_size: int,
    *,
    stays: int,
    leaving: int,
    needed: list[str],
    missing: list[str],
) -> Verdict:
    """``GangBelowMinimum`` (``GangDisruptionAll``): some members of the unit have no waiting job."""
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    already = f" ({leaving} migrating already)" if leaving else ""
    whose = f"gang {gang.id}" if unit_size == 1 else f"gang {gang.id} of {gang.label}"
    if gang.disruption == "all":
        name = GANG_DISRUPTION_ALL
        why = f"{whose} (disruptionMode all): {len(gang.running)} members run{already}; they move all together or none"
    else:
        name = GANG_BELOW_MINIMUM
        why = (
            f"{whose} ({gang.mode}, minimum {gang.min_member}): {len(gang.running)} members run{already}; "
            f"moving pod {pod.key} alone leaves {stays} < {gang.min_member}"
        )
    return Verdict(
        "requeue",
        name,
        f"{why}: it moves only together with the {len(needed)} running members of {gang.label} not yet "
        f"migrating, and {len(missing)} of them have no waiting PodMigrationJob ({shown})",
    )


def _unknown(pod: MigrationPod, gang: DisruptionGang) -> Verdict:
    """``GangUnknown``: the member's gang has no known parameters yet; the job waits until it has."""
    return Verdict(
        "requeue",
        GANG_UNKNOWN,
        f"{gang.unknown}: its minimum and disruption mode are unknown, so pod {pod.key}, one of its "
        f"{len(gang.running)} running members, waits until they are known (the evict annotation or "
        f"skipEvictionGates [{GANG_GATE}] moves it anyway)",
    )


def _member_waiting(label: str, size: int, member: MigrationJob, verdict: Verdict) -> Verdict:
    held = "is refused" if verdict.verdict == "fail" else "waits"
    return Verdict(
        "requeue",
        GANG_MEMBER_WAITING,
        f"moves only with {label} together ({size} PodMigrationJobs); job {member.name} for pod "
        f"{member.pod_key} {held}: {verdict.filter}: {verdict.reason}",
    )


_PASSED = "passed all filters"
_UNSEEN: Any = object()
"""Marks a controller not yet in ``_Round.owner_cache``."""


def _decide(job: MigrationJob, pod: MigrationPod | None, state: _Round, requeues: _Requeues, now: float) -> Verdict:
    if job.ttl_seconds is not None and now - job.creation_time >= job.ttl_seconds:
        return _fail("TTL", f"job {job.name}: ttl {job.ttl_seconds:g}s ran out before it passed arbitration")
    if pod is None:
        return Verdict("pass", None, f"pod {job.pod_key} not found: passes as upstream (the migration reports it)")
    if job.pod_key in state.active_pods:
        return _fail("ExistingJob", f"pod {pod.key}: already has an active PodMigrationJob")
    if pod.evict_annotation:
        return Verdict("pass", None, f"pod {pod.key}: annotation {ANNOTATION_EVICT} bypasses the filters")
    controller = pod.controller
    info = None if controller is None else state.owner_cache.get(controller.uid, _UNSEEN)
    if info is _UNSEEN:
        info = state.owner_of(pod)
    found = None
    # _non_retryable decides; it is skipped only when none of its conditions can hold for this pod.
    if pod.hazards or state.always_non_retryable or (info is not None and info[3] and state.check_replicas):
        found = _non_retryable(pod, info, state)
    return found or _retryable(pod, info, state, requeues) or _PASS


_PASS = Verdict("pass", None, _PASSED)
