"""Gang jobs in the simulator: held binds through the gang model, Strict release, baseline partial
placement, the gang figures, and the scenario's gang fields."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.config.scenario import Scenario
from koordpy.sim import engine as engine_module
from koordpy.sim.engine import BASELINE, KOORDPY, Policy, Simulation
from koordpy.sim.trace import build_trace


def _scenario(mode: str, blocker_lifetime: str | None, wait: str = "1h") -> Scenario:
    """Two 16-core nodes. A blocker (8 cores, arrives at 0) and one gang job of 4 members × 8 cores
    arriving together at 60 s: 8 + 4 × 8 = 40 > 32, so only 3 members fit while the blocker runs."""
    blocker: dict[str, Any] = {
        "name": "blocker",
        "arrivals": {"count": 1, "end": 0},
        "requests": {"cpu": "8", "memory": "1Gi"},
        "usage": {"cpu": {"mean": "1"}, "memory": {"mean": "1Gi"}},
    }
    if blocker_lifetime is not None:
        blocker["lifetime"] = {"min": blocker_lifetime, "max": blocker_lifetime}
    raw: dict[str, Any] = {
        "apiVersion": "koordpy.io/v1alpha1",
        "kind": "Scenario",
        "name": "gang-unit",
        "duration": "30m",
        "step": "60s",
        "nodePools": [{"name": "n", "count": 2, "allocatable": {"cpu": "16", "memory": "64Gi"}}],
        "workloads": [
            blocker,
            {
                "name": "train",
                "arrivals": {"count": 1, "start": "1m", "end": "1m"},
                "requests": {"cpu": "8", "memory": "1Gi"},
                "usage": {"cpu": {"mean": "1"}, "memory": {"mean": "1Gi"}},
                "gang": {"members": 4, "mode": mode, "waitTime": wait},
            },
        ],
        "nodeMetric": {"reportInterval": "60s"},
        "scheduler": {"loadAware": {"usageThresholds": {"cpu": 100, "memory": 100}}},
        "qos": {"enabled": False, "interval": "60s"},
    }
    return validate(Scenario, raw)


def _run(scenario: Scenario, policy: Policy) -> Simulation:
    sim = Simulation(scenario, build_trace(scenario, 1), policy, 1, None)
    sim.run()
    return sim


def _members(sim: Simulation) -> list[int]:
    return [p for p in range(len(sim.trace)) if int(sim.job[p]) >= 0]


def test_members_are_held_then_bound_together_when_the_last_fits() -> None:
    # NonStrict, blocker runs 10 min: at 60 s three members are held (24 of the 24 free cores), the
    # fourth finds no node (recorded, no release); at 600 s the blocker leaves, the fourth is held,
    # the permit allows and all four bind at 600 s.
    sim = _run(_scenario("NonStrict", "10m"), KOORDPY)
    members = _members(sim)
    assert [float(sim.started[p]) for p in members] == [600.0] * 4
    assert all(sim.pod_state[p] == engine_module.RUNNING for p in members)
    summary = sim.stats.summary(sim.still_pending())
    assert summary["gangHolds"] == 4 and summary["gangReleases"] == {}
    # latency: first arrival 60 s → last bound 600 s = 540 s
    assert summary["jobStartLatencyP50Seconds"] == summary["jobStartLatencyMaxSeconds"] == 540.0
    # held, not bound: three held members × 8/16 = 1.5 nodes' worth at the samples 120 … 600 (the
    # sample at 60 s is taken before the cycle; at 600 s before the bind) = 9 samples × 1.5 × 1 min
    assert summary["partialPlacementNodeMinutes"] == 13.5
    assert summary["partialBoundNodeMinutes"] == 0.0


def test_baseline_binds_members_as_they_fit_leaving_the_job_partial() -> None:
    # the same trace without gang awareness: three members bind at 60 s, the fourth at 600 s
    sim = _run(_scenario("NonStrict", "10m"), BASELINE)
    started = sorted(float(sim.started[p]) for p in _members(sim))
    assert started == [60.0, 60.0, 60.0, 600.0]
    summary = sim.stats.summary(sim.still_pending())
    # the same 13.5 node-minutes, but bound: those three pods hold their nodes and do no work
    assert summary["partialPlacementNodeMinutes"] == summary["partialBoundNodeMinutes"] == 13.5
    assert summary["gangJobsFullyRunning"] == 1 and summary["jobStartLatencyMaxSeconds"] == 540.0


def test_strict_gang_that_cannot_fit_releases_every_held_member() -> None:
    # Strict, the blocker never leaves: the fourth member's failure releases the three held members
    # (cause strict) and they go to backoff; no member is ever bound and nothing stays reserved.
    sim = _run(_scenario("Strict", None), KOORDPY)
    members = _members(sim)
    assert not any(sim.pod_state[p] == engine_module.RUNNING for p in members)
    summary = sim.stats.summary(sim.still_pending())
    assert summary["binds"] == 1  # the blocker only
    assert summary["gangReleases"]["strict"] >= 3
    assert summary["gangJobsFullyRunning"] == 0 and summary["partialBoundNodeMinutes"] == 0.0
    # between cycles the released members hold nothing: the nodes' free cpu is 32 - 8 (blocker) - held
    held = [p for p in members if sim.pod_state[p] == engine_module.HELD]
    cpu = sim.fit.position["cpu"]
    assert int(sim.fit.free[:, cpu].sum()) == 32_000 - 8_000 - 8_000 * len(held)
    # the baseline binds three and leaves them there for the whole run
    base = _run(_scenario("Strict", None), BASELINE).stats.summary([])
    assert base["binds"] == 4 and base["gangJobsFullyRunning"] == 0
    # 3 × 0.5 node at the samples 120 … 1800 (29 samples) × 1 min = 43.5 node-minutes
    assert base["partialBoundNodeMinutes"] == 43.5


def test_strict_wait_time_expiry_releases_held_members() -> None:
    # Strict with a blocker that leaves at 10 min would be allowed at 600 s, but a 2-minute wait
    # runs out first for whoever is held; the job still starts once the blocker is gone.
    sim = _run(_scenario("Strict", "10m", wait="2m"), KOORDPY)
    summary = sim.stats.summary(sim.still_pending())
    assert summary["gangJobsFullyRunning"] == 1
    assert all(sim.pod_state[p] == engine_module.RUNNING for p in _members(sim))


def test_members_carry_koordinator_gang_annotations() -> None:
    scenario = _scenario("NonStrict", "10m", wait="90s")
    trace = build_trace(scenario, 1)
    pod = trace.pod(_members_of(trace)[0])
    prefix = "gang.scheduling.koordinator.sh/"
    assert pod.name == "train-0-0"
    assert {k: v for k, v in pod.annotations.items() if k.startswith(prefix)} == {
        f"{prefix}name": "train-0",
        f"{prefix}min-available": "4",
        f"{prefix}total-number": "4",
        f"{prefix}mode": "NonStrict",
        f"{prefix}waiting-time": "90000ms",
    }


def _members_of(trace: Any) -> list[int]:
    return [p for p in range(len(trace)) if int(trace.gangs.job[p]) >= 0]


def test_gang_group_jobs_share_arrivals_and_name_each_other() -> None:
    raw = _scenario("Strict", None).model_dump(by_alias=True)
    raw = json.loads(json.dumps(raw))  # plain data
    raw["workloads"][1]["gang"]["groupWith"] = ["ps"]
    ps = json.loads(json.dumps(raw["workloads"][1]))
    ps.update(name="ps", gang={"members": 1, "groupWith": []})
    ps["arrivals"] = {"count": 1, "start": 0, "end": 900}
    raw["workloads"].append(ps)
    scenario = validate(Scenario, raw)
    trace = build_trace(scenario, 1)
    assert trace.gangs is not None
    groups = {json.loads(a["gang.scheduling.koordinator.sh/groups"])[0] for a in trace.gangs.annotations}
    assert groups == {"default/ps-0"}
    # ps's job arrives with train's (the first of the group in the file), not at its own draw
    assert np.all(trace.arrival[[p for p in range(len(trace)) if trace.workload[p] == 2]] == 60.0)


@pytest.mark.parametrize(
    ("gang", "needle"),
    [
        ({"members": 0}, "workloads[0].gang.members"),
        ({"members": "4"}, "workloads[0].gang.members"),
        ({"members": 4, "minMember": 5}, "workloads[0].gang.minMember: must be <= members"),
        ({"members": 4, "mode": "strict"}, "workloads[0].gang.mode"),
        ({"members": 4, "waitTime": "0s"}, "workloads[0].gang.waitTime"),
        ({"members": 4, "memberSpread": "-1s"}, "workloads[0].gang.memberSpread"),
        ({"members": 4, "groupWith": ["nope"]}, "workloads[0].gang.groupWith[0]: no workload named 'nope'"),
        ({"members": 4, "groupWith": ["w"]}, "workloads[0].gang.groupWith[0]: a workload is always in its own"),
        ({"members": 4, "extra": 1}, "workloads[0].gang.extra"),
        ({"members": 10_000}, "workloads[0].gang.members: arrivals.count × members must be at most 1,000,000"),
    ],
)
def test_bad_gang_fields_name_the_path(gang: dict[str, Any], needle: str) -> None:
    raw: dict[str, Any] = {
        "apiVersion": "koordpy.io/v1alpha1",
        "kind": "Scenario",
        "name": "bad",
        "duration": "1h",
        "nodePools": [{"name": "n", "count": 1, "allocatable": {"cpu": "4", "memory": "4Gi"}}],
        "workloads": [
            {
                "name": "w",
                "arrivals": {"count": 101},
                "usage": {"cpu": {"mean": "1"}, "memory": {"mean": "1Gi"}},
                "gang": gang,
            }
        ],
    }
    with pytest.raises(ConfigError) as caught:
        validate(Scenario, raw)
    assert needle in str(caught.value)
