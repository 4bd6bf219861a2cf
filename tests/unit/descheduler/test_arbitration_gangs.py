"""Gang-aware arbitration: a job never takes a running gang below its minimum, whatever its gang API.

One table per kind of gang (Strict and NonStrict CRD gangs, native ``disruptionMode`` all and single, a
GangGroup), each row with the arithmetic in a comment: "run" is the members that run, "leaving" those with
an active job, "stays" what one job alone would leave. Then the limits a gang's jobs are still counted
against, the escape hatches, and the gang table built from a ``GangCache`` of real pod objects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import ArbitrationResult, arbitrate
from koordpy.descheduler.objects import MigrationJob, MigrationPod, OwnerRef, Workload
from koordpy.model.objects import pod_from_dict
from koordpy.scheduler.plugins.gang import GangCache, podgroup_from_dict
from koordpy.scheduler.plugins.gang.disruption import (
    GangTable,
    gang_table,
    gang_table_from_specs,
    member_running,
    running_in,
)
from koordpy.scheduler.plugins.gang.spec import API_SIGS, GangRef, GangSource, GangSpec, missing_spec

NOW = 10_000.0
NS = "ml"
TRAIN = OwnerRef("Job", "train", "uid-train")
NATIVE = cast(GangSource, "scheduling.k8s.io")
"""A native PodGroup's gang (``scheduling.k8s.io``), built as a ``GangSpec`` with its ``disruption`` set."""


def pod(name: str, *, node: str | None = None, owner: OwnerRef | None = TRAIN, **kw: Any) -> MigrationPod:
    base = MigrationPod(
        uid=f"uid-{name}",
        namespace=NS,
        name=name,
        node_name=node if node is not None else f"node-{name}",
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
        sort_key=(1, 0, 0, 4, 0, 0, -1000.0),
    )
    return replace(base, **kw)


def job(pod_name: str, *, created: float = 1000.0, **kw: Any) -> MigrationJob:
    base = MigrationJob(
        name=f"pmj-{pod_name}",
        uid=f"uid-pmj-{pod_name}",
        creation_time=created,
        pod_namespace=NS,
        pod_name=pod_name,
        phase="Pending",
        passed_arbitration=False,
    )
    return replace(base, **kw)


def spec(
    name: str,
    min_member: int,
    *,
    mode: str = "Strict",
    disruption: str = "minimum",
    group: tuple[str, ...] = (),
    source: GangSource = API_SIGS,
) -> GangSpec:
    ref = GangRef(NS, name, source)
    return GangSpec(
        ref=ref,
        initialised=True,
        min_member=min_member,
        total_number=min_member,
        mode=cast(Any, mode),
        match_policy="once-satisfied",
        wait_seconds=600.0,
        group=tuple(sorted({ref.id, *(f"{NS}/{g}" for g in group)})),
        create_time=None,
        disruption=cast(Any, disruption),
    )


def table(pods: list[MigrationPod], *gangs: tuple[GangSpec, list[str]]) -> GangTable:
    state = {p.key: (p.phase, p.node_name, False) for p in pods}
    return gang_table_from_specs(((s, [f"{NS}/{m}" for m in members]) for s, members in gangs), running_in(state))


def run(
    jobs: list[MigrationJob],
    pods: list[MigrationPod],
    gangs: GangTable | None,
    workloads: list[Workload] = (),  # type: ignore[assignment]
    **config: Any,
) -> ArbitrationResult:
    return arbitrate(
        jobs,
        {p.key: p for p in pods},
        {w.uid: w for w in workloads},
        MigrationControllerArgs.model_validate(config),
        NOW,
        gangs=gangs,
    )


def outcomes(result: ArbitrationResult) -> dict[str, str]:
    """``pass``, or the filter that requeued or failed the job, by pod name."""
    return {name.removeprefix("pmj-"): v.filter or v.verdict for name, v in result.verdicts.items()}


W = ["w0", "w1", "w2", "w3"]


def workers(pending: tuple[str, ...] = ()) -> list[MigrationPod]:
    """Four members of the Job ``train``, one per node; those in ``pending`` are not scheduled yet."""
    return [pod(n, node="" if n in pending else None, phase="Pending" if n in pending else "Running") for n in W]


def jobs_for(names: list[str]) -> list[MigrationJob]:
    """A waiting job per name; the first named is the newest, so it is judged first."""
    return [job(n, created=1000.0 - i) for i, n in enumerate(names)]


