"""The simulator's CPU pressure model (``koordpy.sim.qospressure``) and the agent's pressure rules run on it.

The node: 2 cores, a probe (Guaranteed, 500m request, demand 100m) and two batch pods busy on a whole core
each, either BestEffort (``cpu.weight`` 1) or Burstable with 500m requests (their slice: 1000m -> weight 39).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from koordpy.cli.simulate import qos_factory
from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.model.objects import pod_from_dict
from koordpy.sim import agentqos
from koordpy.sim.engine import KOORDPY
from koordpy.sim.qos import PodUsage
from koordpy.sim.qospressure import PressureModel, cpu_weight
from koordpy.sim.run import simulate
from koordpy_testkit.builders import PodBuilder


@pytest.mark.parametrize(
    ("millis", "weight"),
    [
        (0, 1),  # BestEffort: shares 2 -> 1 + 0
        (100, 4),  # shares 102: 1 + 100 x 9999 // 262142 = 1 + 3
        (500, 20),  # shares 512: 1 + 510 x 9999 // 262142 = 1 + 19
        (1000, 39),  # shares 1024: 1 + 1022 x 9999 // 262142 = 1 + 38
        (256_000, 10000),  # shares capped at 262144: the maximum weight
    ],
)
def test_cpu_weight_is_the_kubelets_conversion(millis, weight):
    assert cpu_weight(millis) == weight


def usage(pod_id: int, raw: dict[str, Any], used: float, demand: float, cap: float | None = None) -> PodUsage:
    return PodUsage(pod_id, pod_from_dict(raw), used, 0.0, cap, 0.0, demand)


def node(batch: str) -> list[PodUsage]:
    probe = (
        PodBuilder("probe").requests(cpu="500m", memory="64Mi").limits(cpu="500m", memory="64Mi").priority(9000).build()
    )
    pods = [usage(0, probe, 100, 100, cap=500)]
    for i in (1, 2):
        raw = PodBuilder(f"batch-{i}")
        if batch == "burstable":
            raw.requests(cpu="500m")
        pods.append(usage(i, raw.build(), 950, 1000))
    return pods


@pytest.mark.parametrize(
    ("batch", "instant"),
    [
        # Each batch pod holds 0.95 of 2 cores; favoured over the probe by 1 / (1 + 20) (the besteffort slice,
        # weight 1, against the probe's 20): 2 x 0.475 x 1/21 = 4.52 %.
        ("besteffort", 100 * 2 * 0.475 / 21),
        # The burstable slice (weight 39) against the probe (20): 2 x 0.475 x 39/59 = 62.80 %.
        ("burstable", 100 * 2 * 0.475 * 39 / 59),
    ],
)
def test_contention_weighs_the_competitors_by_the_kernels_weights(batch, instant):
    model = PressureModel()
    model.step("n", 0.0, 2000, 2000, node(batch))
    _, pods, _ = model.step("n", 10.0, 2000, 2000, node(batch))
    # avg10 after 10 s from 0: instant x (1 - e^-1); avg60: instant x (1 - e^(-1/6)).
    assert pods[0]["cpu_pressure_some_avg10"] == pytest.approx(instant * (1 - math.exp(-1)))
    assert pods[0]["cpu_pressure_some_avg60"] == pytest.approx(instant * (1 - math.exp(-10 / 60)))
    # A batch pod wants 1000 and gets 950: 5 % unmet, plus what the other batch pod and the probe take.
    assert pods[1]["cpu_pressure_some_avg10"] > 5 * (1 - math.exp(-1))


def test_the_contention_factor_scales_and_the_node_pressure_counts_the_excess():
    model = PressureModel(contention=0.5)
    model.step("n", 0.0, 2000, 2000, node("burstable"))
    node_figures, pods, _ = model.step("n", 10.0, 2000, 2000, node("burstable"))
    assert pods[0]["cpu_pressure_some_avg10"] == pytest.approx(0.5 * 100 * 0.95 * 39 / 59 * (1 - math.exp(-1)))
    # Wanted 100 + 1000 + 1000 = 2.1 cores on 2: 0.1 / 2 = 5 % at every instant.
    assert node_figures["cpu_pressure_some_avg10"] == pytest.approx(5 * (1 - math.exp(-1)))


def test_own_limit_age_follows_a_pod_held_back_by_its_cap():
    probe = PodBuilder("probe").requests(cpu="500m").limits(cpu="500m").build()
    model = PressureModel()
    _, _, ages = model.step("n", 0.0, 2000, 600, [usage(0, probe, 500, 800, cap=500)])
    assert ages == {0: {"cpu": 0.0}}  # wants 800 under a 500 cap
    _, _, ages = model.step("n", 4.0, 2000, 300, [usage(0, probe, 300, 300, cap=500)])
    assert ages == {0: {"cpu": 4.0}}  # not held back since: the age grows


def scenario(batch_requests: dict[str, str] | None) -> Scenario:
    batch: dict[str, Any] = {
        "name": "batch",
        "priority": 5000,
        "arrivals": {"count": 2, "end": 0},
        "usage": {"cpu": {"mean": "1"}, "memory": {"mean": "64Mi"}},
    }
    if batch_requests:
        batch["requests"] = batch_requests
    raw = {
        "apiVersion": "koordpy.io/v1alpha1",
        "kind": "Scenario",
        "name": "pressure",
        "duration": "60s",
        "step": "1s",
        "nodePools": [{"name": "n", "count": 1, "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}],
        "workloads": [
            {
                "name": "probe",
                "priority": 9000,
                "labels": {"app": "probe"},
                "arrivals": {"count": 1, "end": 0},
                "requests": {"cpu": "500m", "memory": "64Mi"},
                "limits": {"cpu": "500m", "memory": "64Mi"},
                "usage": {"cpu": {"mean": "100m"}, "memory": {"mean": "32Mi"}},
            },
            batch,
        ],
        "qos": {
            "interval": "1s",
            "policies": [
                {
                    "apiVersion": "ensurance.crane.io/v1alpha1",
                    "kind": "NodeQOSEnsurancePolicy",
                    "metadata": {"name": "protect"},
                    "spec": {
                        "objectiveEnsurances": [
                            {
                                "name": "probe",
                                "avoidanceThreshold": 2,
                                "restoreThreshold": 5,
                                "actionName": "throttle",
                                "metricRule": {
                                    "name": "pod_cpu_pressure_some_avg10",
                                    "value": 20,
                                    "selector": {"matchLabels": {"app": "probe"}},
                                },
                            }
                        ]
                    },
                }
            ],
            "actions": [
                {
                    "metadata": {"name": "throttle"},
                    "spec": {"coolDownSeconds": 3, "throttle": {"cpuThrottle": {"stepCPURatio": 50}}},
                }
            ],
        },
    }
    return validate(Scenario, raw)


def test_simulate_throttles_burstable_batch_and_leaves_besteffort_alone():
    # BestEffort neighbours: the probe's pressure stays near 4.5 %, far under the 20 % line: nothing to do.
    (quiet,) = simulate(scenario(None), 1, [KOORDPY], qos_factory)
    assert quiet.summary["throttleActions"] == 0
    # Burstable neighbours with requests: ~63 % instantaneous, so avg10 crosses 20 % within a few seconds
    # and the agent steps both batch pods down (every 3 s) until the probe's average falls back.
    (busy,) = simulate(scenario({"cpu": "500m", "memory": "64Mi"}), 1, [KOORDPY], qos_factory)
    assert busy.summary["throttleActions"] >= 2
    assert busy.summary["podsThrottled"] == 2


def test_a_recorded_run_logs_each_action_with_its_cap():
    parsed = scenario({"cpu": "500m", "memory": "64Mi"})
    objects = agentqos.load_qos(parsed)
    planner = agentqos.AgentQosPlanner(
        "waterline",
        objects.policies,
        objects.actions,
        agentqos.PLAN_FUNCTIONS["waterline"],
        pressure=agentqos.pressure_model(parsed, objects),
        record=True,
    )
    (run,) = simulate(parsed, 1, [KOORDPY], lambda s, p: planner)
    throttles = [a for a in planner.log if a.kind == "throttle"]
    assert len(throttles) == run.summary["throttleActions"] > 0
    assert all(a.metric == "pod_cpu_pressure_some_avg10" and a.cap is not None for a in throttles)
    # Each step halves the pod's cap (from its use, 1 core at first): 0.5, 0.25, ... never below its request.
    first = [a.cap for a in throttles if a.pod.endswith("batch-0")]
    assert first[0] == pytest.approx(0.5) and all(c >= 0.5 - 1e-9 for c in first)
    # No pressure rule: no model.
    assert agentqos.pressure_model(parsed, agentqos.QosObjects()) is None
