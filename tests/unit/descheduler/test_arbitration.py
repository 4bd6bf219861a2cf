"""Arbitration: the four sort passes, the filters in order and the limits (reference §2.4-2.5)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import (
    ArbitrationResult,
    EvictionFilter,
    arbitrate,
    sort_by_controller,
    sort_by_creation_time,
    sort_by_migrating_count,
    sort_by_pod,
    sort_jobs,
)
from koordpy.descheduler.limits import MAX_INT32
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
        "verdicts": {"j1": {"verdict": "pass", "filter": None, "reason": "passed all filters"}},
    }


# ---------------------------------------------------------------- sort passes, one at a time


def names(jobs: list[MigrationJob]) -> list[str]:
    return [j.name for j in jobs]


def test_pass1_creation_time_newer_first_and_stable_within_a_second() -> None:
    jobs = [job("old", "p", created=100.0), job("new", "p", created=300.0), job("a", "p", created=200.2)]
    jobs.append(job("b", "p", created=200.9))  # same whole second as "a": keeps its place after "a"
    sort_by_creation_time(jobs)
    assert names(jobs) == ["new", "a", "b", "old"]


def test_pass2_pod_rank_missing_pod_first_then_lowest_key() -> None:
    # sort_key = (priority class, priority, kube QoS, koord QoS, deletion cost, eviction cost, -created)
    pods = pods_by_key(
        pod("prod", sort_key=(3, 0, 2, 4, 0, 0, -1.0)),
        pod("batch", sort_key=(1, 0, 0, 4, 0, 0, -1.0)),
        pod("batch-newer", sort_key=(1, 0, 0, 4, 0, 0, -2.0)),  # newer pod (created 2 > 1) first
    )
    jobs = [job("j-prod", "prod"), job("j-batch", "batch"), job("j-missing", "gone"), job("j-newer", "batch-newer")]
    sort_by_pod(jobs, pods)
    assert names(jobs) == ["j-missing", "j-newer", "j-batch", "j-prod"]


def test_pass3_controller_groups_pods_of_one_job_after_its_first() -> None:
    batch_a = OwnerRef("Job", "a", "uid-a")
    batch_b = OwnerRef("Job", "b", "uid-b")
    deploy = OwnerRef("ReplicaSet", "web", "uid-web")
    pods = pods_by_key(
        pod("a1", owner=batch_a),
        pod("w1", owner=deploy),
        pod("b1", owner=batch_b),
        pod("a2", owner=batch_a),
        pod("w2", owner=deploy),
        pod("b2", owner=batch_b),
    )
    jobs = [job(f"j-{n}", n) for n in ("a1", "w1", "b1", "a2", "w2", "b2")]
    sort_by_controller(jobs, pods)
    # keys: a1 0, w1 1, b1 2, a2 -> a's first 0, w2 4 (not a Job: own index), b2 -> b's first 2
    assert names(jobs) == ["j-a1", "j-a2", "j-w1", "j-b1", "j-b2", "j-w2"]


def test_pass4_more_migrating_first() -> None:
    batch_a = OwnerRef("Job", "a", "uid-a")
    batch_b = OwnerRef("Job", "b", "uid-b")
    pods = pods_by_key(pod("a1", owner=batch_a), pod("b1", owner=batch_b), pod("x"))
    jobs = [job("j-x", "x"), job("j-a1", "a1"), job("j-b1", "b1")]
    sort_by_migrating_count(jobs, pods, {"uid-a": 1, "uid-b": 3})
    # keys: x 0 (no Job), a1 -1, b1 -3
    assert names(jobs) == ["j-b1", "j-a1", "j-x"]


def test_the_last_pass_is_primary() -> None:
    """Migrating count beats Job grouping beats pod rank beats creation time."""
    batch = OwnerRef("Job", "train", "uid-train")
    pods = pods_by_key(
        pod("low", sort_key=(0, 0, 0, 0, 0, 0, 0.0)),  # lowest rank
        pod("t1", owner=batch, sort_key=(3, 0, 0, 0, 0, 0, 0.0)),
        pod("t2", owner=batch, sort_key=(3, 5, 0, 0, 0, 0, 0.0)),
        pod("t-running", owner=batch),
        pod("mid", sort_key=(2, 0, 0, 0, 0, 0, 0.0)),
    )
    jobs = [
        job("j-low", "low", created=1.0),
        job("j-t2", "t2", created=9.0),  # newest, but ranks below t1 by priority 5 > 0
        job("j-t1", "t1", created=2.0),
        job("j-mid", "mid", created=3.0),
        running("j-t-running", "t-running"),
    ]
    result = run(jobs, list(pods.values()), maxMigratingPerNode=0)
    # creation: t2 mid t1 low; pod rank: low mid t1 t2; grouping: t1 t2 together (already adjacent);
    # migrating count: train has 1 running job -> t1 t2 first.
    assert result.order == ("j-t1", "j-t2", "j-low", "j-mid")


def test_sort_jobs_is_deterministic_on_ties() -> None:
    pods = pods_by_key(pod("p1"), pod("p2"))
    jobs = sort_jobs([job("z", "p1"), job("a", "p2")], pods, {})
    assert names(jobs) == ["a", "z"]


# ---------------------------------------------------------------- filters


def test_ttl_run_out_fails_with_timeout() -> None:
    owner, workload = rs("web", 5)
    # created 1000, ttl 300 s, now 10000: 9000 >= 300
    result = run([job("j", "p", ttl_seconds=300.0)], [pod("p", owner=owner)], [workload])
    verdict = result.verdicts["j"]
    assert (verdict.verdict, verdict.filter, verdict.job_reason) == ("fail", "TTL", "Timeout")


def test_missing_pod_passes() -> None:
    result = run([job("j", "gone")], [])
    assert outcomes(result) == {"j": ("pass", None)}
    assert "not found" in result.verdicts["j"].reason


def test_a_pod_with_an_active_job_gets_no_second() -> None:
    owner, workload = rs("web", 10)
    result = run([running("r", "p"), job("j", "p")], [pod("p", owner=owner)], [workload])
    assert outcomes(result) == {"j": ("fail", "ExistingJob")}
    assert result.verdicts["j"].job_reason == "ForbiddenMigratePod"


def test_two_waiting_jobs_for_one_pod_only_the_first_passes() -> None:
    owner, workload = rs("web", 10)
    result = run([job("a", "p"), job("b", "p")], [pod("p", owner=owner)], [workload])
    assert outcomes(result) == {"a": ("pass", None), "b": ("fail", "ExistingJob")}


DEPLOY = OwnerRef("ReplicaSet", "web", "uid-web")
WEB = Workload("ReplicaSet", "default", "web", "uid-web", 10)


@pytest.mark.parametrize(
    ("pod_fields", "config", "expected_filter"),
    [
        ({"eviction_cost": MAX_INT32}, {}, "EvictionCost"),
        ({"namespace": "kube-system"}, {"namespaces": {"exclude": ["kube-system"]}}, "Namespaces"),
        ({"namespace": "other"}, {"namespaces": {"include": ["default"]}}, "Namespaces"),
        ({"controller": None, "owner_kinds": ()}, {}, "BarePods"),
        ({"owner_kinds": ("DaemonSet",), "controller": OwnerRef("DaemonSet", "d", "uid-d")}, {}, "DaemonSetPods"),
        ({"mirror": True}, {}, "MirrorPods"),
        ({"priority": 2_000_000_000}, {}, "SystemCritical"),
        ({"priority_class_name": "system-node-critical"}, {}, "SystemCritical"),
        ({"local_storage": True}, {}, "LocalStorage"),
        ({"pvc": True}, {"ignorePvcPods": True}, "PVC"),
        ({"priority": 9000}, {"priorityThreshold": {"value": 9000}}, "PriorityThreshold"),
        ({"labels": {"app": "db"}}, {"labelSelector": {"matchLabels": {"app": "web"}}}, "LabelSelector"),
        ({}, {"nodeSelector": "pool=batch"}, "NodeSelector"),
    ],
)
def test_non_retryable_filters_fail(pod_fields: dict[str, Any], config: dict[str, Any], expected_filter: str) -> None:
    subject = pod("p", owner=DEPLOY, **pod_fields)
    result = arbitrate(
        [job("j", "p", namespace=subject.namespace)], pods_by_key(subject), {WEB.uid: WEB}, args(**config), NOW
    )
    verdict = result.verdicts["j"]
    assert (verdict.verdict, verdict.filter, verdict.job_reason) == ("fail", expected_filter, "ForbiddenMigratePod")


@pytest.mark.parametrize(
    ("pod_fields", "config"),
    [
        ({"controller": None, "owner_kinds": ()}, {"evictAllBarePods": True}),
        ({"controller": None, "owner_kinds": (), "phase": "Failed"}, {"evictFailedBarePods": True}),
        ({"priority": 2_000_000_000}, {"evictSystemCriticalPods": True}),
        ({"local_storage": True}, {"evictLocalStoragePods": True}),
        ({"pvc": True}, {}),  # ignorePvcPods false: PVC pods migrate
        ({"priority": 8999}, {"priorityThreshold": {"value": 9000}}),
        ({"labels": {"app": "web"}}, {"labelSelector": {"matchLabels": {"app": "web"}}}),
        ({"local_storage": True}, {"skipEvictionGates": ["LocalStorage"]}),
        ({"namespace": "other"}, {"namespaces": {"exclude": ["kube-system"]}}),
    ],
)
def test_non_retryable_filters_let_through(pod_fields: dict[str, Any], config: dict[str, Any]) -> None:
    subject = pod("p", owner=DEPLOY, **pod_fields)
    jobs = [job("j", "p", namespace=subject.namespace)]
    result = arbitrate(jobs, pods_by_key(subject), {WEB.uid: WEB}, args(**config), NOW)
    assert outcomes(result) == {"j": ("pass", None)}


@pytest.mark.parametrize(
    ("pod_fields", "config", "expected_filter"),
    [
        ({"eviction_cost": MAX_INT32}, {}, "EvictionCost"),
        ({"controller": None, "owner_kinds": ()}, {}, "BarePods"),
        ({"local_storage": True}, {}, "LocalStorage"),
        ({"priority": 9000}, {"priorityThreshold": {"value": 9000}}, "PriorityThreshold"),
        ({}, {"nodeSelector": "pool=batch"}, "NodeSelector"),  # n1 is labelled pool=web below
        ({}, {}, None),
        ({"local_storage": True, "evict_annotation": True}, {}, None),  # the annotation passes them, as there
    ],
)
def test_the_eviction_filter_outside_a_round_fails_as_arbitration_would(
    pod_fields: dict[str, Any], config: dict[str, Any], expected_filter: str | None
) -> None:
    """What a balance plugin asks before it files a job: the verdict arbitration's non-retryable filters give."""
    subject = pod("p", owner=DEPLOY, **pod_fields)
    nodes = {"n1": {"pool": "web"}}
    refused = EvictionFilter(args(**config), {WEB.uid: WEB}, nodes).refuse(subject)
    assert (refused.filter if refused is not None else None) == expected_filter
    in_round = arbitrate(
        [job("j", "p")], pods_by_key(subject), {WEB.uid: WEB}, args(**config), NOW, nodes=nodes
    ).verdicts["j"]
    assert in_round.filter == expected_filter