# ---------------------------------------------------------------- Strict and NonStrict CRD gangs (minimum)


@pytest.mark.parametrize("mode", ["Strict", "NonStrict"])
@pytest.mark.parametrize(
    ("min_member", "pending", "active", "waiting", "expected"),
    [
        # 4 run, stays 4-1 = 3 < 4: w0 moves only with w1..w3, which have no job
        (4, (), (), ["w0"], {"w0": "GangBelowMinimum"}),
        # 4 run, 4 jobs: 4-4 = 0 left, the whole gang moves, admitted in one round
        (4, (), (), W, {"w0": "pass", "w1": "pass", "w2": "pass", "w3": "pass"}),
        # 3 of the 4 jobs: 4-3 = 1 < 4 and w3 has no job: none passes
        (4, (), (), ["w0", "w1", "w2"], {"w0": "GangBelowMinimum", "w1": "GangBelowMinimum", "w2": "GangBelowMinimum"}),
        # minimum 3: 4-1 = 3 >= 3, w0 passes alone
        (3, (), (), ["w0"], {"w0": "pass"}),
        # minimum 3: w0 alone (4-1 = 3 >= 3); w1 then: 4-1 leaving-1 = 2 < 3, and w2, w3 have no job
        (3, (), (), ["w0", "w1"], {"w0": "pass", "w1": "GangBelowMinimum"}),
        # minimum 3: w0 alone (3 >= 3); w1 leaves 2 < 3: w1, w2, w3 (every member not leaving) together
        (3, (), (), W, {"w0": "pass", "w1": "pass", "w2": "pass", "w3": "pass"}),
        # w3 pending: 3 run; minimum 2: 3-1 = 2 >= 2
        (2, ("w3",), (), ["w0"], {"w0": "pass"}),
        # w3 is pending: moving it takes nothing from the 3 that run
        (4, ("w3",), (), ["w3"], {"w3": "pass"}),
        # w3 pending: 3 run < 4 already; moving w0 alone leaves 2, not 0: w0 moves only with w1, w2
        (4, ("w3",), (), ["w0"], {"w0": "GangBelowMinimum"}),
        # w3 migrating already: 4 run, 1 leaving, 4-1-1 = 2 < 4: w0 moves with w1, w2 (no jobs)
        (4, (), ("w3",), ["w0"], {"w0": "GangBelowMinimum"}),
        # w3 migrating already: w0, w1, w2 take the 4-1 = 3 not leaving to 0: together
        (4, (), ("w3",), ["w0", "w1", "w2"], {"w0": "pass", "w1": "pass", "w2": "pass"}),
        # minimum 0 (a gang of its annotations that says 0): 4-1 = 3 >= 0
        (0, (), (), ["w0"], {"w0": "pass"}),
    ],
)
def test_minimum_gangs(
    mode: str,
    min_member: int,
    pending: tuple[str, ...],
    active: tuple[str, ...],
    waiting: list[str],
    expected: dict[str, str],
) -> None:
    pods = workers(pending)
    gangs = table(pods, (spec("train", min_member, mode=mode), W))
    running_jobs = [job(n, phase="Running") for n in active]
    result = run([*jobs_for(waiting), *running_jobs], pods, gangs)
    assert outcomes(result) == expected


def test_without_the_gang_table_every_job_passes_alone() -> None:
    """The same four pods and one job, no gang known: the job passes (what every upstream does)."""
    assert outcomes(run(jobs_for(["w0"]), workers(), None)) == {"w0": "pass"}
    assert outcomes(run(jobs_for(["w0"]), workers(), GangTable())) == {"w0": "pass"}


def test_a_member_with_two_jobs_moves_with_the_one_not_judged_yet() -> None:
    """w1 has two jobs: the newest, judged first, ran out of its ttl (10000 - 1000 >= 5 s) and fails alone;
    w0's unit then takes w1's other job, not the failed one: 4 run, 4 jobs, 4-4 = 0 left: together."""
    pods = workers()
    expired = job("w1", created=1000.0, name="pmj-w1-expired", ttl_seconds=5.0)
    result = run(
        [expired, *[job(n, created=999.0 - i) for i, n in enumerate(W)]], pods, table(pods, (spec("train", 4), W))
    )
    assert result.verdicts["pmj-w1-expired"].filter == "TTL"
    assert {n: v.verdict for n, v in result.verdicts.items() if n != "pmj-w1-expired"} == dict.fromkeys(
        [f"pmj-{n}" for n in W], "pass"
    )


