"""The ``migration`` simulation: nodes drained at once, arbitration against evicting everything together.

A discrete-time model (steps of ``stepSeconds``, by default the 0.5 s arbitration interval) built on
the manager's own pure code: each step runs :func:`koordpy.descheduler.arbitration.arbitrate` on the
PodMigrationJobs (mode ``arbitration``) or passes every waiting job (mode ``evict-all``), then
:func:`koordpy.descheduler.lifecycle.decide` on every job, exactly as one manager round does. An evicted
pod is gone at once; its controller (a Deployment's ReplicaSet or a batch Job) replaces it on a node
that is not drained, Ready a seeded random ``startupSeconds`` later.

Measured per mode, per step: unavailable replicas of every workload (missing + not Ready), migrating
jobs per workload and per node. "Above budget" means more unavailable replicas than the workload's
``maxUnavailablePerWorkload`` (the stand-in for a PodDisruptionBudget; batch Jobs have no replica
count, so no budget, as in arbitration).

Not modelled (not guaranteed): scheduling delays, node capacity, ``objectLimiters`` (off here: the
arbitration limits alone are compared), API latency.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import arbitrate
from koordpy.descheduler.decisions import Evict, Finish, Start, Wait
from koordpy.descheduler.job_facts import ANNOTATION_PASSED_ARBITRATION
from koordpy.descheduler.lifecycle import decide
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings, PodView
from koordpy.descheduler.limits import workload_limit
from koordpy.descheduler.objects import MigrationPod, job_from_dict, pod_from_dict, workload_from_dict
from koordpy.descheduler.ratelimit import ObjectLimiter, TokenBucket
from koordpy.model.durations import format_rfc3339

__all__ = [
    "MODES",
    "MigrationRun",
    "MigrationScenario",
    "compare",
    "followed_workload",
    "run_migration",
]

MODES = ("arbitration", "evict-all")
T0 = 1795255200.0
NAMESPACE = "shop"
MAX_STEPS = 100_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class DeploymentGroup(_Strict):
    count: int = Field(ge=1, le=1000, description="Deployments of this size.")
    replicas: int = Field(ge=1, le=1000)


class BatchJobGroup(_Strict):
    count: int = Field(ge=1, le=1000, description="batch Jobs of this size.")
    parallelism: int = Field(ge=1, le=1000, description="Running pods of each Job.")


class MigrationScenario(_Strict):
    """``kind: MigrationScenario``: the cluster, the drained nodes and the ``migrationController`` args."""

    api_version: Literal["koordpy.io/v1alpha1"] = Field("koordpy.io/v1alpha1", alias="apiVersion")
    kind: Literal["MigrationScenario"]
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(0, ge=0)
    nodes: int = Field(ge=2, le=1000)
    drained: int = Field(ge=1, description="The first `drained` nodes get a PodMigrationJob per pod.")
    step_seconds: float = Field(0.5, gt=0, le=60, alias="stepSeconds")
    startup_seconds: tuple[float, float] = Field(
        (8.0, 15.0), alias="startupSeconds", description="[min, max] seconds until a replacement is Ready."
    )
    deployments: list[DeploymentGroup] = Field(default_factory=list)
    jobs: list[BatchJobGroup] = Field(default_factory=list)
    migration_controller: dict[str, Any] = Field(default_factory=dict, alias="migrationController")

    @field_validator("startup_seconds")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not 0 <= value[0] <= value[1]:
            raise ValueError("expected [min, max] with 0 <= min <= max")
        return value

    @model_validator(mode="after")
    def _fits(self) -> MigrationScenario:
        if self.drained >= self.nodes:
            raise ValueError("drained: must be less than nodes (replacements need a node that is not drained)")
        MigrationControllerArgs.model_validate(self.migration_controller)
        return self

    def controller_args(self, mode: str) -> MigrationControllerArgs:
        """The scenario's ``migrationController`` args with ``EvictDirectly`` jobs; evict-all turns
        arbitration off (every waiting job passes at once, as ``arbitrationArgs.enabled: false``)."""
        raw = dict(self.migration_controller)
        raw.setdefault("defaultJobMode", "EvictDirectly")
        arbitration = dict(raw.get("arbitrationArgs") or {})
        arbitration["enabled"] = mode == "arbitration"
        raw["arbitrationArgs"] = arbitration
        return MigrationControllerArgs.model_validate(raw)


@dataclass(slots=True)
class MigrationRun:
    """One mode's outcome. ``unavailable[uid]`` holds one value per step (at ``times``)."""

    mode: str
    times: list[float]
    unavailable: dict[str, list[int]]
    replicas: dict[str, int | None]
    names: dict[str, str]
    """``Deployment shop/web-001 (12 replicas)``: how the table and the chart name a workload."""
    refs: dict[str, tuple[str, str, str]]
    """(kind, namespace, name) of each workload."""
    budget: dict[str, int]
    max_migrating: dict[str, int]
    node_limit: int | None
    peak_migrating: dict[str, int]
    peak_migrating_per_node: dict[str, int]
    jobs: int
    succeeded: int
    seconds_to_finish: float | None
    evictions: list[float] = field(default_factory=list)

    def peak(self, uid: str) -> int:
        return max(self.unavailable[uid], default=0)

    def above_budget(self) -> list[str]:
        """Workloads with a budget that had more unavailable replicas than it at some step."""
        return sorted(uid for uid, limit in self.budget.items() if self.peak(uid) > limit)

    def above_migrating(self) -> list[str]:
        return sorted(uid for uid, limit in self.max_migrating.items() if self.peak_migrating.get(uid, 0) > limit)

    def nodes_above_limit(self) -> list[str]:
        limit = self.node_limit
        return [] if limit is None else sorted(n for n, c in self.peak_migrating_per_node.items() if c > limit)

    def worst(self) -> str:
        """This run's workload with the most unavailable replicas at one time (ties: more replicas, then
        the name that sorts last). Across several runs use :func:`followed_workload`."""
        return max(self.unavailable, key=lambda uid: (self.peak(uid), self.replicas[uid] or 0, self.names[uid]))

    def summary(self) -> dict[str, Any]:
        """This run's figures (camelCase keys, numbers as numbers; ``secondsToFinish`` null when the jobs
        did not finish within the step limit)."""
        return {
            "policy": self.mode,
            "jobs": self.jobs,
            "succeeded": self.succeeded,
            "evictions": len(self.evictions),
            "workloads": len(self.unavailable),
            "maxUnavailableOfOneWorkload": max((self.peak(uid) for uid in self.unavailable), default=0),
            "workloadsAboveBudget": len(self.above_budget()),
            "workloadsAboveMaxMigrating": len(self.above_migrating()),
            "nodesAboveMaxMigratingPerNode": len(self.nodes_above_limit()),
            "secondsToFinish": self.seconds_to_finish,
        }