def test_the_eviction_filter_reads_node_labels_and_workloads() -> None:
    config = args(nodeSelector="pool=batch")
    assert EvictionFilter(config, {WEB.uid: WEB}, {"n1": {"pool": "batch"}}).refuse(pod("p", owner=DEPLOY)) is None
    # a ReplicaSet of 1 replica: migrating its pod would leave none (ExpectedReplicas)
    owner, single = rs("single", 1)
    refused = EvictionFilter(args(), {single.uid: single}).refuse(pod("p", owner=owner))
    assert refused is not None and refused.filter == "ExpectedReplicas"


def test_node_selector_matches_node_labels() -> None:
    subject = pod("p", owner=DEPLOY, node="n1")
    config = args(nodeSelector="pool=batch")
    jobs = [job("j", "p")]
    good = arbitrate(jobs, pods_by_key(subject), {WEB.uid: WEB}, config, NOW, nodes={"n1": {"pool": "batch"}})
    bad = arbitrate(jobs, pods_by_key(subject), {WEB.uid: WEB}, config, NOW, nodes={"n1": {"pool": "web"}})
    assert outcomes(good) == {"j": ("pass", None)}
    assert outcomes(bad) == {"j": ("fail", "NodeSelector")}


@pytest.mark.parametrize(
    ("replicas", "config", "expected"),
    [
        (1, {}, "fail"),  # replicas == 1
        (2, {}, "pass"),  # implicit maxMigrating 1, maxUnavailable 1: 2 is neither
        (4, {}, "pass"),  # implicit 2 and 2: 4 is neither
        (2, {"maxMigratingPerWorkload": 2}, "fail"),  # maxMigrating 2 == replicas 2
        (4, {"maxUnavailablePerWorkload": "100%"}, "fail"),  # 100 % of 4 = 4 == replicas
        (10, {"maxUnavailablePerWorkload": "100%"}, "fail"),  # 10 == 10
        (1, {"skipCheckExpectedReplicas": True}, "pass"),  # guard off
        (1, {"skipEvictionGates": ["ExpectedReplicas"]}, "pass"),  # gate skipped
        (0, {}, "fail"),  # limit capped at 0 == replicas 0
    ],
)
def test_expected_replicas_guard(replicas: int, config: dict[str, Any], expected: str) -> None:
    owner, workload = rs("web", replicas)
    result = run([job("j", "p")], [pod("p", owner=owner)], [workload], **config)
    verdict = result.verdicts["j"]
    assert verdict.verdict == expected
    assert verdict.filter == ("ExpectedReplicas" if expected == "fail" else None)