def test_a_waiting_job_names_the_members_without_a_job() -> None:
    pods = workers()
    result = run(jobs_for(["w0"]), pods, table(pods, (spec("train", 4), W)))
    verdict = result.verdicts["pmj-w0"]
    assert verdict.verdict == "requeue"
    assert verdict.reason == (
        "gang ml/train (Strict, minimum 4): 4 members run; moving pod ml/w0 alone leaves 3 < 4: it moves only "
        "together with the 4 running members of gang ml/train not yet migrating, and 3 of them have no waiting "
        "PodMigrationJob (ml/w1, ml/w2, ml/w3)"
    )


def test_a_gang_moving_together_says_so() -> None:
    pods = workers()
    result = run(jobs_for(W), pods, table(pods, (spec("train", 4), W)))
    assert {v.reason for v in result.verdicts.values()} == {
        "passed all filters; moves with gang ml/train together: 4 PodMigrationJobs admitted in one round"
    }


# ---------------------------------------------------------------- native PodGroups: disruptionMode all / single


@pytest.mark.parametrize(
    ("disruption", "min_member", "waiting", "expected"),
    [
        # all: 4 run, 4-1 = 3 left, not 0: all or none, and w1..w3 have no job
        ("all", 2, ["w0"], {"w0": "GangDisruptionAll"}),
        # all: minimum 1 changes nothing: 3 left is not 0
        ("all", 1, ["w0", "w1"], {"w0": "GangDisruptionAll", "w1": "GangDisruptionAll"}),
        # all: 4 jobs, 4-4 = 0 left: together
        ("all", 2, W, {"w0": "pass", "w1": "pass", "w2": "pass", "w3": "pass"}),
        # single: each member alone, 4-1 = 3 < minCount 4 is allowed
        ("single", 4, ["w0"], {"w0": "pass"}),
        # single: two at once, 4-2 = 2 < 4, still each alone
        ("single", 4, ["w0", "w1"], {"w0": "pass", "w1": "pass"}),
    ],
)
def test_native_disruption_modes(
    disruption: str, min_member: int, waiting: list[str], expected: dict[str, str]
) -> None:
    pods = workers()
    gangs = table(pods, (spec("train", min_member, disruption=disruption, source=NATIVE), W))
    assert outcomes(run(jobs_for(waiting), pods, gangs)) == expected


def test_native_all_with_one_member_running_moves_it() -> None:
    """all: w1..w3 pending, 1 runs; moving it leaves 1-1 = 0 running: the whole (running) gang moves."""
    pods = workers(pending=("w1", "w2", "w3"))
    gangs = table(pods, (spec("train", 4, disruption="all", source=NATIVE), W))
    assert outcomes(run(jobs_for(["w0"]), pods, gangs)) == {"w0": "pass"}


# ---------------------------------------------------------------- a gang whose PodGroup is not seen: held


UNSEEN = f"gang {NS}/train: PodGroup {NS}/train (scheduling.k8s.io) not found"


def unseen() -> GangSpec:
    """The native gang ``train`` as the gang cache keeps it while its PodGroup is not seen: un-initialised,
    minimum 0, the cache's problem."""
    return missing_spec(GangRef(NS, "train", NATIVE), UNSEEN)


@pytest.mark.parametrize(
    ("pending", "waiting", "config", "expected"),
    [
        # 4 run; minimum unknown (0 in the un-initialised spec: 4-1 = 3 >= 0 would pass): held
        ((), ["w0"], {}, {"w0": "GangUnknown"}),
        # 4 jobs for the 4 seen: 4-4 = 0 would move the gang whole, but its size and mode are unknown: held
        ((), W, {}, {"w0": "GangUnknown", "w1": "GangUnknown", "w2": "GangUnknown", "w3": "GangUnknown"}),
        # w0 pending: moving it takes nothing that runs
        (("w0",), ["w0"], {}, {"w0": "pass"}),
        # the gate skipped: the rule is off
        ((), ["w0"], {"skipEvictionGates": ["GangDisruption"]}, {"w0": "pass"}),
    ],
)
def test_a_member_of_a_gang_whose_podgroup_is_not_seen_waits(
    pending: tuple[str, ...], waiting: list[str], config: dict[str, Any], expected: dict[str, str]
) -> None:
    pods = workers(pending)
    assert outcomes(run(jobs_for(waiting), pods, table(pods, (unseen(), W)), **config)) == expected