def followed_workload(runs: Sequence[MigrationRun]) -> str:
    """The one workload a comparison follows in every run (its table row and its chart): the most
    unavailable replicas at one time in the last run (evict-all when compared), ties broken by its peak
    in the runs before, then by more replicas, then by the name that sorts last. Raises ValueError
    without runs."""
    if not runs:
        raise ValueError("no runs to follow a workload in")
    last = runs[-1]
    return max(
        last.unavailable,
        key=lambda uid: (
            last.peak(uid),
            tuple(run.peak(uid) for run in reversed(runs[:-1])),
            last.replicas[uid] or 0,
            last.names[uid],
        ),
    )


def _pod(name: str, owner_ref: tuple[str, str, str], node: str, ready_at: float) -> dict[str, Any]:
    owner_kind, owner, owner_uid = owner_ref
    api = "batch/v1" if owner_kind == "Job" else "apps/v1"
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "labels": {"app": owner},
            "ownerReferences": [
                {"apiVersion": api, "kind": owner_kind, "name": owner, "uid": owner_uid, "controller": True}
            ],
            "creationTimestamp": format_rfc3339(T0 - 3600),
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app"}]},
        "status": {"phase": "Running", "conditions": []},
        "_ready_at": ready_at,
    }


@dataclass(slots=True)
class _Cluster:
    pods: dict[str, dict[str, Any]]
    workloads: dict[str, dict[str, Any]]
    owner_of_pod_owner: dict[str, str]  # pod owner UID (ReplicaSet or Job) -> workload UID
    pod_owner: dict[str, tuple[str, str, str]]  # workload UID -> (kind, name, uid) pods point at
    replicas: dict[str, int | None]
    names: dict[str, str]
    refs: dict[str, tuple[str, str, str]]
    jobs: list[dict[str, Any]]


