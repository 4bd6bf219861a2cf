"""kube-scheduler's in-tree filters: verdicts, fixed reasons and the numbers in the detail."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.model.objects import NodeInfo, node_from_dict
from koordpy.model.placement import PodPlacement, Toleration, placement_from_dict
from koordpy.scheduler.framework.fit import (
    RequestsTable,
    filter_node,
    format_amount,
    node_affinity,
    node_name,
    node_unschedulable,
    taint_toleration,
    tolerates,
)
from koordpy.scheduler.framework.status import Code
from koordpy_testkit.builders import NodeBuilder

GI = 1024**3


def _node(name: str = "n1", cpu: str = "16", memory: str = "64Gi", pods: str = "110", **spec: Any) -> NodeInfo:
    raw = NodeBuilder(name).allocatable(cpu=cpu, memory=memory, pods=pods).label("zone", "a").build()
    raw["metadata"]["labels"]["gpus"] = "4"
    raw["spec"] = spec
    return node_from_dict(raw)


def _placement(**spec: Any) -> PodPlacement:
    return placement_from_dict({"spec": spec})


# ---- NodeResourcesFit ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "pod", "reason", "detail"),
    [
        # 15.92 cores allocatable, 4.1 requested: free 11.82 < 15 requested
        ({"cpu": 4100}, {"cpu": 15000}, "Insufficient cpu", "Insufficient cpu: requested 15, free 11.82 of 15.92"),
        # free 11.82 ≥ 11.82: fits exactly (the rule is "request > free")
        ({"cpu": 4100}, {"cpu": 11820}, "", ""),
        # memory 64Gi − 63Gi = 1Gi free < 2Gi; cpu fits; both resources listed when both short
        ({"memory": 63 * GI}, {"memory": 2 * GI}, "Insufficient memory", "requested 2Gi, free 1Gi of 64Gi"),
        (
            {"cpu": 15000, "memory": 63 * GI},
            {"cpu": 1000, "memory": 2 * GI},
            "Insufficient cpu, Insufficient memory",
            "Insufficient cpu: requested 1, free 0.92 of 15.92; Insufficient memory",
        ),
        # an extended resource the node does not list: allocatable 0
        ({}, {"nvidia.com/gpu": 1}, "Insufficient nvidia.com/gpu", "requested 1, free 0 of 0"),
    ],
)
def test_requests_fit(requested: dict[str, int], pod: dict[str, int], reason: str, detail: str) -> None:
    node = _node(cpu="15920m")
    table = RequestsTable.of_nodes([node], pod)
    table.bind(0, table.vector(requested | {}))
    vec = table.vector(pod)
    status = table.status(0, vec)
    assert status.reason == reason
    assert detail in status.detail
    assert bool(table.feasible(vec)[0]) is (reason == "")
    if reason:
        assert status.code is Code.UNSCHEDULABLE and status.plugin == "NodeResourcesFit"


def test_too_many_pods_counts_the_slot() -> None:
    # 3 pods allowed, 3 bound: 3 + 1 > 3
    table = RequestsTable.of_nodes([_node(pods="3")])
    empty = table.vector({})
    for _ in range(3):
        table.bind(0, empty)
    status = table.status(0, empty)
    assert (status.reason, status.detail) == ("Too many pods", "Too many pods: 3 of 3 pods in use")
    table.unbind(0, empty)
    assert table.status(0, empty).is_success


def test_missing_pod_capacity_is_zero_for_kube_scheduler_and_settable() -> None:
    raw = NodeBuilder("bare").allocatable(cpu="4").build()
    node = node_from_dict(raw)
    assert RequestsTable.of_nodes([node]).status(0, np.array([1, 0], np.int64)).reason == "Too many pods"
    assert RequestsTable.of_nodes([node], missing_pods=110).feasible(np.array([1, 0], np.int64)).tolist() == [True]


def test_feasible_over_rows_agrees_with_per_row_status() -> None:
    nodes = [_node("a", cpu="4"), _node("b", cpu="8"), _node("c", cpu="2")]
    table = RequestsTable.of_nodes(nodes)
    table.bind(1, table.vector({"cpu": 6000}))
    vec = table.vector({"cpu": 3000})
    # free cpu: a 4, b 2, c 2 → only a fits 3
    assert table.feasible(vec).tolist() == [True, False, False]
    assert [table.status(i, vec).is_success for i in range(3)] == [True, False, False]
    assert table.status(1, vec).detail == "Insufficient cpu: requested 3, free 2 of 8"


def test_unknown_resource_without_column_raises() -> None:
    with pytest.raises(KeyError, match="example.com/foo"):
        RequestsTable.of_nodes([_node()]).vector({"example.com/foo": 1})


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 15920, "15.92"),
        ("cpu", 15000, "15"),
        ("cpu", 250, "0.25"),
        ("memory", 3 * GI // 2, "1.5Gi"),
        ("pods", 7, "7"),
        ("hugepages-2Mi", GI, "1Gi"),
    ],
)
def test_format_amount(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text


# ---- NodeUnschedulable, NodeName -------------------------------------------------------------


def test_cordoned_node_unless_tolerated() -> None:
    cordoned = _node(unschedulable=True)
    status = node_unschedulable(PodPlacement(), cordoned)
    assert (status.code, status.reason) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were unschedulable")
    tolerant = _placement(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert node_unschedulable(tolerant, cordoned).is_success
    assert node_unschedulable(PodPlacement(), _node()).is_success


def test_node_name() -> None:
    assert node_name(_placement(nodeName="n1"), _node("n1")).is_success
    status = node_name(_placement(nodeName="n2"), _node("n1"))
    assert status.reason == "node(s) didn't match the requested node name" and status.unresolvable


# ---- TaintToleration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), ("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "w", "NoSchedule"), ("k", "v", "NoSchedule"), False),  # value differs
        (Toleration("k", "Exists", "", ""), ("k", "v", "NoExecute"), True),  # empty effect: any effect
        (Toleration("k", "Exists", "", "NoSchedule"), ("k", "v", "NoExecute"), False),
        (Toleration("", "Exists", "", ""), ("any", "thing", "NoSchedule"), True),  # empty key + Exists: all
        (Toleration("j", "Exists", "", ""), ("k", "", "NoSchedule"), False),
        (Toleration("k", "Bogus", "v", ""), ("k", "v", "NoSchedule"), False),
    ],
)
def test_tolerates(toleration: Toleration, taint: tuple[str, str, str], expected: bool) -> None:
    assert tolerates(toleration, *taint) is expected


def test_taints_only_noschedule_and_noexecute_filter() -> None:
    node = _node(
        taints=[
            {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        ]
    )
    status = taint_toleration(PodPlacement(), node)
    assert status.reason == "node(s) had untolerated taint {dedicated: gpu}"
    assert status.detail.endswith("effect NoSchedule, no matching toleration") and status.unresolvable
    tolerant = _placement(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}])
    assert taint_toleration(tolerant, node).is_success


# ---- NodeAffinity ----------------------------------------------------------------------------


def _required(*terms: dict[str, Any]) -> PodPlacement:
    return _placement(
        affinity={
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    )


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("placement", "matches"),
    [
        (PodPlacement(), True),
        (_placement(nodeSelector={"zone": "a"}), True),
        (_placement(nodeSelector={"zone": "b"}), False),
        (_placement(nodeSelector={"disk": "ssd"}), False),  # label absent
        (_required(_expr("zone", "In", "a", "b")), True),
        (_required(_expr("zone", "NotIn", "a")), False),
        (_required(_expr("disk", "NotIn", "ssd")), True),  # absent label passes NotIn
        (_required(_expr("zone", "Exists")), True),
        (_required(_expr("zone", "DoesNotExist")), False),
        (_required(_expr("gpus", "Gt", "3")), True),  # 4 > 3
        (_required(_expr("gpus", "Gt", "4")), False),  # 4 > 4 is false
        (_required(_expr("gpus", "Lt", "5")), True),
        (_required(_expr("zone", "Lt", "5")), False),  # "a" is no integer
        (_required(_expr("zone", "In", "b"), _expr("gpus", "Exists")), True),  # terms are ORed
        (_required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}), True),
        (_required({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}), False),
        (_required({}), False),  # an empty term matches nothing
        (_required(), False),  # no terms at all: nothing
        # nodeSelector and affinity both apply
        (
            _placement(
                nodeSelector={"zone": "a"},
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [_expr("zone", "In", "b")]
                        }
                    }
                },
            ),
            False,
        ),
    ],
)
def test_node_affinity(placement: PodPlacement, matches: bool) -> None:
    status = node_affinity(placement, _node())
    assert status.is_success is matches
    if not matches:
        assert status.reason == "node(s) didn't match Pod's node affinity/selector"
        assert status.plugin == "NodeAffinity" and status.unresolvable


def test_affinity_detail_names_the_label() -> None:
    status = node_affinity(_placement(nodeSelector={"zone": "b"}), _node())
    assert status.detail.endswith("nodeSelector zone=b (node: zone=a)")
    status = node_affinity(_required(_expr("zone", "In", "b", "c")), _node())
    assert "term[0] zone In [b,c] (node: zone=a)" in status.detail


def test_bad_operator_names_the_field() -> None:
    from koordpy.model.objects import ObjectError

    with pytest.raises(ObjectError, match=r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.operator"):
        _required(_expr("zone", "Like", "a"))


# ---- order -----------------------------------------------------------------------------------


def test_first_failure_in_kube_scheduler_order() -> None:
    # cordoned, tainted and full: NodeUnschedulable is reported (it runs first)
    node = _node(cpu="1", unschedulable=True, taints=[{"key": "k", "effect": "NoSchedule"}])
    table = RequestsTable.of_nodes([node])
    vec = table.vector({"cpu": 2000})
    assert filter_node(PodPlacement(), node, table, 0, vec).plugin == "NodeUnschedulable"
    tolerant = _placement(tolerations=[{"operator": "Exists"}])  # tolerates every taint, cordon included
    status = filter_node(tolerant, node, table, 0, vec)
    assert (status.plugin, status.detail) == ("NodeResourcesFit", "Insufficient cpu: requested 2, free 1 of 1")
    assert filter_node(tolerant, node, table, 0, table.vector({"cpu": 500})).is_success


def test_resources_fit_for_one_node_from_mappings() -> None:
    from koordpy.scheduler.framework.fit import resources_fit

    alloc = {"cpu": 15920, "memory": 64 * GI, "pods": 110}
    # 15.92 − 4.1 = 11.82 free < 15
    status = resources_fit(alloc, {"cpu": 4100}, 1, {"cpu": 15000})
    assert status.detail == "Insufficient cpu: requested 15, free 11.82 of 15.92"
    assert resources_fit(alloc, {"cpu": 4100}, 1, {"cpu": 11820}).is_success
    # 110 pods already: the slot is gone even for an empty pod
    assert resources_fit(alloc, {}, 110, {}).reason == "Too many pods"
    # an extended resource requested so far that the incoming pod does not ask for is irrelevant
    assert resources_fit(alloc, {"example.com/fpga": 1}, 1, {"cpu": 1000}).is_success