def test_a_gang_whose_podgroup_is_not_seen_says_so_and_moves_once_it_is() -> None:
    pods = workers()
    held = run(jobs_for(["w0"]), pods, table(pods, (unseen(), W))).verdicts["pmj-w0"]
    assert (held.verdict, held.filter) == ("requeue", "GangUnknown")
    assert held.reason == (
        f"{UNSEEN}: its minimum and disruption mode are unknown, so pod ml/w0, one of its 4 running members, "
        "waits until they are known (the evict annotation or skipEvictionGates [GangDisruption] moves it anyway)"
    )
    # the PodGroup seen (disruptionMode all): w0 alone waits for the others (4-1 = 3, not 0) ...
    seen = table(pods, (spec("train", 4, disruption="all", source=NATIVE), W))
    assert outcomes(run(jobs_for(["w0"]), pods, seen)) == {"w0": "GangDisruptionAll"}
    # ... and the four move together (4-4 = 0)
    assert outcomes(run(jobs_for(W), pods, seen)) == {"w0": "pass", "w1": "pass", "w2": "pass", "w3": "pass"}


def test_the_evict_annotation_and_the_ttl_still_apply_to_an_unseen_gang() -> None:
    pods = workers()
    pods[0] = replace(pods[0], evict_annotation=True)
    gangs = table(pods, (unseen(), W))
    # w0 annotated: bypasses; w1 created 1000, now 10000, ttl 60: out
    result = run([job("w0"), job("w1", ttl_seconds=60.0)], pods, gangs)
    assert outcomes(result) == {"w0": "pass", "w1": "TTL"}


def test_a_native_member_seen_before_its_podgroup_is_held_until_the_podgroup_arrives() -> None:
    """The gang table from a ``GangCache`` fed as the manager feeds it: two native members (``spec.
    schedulingGroup``) run before their PodGroup is seen; then the PodGroup (minCount 2, disruptionMode all)."""
    cache = GangCache(CoschedulingArgs.model_validate({}))
    for name in ("p0", "p1"):
        raw = raw_pod(name)
        raw["spec"]["schedulingGroup"] = {"podGroupName": "pair"}
        cache.upsert_pod(pod_from_dict(raw))
    pods = [pod("p0"), pod("p1")]
    runs = running_in({p.key: (p.phase, p.node_name, False) for p in pods})
    before = gang_table(cache, ["ml/p0", "ml/p1"], runs)
    gang = before.of("ml/p0")
    assert gang is not None
    assert (gang.source, gang.unknown) == (
        "scheduling.k8s.io",
        "gang ml/pair: PodGroup ml/pair (scheduling.k8s.io) not found",
    )
    assert outcomes(run(jobs_for(["p0", "p1"]), pods, before)) == {"p0": "GangUnknown", "p1": "GangUnknown"}
    cache.upsert_podgroup(
        podgroup_from_dict(
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "pair", "namespace": NS},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": {"all": {}}},
            }
        )
    )
    after = gang_table(cache, ["ml/p0", "ml/p1"], runs)
    assert outcomes(run(jobs_for(["p0"]), pods, after)) == {"p0": "GangDisruptionAll"}  # 2-1 = 1, not 0
    assert outcomes(run(jobs_for(["p0", "p1"]), pods, after)) == {"p0": "pass", "p1": "pass"}  # 2-2 = 0


# ---------------------------------------------------------------- a GangGroup


A = ["a0", "a1"]
B = ["b0", "b1"]


def group_pods() -> list[MigrationPod]:
    return [pod(n) for n in (*A, *B)]


def group_table(pods: list[MigrationPod], b_group: tuple[str, ...] = ("a", "b")) -> GangTable:
    return table(pods, (spec("a", 2, group=("a", "b")), A), (spec("b", 2, group=b_group), B))


@pytest.mark.parametrize(
    ("waiting", "expected"),
    [
        # a: 2 run, 2-1 = 1 < 2: the GangGroup breaks, so a0 moves with a1, b0, b1 (no jobs)
        (["a0"], {"a0": "GangBelowMinimum"}),
        # a would go 2-2 = 0, but b stays: the group moves as one; b0, b1 have no job
        (["a0", "a1"], {"a0": "GangBelowMinimum", "a1": "GangBelowMinimum"}),
        # all four: every running member of the group moves, 4 jobs in one round
        (A + B, {"a0": "pass", "a1": "pass", "b0": "pass", "b1": "pass"}),
    ],
)
def test_gang_group_moves_as_one(waiting: list[str], expected: dict[str, str]) -> None:
    pods = group_pods()
    assert outcomes(run(jobs_for(waiting), pods, group_table(pods))) == expected