def _build(scenario: MigrationScenario, rng: random.Random) -> _Cluster:
    nodes = [f"node-{i:02d}" for i in range(scenario.nodes)]
    drained = set(nodes[: scenario.drained])
    cluster = _Cluster({}, {}, {}, {}, {}, {}, {}, [])
    sizes: list[tuple[str, int]] = [("Deployment", g.replicas) for g in scenario.deployments for _ in range(g.count)]
    sizes += [("Job", g.parallelism) for g in scenario.jobs for _ in range(g.count)]
    for index, (kind, size) in enumerate(sizes):
        name = f"{'web' if kind == 'Deployment' else 'batch'}-{index:03d}"
        uid = f"{kind.lower()}-{name}"
        if kind == "Deployment":
            rs_uid = f"rs-{name}"
            cluster.workloads[uid] = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid},
                "spec": {"replicas": size},
            }
            cluster.workloads[rs_uid] = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-rs",
                    "namespace": NAMESPACE,
                    "uid": rs_uid,
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": uid, "controller": True}
                    ],
                },
                "spec": {"replicas": size},
            }
            cluster.pod_owner[uid] = ("ReplicaSet", f"{name}-rs", rs_uid)
            cluster.replicas[uid] = size
        else:
            cluster.workloads[uid] = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid},
                "spec": {"parallelism": size},
            }
            cluster.pod_owner[uid] = ("Job", name, uid)
            cluster.replicas[uid] = None
        cluster.names[uid] = f"{kind} {NAMESPACE}/{name} ({size} {'replicas' if kind == 'Deployment' else 'pods'})"
        cluster.refs[uid] = (kind, NAMESPACE, name)
        owner_kind, owner_name, owner_uid = cluster.pod_owner[uid]
        cluster.owner_of_pod_owner[owner_uid] = uid
        for r in range(size):
            pod_name = f"{name}-{r}"
            node = rng.choice(nodes)
            cluster.pods[pod_name] = _pod(pod_name, (owner_kind, owner_name, owner_uid), node, T0 - 3600)
            if node in drained:
                cluster.jobs.append(
                    {
                        "metadata": {
                            "name": f"pmj-{pod_name}",
                            "creationTimestamp": format_rfc3339(T0),
                            "annotations": {},
                        },
                        "spec": {"ttl": "30m", "podRef": {"namespace": NAMESPACE, "name": pod_name}},
                        "status": {},
                    }
                )
    return cluster


