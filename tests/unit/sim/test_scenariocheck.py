"""Scenario rules that do nothing come back as warnings naming the field; a sensible scenario gets none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.sim.run import DEFAULT_SCENARIO
from koordpy.sim.scenariocheck import scenario_warnings

POLICY: dict[str, Any] = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "NodeQOSEnsurancePolicy",
    "metadata": {"name": "cpu"},
    "spec": {
        "objectiveEnsurances": [
            {"name": "t", "actionName": "throttle", "metricRule": {"name": "cpu_total_utilization", "value": 70}}
        ]
    },
}
THROTTLE: dict[str, Any] = {
    "apiVersion": "ensurance.crane.io/v1alpha1",
    "kind": "AvoidanceAction",
    "metadata": {"name": "throttle"},
    "spec": {"throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 20}}},
}


def _warnings(raw: dict[str, Any]) -> list[str]:
    scenario = validate(Scenario, raw)
    return scenario_warnings(scenario)


def _with_qos(raw: dict[str, Any], policy: dict[str, Any] | None = None, *actions: dict[str, Any]) -> None:
    raw["qos"] = {"policies": [policy or POLICY], "actions": list(actions) or [THROTTLE]}


def test_the_small_scenario_and_the_default_have_no_warning(small_raw: dict[str, Any]) -> None:
    small_raw["workloads"][0]["usage"]["peakHour"] = 12.5  # inside 12:00-13:00
    _with_qos(small_raw)
    assert _warnings(small_raw) == []
    default = validate(Scenario, yaml.safe_load(DEFAULT_SCENARIO.read_text(encoding="utf-8")))
    assert scenario_warnings(default) == []


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = raw
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[last] = value

    return apply


def _big_requests(raw: dict[str, Any]) -> None:
    raw["workloads"][0]["requests"]["cpu"] = "17"  # nodes have 16
    raw["workloads"][0]["limits"]["cpu"] = "17"


def _add_pool(raw: dict[str, Any]) -> None:
    raw["nodePools"].append({"name": "tiny", "count": 2, "allocatable": {"cpu": "500m", "memory": "1Gi"}})


def _gpu_requests(raw: dict[str, Any]) -> None:
    raw["workloads"][1]["requests"]["nvidia.com/gpu"] = "1"
    raw["workloads"][1]["limits"]["nvidia.com/gpu"] = "1"


def _policy_for(selector: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def apply(raw: dict[str, Any]) -> None:
        policy = {**POLICY, "spec": {**POLICY["spec"], "selector": selector}}
        _with_qos(raw, policy)

    return apply


def _unknown_metric(raw: dict[str, Any]) -> None:
    rule = {"name": "t", "actionName": "throttle", "metricRule": {"name": "network_drop_in", "value": 70}}
    _with_qos(raw, {**POLICY, "spec": {"objectiveEnsurances": [rule]}})


def _missing_action(raw: dict[str, Any]) -> None:
    rule = {"name": "t", "actionName": "nap", "metricRule": {"name": "cpu_total_utilization", "value": 70}}
    raw["qos"] = {"policies": [{**POLICY, "spec": {"objectiveEnsurances": [rule]}}], "actions": []}


def _idle_action(raw: dict[str, Any]) -> None:
    _with_qos(raw, POLICY, {**THROTTLE, "spec": {"coolDownSeconds": 30}})


def _unused_action(raw: dict[str, Any]) -> None:
    evict = {**THROTTLE, "metadata": {"name": "evict"}, "spec": {"eviction": {}}}
    _with_qos(raw, POLICY, THROTTLE, evict)


def _qos_off(raw: dict[str, Any]) -> None:
    _with_qos(raw)
    raw["qos"]["enabled"] = False


# The small scenario: one pool "n" of 6 × 16 CPU / 64 Gi, 12:00-13:00 UTC; workloads[0] "svc" (diurnal, peak
# set to 12.5 below), workloads[1] "job" (bursty every 10 m for 3 m, lifetimes 5-20 m).
CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("requests too big", _big_requests, "workloads[0] (svc): its requests fit no node"),
    ("resource nobody has", _gpu_requests, "workloads[1] (job): its requests fit no node"),
    ("pool nobody fits", _add_pool, "nodePools[1] (tiny): no workload's requests fit its nodes"),
    ("no arrivals", _set("workloads.1.arrivals.count", 0), "workloads[1] (job).arrivals.count: 0"),
    ("arrivals at the end", _set("workloads.1.arrivals", {"count": 3, "start": "1h"}), "window starts at the end"),
    ("ignored field", _set("workloads.1.usage.peakHour", 3), "workloads[1] (job).usage: peakHour ignored by"),
    ("flat diurnal", _set("workloads.0.usage.amplitude", 0), "workloads[0] (svc).usage.amplitude: 0"),
    ("peak outside", _set("workloads.0.usage.peakHour", 18), "18:00 UTC is outside the simulated hours (12:00-13:00"),
    ("burst factor 1", _set("workloads.1.usage.burstFactor", 1), "burstFactor 1 or burstLength 0"),
    ("bursts too rare", _set("workloads.1.usage.burstEvery", "2h"), "burstEvery: 7200s is not shorter than the run"),
    ("lifetime too long", _set("workloads.1.lifetime", {"min": "2h", "max": "3h"}), "lifetime.min: not shorter"),
    (
        "selector no node",
        _policy_for({"matchLabels": {"pool": "gpu"}}),
        "NodeQOSEnsurancePolicy cpu: spec.selector matches no node",
    ),
    ("unknown metric", _unknown_metric, "metric 'network_drop_in' is a Crane metric koordpy does not act on"),
    ("missing action", _missing_action, "no AvoidanceAction named 'nap': the rule does nothing"),
    ("action does nothing", _idle_action, "AvoidanceAction 'throttle' neither evicts nor throttles CPU"),
    ("action nobody names", _unused_action, "qos.actions (evict): no rule names this AvoidanceAction"),
    ("qos disabled", _qos_off, "qos.enabled: false, so qos.policies, qos.actions and qos.podQOS are not run"),
]


@pytest.mark.parametrize(("mutate", "needle"), [(m, n) for _, m, n in CASES], ids=[c[0] for c in CASES])
def test_each_do_nothing_rule_gets_one_warning(
    small_raw: dict[str, Any], mutate: Callable[[dict[str, Any]], None], needle: str
) -> None:
    small_raw["workloads"][0]["usage"]["peakHour"] = 12.5
    mutate(small_raw)
    warnings = _warnings(small_raw)
    assert [w for w in warnings if needle in w] != [], warnings
    assert len(warnings) == 1, warnings


def test_a_selector_that_matches_a_pool_label_is_fine(small_raw: dict[str, Any]) -> None:
    small_raw["workloads"][0]["usage"]["peakHour"] = 12.5
    small_raw["nodePools"][0]["labels"] = {"pool": "gpu"}
    _policy_for({"matchLabels": {"pool": "gpu"}})(small_raw)
    assert _warnings(small_raw) == []