def test_gang_group_message_names_the_group() -> None:
    pods = group_pods()
    verdict = run(jobs_for(["a0"]), pods, group_table(pods)).verdicts["pmj-a0"]
    assert verdict.reason.startswith("gang ml/a of GangGroup [ml/a,ml/b] (Strict, minimum 2): 2 members run;")
    assert "the 4 running members of GangGroup [ml/a,ml/b]" in verdict.reason
    assert verdict.reason.endswith("3 of them have no waiting PodMigrationJob (ml/a1, ml/b0, ml/b1)")


def test_a_gang_declaring_another_group_is_not_part_of_it() -> None:
    """b declares only itself: a's group [a, b] counts a alone (as the gang cache does), so a0 and a1
    move together without b (a: 2-2 = 0)."""
    pods = group_pods()
    assert outcomes(run(jobs_for(A), pods, group_table(pods, b_group=()))) == {"a0": "pass", "a1": "pass"}


# ---------------------------------------------------------------- the limits still count every member


def test_a_unit_over_the_per_node_limit_waits_whole_and_counts_nothing() -> None:
    """Four members on node n0, maxMigratingPerNode 2: w0 (0 < 2) and w1 (1 < 2) would pass, w2 finds
    2 >= 2. The unit does not pass, and its two tentative counts are taken back: an unrelated pod x on n0
    then passes (0 < 2)."""
    pods = [pod(n, node="n0") for n in W] + [pod("x", node="n0", owner=None, evict_annotation=False)]
    gangs = table(pods, (spec("train", 4), W))
    result = run([*jobs_for(W), job("x", created=1.0)], pods, gangs, evictAllBarePods=True)
    assert outcomes(result) == {
        "w0": "GangMemberWaiting",
        "w1": "GangMemberWaiting",
        "w2": "MaxMigratingPerNode",
        "w3": "MaxMigratingPerNode",
        "x": "pass",
    }
    assert result.verdicts["pmj-w0"].reason == (
        "moves only with gang ml/train together (4 PodMigrationJobs); job pmj-w2 for pod ml/w2 waits: "
        "MaxMigratingPerNode: 2 pods migrating on node n0 >= maxMigratingPerNode 2"
    )


@pytest.mark.parametrize(
    ("config", "expected_x"),
    [
        # 4 of the gang counted in namespace ml: 4 >= 4, x waits
        ({"maxMigratingPerNamespace": 4}, "MaxMigratingPerNamespace"),
        # globally: 4 < 5, x passes as the fifth
        ({"maxMigratingGlobally": 5}, "pass"),
        # globally 4 >= 4 once the gang passed
        ({"maxMigratingGlobally": 4}, "MaxMigratingGlobally"),
    ],
)
def test_each_member_moving_together_counts_against_the_limits(config: dict[str, Any], expected_x: str) -> None:
    pods = [*workers(), pod("x", owner=OwnerRef("Job", "other", "uid-other"))]
    result = run([*jobs_for(W), job("x", created=1.0)], pods, table(pods, (spec("train", 4), W)), **config)
    assert outcomes(result) == {"w0": "pass", "w1": "pass", "w2": "pass", "w3": "pass", "x": expected_x}


def test_a_unit_larger_than_the_global_limit_never_moves() -> None:
    """maxMigratingGlobally 3: the fourth member finds 3 >= 3, so the four never pass together."""
    pods = workers()
    result = run(jobs_for(W), pods, table(pods, (spec("train", 4), W)), maxMigratingGlobally=3)
    assert result.names("pass") == []
    assert outcomes(result)["w3"] == "MaxMigratingGlobally"