def run_migration(scenario: MigrationScenario, seed: int, mode: str) -> MigrationRun:
    """Drain the scenario's nodes in ``mode`` (``arbitration`` or ``evict-all``); deterministic for a seed."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    rng = random.Random(seed)
    cluster = _build(scenario, rng)
    nodes = [f"node-{i:02d}" for i in range(scenario.nodes)]
    targets = nodes[scenario.drained :]
    args = scenario.controller_args(mode)
    settings = LifecycleSettings(default_job_mode="EvictDirectly")
    bucket = TokenBucket(args.evict_qps, args.evict_burst) if mode == "arbitration" else None
    limiter = ObjectLimiter(0.0)  # objectLimiters off: the arbitration limits alone are compared
    pods, jobs = cluster.pods, cluster.jobs
    budget = {
        uid: workload_limit(n, args.max_unavailable_per_workload)
        for uid, n in cluster.replicas.items()
        if n is not None
    }
    max_migrating = {
        uid: workload_limit(n, args.max_migrating_per_workload) for uid, n in cluster.replicas.items() if n is not None
    }
    expected = {uid: n if n is not None else 0 for uid, n in cluster.replicas.items()}
    for uid in cluster.replicas:
        if cluster.replicas[uid] is None:  # a batch Job: its pods now are what it runs
            owner_uid = cluster.pod_owner[uid][2]
            expected[uid] = sum(1 for p in pods.values() if p["metadata"]["ownerReferences"][0]["uid"] == owner_uid)
    unavailable_series: dict[str, list[int]] = {uid: [] for uid in cluster.replicas}
    peak_migrating: dict[str, int] = {}
    peak_per_node: dict[str, int] = {}
    times: list[float] = []
    evictions: list[float] = []
    by_name = {j["metadata"]["name"]: j for j in jobs}
    node_of_job = {j["metadata"]["name"]: pods[j["spec"]["podRef"]["name"]]["spec"]["nodeName"] for j in jobs}
    workload_of_job = {
        j["metadata"]["name"]: cluster.owner_of_pod_owner[
            pods[j["spec"]["podRef"]["name"]]["metadata"]["ownerReferences"][0]["uid"]
        ]
        for j in jobs
    }
    mworkloads = {uid: workload_from_dict(w) for uid, w in cluster.workloads.items()}
    parsed_pods: dict[tuple[str, bool], MigrationPod] = {}
    replacement = 0
    now = T0
    finished_at: float | None = None
    for _ in range(MAX_STEPS):
        for p in pods.values():
            ready = p["_ready_at"] <= now
            p["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        _measure(cluster, expected, now, unavailable_series)
        times.append(now - T0)
        waiting = [j for j in jobs if not j["status"].get("phase") and not j["metadata"]["annotations"]]
        if waiting:
            parsed = [job_from_dict(j) for j in jobs]
            mpods = {f"{NAMESPACE}/{n}": _parsed_pod(parsed_pods, p, now) for n, p in pods.items()}
            result = arbitrate(parsed, mpods, mworkloads, args, now)
            for name in result.names("pass"):
                by_name[name]["metadata"]["annotations"][ANNOTATION_PASSED_ARBITRATION] = "true"
        for job in jobs:
            ref = job["spec"]["podRef"]["name"]
            raw = pods.get(ref)
            view = PodView.from_object(raw) if raw is not None else None
            decision = decide(job, view, now, settings, evict_tokens=bucket, object_limiter=limiter)
            if isinstance(decision, Start):
                job["spec"]["podRef"]["uid"] = decision.pod_uid
                job["status"] = decision.status
            elif isinstance(decision, Evict):
                job["status"] = decision.status
                evicted = pods.pop(ref)
                evictions.append(now - T0)
                owner = evicted["metadata"]["ownerReferences"][0]
                replacement += 1
                new_name = f"{owner['name']}-r{replacement}"
                startup = rng.uniform(*scenario.startup_seconds)
                pods[new_name] = _pod(new_name, (owner["kind"], owner["name"], owner["uid"]), rng.choice(targets), now)
                pods[new_name]["_ready_at"] = now + startup
            elif isinstance(decision, Finish | Wait) and decision.status is not None:
                job["status"] = decision.status
        migrating: dict[str, int] = {}
        per_node: dict[str, int] = {}
        for job in jobs:
            if job["status"].get("phase") == "Running":
                name = job["metadata"]["name"]
                migrating[workload_of_job[name]] = migrating.get(workload_of_job[name], 0) + 1
                per_node[node_of_job[name]] = per_node.get(node_of_job[name], 0) + 1
        for uid, count in migrating.items():
            peak_migrating[uid] = max(peak_migrating.get(uid, 0), count)
        for node, count in per_node.items():
            peak_per_node[node] = max(peak_per_node.get(node, 0), count)
        done = all(j["status"].get("phase") in ("Succeeded", "Failed") for j in jobs)
        if done and all(p["_ready_at"] <= now for p in pods.values()):
            finished_at = now
            break
        now += scenario.step_seconds
    return MigrationRun(
        mode=mode,
        times=times,
        unavailable=unavailable_series,
        replicas=cluster.replicas,
        names=cluster.names,
        refs=cluster.refs,
        budget=budget,
        max_migrating=max_migrating,
        node_limit=args.max_migrating_per_node if (args.max_migrating_per_node or 0) > 0 else None,
        peak_migrating=peak_migrating,
        peak_migrating_per_node=peak_per_node,
        jobs=len(jobs),
        succeeded=sum(1 for j in jobs if j["status"].get("phase") == "Succeeded"),
        seconds_to_finish=None if finished_at is None else finished_at - T0,
        evictions=evictions,
    )


def _parsed_pod(cache: dict[tuple[str, bool], MigrationPod], raw: dict[str, Any], now: float) -> MigrationPod:
    """``pod_from_dict`` of the pod as it is now; only its Ready condition changes, so one parse per state."""
    key = (raw["metadata"]["name"], raw["_ready_at"] <= now)
    found = cache.get(key)
    if found is None:
        found = cache[key] = pod_from_dict({k: v for k, v in raw.items() if k != "_ready_at"})
    return found


def _measure(cluster: _Cluster, expected: Mapping[str, int], now: float, series: Mapping[str, list[int]]) -> None:
    present = dict.fromkeys(expected, 0)
    not_ready = dict.fromkeys(expected, 0)
    for p in cluster.pods.values():
        uid = cluster.owner_of_pod_owner[p["metadata"]["ownerReferences"][0]["uid"]]
        present[uid] += 1
        if p["_ready_at"] > now:
            not_ready[uid] += 1
    for uid, want in expected.items():
        series[uid].append(not_ready[uid] + max(0, want - present[uid]))


def compare(scenario: MigrationScenario, seed: int, modes: Sequence[str] = MODES) -> list[MigrationRun]:
    """Every mode on the same cluster (the same seed gives the same pod placement)."""
    return [run_migration(scenario, seed, mode) for mode in modes]