def test_evict_annotation_bypasses_the_filters() -> None:
    subject = pod(
        "p", evict_annotation=True, eviction_cost=MAX_INT32, local_storage=True, controller=None, owner_kinds=()
    )
    others = [pod(f"o{i}") for i in range(3)]
    jobs = [running(f"r{i}", f"o{i}") for i in range(3)] + [job("j", "p")]
    # 3 pods migrating on n1 >= maxMigratingPerNode 2, and the pod is bare, local-storage, cost MaxInt32
    result = run(jobs, [subject, *others])
    assert outcomes(result) == {"j": ("pass", None)}
    assert "bypasses" in result.verdicts["j"].reason


def test_evict_annotation_does_not_allow_a_second_job_for_one_pod() -> None:
    subject = pod("p", owner=DEPLOY, evict_annotation=True)
    result = run([running("r", "p"), job("j", "p")], [subject], [WEB])
    assert outcomes(result) == {"j": ("fail", "ExistingJob")}


# ---------------------------------------------------------------- limits and arbitration-aware counting


def test_max_migrating_per_node_default_two() -> None:
    """maxMigratingPerNode defaults to 2: the third pod of a node waits."""
    owner, workload = rs("big", 100)  # per workload: 10 % of 100 = 10, not the limiting rule
    pods = [pod(f"p{i}", owner=owner) for i in range(4)]
    result = run([job(f"j{i}", f"p{i}", created=100.0 - i) for i in range(4)], pods, [workload])
    # order: newest first -> j0 (created 100) ... j3 (97); j0 and j1 pass, then 2 >= 2
    assert result.order == ("j0", "j1", "j2", "j3")
    assert outcomes(result) == {
        "j0": ("pass", None),
        "j1": ("pass", None),
        "j2": ("requeue", "MaxMigratingPerNode"),
        "j3": ("requeue", "MaxMigratingPerNode"),
    }