def test_a_stateful_set_gang_meets_its_workload_limit() -> None:
    """Members of a 4-replica StatefulSet: implicit maxMigratingPerWorkload 2 (4..10), so the third of
    the four finds 2 >= 2 and the unit waits (raise the limit, or skip the gate, to move such a gang)."""
    owner = OwnerRef("StatefulSet", "db", "uid-db")
    workload = Workload("StatefulSet", NS, "db", "uid-db", 4)
    pods = [pod(n, owner=owner) for n in W]
    gangs = table(pods, (spec("train", 4), W))
    result = run(jobs_for(W), pods, gangs, [workload])
    assert result.names("pass") == []
    assert outcomes(result)["w2"] == "MaxMigratingPerWorkload"
    # maxMigratingPerWorkload 4 == 4 replicas: the expected-replicas guard refuses every member
    result = run(jobs_for(W), pods, gangs, [workload], maxMigratingPerWorkload=4, maxUnavailablePerWorkload=4)
    assert set(outcomes(result).values()) == {"ExpectedReplicas"}
    result = run(
        jobs_for(W),
        pods,
        gangs,
        [workload],
        skipEvictionGates=["MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"],
    )
    assert result.names("pass") == ["pmj-w0", "pmj-w1", "pmj-w2", "pmj-w3"]


def test_a_refused_member_refuses_nothing_else() -> None:
    """w1 has an emptyDir: its job fails (LocalStorage); w0, w2, w3 wait, naming it; nothing is counted."""
    pods = workers()
    pods[1] = replace(pods[1], local_storage=True)
    result = run(jobs_for(W), pods, table(pods, (spec("train", 4), W)))
    assert outcomes(result) == {
        "w0": "GangMemberWaiting",
        "w1": "LocalStorage",
        "w2": "GangMemberWaiting",
        "w3": "GangMemberWaiting",
    }
    assert result.verdicts["pmj-w1"].verdict == "fail"
    assert "job pmj-w1 for pod ml/w1 is refused: LocalStorage" in result.verdicts["pmj-w0"].reason


def test_a_member_requeued_earlier_in_the_round_holds_its_unit() -> None:
    """Minimum 3. w1 first: alone 4-1 = 3 >= 3, but its node has 2 migrating >= 2 (requeued). w0: alone
    4-1 = 3 >= 3, passes. w2: 4-1 leaving-1 = 2 < 3, so w1, w2, w3 must move together, and w1's job was
    held in this round: w2 and w3 wait, naming it."""
    pods = workers()
    busy = [pod("o1", node="node-w1", owner=OwnerRef("Job", "o", "uid-o")), pod("o2", node="node-w1", owner=None)]
    running_others = [job("o1", phase="Running"), job("o2", phase="Running")]
    jobs = jobs_for(["w1", "w0", "w2", "w3"])
    result = run([*jobs, *running_others], [*pods, *busy], table(pods, (spec("train", 3), W)))
    assert outcomes(result) == {
        "w1": "MaxMigratingPerNode",
        "w0": "pass",
        "w2": "GangMemberWaiting",
        "w3": "GangMemberWaiting",
    }
    assert "job pmj-w1 for pod ml/w1 waits: MaxMigratingPerNode" in result.verdicts["pmj-w2"].reason


# ---------------------------------------------------------------- what bypasses the rule


def test_the_evict_annotation_bypasses_the_gang_rule() -> None:
    pods = workers()
    pods[0] = replace(pods[0], evict_annotation=True)
    assert outcomes(run(jobs_for(["w0"]), pods, table(pods, (spec("train", 4), W)))) == {"w0": "pass"}


def test_skip_eviction_gates_gang_disruption_turns_the_rule_off() -> None:
    pods = workers()
    result = run(jobs_for(["w0"]), pods, table(pods, (spec("train", 4), W)), skipEvictionGates=["GangDisruption"])
    assert outcomes(result) == {"w0": "pass"}


def test_arbitration_disabled_passes_gang_members_too() -> None:
    pods = workers()
    result = run(jobs_for(["w0"]), pods, table(pods, (spec("train", 4), W)), arbitrationArgs={"enabled": False})
    assert outcomes(result) == {"w0": "pass"}


def test_ttl_and_existing_job_are_judged_first() -> None:
    pods = workers()
    gangs = table(pods, (spec("train", 4), W))
    result = run([job("w0", ttl_seconds=60.0), job("w1", phase="Running"), job("w1", created=999.0)], pods, gangs)
    # w0: created 1000, now 10000, ttl 60: out; w1 has an active job: no second
    assert {n: v.filter for n, v in result.verdicts.items()} == {"pmj-w0": "TTL", "pmj-w1": "ExistingJob"}


# ---------------------------------------------------------------- the table from real pods


def raw_pod(
    name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {"nodeName": status.pop("node", "n1"), "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": status.pop("phase", "Running")},
    }


