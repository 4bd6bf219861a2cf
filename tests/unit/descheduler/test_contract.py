"""The threshold contract: which inequality between the three components' thresholds rules out which loop."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.errors import validate
from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.crds.ensurance import AvoidanceAction, NodeQOSEnsurancePolicy
from koordpy.descheduler.contract import (
    LOOP_DESCHEDULER_AGENT,
    LOOP_SCHEDULER_AGENT,
    LOOP_SCHEDULER_DESCHEDULER,
    Finding,
    Policy,
    check_thresholds,
)
from koordpy.model.objects import node_from_dict
from koordpy_testkit.builders import NodeBuilder


def scheduler(**fields: Any) -> LoadAwareSchedulingArgs:
    return validate(LoadAwareSchedulingArgs, fields)


def descheduler(**fields: Any) -> LowNodeLoadArgs:
    return validate(LowNodeLoadArgs, fields)


def policy(
    metric: str, value: object, *, action: str = "evict", selector: dict[str, Any] | None = None, **rule: Any
) -> Policy:
    spec: dict[str, Any] = {
        "objectiveEnsurances": [
            {"name": "r", "metricRule": {"name": metric, "value": value}, "actionName": action, **rule}
        ]
    }
    if selector is not None:
        spec["selector"] = selector
    return Policy("p", NodeQOSEnsurancePolicy.model_validate({"metadata": {"name": "p"}, "spec": spec}))


EVICT = {"evict": AvoidanceAction.model_validate({"metadata": {"name": "evict"}, "spec": {"eviction": {}}})}
THROTTLE = {
    "evict": AvoidanceAction.model_validate(
        {"metadata": {"name": "evict"}, "spec": {"throttle": {"cpuThrottle": {"minCPURatio": 10, "stepCPURatio": 10}}}}
    )
}
WATERLINE = "p.spec.objectiveEnsurances[0].metricRule.value"


def contradictions(findings: list[Finding]) -> set[tuple[str, tuple[str, ...]]]:
    return {(f.loop, f.paths) for f in findings if f.severity == "contradiction"}


@pytest.mark.parametrize(
    ("extender", "high", "expected"),
    [
        # T 65 <= H 75 on cpu, T 95 > H 80 on memory: the memory band (80 %, 95 %] is placed and drained.
        pytest.param({}, {"cpu": 75, "memory": 80}, {"memory"}, id="defaults against the shipped example"),
        pytest.param({}, {"cpu": 65, "memory": 95}, set(), id="equal: no band"),
        pytest.param({"usageThresholds": {"cpu": 80}}, {"cpu": 75}, {"cpu"}, id="T 80 > H 75"),
        # usageThresholds given without memory: 0 there, the extender does not limit memory; H 90 < 100.
        pytest.param({"usageThresholds": {"cpu": 60}}, {"cpu": 75, "memory": 90}, {"memory"}, id="T 0 means no limit"),
        pytest.param({"usageThresholds": {"cpu": 60}}, {"cpu": 75, "memory": 100}, set(), id="T 0 against H 100"),
    ],
)
def test_scheduler_against_descheduler(extender: dict[str, Any], high: dict[str, float], expected: set[str]) -> None:
    found = contradictions(
        check_thresholds(scheduler=scheduler(**extender), descheduler=descheduler(highThresholds=high))
    )
    assert found == {
        (LOOP_SCHEDULER_DESCHEDULER, (f"loadAware.usageThresholds.{r}", f"lowNodeLoad.highThresholds.{r}"))
        for r in expected
    }


def test_aggregated_and_prod_thresholds() -> None:
    # With aggregated thresholds configured the extender does not check usageThresholds for non-Prod pods: those
    # are compared. Prod: prodUsageThresholds against prodHighThresholds.
    args = scheduler(
        usageThresholds={"cpu": 90, "memory": 90},
        aggregated={"usageThresholds": {"cpu": 70, "memory": 70}, "usageAggregationType": "p95"},
        prodUsageThresholds={"cpu": 60},
    )
    pools = descheduler(highThresholds={"cpu": 75, "memory": 75}, prodHighThresholds={"cpu": 50})
    assert contradictions(check_thresholds(scheduler=args, descheduler=pools)) == {
        (LOOP_SCHEDULER_DESCHEDULER, ("loadAware.prodUsageThresholds.cpu", "lowNodeLoad.prodHighThresholds.cpu"))
    }


def test_pool_paths_and_deviation() -> None:
    # A pool's own highThresholds is named by its path; an inherited one by the top level's; a pool with deviation
    # thresholds cannot be compared (a warning).
    pools = descheduler(
        highThresholds={"cpu": 60},
        nodePools=[
            {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "highThresholds": {"cpu": 50}},
            {"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}},
            {"name": "c", "nodeSelector": {"matchLabels": {"pool": "c"}}, "useDeviationThresholds": True},
        ],
    )
    findings = check_thresholds(scheduler=scheduler(usageThresholds={"cpu": 65, "memory": 100}), descheduler=pools)
    assert contradictions(findings) == {
        (LOOP_SCHEDULER_DESCHEDULER, ("loadAware.usageThresholds.cpu", "lowNodeLoad.highThresholds.cpu")),
        (LOOP_SCHEDULER_DESCHEDULER, ("loadAware.usageThresholds.cpu", "lowNodeLoad.nodePools[0].highThresholds.cpu")),
    }
    assert [f.paths for f in findings if f.severity == "warning"] == [
        ("lowNodeLoad.nodePools[2].useDeviationThresholds",)
    ]


@pytest.mark.parametrize(
    ("metric", "value", "actions", "expected"),
    [
        # H 80 > W 70 and T 95 > W 70 on memory: both loops.
        pytest.param(
            "memory_total_utilization",
            70,
            EVICT,
            {
                (LOOP_DESCHEDULER_AGENT, ("lowNodeLoad.highThresholds.memory", WATERLINE)),
                (LOOP_SCHEDULER_AGENT, ("loadAware.usageThresholds.memory", WATERLINE)),
            },
            id="memory waterline below both",
        ),
        # W 96: above both.
        pytest.param("memory_total_utilization", 96, EVICT, set(), id="memory waterline above both"),
        # cpu W 70: above T 65, below H 75: only the descheduler's moves land where the agent evicts.
        pytest.param(
            "cpu_total_utilization",
            "70",
            EVICT,
            {(LOOP_DESCHEDULER_AGENT, ("lowNodeLoad.highThresholds.cpu", WATERLINE))},
            id="cpu waterline between",
        ),
        pytest.param("memory_total_utilization", 70, THROTTLE, set(), id="a throttling action does not evict"),
        pytest.param("memory_total_utilization", 70, {}, set(), id="an action that does not exist never acts"),
        pytest.param(
            "memory_total_utilization",
            70,
            None,
            {
                (LOOP_DESCHEDULER_AGENT, ("lowNodeLoad.highThresholds.memory", WATERLINE)),
                (LOOP_SCHEDULER_AGENT, ("loadAware.usageThresholds.memory", WATERLINE)),
            },
            id="actions unknown: assumed to evict",
        ),
    ],
)
def test_against_the_agent(
    metric: str, value: object, actions: dict[str, AvoidanceAction] | None, expected: set[tuple[str, tuple[str, ...]]]
) -> None:
    findings = check_thresholds(
        scheduler=scheduler(),
        descheduler=descheduler(highThresholds={"cpu": 75, "memory": 95}),
        policies=[policy(metric, value)],
        actions=actions,
    )
    assert contradictions(findings) == expected


def test_preview_rules_and_amounts() -> None:
    preview = policy("memory_total_utilization", 50, strategy="Preview")
    amount = policy("memory_total_usage", "10Gi")
    findings = check_thresholds(
        descheduler=descheduler(highThresholds={"memory": 80}), policies=[preview, amount], actions=EVICT
    )
    assert contradictions(findings) == set()
    assert [f.severity for f in findings] == ["warning"]  # the amount cannot be compared without nodes


def node(name: str, cpu_alloc: str, cpu_cap: str, **labels: str) -> Any:
    raw = NodeBuilder(name).allocatable(cpu=cpu_alloc, memory="64Gi").build()
    raw["status"]["capacity"]["cpu"] = cpu_cap
    raw["metadata"]["labels"].update(labels)
    return node_from_dict(raw)


def test_node_by_node() -> None:
    # alloc 30 cores, capacity 32: H 80 % of 30 = 24 cores; W 75 % of 32 = 24 cores: not above, no loop (without
    # nodes, 80 > 75 is one). H 81 %: 24.3 > 24 cores on node a.
    cpu = policy("cpu_total_utilization", 75)
    nodes = [node("a", "30", "32")]
    assert (
        contradictions(
            check_thresholds(
                descheduler=descheduler(highThresholds={"cpu": 80}), policies=[cpu], actions=EVICT, nodes=nodes
            )
        )
        == set()
    )
    assert contradictions(
        check_thresholds(descheduler=descheduler(highThresholds={"cpu": 80}), policies=[cpu], actions=EVICT)
    ) == {(LOOP_DESCHEDULER_AGENT, ("lowNodeLoad.highThresholds.cpu", WATERLINE))}
    found = check_thresholds(
        descheduler=descheduler(highThresholds={"cpu": 81}), policies=[cpu], actions=EVICT, nodes=nodes
    )
    assert [f.message.split(",")[0] for f in found] == ["on node a"]


def test_node_by_node_reads_selectors_and_the_nodes_thresholds() -> None:
    # The policy selects gpu nodes only; the pool's nodes have none: no finding. The extender's thresholds come
    # from the node's annotation where it has one (memory 60 on node b, under the waterline 70).
    nodes = [node("a", "32", "32", pool="general"), node("b", "32", "32", gpu="yes")]
    gpu = policy("memory_total_utilization", 70, selector={"matchLabels": {"gpu": "yes"}})
    pools = descheduler(highThresholds={"memory": 80}, nodeSelector={"matchLabels": {"pool": "general"}})
    assert contradictions(check_thresholds(descheduler=pools, policies=[gpu], actions=EVICT, nodes=nodes)) == set()
    raw = (
        NodeBuilder("b")
        .allocatable(cpu="32", memory="64Gi")
        .label("gpu", "yes")
        .annotation("scheduling.koordinator.sh/usage-thresholds", '{"usageThresholds": {"cpu": 65, "memory": 60}}')
    )
    findings = check_thresholds(
        scheduler=scheduler(), policies=[gpu], actions=EVICT, nodes=[node_from_dict(raw.build())]
    )
    assert contradictions(findings) == set()
    findings = check_thresholds(scheduler=scheduler(), policies=[gpu], actions=EVICT, nodes=[nodes[1]])
    assert contradictions(findings) == {(LOOP_SCHEDULER_AGENT, ("loadAware.usageThresholds.memory", WATERLINE))}


def test_the_estimator_note() -> None:
    # T 65 % with an 85 % cpu factor: a node filled by estimates can measure 65 / 0.85 = 76.5 % > H 75: a note.
    findings = check_thresholds(
        scheduler=scheduler(), descheduler=descheduler(highThresholds={"cpu": 75, "memory": 95})
    )
    # memory: 95 / 0.7 = 135.7 % > 95 %.
    notes = {f.paths[-1]: f.message for f in findings if f.severity == "note"}
    assert set(notes) == {"loadAware.estimatedScalingFactors.cpu", "loadAware.estimatedScalingFactors.memory"}
    assert "up to 76.5 %" in notes["loadAware.estimatedScalingFactors.cpu"]
    assert "up to 135.7 %" in notes["loadAware.estimatedScalingFactors.memory"]
    assert not contradictions(findings)