def test_pending_jobs_count_only_once_passed_deadlock_1150() -> None:
    """Four Pending jobs on one node that have not passed do not block each other (Koordinator issue #1150)."""
    owner, workload = rs("big", 100)
    pods = [pod(f"p{i}", owner=owner) for i in range(5)]
    waiting = [job(f"j{i}", f"p{i}", created=100.0 - i) for i in range(4)]
    passed = job("done", "p4", passed_arbitration=True)  # Pending and passed: counts
    result = run([*waiting, passed], pods, [workload])
    # 1 passed job on n1: j0 passes (1 < 2), then 2 >= 2 for the rest
    assert outcomes(result)["j0"] == ("pass", None)
    assert [outcomes(result)[f"j{i}"][0] for i in (1, 2, 3)] == ["requeue"] * 3
    # without the passed one, two pass
    result = run(waiting, pods, [workload])
    assert result.names("pass") == ["j0", "j1"]


def test_finished_jobs_do_not_count() -> None:
    owner, workload = rs("big", 100)
    pods = [pod(f"p{i}", owner=owner) for i in range(3)]
    finished = [job("s", "p1", phase="Succeeded"), job("f", "p2", phase="Failed")]
    result = run([job("j", "p0"), *finished], pods, [workload])
    assert outcomes(result) == {"j": ("pass", None)}