def test_gang_table_reads_every_crd_api_from_a_gang_cache() -> None:
    cache = GangCache(CoschedulingArgs.model_validate({}))
    cache.upsert_podgroup(
        podgroup_from_dict(
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "sig", "namespace": NS},
                "spec": {"minMember": 2},
            }
        )
    )
    cache.upsert_podgroup(
        podgroup_from_dict(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "vc", "namespace": NS},
                "spec": {"minMember": 3},
            }
        )
    )
    raws = [
        raw_pod("s0", labels={"pod-group.scheduling.sigs.k8s.io": "sig"}),
        raw_pod("s1", labels={"pod-group.scheduling.sigs.k8s.io": "sig"}, phase="Pending", node=""),
        raw_pod("v0", annotations={"scheduling.k8s.io/group-name": "vc"}),
        raw_pod(
            "k0",
            annotations={
                "gang.scheduling.koordinator.sh/name": "kg",
                "gang.scheduling.koordinator.sh/min-available": "5",
                "gang.scheduling.koordinator.sh/mode": "NonStrict",
            },
        ),
        raw_pod("m0", labels={"pod-group.scheduling.sigs.k8s.io": "missing"}),
        raw_pod("lone"),
    ]
    for raw in raws:
        cache.upsert_pod(pod_from_dict(raw))
    state = {f"{NS}/{r['metadata']['name']}": (r["status"]["phase"], r["spec"]["nodeName"], False) for r in raws}
    found = gang_table(cache, [f"{NS}/{n}" for n in ("s0", "v0", "k0", "m0", "lone")], running_in(state))
    summary = {
        gid: (g.source, g.mode, g.min_member, g.disruption, sorted(g.running), g.members)
        for gid, g in found.gangs.items()
    }
    assert summary == {
        "ml/sig": ("scheduling.sigs.k8s.io", "Strict", 2, "minimum", ["ml/s0"], 2),  # s1 is pending
        "ml/vc": ("scheduling.volcano.sh", "Strict", 3, "minimum", ["ml/v0"], 1),
        "ml/kg": ("annotations", "NonStrict", 5, "minimum", ["ml/k0"], 1),
        "ml/missing": ("scheduling.sigs.k8s.io", "Strict", 0, "minimum", ["ml/m0"], 1),  # PodGroup not found
    }
    assert found.gangs["ml/missing"].unknown == (
        "gang ml/missing: PodGroup ml/missing (scheduling.sigs.k8s.io) not found"
    )  # held: its jobs wait as GangUnknown
    assert {gid for gid, g in found.gangs.items() if g.unknown} == {"ml/missing"}
    assert found.of("ml/lone") is None


@pytest.mark.parametrize(
    ("phase", "node", "deleting", "runs"),
    [
        ("Running", "n1", False, True),
        ("Pending", "n1", False, False),
        ("Running", "", False, False),
        ("Running", "n1", True, False),
        ("Succeeded", "n1", False, False),
    ],
)
def test_member_running(phase: str, node: str, deleting: bool, runs: bool) -> None:
    assert member_running(phase, node, deleting) is runs


def test_the_last_member_of_a_gang_waits_for_its_group() -> None:
    """a1 migrating already; a0 alone would leave a with 2-1-1 = 0 running while b keeps 2: the group
    breaks, so a0 moves only with b0 and b1 (no jobs). With them, the three pass together."""
    pods = group_pods()
    gangs = group_table(pods)
    migrating = job("a1", phase="Running")
    assert outcomes(run([*jobs_for(["a0"]), migrating], pods, gangs)) == {"a0": "GangBelowMinimum"}
    result = run([*jobs_for(["a0", "b0", "b1"]), migrating], pods, gangs)
    assert outcomes(result) == {"a0": "pass", "b0": "pass", "b1": "pass"}
    assert result.verdicts["pmj-a0"].gang == "GangGroup [ml/a,ml/b]"


def test_the_last_member_of_a_lone_gang_moves_when_the_others_are_migrating() -> None:
    """Three of four migrating already: w3 alone leaves 4-3-1 = 0, the gang moves whole."""
    pods = workers()
    migrating = [job(n, phase="Running") for n in ("w0", "w1", "w2")]
    assert outcomes(run([*jobs_for(["w3"]), *migrating], workers(), table(pods, (spec("train", 4), W)))) == {
        "w3": "pass"
    }
