"""The ``starving`` simulation: the seed's Time0–Time6 story, a small cluster, validation, determinism."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from pydantic import ValidationError

from koordpy.scheduler.plugins.reservation import controller, ledger
from koordpy.sim import starving
from koordpy.sim.starving import StarvingRun, StarvingScenario, build_starving_trace, compare_starving, run_starving

# The seed's story on one 3C3G node: 1C1G pods arrive every 4 s from t=0 and run 10 s each (so 2 or 3
# of them always run: the node never has 3C free while the stream lasts, t < 100); pod-4 (3C3G, a
# priority class) arrives at t=1.
SEED_STORY: dict[str, Any] = {
    "kind": "StarvingScenario",
    "name": "seed-002",
    "durationSeconds": 300,
    "sampleSeconds": 1,
    "nodes": {"count": 1, "allocatable": {"cpu": "3", "memory": "3Gi"}},
    "smallPods": {
        "pattern": "regular",
        "ratePerSecond": 0.25,
        "endSeconds": 100,
        "lifetimeSeconds": [10, 10],
        "shapes": [{"requests": {"cpu": "1", "memory": "1Gi"}}],
    },
    "bigJobs": [
        {
            "name": "pod-4",
            "arrivalSeconds": 1,
            "requests": {"cpu": "3", "memory": "3Gi"},
            "lifetimeSeconds": 20,
            "priority": 1000,
            "priorityClassName": "high",
        }
    ],
    "reservation": {"starvingJobTimeThreshold": 5, "reservedNodePercent": 100, "intervalSeconds": 1},
}

# Six 16-core nodes about 85 % requested by 1- and 2-core pods of 1 to 5 minutes for 40 minutes, then
# quiet; two gangs of whole-node pods and one big pod with a priority class.
SMALL_CLUSTER: dict[str, Any] = {
    "kind": "StarvingScenario",
    "name": "small-cluster",
    "seed": 4,
    "durationSeconds": 3600,
    "sampleSeconds": 30,
    "nodes": {"count": 6, "allocatable": {"cpu": "16", "memory": "64Gi"}},
    "smallPods": {
        "ratePerSecond": 0.45,
        "endSeconds": 2400,
        "lifetimeSeconds": [60, 300],
        "shapes": [
            {"requests": {"cpu": "1", "memory": "2Gi"}, "weight": 3},
            {"requests": {"cpu": "2", "memory": "4Gi"}},
        ],
    },
    "bigJobs": [
        {"name": "gang-a", "arrivalSeconds": 300, "members": 2, "requests": {"cpu": "16"}, "lifetimeSeconds": 600},
        {
            "name": "solo",
            "arrivalSeconds": 600,
            "requests": {"cpu": "14", "memory": "8Gi"},
            "lifetimeSeconds": 600,
            "priority": 1000,
            "priorityClassName": "high",
        },
        {"name": "gang-b", "arrivalSeconds": 900, "members": 2, "requests": {"cpu": "16"}, "lifetimeSeconds": 300},
    ],
    "reservation": {"starvingJobTimeThreshold": 120, "reservedNodePercent": 34, "intervalSeconds": 10},
}


def _scenario(raw: dict[str, Any], **changes: Any) -> StarvingScenario:
    return StarvingScenario.model_validate(copy.deepcopy(raw) | changes)


@pytest.fixture(scope="module")
def story() -> dict[str, StarvingRun]:
    scenario = _scenario(SEED_STORY)
    return {run.mode: run for run in compare_starving(scenario, 0)}


def test_seed_story_baseline_starts_the_big_pod_after_the_whole_stream(story: dict[str, StarvingRun]) -> None:
    (job,) = story["baseline"].jobs
    # the last small pod arrives at t=96 (every 4 s below 100) and ends at 106: only then is 3C free
    assert job.start == 106.0
    assert story["baseline"].reservations_created == 0 and story["baseline"].idle_held_cpu_seconds == 0


def test_seed_story_koordpy_starts_the_big_pod_when_the_node_drains(story: dict[str, StarvingRun]) -> None:
    run = story["koordpy"]
    (job,) = run.jobs
    assert job.start is not None and job.nodes == ("node-00",)
    # starving once created more than 5 s ago: the pass at t=7 reserves (Waiting: 1C free of 3C);
    # the pods bound at t=0 and t=4 end at 10 and 14, the one at t=8 is held off, so the node drains
    # at t=14 and pod-4 binds there, 92 s before the baseline.
    assert job.start == 14.0
    assert run.reservations_created == 1 and run.max_nodes_held == 1
    # the cost: small pods that arrived during the hold waited, and the node's free cpu was held idle
    # (t=7..10: 1C free, t=10..14: 2C free -> 3 + 8 = 11 cpu·s)
    assert max(run.small_waits) > 0
    assert run.idle_held_cpu_seconds == pytest.approx(11_000.0)
    assert run.summary()["idleHeldCpuSeconds"] == 11.0


def test_seed_story_every_small_pod_still_runs(story: dict[str, StarvingRun]) -> None:
    for run in story.values():
        assert run.small_pods == 25 and run.small_bound == 25 and run.small_pending_at_end == 0


@pytest.fixture(scope="module")
def cluster() -> dict[str, StarvingRun]:
    scenario = _scenario(SMALL_CLUSTER)
    return {run.mode: run for run in compare_starving(scenario, scenario.seed)}


def test_small_cluster_big_jobs_start_sooner_with_reservations(cluster: dict[str, StarvingRun]) -> None:
    koordpy, baseline = cluster["koordpy"], cluster["baseline"]
    assert len(koordpy.latencies()) == 3
    assert max(koordpy.latencies()) < min(baseline.latencies())
    assert koordpy.reservations_created > 0


def test_small_cluster_holds_at_most_the_percent_of_nodes(cluster: dict[str, StarvingRun]) -> None:
    # reservedNodePercent 34 of 6 nodes: floor(2.04) = 2 nodes at most
    assert 1 <= cluster["koordpy"].max_nodes_held <= 2
    assert max(cluster["koordpy"].nodes_held) <= 2


def test_small_cluster_costs_are_reported(cluster: dict[str, StarvingRun]) -> None:
    koordpy, baseline = cluster["koordpy"], cluster["baseline"]
    assert koordpy.idle_held_cpu_seconds > 0 == baseline.idle_held_cpu_seconds
    assert koordpy.summary()["smallPendingP95Seconds"] >= baseline.summary()["smallPendingP95Seconds"]
    assert koordpy.small_pods == baseline.small_pods  # one shared stream


def test_runs_call_the_managers_decide_and_the_extenders_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()

    def spy(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(starving, "decide", spy("decide", controller.decide))
    monkeypatch.setattr(starving, "reserved_verdict", spy("verdict", ledger.reserved_verdict))
    scenario = _scenario(SEED_STORY)
    run = run_starving(scenario, 0, "baseline")
    assert calls == Counter() and run.controller_passes == 0
    run = run_starving(scenario, 0, "koordpy")
    assert calls["decide"] == run.controller_passes == 301  # t = 0, 1, ..., 300
    assert calls["verdict"] > 0


def test_same_seed_same_trace_and_result() -> None:
    scenario = _scenario(SMALL_CLUSTER)
    assert build_starving_trace(scenario, 4) == build_starving_trace(scenario, 4)
    assert build_starving_trace(scenario, 4).arrival != build_starving_trace(scenario, 5).arrival
    first = run_starving(scenario, 4, "baseline").summary()
    assert run_starving(scenario, 4, "baseline").summary() == first


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"bigJobs": [{"name": "x", "arrivalSeconds": 0, "requests": {"cpu": "1"}, "lifetimeSeconds": 1}]}, "priority"),
        (
            {
                "bigJobs": [
                    {"name": "x", "arrivalSeconds": 0, "members": 2, "requests": {"cpu": "4"}, "lifetimeSeconds": 1}
                ]
            },
            "bigJobs[0].requests",
        ),
        (
            {
                "bigJobs": [
                    {
                        "name": "x",
                        "arrivalSeconds": 0,
                        "members": 2,
                        "minMember": 3,
                        "requests": {"cpu": "1"},
                        "lifetimeSeconds": 1,
                    }
                ]
            },
            "minMember",
        ),
        ({"reservation": {"reservedNodePercent": 101}}, "reservedNodePercent"),
        ({"reservation": {"nope": 1}}, "nope"),
    ],
)
def test_bad_scenarios_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field.replace("[", r"\[").replace("]", r"\]")):
        _scenario(SEED_STORY, **change)


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        run_starving(_scenario(SEED_STORY), 0, "volcano")
