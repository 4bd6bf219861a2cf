"""Builders for the waterline policy's inputs (tests, the simulator, docs examples).

Example::

    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 4000, "throttle"))
    act = throttle_action("throttle", min_ratio=10, step=50)
    pods = [pod_sample(PodBuilder("a").build(), cpu=2.0, memory=1 << 30)]
    plan([pol], [act], node_sample(cpu=5.0), pods, AgentState(), now=0.0)
"""

from __future__ import annotations

from typing import Any

from koordpy.agent.policy.types import NodeSample, PodSample
from koordpy.crds.ensurance import AvoidanceAction, NodeQOSEnsurancePolicy
from koordpy.model.objects import pod_from_dict

__all__ = ["evict_action", "node_sample", "pod_sample", "qos_policy", "rule", "throttle_action"]


def rule(
    name: str,
    metric: str,
    value: int | str,
    action: str,
    *,
    avoid: int = 1,
    restore: int = 1,
    strategy: str = "None",
    selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    metric_rule: dict[str, Any] = {"name": metric, "value": value}
    if selector is not None:
        metric_rule["selector"] = selector
    return {
        "name": name,
        "metricRule": metric_rule,
        "avoidanceThreshold": avoid,
        "restoreThreshold": restore,
        "actionName": action,
        "strategy": strategy,
    }


def qos_policy(name: str, *rules: dict[str, Any], selector: dict[str, Any] | None = None) -> NodeQOSEnsurancePolicy:
    spec: dict[str, Any] = {"objectiveEnsurances": list(rules)}
    if selector is not None:
        spec["selector"] = selector
    return NodeQOSEnsurancePolicy.model_validate(
        {
            "apiVersion": "ensurance.crane.io/v1alpha1",
            "kind": "NodeQOSEnsurancePolicy",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def throttle_action(name: str, *, min_ratio: int = 0, step: int = 50, cool_down: int = 300) -> AvoidanceAction:
    return AvoidanceAction.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "coolDownSeconds": cool_down,
                "throttle": {"cpuThrottle": {"minCPURatio": min_ratio, "stepCPURatio": step}},
            },
        }
    )


def evict_action(name: str, *, grace: int | None = None, cool_down: int = 300) -> AvoidanceAction:
    eviction: dict[str, Any] = {} if grace is None else {"terminationGracePeriodSeconds": grace}
    return AvoidanceAction.model_validate(
        {"metadata": {"name": name}, "spec": {"coolDownSeconds": cool_down, "eviction": eviction}}
    )


def node_sample(
    *,
    cpu: float | None = None,
    cores: float | None = 8.0,
    memory: int | None = None,
    memory_capacity: int | None = 32 << 30,
    time: float = 0.0,
    name: str = "node-1",
    labels: dict[str, str] | None = None,
    pressure: dict[str, float] | None = None,
) -> NodeSample:
    return NodeSample(name, time, cpu, cores, memory, memory_capacity, labels or {}, pressure or {})


def pod_sample(
    raw: dict[str, Any],
    *,
    cpu: float | None,
    memory: int | None = 0,
    cpu_cap: float | None = None,
    pressure: dict[str, float] | None = None,
    own_limit_age: dict[str, float] | None = None,
) -> PodSample:
    return PodSample(pod_from_dict(raw), cpu, memory, cpu_cap, pressure or {}, own_limit_age or {})