@pytest.mark.parametrize(
    ("config", "passes"),
    [
        ({}, 4),  # no global limit: per node 2 on each of n1 and n2 -> 4
        ({"maxMigratingGlobally": 3}, 3),
        ({"maxMigratingGlobally": 0}, 4),  # 0 is off
        ({"maxMigratingPerNode": 0, "maxMigratingGlobally": 5}, 5),  # per node off
        ({"maxMigratingPerNode": 0, "maxMigratingPerNamespace": 1}, 2),  # one per namespace (a, b)
    ],
)
def test_global_node_namespace_limits(config: dict[str, Any], passes: int) -> None:
    owner, workload = rs("big", 1000)  # per workload 10 % of 1000 = 100: not limiting
    ns_owner_b = OwnerRef("ReplicaSet", "big-b", "uid-big-b")
    workload_b = Workload("ReplicaSet", "b", "big-b", "uid-big-b", 1000)
    pods = [pod(f"a{i}", node=f"n{i % 2 + 1}", namespace="a", owner=owner) for i in range(4)]
    pods += [pod(f"b{i}", node=f"n{i % 2 + 1}", namespace="b", owner=ns_owner_b) for i in range(4)]
    jobs = [job(f"j-{p.name}", p.name, namespace=p.namespace) for p in pods]
    result = run(jobs, pods, [replace(workload, namespace="a"), workload_b], **config)
    assert len(result.names("pass")) == passes
    assert len(result.names("requeue")) == 8 - passes


@pytest.mark.parametrize(
    ("replicas", "config", "running_jobs", "expected"),
    [
        # implicit: 3 replicas -> maxMigrating 1 (< 4), maxUnavailable 1
        (3, {}, 0, "pass"),
        (3, {}, 1, "MaxMigratingPerWorkload"),  # 1 other migrating >= 1
        # implicit: 6 replicas -> 2 (4..10)
        (6, {}, 1, "pass"),  # 1 < 2
        (6, {}, 2, "MaxMigratingPerWorkload"),  # 2 >= 2
        # implicit: 30 replicas -> 10 % of 30 = 3
        (30, {}, 2, "pass"),
        (30, {}, 3, "MaxMigratingPerWorkload"),
        # explicit percent: 25 % of 12 = 3; maxUnavailable implicit 10 % of 12 = 1.2 -> 1
        (12, {"maxMigratingPerWorkload": "25%"}, 1, "MaxUnavailablePerWorkload"),  # migrating 1 < 3, unavailable 1 >= 1
        (12, {"maxMigratingPerWorkload": "25%", "maxUnavailablePerWorkload": 3}, 2, "pass"),  # 2 < 3 and 2 < 3
        (12, {"maxMigratingPerWorkload": "25%", "maxUnavailablePerWorkload": 3}, 3, "MaxMigratingPerWorkload"),
        # explicit percent that scales to 0 becomes 1: 5 % of 12 = 0.6 -> 0 -> 1
        (12, {"maxMigratingPerWorkload": "5%", "maxUnavailablePerWorkload": 5}, 1, "MaxMigratingPerWorkload"),
    ],
)
def test_per_workload_limits(replicas: int, config: dict[str, Any], running_jobs: int, expected: str) -> None:
    owner, workload = rs("web", replicas)
    pods = [pod(f"p{i}", node=f"n{i}", owner=owner) for i in range(replicas)]
    jobs = [running(f"r{i}", f"p{i + 1}") for i in range(running_jobs)] + [job("j", "p0")]
    result = run(jobs, pods, [workload], **config)
    verdict = result.verdicts["j"]
    if expected == "pass":
        assert (verdict.verdict, verdict.filter) == ("pass", None)
    else:
        assert (verdict.verdict, verdict.filter) == ("requeue", expected)


