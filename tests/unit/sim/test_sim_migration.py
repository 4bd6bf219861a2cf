"""The migration simulation: arbitration keeps every workload inside its limits, evict-all does not."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from koordpy.descheduler import arbitration, lifecycle
from koordpy.sim import migration
from koordpy.sim.migration import MigrationRun, MigrationScenario, compare, followed_workload, run_migration

# 4 nodes, node-00 drained: Deployments of 2, 5, 12 and 30 replicas (x2) and one Job of 6 pods.
SMALL: dict[str, Any] = {
    "kind": "MigrationScenario",
    "name": "small-drain",
    "seed": 5,
    "nodes": 4,
    "drained": 1,
    "startupSeconds": [3, 6],
    "deployments": [
        {"count": 2, "replicas": 2},
        {"count": 2, "replicas": 5},
        {"count": 2, "replicas": 12},
        {"count": 2, "replicas": 30},
    ],
    "jobs": [{"count": 1, "parallelism": 6}],
}


def _scenario(**changes: Any) -> MigrationScenario:
    return MigrationScenario.model_validate(SMALL | changes)


@pytest.fixture(scope="module")
def small_runs() -> list[MigrationRun]:
    scenario = _scenario()
    return compare(scenario, scenario.seed)


def test_arbitration_keeps_every_workload_inside_its_limits(small_runs: list[MigrationRun]) -> None:
    arbitrated, _ = small_runs
    assert arbitrated.mode == "arbitration"
    assert arbitrated.jobs > 10 and arbitrated.succeeded == arbitrated.jobs
    for uid, budget in arbitrated.budget.items():  # every step, not only the peak
        assert max(arbitrated.unavailable[uid]) <= budget, uid
        assert arbitrated.peak_migrating.get(uid, 0) <= arbitrated.max_migrating[uid], uid
    assert arbitrated.node_limit == 2  # maxMigratingPerNode default
    assert max(arbitrated.peak_migrating_per_node.values()) <= 2
    assert arbitrated.above_budget() == arbitrated.above_migrating() == arbitrated.nodes_above_limit() == []


def test_evict_all_goes_above_the_limits(small_runs: list[MigrationRun]) -> None:
    _, evict_all = small_runs
    assert evict_all.mode == "evict-all"
    assert evict_all.succeeded == evict_all.jobs
    assert evict_all.above_budget() and evict_all.above_migrating()
    assert evict_all.nodes_above_limit() == ["node-00"]
    worst = evict_all.worst()
    assert evict_all.peak(worst) > evict_all.budget[worst]


def test_arbitration_is_slower_but_both_finish(small_runs: list[MigrationRun]) -> None:
    arbitrated, evict_all = small_runs
    assert arbitrated.seconds_to_finish is not None and evict_all.seconds_to_finish is not None
    assert arbitrated.seconds_to_finish > evict_all.seconds_to_finish
    assert arbitrated.jobs == evict_all.jobs  # the same cluster: placement depends on the seed only


@pytest.mark.parametrize(
    ("replicas", "budget"),
    [
        (2, 1),  # < 4 replicas: 1
        (5, 2),  # 4..10: 2
        (12, 1),  # > 10: 10% of 12 = 1.2 -> 1
        (30, 3),  # 10% of 30 = 3
    ],
)
def test_budgets_follow_the_implicit_workload_rule(small_runs: list[MigrationRun], replicas: int, budget: int) -> None:
    arbitrated, _ = small_runs
    found = {arbitrated.budget[uid] for uid, n in arbitrated.replicas.items() if n == replicas}
    assert found == {budget}


def test_the_batch_job_has_no_budget(small_runs: list[MigrationRun]) -> None:
    arbitrated, _ = small_runs
    jobs = [uid for uid, n in arbitrated.replicas.items() if n is None]
    assert len(jobs) == 1 and jobs[0] not in arbitrated.budget


def test_a_configured_max_unavailable_is_honoured() -> None:
    scenario = _scenario(migrationController={"maxUnavailablePerWorkload": 1, "maxMigratingPerNode": 4})
    run = run_migration(scenario, 5, "arbitration")
    assert set(run.budget.values()) == {1}
    assert all(max(run.unavailable[uid]) <= 1 for uid in run.budget)
    assert run.succeeded == run.jobs


def test_deterministic_for_a_seed() -> None:
    scenario = _scenario()
    first, second = (run_migration(scenario, 9, "arbitration") for _ in range(2))
    assert first.summary() == second.summary()
    assert first.unavailable == second.unavailable and first.times == second.times
    other = run_migration(scenario, 10, "arbitration")
    assert (other.jobs, other.unavailable) != (first.jobs, first.unavailable)  # the seed places the pods


def test_runs_call_the_managers_arbitrate_and_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    assert vars(migration)["arbitrate"] is arbitration.arbitrate and vars(migration)["decide"] is lifecycle.decide
    calls = {"arbitrate": 0, "decide": 0}

    def spy(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(migration, "arbitrate", spy("arbitrate", arbitration.arbitrate))
    monkeypatch.setattr(migration, "decide", spy("decide", lifecycle.decide))
    run = run_migration(_scenario(), 5, "arbitration")
    assert calls["arbitrate"] > 0 and calls["decide"] >= run.jobs


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"drained": 4}, "drained"),  # every node drained: nowhere to go
        ({"kind": "Scenario"}, "kind"),
        ({"startupSeconds": [6, 3]}, "startupSeconds"),
        ({"migrationController": {"maxMigratingPerNode": "2"}}, "maxMigratingPerNode"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_scenarios_are_refused(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        _scenario(**changes)


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        run_migration(_scenario(), 5, "gentle")


def _run(mode: str, unavailable: dict[str, list[int]], replicas: dict[str, int | None]) -> MigrationRun:
    return MigrationRun(
        mode=mode,
        times=[0.0, 1.0],
        unavailable=unavailable,
        replicas=replicas,
        names={uid: f"Deployment shop/{uid}" for uid in unavailable},
        refs={uid: ("Deployment", "shop", uid) for uid in unavailable},
        budget={},
        max_migrating={},
        node_limit=None,
        peak_migrating={},
        peak_migrating_per_node={},
        jobs=0,
        succeeded=0,
        seconds_to_finish=None,
    )


def test_one_followed_workload_for_every_run() -> None:
    replicas: dict[str, int | None] = {"web-1": 60, "web-2": 60, "web-3": 40}
    # the last run: web-1 and web-2 tie at 18; the run before breaks the tie (web-1 peaked at 6, web-2 at 4)
    arbitrated = _run("arbitration", {"web-1": [0, 6], "web-2": [4, 0], "web-3": [9, 0]}, replicas)
    evict_all = _run("evict-all", {"web-1": [18, 0], "web-2": [0, 18], "web-3": [12, 0]}, replicas)
    assert followed_workload([arbitrated, evict_all]) == "web-1"
    # each run's own worst differs (arbitration's is web-3): followed_workload is what table and chart use
    assert arbitrated.worst() == "web-3" and evict_all.worst() == "web-2"
    # all tied: more replicas, then the name that sorts last
    tied = _run("evict-all", {"web-1": [5], "web-2": [5], "web-3": [5]}, replicas)
    assert followed_workload([tied]) == "web-2"
    with pytest.raises(ValueError, match="no runs"):
        followed_workload([])


def test_the_summary_counts_the_most_unavailable_of_any_workload(small_runs: list[MigrationRun]) -> None:
    for run in small_runs:
        summary = run.summary()
        assert summary["policy"] == run.mode
        assert summary["maxUnavailableOfOneWorkload"] == max(max(series) for series in run.unavailable.values())
        assert summary["evictions"] == len(run.evictions) == run.succeeded
