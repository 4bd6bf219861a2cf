"""How ``pytest -n`` shares the tests: each shared tier one unit, every other module one unit, the
shared tiers first (``koordpy_testkit.workers``)."""

from __future__ import annotations

import types

import pytest

from koordpy_testkit.workers import TierScheduling, shared_tiers_first, work_unit


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        ("tests/cluster/test_cluster_rbac.py::test_no_denial", "tests/cluster"),
        ("tests/cluster/test_cluster_gangs.py::TestX::test_y[a-b]", "tests/cluster"),
        ("tests/guest/test_guest_usage.py::test_usage", "tests/guest"),
        ("tests/system/test_setup_platforms.py::test_demo", "tests/system"),
        ("tests/unit/test_lock.py::test_lock_agrees_with_pyproject", "tests/unit/test_lock.py"),
        ("tests/adapters/cli/test_hostile_inputs.py::test_x[cluster/a]", "tests/adapters/cli/test_hostile_inputs.py"),
        ("tests/node/test_node_cgroup_v1.py::test_write", "tests/node/test_node_cgroup_v1.py"),
    ],
)
def test_a_shared_tier_is_one_unit_any_other_module_its_own(nodeid: str, unit: str) -> None:
    assert work_unit(nodeid) == unit


def test_the_shared_tiers_come_first_each_in_its_own_order() -> None:
    nodeids = [
        "tests/adapters/a.py::t1",
        "tests/cluster/test_b.py::t1",
        "tests/cluster/test_rbac.py::t9",
        "tests/guest/g.py::t1",
        "tests/system/s.py::t1",
        "tests/unit/u.py::t1",
        "tests/adapters/a.py::t2",
    ]
    ordered = [nodeids[i] for i in shared_tiers_first(nodeids)]
    assert ordered == [
        "tests/cluster/test_b.py::t1",
        "tests/cluster/test_rbac.py::t9",  # the tier's own order kept: its whole-session check stays last
        "tests/guest/g.py::t1",
        "tests/system/s.py::t1",
        "tests/adapters/a.py::t1",  # the others in collection order (a stable sort)
        "tests/unit/u.py::t1",
        "tests/adapters/a.py::t2",
    ]


def test_the_scheduler_splits_by_unit_and_keeps_collection_order() -> None:
    option = types.SimpleNamespace(loadscopereorder=True, maxschedchunk=None)
    config = types.SimpleNamespace(option=option, getvalue={"tx": ["2*popen"]}.get)  # pytest -n 2
    scheduling = TierScheduling(config)
    assert option.loadscopereorder is False  # xdist would otherwise put the largest unit first
    assert scheduling._split_scope("tests/cluster/test_b.py::t1") == "tests/cluster"
    assert scheduling._split_scope("tests/unit/u.py::t1") == "tests/unit/u.py"