def test_max_unavailable_counts_other_unready_pods_but_not_the_pod_itself() -> None:
    # 6 replicas: implicit maxUnavailable 2 (4..10), maxMigrating 2
    owner, workload = rs("web", 6)
    pods = [pod(f"p{i}", node=f"n{i}", owner=owner) for i in range(6)]
    pods[1] = replace(pods[1], available=False)
    pods[2] = replace(pods[2], available=False)
    result = run([job("j", "p0")], pods, [workload])
    # other unavailable: p1, p2 = 2 >= 2
    assert outcomes(result) == {"j": ("requeue", "MaxUnavailablePerWorkload")}
    # the unready pod p1 itself: others unavailable = p2 only = 1 < 2 -> passes
    result = run([job("j", "p1")], pods, [workload])
    assert outcomes(result) == {"j": ("pass", None)}


def test_unavailable_and_migrating_are_merged_not_double_counted() -> None:
    # 6 replicas, maxUnavailable 3 explicit, maxMigrating 3 explicit
    owner, workload = rs("web", 6)
    pods = [pod(f"p{i}", node=f"n{i}", owner=owner) for i in range(6)]
    pods[1] = replace(pods[1], available=False)
    # p1 is unready and migrating: counted once; p2 migrating and ready: once -> 2 < 3
    jobs = [running("r1", "p1"), running("r2", "p2"), job("j", "p0")]
    result = run(jobs, pods, [workload], maxUnavailablePerWorkload=3, maxMigratingPerWorkload=3)
    assert outcomes(result) == {"j": ("pass", None)}


def test_terminal_pods_are_not_unavailable() -> None:
    owner, workload = rs("web", 6)
    pods = [pod(f"p{i}", node=f"n{i}", owner=owner) for i in range(6)]
    pods += [pod(f"old{i}", owner=owner, phase="Failed", available=False) for i in range(5)]
    result = run([job("j", "p0")], pods, [workload])
    assert outcomes(result) == {"j": ("pass", None)}


def test_passes_in_one_round_count_for_later_jobs_of_the_workload() -> None:
    # 6 replicas: implicit maxMigrating 2 -> two of four waiting pass
    owner, workload = rs("web", 6)
    pods = [pod(f"p{i}", node=f"n{i}", owner=owner) for i in range(6)]
    result = run([job(f"j{i}", f"p{i}", created=100.0 - i) for i in range(4)], pods, [workload])
    assert result.names("pass") == ["j0", "j1"]
    assert {result.verdicts[n].filter for n in ("j2", "j3")} == {"MaxMigratingPerWorkload"}


def test_owner_chain_replicaset_to_deployment() -> None:
    """Two ReplicaSets of one Deployment (a rollout) share the Deployment's limits."""
    deployment = Workload("Deployment", "default", "web", "uid-deploy", 6)
    deploy_ref = OwnerRef("Deployment", "web", "uid-deploy")
    rs_old = Workload("ReplicaSet", "default", "web-1", "uid-rs1", 3, deploy_ref)
    rs_new = Workload("ReplicaSet", "default", "web-2", "uid-rs2", 3, deploy_ref)
    pods = [pod(f"a{i}", node=f"n{i}", owner=OwnerRef("ReplicaSet", "web-1", "uid-rs1")) for i in range(3)]
    pods += [pod(f"b{i}", node=f"m{i}", owner=OwnerRef("ReplicaSet", "web-2", "uid-rs2")) for i in range(3)]
    jobs = [running("r0", "a0"), running("r1", "b0"), job("j", "a1")]
    result = run(jobs, pods, [deployment, rs_old, rs_new])
    # Deployment 6 replicas -> maxMigrating 2; a0 and b0 migrating = 2 >= 2. Per ReplicaSet it would be 1 >= 1 too,
    # but the message names the Deployment.
    verdict = result.verdicts["j"]
    assert (verdict.verdict, verdict.filter) == ("requeue", "MaxMigratingPerWorkload")
    assert "Deployment default/web" in verdict.reason


