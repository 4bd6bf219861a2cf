"""The pod conversion's shortcuts (the unchecked memo key, owners read in one pass, positional fields)
give what the checked path gives, and never hand one pod's memoised resources to an unusual shape."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from test_objects_fast_paths import SHAPES  # same directory (pytest prepend import mode)

from koordpy.model import objects
from koordpy.model.objects import ControllerRef, ObjectError, pod_from_dict
from koordpy.model.priority import KubeQoS, PriorityClass
from koordpy_testkit import PodBuilder


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize("spec", SHAPES)
def test_the_lookup_key_is_the_checked_shape(spec: dict[str, Any]) -> None:
    assert objects._resources_key(spec) == objects._resources_shape(spec)
    assert objects._resources_key(spec) is not None


@pytest.mark.parametrize(
    ("unusual", "error"),
    [
        # a number where a string was memoised: 1 == True, but neither equals "1"
        ({"cpu": 1}, None),
        ({"cpu": True}, r"requests\.cpu"),
        ({"cpu": ["1"]}, r"requests\.cpu"),  # unhashable: the lookup raises TypeError, the checked path names it
        ({"cpu": {"value": "1"}}, r"requests\.cpu"),
    ],
)
def test_a_key_with_anything_but_strings_never_finds_a_memoised_result(unusual: Any, error: str | None) -> None:
    objects._POD_RESOURCES.clear()
    memoised = pod_from_dict(_pod({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}))
    assert memoised.requests == {"cpu": 1000} and len(objects._POD_RESOURCES) == 1
    spec = {"containers": [{"resources": {"requests": unusual}}]}
    if error is None:
        assert pod_from_dict(_pod(spec)).requests == {"cpu": 1000}  # the checked path reads the number 1
        assert objects._resources_shape(spec) is None
    else:
        with pytest.raises(ObjectError, match=error):
            pod_from_dict(_pod(spec))
    assert len(objects._POD_RESOURCES) == 1  # nothing memoised for the unusual shape


def test_a_memo_hit_gives_what_a_cold_conversion_gives_for_every_field() -> None:
    raw = (
        PodBuilder("web-0", "shop")
        .requests(cpu="1500m", memory="3Gi")
        .limits(cpu="3", memory="4Gi")
        .label("app", "web")
        .annotation("a", "b")
        .owner("ReplicaSet", "web-7c9d")
        .node("n1")
        .priority(9000)
        .build()
    )
    raw["metadata"]["creationTimestamp"] = "2026-11-21T09:59:00Z"
    raw["spec"]["terminationGracePeriodSeconds"] = 45
    raw["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-21T10:00:00Z"},
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-21T10:00:05Z"},
        ],
    }
    objects._POD_RESOURCES.clear()
    cold = pod_from_dict(copy.deepcopy(raw))
    warm = pod_from_dict(copy.deepcopy(raw))
    assert warm == cold
    # each field where it belongs (the constructor call is positional)
    assert (cold.uid, cold.namespace, cold.name, cold.node_name) == (raw["metadata"]["uid"], "shop", "web-0", "n1")
    assert (cold.scheduler_name, cold.phase, cold.priority) == ("koordpy-scheduler", "Running", 9000)
    assert cold.labels == {"app": "web"} and cold.annotations == {"a": "b"}
    assert cold.requests == {"cpu": 1500, "memory": 3 * 2**30} and cold.limits == {"cpu": 3000, "memory": 4 * 2**30}
    assert cold.qos is KubeQoS.BURSTABLE and cold.priority_class is PriorityClass.PROD
    assert cold.owner_kinds == ("ReplicaSet",)
    # 2026-11-21T10:00:00Z is 1795255200; creation one minute before, initialised 5 s after
    assert (cold.creation_time, cold.deletion_time) == (1795255200.0 - 60, None)
    assert (cold.scheduled_time, cold.initialized_time) == (1795255200.0, 1795255205.0)
    assert cold.termination_grace_seconds == 45
    assert cold.controller == ControllerRef("ReplicaSet", "web-7c9d", "ReplicaSet-web-7c9d", "apps/v1")


def test_owner_kinds_in_order_and_the_first_controller() -> None:
    raw = PodBuilder("p").build()
    raw["metadata"]["ownerReferences"] = [
        {"kind": "Node", "name": "n1"},  # not a controller
        {"kind": None, "name": "x", "controller": "true"},  # kind read as str(None); "true" is not true
        {"kind": "Job", "name": "j", "uid": "u1", "apiVersion": "batch/v1", "controller": True},
        {"kind": "CronJob", "name": "c", "controller": True},  # a second controller: the first wins
    ]
    pod = pod_from_dict(raw)
    assert pod.owner_kinds == ("Node", "None", "Job", "CronJob")
    assert pod.controller == ControllerRef("Job", "j", "u1", "batch/v1")
    raw["metadata"]["ownerReferences"] = []
    assert (pod_from_dict(raw).owner_kinds, pod_from_dict(raw).controller) == ((), None)


def test_an_owner_that_is_not_an_object_is_named_by_its_position() -> None:
    raw = PodBuilder("p").build()
    raw["metadata"]["ownerReferences"] = [{"kind": "Job"}, "Job"]
    with pytest.raises(ObjectError, match=r"metadata\.ownerReferences\[1\]: expected an object, got str"):
        pod_from_dict(raw)


def test_a_pod_view_copies_by_replace_and_compares_by_value() -> None:
    # PodInfo is read-only by type only (mypy reports assignments); copies go through dataclasses.replace
    pod = pod_from_dict(PodBuilder("p").requests(cpu="1").build())
    placed = dataclasses.replace(pod, node_name="n1")
    assert (placed.node_name, pod.node_name) == ("n1", "")
    assert placed != pod and dataclasses.replace(placed, node_name="") == pod
    assert [f.name for f in dataclasses.fields(pod)][:3] == ["uid", "namespace", "name"]
    assert not hasattr(pod, "__dict__")  # slotted
    assert pickle.loads(pickle.dumps(placed)) == placed and copy.deepcopy(placed) == placed
