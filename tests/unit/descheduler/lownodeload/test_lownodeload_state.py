"""BalanceState's node order and a pod's phantom (what a round replays of a move, round after round)."""

from __future__ import annotations

from typing import Any

from koordpy.config.errors import validate
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.descheduler.lownodeload.state import BalancePod, BalanceState
from koordpy.model.objects import node_from_dict, pod_from_dict


def node(name: str) -> Any:
    return node_from_dict(
        {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}
    )


def pod(name: str, on: str) -> BalancePod:
    raw = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"nodeName": on, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }
    return BalancePod(pod_from_dict(raw), raw)


def test_rows_are_in_name_order_after_every_node_added_or_removed() -> None:
    state = BalanceState(validate(LowNodeLoadArgs, {}))
    for name in ("n3", "n1"):
        state.upsert_node(node(name))
    assert [state.name(r) for r in state.rows().tolist()] == ["n1", "n3"]
    state.upsert_node(node("n2"))  # a new node after the order was read: the order is read again
    assert [state.name(r) for r in state.rows().tolist()] == ["n1", "n2", "n3"]
    state.remove_node("n1")
    assert [state.name(r) for r in state.rows().tolist()] == ["n2", "n3"]
    state.upsert_node(node("n0"))  # takes n1's freed row, and comes first by name
    assert [state.name(r) for r in state.rows().tolist()] == ["n0", "n2", "n3"]


def test_a_phantom_is_the_pod_placed_on_its_destination_and_kept_for_that_destination() -> None:
    moved = pod("web-1", "n1")
    on_n2 = moved.phantom("n2", "@test")
    assert (on_n2.uid, on_n2.node_name, on_n2.scheduled_time) == ("uid-web-1@test", "n2", None)
    assert (on_n2.namespace, on_n2.name, on_n2.requests) == (moved.info.namespace, moved.info.name, moved.info.requests)
    assert moved.phantom("n2", "@test") is on_n2  # replayed next round: not built again
    on_n3 = moved.phantom("n3", "@test")
    assert on_n3.node_name == "n3" and moved.info.node_name == "n1"