def test_job_pods_have_no_replica_limits() -> None:
    batch = OwnerRef("Job", "train", "uid-train")
    train = Workload("Job", "default", "train", "uid-train", None)
    pods = [pod(f"t{i}", node=f"n{i}", owner=batch) for i in range(4)]
    result = run([job(f"j{i}", f"t{i}") for i in range(4)], pods, [train])
    assert len(result.names("pass")) == 4


def test_object_limiter_requeues_limited_workloads() -> None:
    owner, workload = rs("web", 10)
    result = arbitrate(
        [job("j", "p")],
        pods_by_key(pod("p", owner=owner)),
        {workload.uid: workload},
        args(),
        NOW,
        limited_workloads=frozenset({workload.uid}),
    )
    assert outcomes(result) == {"j": ("requeue", "ObjectLimiter")}


def test_skip_eviction_gates_skips_limits() -> None:
    owner, workload = rs("big", 100)
    pods = [pod(f"p{i}", owner=owner) for i in range(4)]
    result = run([job(f"j{i}", f"p{i}") for i in range(4)], pods, [workload], skipEvictionGates=["MaxMigratingPerNode"])
    assert len(result.names("pass")) == 4


def test_arbitration_disabled_passes_everything_in_creation_order() -> None:
    pods = [pod("p", eviction_cost=MAX_INT32), pod("q")]
    result = run([job("b", "p", created=2.0), job("a", "q", created=1.0)], pods, arbitrationArgs={"enabled": False})
    assert result.order == ("a", "b")
    assert outcomes(result) == {"a": ("pass", None), "b": ("pass", None)}


def test_only_waiting_jobs_get_verdicts() -> None:
    owner, workload = rs("big", 100)
    pods = [pod(f"p{i}", owner=owner) for i in range(4)]
    jobs = [
        running("r", "p0"),
        job("passed", "p1", passed_arbitration=True),
        job("deleting", "p2", deleting=True),
        job("done", "p3", phase="Succeeded"),
    ]
    assert run(jobs, pods, [workload]).verdicts == {}


@pytest.mark.parametrize("seed", range(5))
def test_sort_jobs_equals_the_four_passes_one_after_the_other(seed: int) -> None:
    """sort_jobs composes the passes with numpy; applying the pass functions one by one must agree."""
    rng = random.Random(seed)
    owners = [OwnerRef("Job", f"job-{i}", f"uid-job-{i}") for i in range(4)] + [DEPLOY, None]
    pods = pods_by_key(
        *(
            pod(
                f"p{i}",
                owner=rng.choice(owners),
                sort_key=(
                    rng.randrange(4),
                    rng.randrange(3),
                    rng.randrange(3),
                    4,
                    0,
                    rng.randrange(2),
                    -rng.randrange(5),
                ),
            )
            for i in range(60)
        )
    )
    jobs = [job(f"j{i:02d}", f"p{rng.randrange(70)}", created=float(rng.randrange(5))) for i in range(80)]
    migrating = {f"uid-job-{i}": rng.randrange(3) for i in range(4)}
    expected = sorted(jobs, key=lambda j: j.name)
    sort_by_creation_time(expected)
    sort_by_pod(expected, pods)
    sort_by_controller(expected, pods)
    sort_by_migrating_count(expected, pods, migrating)
    assert names(sort_jobs(jobs, pods, migrating)) == names(expected)
