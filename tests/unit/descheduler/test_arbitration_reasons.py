"""What arbitration tells the user: each filter's and each limit's verdict with its exact reason (the text a
PodMigrationJob's condition and Event carry), and the edges of the filters' switches.

The helpers are test_arbitration's (same directory, pytest's prepend import mode).
"""

from __future__ import annotations

from typing import Any

import pytest
import test_arbitration_gangs as gangs
from test_arbitration import DEPLOY, NOW, WEB, args, job, pod, pods_by_key, rs, run, running

from koordpy.descheduler.arbitration import arbitrate
from koordpy.descheduler.limits import MAX_INT32
from koordpy.descheduler.objects import OwnerRef, Workload


def verdict_of(pod_fields: dict[str, Any], config: dict[str, Any]) -> tuple[str, str | None, str]:
    subject = pod("p", owner=DEPLOY, **pod_fields)
    result = arbitrate(
        [job("j", "p", namespace=subject.namespace)], pods_by_key(subject), {WEB.uid: WEB}, args(**config), NOW
    )
    verdict = result.verdicts["j"]
    return verdict.verdict, verdict.filter, verdict.reason


@pytest.mark.parametrize(
    ("pod_fields", "config", "expected"),
    [
        (
            {"eviction_cost": MAX_INT32},
            {},
            ("EvictionCost", "pod default/p: eviction cost is MaxInt32 (2147483647), it never migrates"),
        ),
        (
            {"namespace": "other"},
            {"namespaces": {"include": ["default"]}},
            ("Namespaces", "pod other/p: namespace other is not in namespaces.include"),
        ),
        (
            {"namespace": "kube-system"},
            {"namespaces": {"exclude": ["kube-system"]}},
            ("Namespaces", "pod kube-system/p: namespace kube-system is in namespaces.exclude"),
        ),
        (
            {"controller": None, "owner_kinds": ()},
            {},
            ("BarePods", "pod default/p: has no owner (evictAllBarePods is false)"),
        ),
        # evictFailedBarePods lets only a Failed bare pod go: a running one still fails
        (
            {"controller": None, "owner_kinds": ()},
            {"evictFailedBarePods": True},
            ("BarePods", "pod default/p: has no owner (evictAllBarePods is false)"),
        ),
        (
            {"owner_kinds": ("DaemonSet",), "controller": OwnerRef("DaemonSet", "d", "uid-d")},
            {},
            ("DaemonSetPods", "pod default/p: is owned by a DaemonSet"),
        ),
        ({"mirror": True}, {}, ("MirrorPods", "pod default/p: is a mirror (static) pod")),
        (
            {"priority": 2_000_000_000},
            {},
            ("SystemCritical", "pod default/p: is system-critical (evictSystemCriticalPods is false)"),
        ),
        (
            {"local_storage": True},
            {},
            ("LocalStorage", "pod default/p: has emptyDir or hostPath volumes (evictLocalStoragePods is false)"),
        ),
        (
            {"pvc": True},
            {"ignorePvcPods": True},
            ("PVC", "pod default/p: has PersistentVolumeClaim volumes (ignorePvcPods is true)"),
        ),
        (
            {"priority": 9000},
            {"priorityThreshold": {"value": 9000}},
            ("PriorityThreshold", "pod default/p: priority 9000 >= priorityThreshold 9000"),
        ),
        # no priority counts as 0: a threshold of 0 stops it
        (
            {"priority": None},
            {"priorityThreshold": {"value": 0}},
            ("PriorityThreshold", "pod default/p: priority 0 >= priorityThreshold 0"),
        ),
        (
            {"labels": {"app": "db"}},
            {"labelSelector": {"matchLabels": {"app": "web"}}},
            ("LabelSelector", "pod default/p: labels do not match labelSelector"),
        ),
        (
            {},
            {"nodeSelector": "pool=batch"},
            ("NodeSelector", "pod default/p: node n1 does not match nodeSelector"),
        ),
        (
            {"node_name": ""},
            {"nodeSelector": "pool=batch"},
            ("NodeSelector", "pod default/p: node (none) does not match nodeSelector"),
        ),
    ],
)
def test_each_filter_fails_with_its_reason(
    pod_fields: dict[str, Any], config: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert verdict_of(pod_fields, config) == ("fail", *expected)


@pytest.mark.parametrize(
    ("pod_fields", "config"),
    [
        # no priority counts as 0, below a threshold of 1
        ({"priority": None}, {"priorityThreshold": {"value": 1}}),
        # the gate skipped: namespaces are not read at all
        (
            {"namespace": "kube-system"},
            {"namespaces": {"exclude": ["kube-system"]}, "skipEvictionGates": ["Namespaces"]},
        ),
    ],
)
def test_filters_that_let_a_pod_through(pod_fields: dict[str, Any], config: dict[str, Any]) -> None:
    assert verdict_of(pod_fields, config)[:2] == ("pass", None)


def test_the_expected_replicas_guard_says_why() -> None:
    owner, workload = rs("web", 2)
    result = run([job("j", "p")], [pod("p", owner=owner)], [workload], maxMigratingPerWorkload=2)
    verdict = result.verdicts["j"]
    # 2 replicas: maxMigrating 2 (explicit), maxUnavailable 1 (implicit, < 4): 2 == maxMigrating
    assert (verdict.verdict, verdict.filter, verdict.reason) == (
        "fail",
        "ExpectedReplicas",
        "pod default/p: ReplicaSet default/web expects 2 replicas, maxMigrating 2, maxUnavailable 1: "
        "migrating would leave none",
    )


def requeue_reasons(result: Any) -> dict[str, tuple[str, str | None, str]]:
    return {n: (v.verdict, v.filter, v.reason) for n, v in result.verdicts.items() if v.verdict == "requeue"}


def test_each_limit_requeues_with_the_count_it_reached() -> None:
    owner, workload = rs("big", 1000)  # per workload 10 % of 1000 = 100: not limiting
    pods = [pod(f"p{i}", owner=owner) for i in range(3)]
    jobs = [job(f"j{i}", f"p{i}", created=100.0 - i) for i in range(3)]
    # 2 pass on n1, the third finds 2 migrating on n1 >= 2
    assert requeue_reasons(run(jobs, pods, [workload])) == {
        "j2": ("requeue", "MaxMigratingPerNode", "2 pods migrating on node n1 >= maxMigratingPerNode 2")
    }
    assert requeue_reasons(run(jobs, pods, [workload], maxMigratingGlobally=1)) == {
        "j1": ("requeue", "MaxMigratingGlobally", "1 pods migrating >= maxMigratingGlobally 1"),
        "j2": ("requeue", "MaxMigratingGlobally", "1 pods migrating >= maxMigratingGlobally 1"),
    }
    by_namespace = run(jobs, pods, [workload], maxMigratingPerNode=0, maxMigratingPerNamespace=2)
    assert requeue_reasons(by_namespace) == {
        "j2": (
            "requeue",
            "MaxMigratingPerNamespace",
            "2 pods migrating in namespace default >= maxMigratingPerNamespace 2",
        )
    }


def test_the_workload_limits_requeue_with_the_replicas() -> None:
    owner, workload = rs("web", 6)  # implicit maxMigrating 2 and maxUnavailable 2 (4..10)
    pods = [pod(f"p{i}", node=f"n{i}", owner=owner) for i in range(6)]
    jobs = [running("r1", "p1"), running("r2", "p2"), job("j", "p0")]
    assert requeue_reasons(run(jobs, pods, [workload])) == {
        "j": (
            "requeue",
            "MaxMigratingPerWorkload",
            "2 pods of ReplicaSet default/web migrating >= maxMigratingPerWorkload 2 (6 replicas)",
        )
    }
    unready = [pod(f"p{i}", node=f"n{i}", owner=owner, available=i == 0) for i in range(3)]
    result = run([job("j", "p0")], [*unready, *pods[3:]], [workload])
    assert requeue_reasons(result) == {
        "j": (
            "requeue",
            "MaxUnavailablePerWorkload",
            "2 other pods of ReplicaSet default/web unavailable or migrating >= maxUnavailablePerWorkload 2 (6 replicas)",
        )
    }


def test_the_object_limiter_says_which_workload() -> None:
    owner, workload = rs("web", 10)
    result = arbitrate(
        [job("j", "p")],
        pods_by_key(pod("p", owner=owner)),
        {workload.uid: workload},
        args(),
        NOW,
        limited_workloads=frozenset({workload.uid}),
    )
    assert requeue_reasons(result) == {
        "j": ("requeue", "ObjectLimiter", "ReplicaSet default/web is rate limited by objectLimiters")
    }


def test_a_workload_without_replicas_has_no_workload_limits() -> None:
    """A controller without a replica count (a Job): neither the guard nor the per-workload limits apply, however
    many of its pods migrate."""
    batch = OwnerRef("Job", "train", "uid-train")
    train = Workload("Job", "default", "train", "uid-train", None)
    pods = [pod(f"t{i}", node=f"n{i}", owner=batch) for i in range(3)]
    jobs = [running("r1", "t1"), running("r2", "t2"), job("j", "t0")]
    assert run(jobs, pods, [train]).verdicts["j"].verdict == "pass"


# ---------------------------------------------------------------- gangs: what a member waits for, and the counts


def gang_of(names: list[str], *, disruption: str = "minimum", min_member: int | None = None) -> tuple[Any, Any]:
    pods = [gangs.pod(n) for n in names]
    size = len(names) if min_member is None else min_member
    source = gangs.NATIVE if disruption == "all" else gangs.API_SIGS
    return pods, gangs.table(pods, (gangs.spec("train", size, disruption=disruption, source=source), names))


def test_a_gang_member_without_jobs_for_the_rest_names_five_and_counts_the_others() -> None:
    """Eight members run, one migrating already, one job waiting: the unit needs the 8 − 1 = 7 not yet migrating;
    6 of them have no job: five are named, "and 1 more"."""
    names = [f"w{i}" for i in range(8)]
    pods, table = gang_of(names)
    result = gangs.run([*gangs.jobs_for(["w0"]), gangs.job("w7", phase="Running")], pods, table)
    verdict = result.verdicts["pmj-w0"]
    assert (verdict.verdict, verdict.filter) == ("requeue", "GangBelowMinimum")
    assert verdict.reason == (
        "gang ml/train (Strict, minimum 8): 8 members run (1 migrating already); moving pod ml/w0 alone leaves "
        "6 < 8: it moves only together with the 7 running members of gang ml/train not yet migrating, and 6 of "
        "them have no waiting PodMigrationJob (ml/w1, ml/w2, ml/w3, ml/w4, ml/w5 and 1 more)"
    )


def test_five_members_without_a_job_are_all_named() -> None:
    pods, table = gang_of([f"w{i}" for i in range(6)])
    verdict = gangs.run(gangs.jobs_for(["w0"]), pods, table).verdicts["pmj-w0"]
    assert verdict.reason.endswith("5 of them have no waiting PodMigrationJob (ml/w1, ml/w2, ml/w3, ml/w4, ml/w5)")


def test_a_gang_that_moves_all_or_none_says_so() -> None:
    pods, table = gang_of(gangs.W, disruption="all", min_member=2)
    verdict = gangs.run(gangs.jobs_for(["w0"]), pods, table).verdicts["pmj-w0"]
    assert (verdict.verdict, verdict.filter, verdict.reason) == (
        "requeue",
        "GangDisruptionAll",
        "gang ml/train (disruptionMode all): 4 members run; they move all together or none: it moves only "
        "together with the 4 running members of gang ml/train not yet migrating, and 3 of them have no waiting "
        "PodMigrationJob (ml/w1, ml/w2, ml/w3)",
    )


def test_a_member_waits_for_a_member_that_is_refused() -> None:
    """w2 cannot migrate at all (a mirror pod): w0 and w1 are requeued behind it, and say it is refused."""
    pods = [gangs.pod(n, mirror=n == "w2") for n in gangs.W]
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    result = gangs.run(gangs.jobs_for(gangs.W), pods, table)
    waiting = result.verdicts["pmj-w0"]
    assert (waiting.verdict, waiting.filter) == ("requeue", "GangMemberWaiting")
    assert waiting.reason == (
        "moves only with gang ml/train together (4 PodMigrationJobs); job pmj-w2 for pod ml/w2 is refused: "
        "MirrorPods: pod ml/w2: is a mirror (static) pod"
    )
    assert result.verdicts["pmj-w2"].verdict == "fail"


@pytest.mark.parametrize(
    ("migrating_before", "node_limit", "expected"),
    [
        # nothing else on n0, limit 2: w0 (0 < 2), w1 (1 < 2) counted, w2 finds 2 >= 2; the unit waits and gives
        # both counts back (2 -> 1 -> 0): x (0 < 2) and y (1 < 2) pass, z finds 2 >= 2
        (0, 2, {"x": "pass", "y": "pass", "z": "MaxMigratingPerNode"}),
        # one pod migrating on n0, limit 3: w0 (1 < 3), w1 (2 < 3) counted, w2 finds 3 >= 3; given back (3 -> 2 -> 1):
        # x (1 < 3), y (2 < 3) pass, z finds 3 >= 3
        (1, 3, {"x": "pass", "y": "pass", "z": "MaxMigratingPerNode"}),
    ],
)
def test_a_unit_that_waits_gives_back_exactly_the_counts_it_took(
    migrating_before: int, node_limit: int, expected: dict[str, str]
) -> None:
    pods = [gangs.pod(n, node="n0") for n in gangs.W]
    others = [gangs.pod(n, node="n0", owner=None) for n in ("x", "y", "z", "m")]
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    before = [gangs.job("m", phase="Running")][:migrating_before]
    loose = [gangs.job(n, created=float(3 - i)) for i, n in enumerate(("x", "y", "z"))]
    result = gangs.run(
        [*gangs.jobs_for(gangs.W), *loose, *before],
        [*pods, *others],
        table,
        evictAllBarePods=True,
        maxMigratingPerNode=node_limit,
    )
    outcome = gangs.outcomes(result)
    assert {n: outcome[n] for n in ("x", "y", "z")} == expected
    assert {outcome[n] for n in ("w0", "w1")} == {"GangMemberWaiting"}


@pytest.mark.parametrize(
    ("limit", "expected_filter"),
    [
        ({"maxMigratingPerNode": 0, "maxMigratingGlobally": 2}, "MaxMigratingGlobally"),
        ({"maxMigratingPerNode": 0, "maxMigratingPerNamespace": 2}, "MaxMigratingPerNamespace"),
    ],
)
def test_a_waiting_unit_gives_back_its_global_and_namespace_counts(limit: dict[str, int], expected_filter: str) -> None:
    """The four members on four nodes: w0 (0 < 2) and w1 (1 < 2) counted, w2 finds 2 >= 2; the unit waits and
    gives both back: x (0 < 2) and y (1 < 2) pass, z finds 2 >= 2."""
    pods = [gangs.pod(n) for n in gangs.W]
    others = [gangs.pod(n, owner=None) for n in ("x", "y", "z")]
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    loose = [gangs.job(n, created=float(3 - i)) for i, n in enumerate(("x", "y", "z"))]
    result = gangs.run([*gangs.jobs_for(gangs.W), *loose], [*pods, *others], table, evictAllBarePods=True, **limit)
    outcome = gangs.outcomes(result)
    assert {n: outcome[n] for n in ("x", "y", "z")} == {"x": "pass", "y": "pass", "z": expected_filter}


@pytest.mark.parametrize(
    ("limits", "expected_filter"),
    [
        ({"maxMigratingPerWorkload": 3, "maxUnavailablePerWorkload": 7}, "MaxMigratingPerWorkload"),
        ({"maxMigratingPerWorkload": 7, "maxUnavailablePerWorkload": 3}, "MaxUnavailablePerWorkload"),
    ],
)
def test_a_waiting_unit_gives_back_its_workload_counts(limits: dict[str, int], expected_filter: str) -> None:
    """Eight replicas of one StatefulSet, four of them a gang of minimum 4, each pod on its own node; the
    workload's limit 3: w0, w1, w2 counted (0, 1, 2 < 3), w3 finds 3 >= 3; the unit waits and gives the three
    back: x, y, z pass (0, 1, 2 < 3), q finds 3 >= 3."""
    owner = OwnerRef("StatefulSet", "db", "uid-db")
    db = Workload("StatefulSet", gangs.NS, "db", "uid-db", 8)
    members = [gangs.pod(n, owner=owner) for n in gangs.W]
    others = [gangs.pod(n, owner=owner) for n in ("x", "y", "z", "q")]
    table = gangs.table(members, (gangs.spec("train", 4), gangs.W))
    loose = [gangs.job(n, created=float(4 - i)) for i, n in enumerate(("x", "y", "z", "q"))]
    result = gangs.run(
        [*gangs.jobs_for(gangs.W), *loose], [*members, *others], table, [db], maxMigratingPerNode=0, **limits
    )
    outcome = gangs.outcomes(result)
    assert {outcome[n] for n in gangs.W} == {"GangMemberWaiting", expected_filter}
    assert {n: outcome[n] for n in ("x", "y", "z", "q")} == {
        "x": "pass",
        "y": "pass",
        "z": "pass",
        "q": expected_filter,
    }


def test_a_ttl_run_out_and_a_second_job_say_why() -> None:
    owner, workload = rs("web", 5)
    result = run(
        [job("late", "p", ttl_seconds=300.0), running("r", "q"), job("again", "q")],
        [pod("p", owner=owner), pod("q", owner=owner)],
        [workload],
    )
    assert {n: (v.verdict, v.filter, v.reason) for n, v in result.verdicts.items()} == {
        "late": ("fail", "TTL", "job late: ttl 300s ran out before it passed arbitration"),
        "again": ("fail", "ExistingJob", "pod default/q: already has an active PodMigrationJob"),
    }


def test_a_rate_limited_workload_without_replicas_is_requeued_too() -> None:
    batch = OwnerRef("Job", "train", "uid-train")
    train = Workload("Job", "default", "train", "uid-train", None)
    result = arbitrate(
        [job("j", "p")],
        pods_by_key(pod("p", owner=batch)),
        {train.uid: train},
        args(),
        NOW,
        limited_workloads=frozenset({train.uid}),
    )
    assert requeue_reasons(result) == {
        "j": ("requeue", "ObjectLimiter", "Job default/train is rate limited by objectLimiters")
    }


def group_of(
    a: tuple[list[str], str, int], b: tuple[list[str], str, int], pending: tuple[str, ...] = ()
) -> tuple[Any, Any]:
    """Gangs a and b in one GangGroup: (members, disruption, minimum) each; ``pending`` members do not run."""
    pods = [
        gangs.pod(n, node="" if n in pending else None, phase="Pending" if n in pending else "Running")
        for n in [*a[0], *b[0]]
    ]
    specs = [
        (
            gangs.spec(
                name,
                minimum,
                disruption=disruption,
                group=("a", "b"),
                source=gangs.NATIVE if disruption != "minimum" else gangs.API_SIGS,
            ),
            members,
        )
        for name, (members, disruption, minimum) in (("a", a), ("b", b))
    ]
    return pods, gangs.table(pods, *specs)


def test_a_single_gangs_last_running_member_moves_alone_even_in_a_gang_group() -> None:
    """disruptionMode single: each member alone, whatever its GangGroup (a1 is pending: a0 is a's last)."""
    pods, table = group_of((["a0", "a1"], "single", 2), (["b0", "b1"], "minimum", 2), pending=("a1",))
    assert gangs.outcomes(gangs.run(gangs.jobs_for(["a0"]), pods, table)) == {"a0": "pass"}


def test_a_gangs_last_running_member_moves_with_its_gang_group() -> None:
    """a (minimum 0) keeps its rule with none left running, but taking its last member moves a whole, and a
    moves only with its GangGroup: b0, b1 have no job. Alone (no group) it would pass."""
    pods, table = group_of((["a0", "a1"], "minimum", 0), (["b0", "b1"], "minimum", 2), pending=("a1",))
    verdict = gangs.run(gangs.jobs_for(["a0"]), pods, table).verdicts["pmj-a0"]
    assert (verdict.verdict, verdict.filter) == ("requeue", "GangBelowMinimum")
    alone = [gangs.pod("a0"), gangs.pod("a1", node="", phase="Pending")]
    single_table = gangs.table(alone, (gangs.spec("a", 0), ["a0", "a1"]))
    assert gangs.outcomes(gangs.run(gangs.jobs_for(["a0"]), alone, single_table)) == {"a0": "pass"}


def test_requeues_of_different_limits_in_one_round_keep_their_own_reasons() -> None:
    """b0, b1 pass on n1 and b2 finds 2 >= 2 there; p0 passes (web: 0 < 1) and p1 finds 1 >= 1 of web's
    maxMigrating (3 replicas: implicit 1)."""
    big_owner, big = rs("big", 1000)
    web_owner, web = rs("web", 3)
    pods = [pod(f"b{i}", owner=big_owner) for i in range(3)]
    pods += [pod("p0", node="n2", owner=web_owner), pod("p1", node="n3", owner=web_owner)]
    jobs = [job(f"j-{p.name}", p.name, created=100.0 - i) for i, p in enumerate(pods)]
    assert requeue_reasons(run(jobs, pods, [big, web])) == {
        "j-b2": ("requeue", "MaxMigratingPerNode", "2 pods migrating on node n1 >= maxMigratingPerNode 2"),
        "j-p1": (
            "requeue",
            "MaxMigratingPerWorkload",
            "1 pods of ReplicaSet default/web migrating >= maxMigratingPerWorkload 1 (3 replicas)",
        ),
    }


def test_members_judged_after_the_first_incomplete_one_say_the_same() -> None:
    """w0 and w1 have jobs, w2 and w3 none: w0 finds the unit lacking; w1, judged next with nothing passed in
    between, gets the same account (4 needed, 2 of them without a job) from what w0's look found."""
    pods = gangs.workers()
    result = gangs.run(gangs.jobs_for(["w0", "w1"]), pods, gangs.table(pods, (gangs.spec("train", 4), gangs.W)))
    tail = (
        "it moves only together with the 4 running members of gang ml/train not yet migrating, and 2 of them "
        "have no waiting PodMigrationJob (ml/w2, ml/w3)"
    )
    assert result.verdicts["pmj-w0"].reason.endswith(tail)
    assert result.verdicts["pmj-w1"].reason == (
        f"gang ml/train (Strict, minimum 4): 4 members run; moving pod ml/w1 alone leaves 3 < 4: {tail}"
    )


@pytest.mark.parametrize(
    ("gate", "pod_fields", "config"),
    [
        ("Namespaces", {"namespace": "kube-system"}, {"namespaces": {"exclude": ["kube-system"]}}),
        ("BarePods", {"controller": None, "owner_kinds": ()}, {}),
        ("SystemCritical", {"priority": 2_000_000_000}, {}),
        ("LocalStorage", {"local_storage": True}, {}),
        ("PVC", {"pvc": True}, {"ignorePvcPods": True}),
        ("PriorityThreshold", {"priority": 9000}, {"priorityThreshold": {"value": 9000}}),
        ("LabelSelector", {"labels": {"app": "db"}}, {"labelSelector": {"matchLabels": {"app": "web"}}}),
    ],
)
def test_each_filter_gate_skipped_lets_its_pod_through(
    gate: str, pod_fields: dict[str, Any], config: dict[str, Any]
) -> None:
    """The same pod and configuration fail by the gate's filter, and pass with ``skipEvictionGates: [gate]``."""
    assert verdict_of(pod_fields, config)[:2] == ("fail", gate)
    assert verdict_of(pod_fields, {**config, "skipEvictionGates": [gate]})[:2] == ("pass", None)


@pytest.mark.parametrize(
    ("gate", "config"),
    [
        ("MaxMigratingGlobally", {"maxMigratingPerNode": 0, "maxMigratingGlobally": 1}),
        ("MaxMigratingPerNode", {"maxMigratingPerNode": 1}),
        ("MaxMigratingPerNamespace", {"maxMigratingPerNode": 0, "maxMigratingPerNamespace": 1}),
        (
            "MaxMigratingPerWorkload",
            {"maxMigratingPerNode": 0, "maxMigratingPerWorkload": 1, "maxUnavailablePerWorkload": 5},
        ),
        (
            "MaxUnavailablePerWorkload",
            {"maxMigratingPerNode": 0, "maxMigratingPerWorkload": 5, "maxUnavailablePerWorkload": 1},
        ),
    ],
)
def test_each_limit_gate_skipped_lets_the_second_pod_through(gate: str, config: dict[str, Any]) -> None:
    """Two pods of a 10-replica workload on one node, each limit at 1: the second is requeued by the gate's
    limit, and passes with ``skipEvictionGates: [gate]``."""
    owner, workload = rs("web", 10)
    pods = [pod("p0", owner=owner), pod("p1", owner=owner)]
    jobs = [job("j0", "p0", created=2.0), job("j1", "p1", created=1.0)]
    limited = run(jobs, pods, [workload], **config).verdicts["j1"]
    assert (limited.verdict, limited.filter) == ("requeue", gate)
    skipped = run(jobs, pods, [workload], **config, skipEvictionGates=[gate]).verdicts["j1"]
    assert (skipped.verdict, skipped.filter) == ("pass", None)


def test_arbitration_disabled_says_so() -> None:
    result = run([job("j", "p")], [pod("p")], arbitrationArgs={"enabled": False})
    assert result.verdicts["j"].reason == "arbitration disabled (arbitrationArgs.enabled: false): passes unfiltered"


def test_running_jobs_count_in_their_own_namespace() -> None:
    """A running job in namespace a fills a's limit of 1 and leaves b's free."""
    pods = [pod("a0", namespace="a"), pod("a1", namespace="a"), pod("b0", namespace="b")]
    jobs = [running("r", "a0", namespace="a"), job("ja", "a1", namespace="a"), job("jb", "b0", namespace="b")]
    result = run(jobs, pods, maxMigratingPerNode=0, maxMigratingPerNamespace=1, evictAllBarePods=True)
    assert {n: (v.verdict, v.filter) for n, v in result.verdicts.items()} == {
        "ja": ("requeue", "MaxMigratingPerNamespace"),
        "jb": ("pass", None),
    }


def test_the_job_with_more_pods_migrating_goes_first() -> None:
    """Jobs a and b (batch/v1 Jobs): a has one pod migrating, b two; b's waiting pod is judged first, however
    a's pod ranks. Only one more may migrate (globally 4: 3 active + 1)."""
    a, b = OwnerRef("Job", "a", "uid-a"), OwnerRef("Job", "b", "uid-b")
    pods = [
        pod("a0", owner=a),
        pod("a1", owner=a, node="n2"),
        pod("b0", owner=b, node="n3"),
        pod("b1", owner=b, node="n4"),
    ]
    pods += [pod("b2", owner=b, node="n5", sort_key=(3, 9, 1, 4, 0, 0, -1000.0))]  # ranks after a1
    jobs = [running("ra", "a0"), running("rb0", "b0"), running("rb1", "b1"), job("ja", "a1"), job("jb", "b2")]
    result = run(jobs, pods, maxMigratingGlobally=4)
    assert result.order == ("jb", "ja")
    assert {n: v.verdict for n, v in result.verdicts.items()} == {"jb": "pass", "ja": "requeue"}


def test_a_member_judged_after_one_passed_alone_counts_afresh() -> None:
    """w0 finds its unit lacking (w2, w3 without jobs); w1 carries the evict annotation and passes alone (now
    migrating); w2, judged next, needs the three not yet migrating, and only w3 lacks a job."""
    pods = [gangs.pod(n, evict_annotation=n == "w1") for n in gangs.W]
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    result = gangs.run(gangs.jobs_for(["w0", "w1", "w2"]), pods, table)
    assert result.verdicts["pmj-w1"].verdict == "pass"
    assert result.verdicts["pmj-w2"].reason == (
        "gang ml/train (Strict, minimum 4): 4 members run (1 migrating already); moving pod ml/w2 alone leaves "
        "2 < 4: it moves only together with the 3 running members of gang ml/train not yet migrating, and 1 of "
        "them have no waiting PodMigrationJob (ml/w3)"
    )


def test_a_member_judged_after_an_incomplete_one_counts_the_members_migrating_already() -> None:
    """w3 migrates already; w0 and w1 wait, w2 has no job: w1 gets w0's account, migrating member included."""
    pods = gangs.workers()
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    result = gangs.run([*gangs.jobs_for(["w0", "w1"]), gangs.job("w3", phase="Running")], pods, table)
    assert result.verdicts["pmj-w1"].reason == (
        "gang ml/train (Strict, minimum 4): 4 members run (1 migrating already); moving pod ml/w1 alone leaves "
        "2 < 4: it moves only together with the 3 running members of gang ml/train not yet migrating, and 1 of "
        "them have no waiting PodMigrationJob (ml/w2)"
    )


def test_when_every_pod_belongs_to_a_job_their_jobs_still_go_together() -> None:
    """Pods of Jobs a and b only, ranked a0 < b0 < a1: a1 is moved up to its Job's first (a0), so the order
    is a0, a1, b0 (creation times equal: the pod rank decides, then the grouping)."""
    a, b = OwnerRef("Job", "a", "uid-a"), OwnerRef("Job", "b", "uid-b")
    pods = [
        pod("a0", owner=a, sort_key=(1, 0, 0, 4, 0, 0, -1000.0)),
        pod("b0", owner=b, node="n2", sort_key=(2, 0, 0, 4, 0, 0, -1000.0)),
        pod("a1", owner=a, node="n3", sort_key=(3, 0, 0, 4, 0, 0, -1000.0)),
    ]
    result = run([job(f"j-{p.name}", p.name) for p in pods], pods)
    assert result.order == ("j-a0", "j-a1", "j-b0")


@pytest.mark.parametrize(
    ("ttl", "expected"),
    [
        (9000.0, ("fail", "TTL")),  # created 1000, now 10000: 9000 s old >= ttl 9000: run out, judged alone
        (10_000.0, ("requeue", "GangBelowMinimum")),  # 9000 < 10000: still the gang's
    ],
)
def test_a_gang_members_job_whose_ttl_ran_out_is_judged_alone(ttl: float, expected: tuple[str, str]) -> None:
    pods = gangs.workers()
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    verdict = gangs.run([gangs.job("w0", ttl_seconds=ttl)], pods, table).verdicts["pmj-w0"]
    assert (verdict.verdict, verdict.filter) == expected


def test_a_member_of_a_gang_group_that_keeps_its_gang_moves_alone() -> None:
    """a (minimum 1, two running) in a GangGroup with b: moving a0 leaves a1 (1 >= 1), so a0 moves alone."""
    pods, table = group_of((["a0", "a1"], "minimum", 1), (["b0", "b1"], "minimum", 2))
    assert gangs.outcomes(gangs.run(gangs.jobs_for(["a0"]), pods, table)) == {"a0": "pass"}


def test_members_wait_for_a_member_refused_before_them() -> None:
    """Every member has a job (ttl 20,000 s, 9,000 s old); w1's is the newest (judged first) and its ttl has
    run out: TTL, alone. The others move only together with w1's: each waits, naming it."""
    pods = gangs.workers()
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    jobs = [gangs.job("w1", created=1001.0, ttl_seconds=8999.0)]  # 10000 - 1001 = 8999 s old: run out
    jobs += [gangs.job(n, ttl_seconds=20_000.0) for n in ("w0", "w2", "w3")]
    result = gangs.run(jobs, pods, table)
    assert result.order[0] == "pmj-w1"
    assert gangs.outcomes(result) == {
        "w1": "TTL",
        "w0": "GangMemberWaiting",
        "w2": "GangMemberWaiting",
        "w3": "GangMemberWaiting",
    }
    assert result.verdicts["pmj-w0"].reason == (
        "moves only with gang ml/train together (4 PodMigrationJobs); job pmj-w1 for pod ml/w1 is refused: "
        "TTL: job pmj-w1: ttl 8999s ran out before it passed arbitration"
    )


def test_a_unit_judges_each_members_ttl_at_the_rounds_time() -> None:
    """All four members' jobs within their ttl (9,000 s old, ttl 20,000 s): the unit passes together; one of
    them past its ttl inside the unit (w3 created later, so judged with the unit, 9,000 s >= ttl 9,000 s)
    holds the others."""
    pods = gangs.workers()
    table = gangs.table(pods, (gangs.spec("train", 4), gangs.W))
    fresh = [gangs.job(n, ttl_seconds=20_000.0) for n in gangs.W]
    assert set(gangs.outcomes(gangs.run(fresh, pods, table)).values()) == {"pass"}
    late = [*fresh[:3], gangs.job("w3", created=999.0, ttl_seconds=9000.0)]
    outcome = gangs.outcomes(gangs.run(late, pods, table))
    assert outcome["w3"] == "TTL" and {outcome[n] for n in ("w0", "w1", "w2")} == {"GangMemberWaiting"}


def test_the_namespaces_gate_skipped_holds_when_other_filters_run() -> None:
    """A priorityThreshold makes every pod go through the filters: the skipped Namespaces gate still lets
    the excluded namespace's pod through."""
    config = {"namespaces": {"exclude": ["kube-system"]}, "priorityThreshold": {"value": 10_000}}
    assert verdict_of({"namespace": "kube-system"}, config)[:2] == ("fail", "Namespaces")
    assert verdict_of({"namespace": "kube-system"}, {**config, "skipEvictionGates": ["Namespaces"]})[:2] == (
        "pass",
        None,
    )


def test_an_unready_pod_counts_only_the_others_unavailable() -> None:
    """6 replicas (maxUnavailable 2): p0 unready with p1, p2 unready too. p0's own job counts the others: 2 >= 2
    (requeued); with only p1 unready besides it, 1 < 2 (passes)."""
    owner, workload = rs("web", 6)
    pods = [pod(f"p{i}", node=f"n{i}", owner=owner, available=i > 2) for i in range(6)]
    assert run([job("j", "p0")], pods, [workload]).verdicts["j"].filter == "MaxUnavailablePerWorkload"
    pods[2] = pod("p2", node="n2", owner=owner)
    assert run([job("j", "p0")], pods, [workload]).verdicts["j"].verdict == "pass"
    fresh_node = run(
        [job("j", "p3")], [pod("p3", node="n9", owner=owner), *pods[4:]], [workload], maxMigratingPerNode=1
    )
    assert fresh_node.verdicts["j"].verdict == "pass"  # nobody migrates on n9: 0 < 1
