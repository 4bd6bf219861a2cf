"""The driver's side of the extender protocol, without processes: bodies, response checks, fit, queue."""

from __future__ import annotations

import orjson
import pytest

from koordpy.model.objects import node_from_dict
from koordpy_testkit.builders import NodeBuilder, make_node, make_pod
from koordpy_testkit.schedulerdriver.intree import NodeUsage, filter_node, least_allocated_score
from koordpy_testkit.schedulerdriver.protocol import (
    ExtenderConfig,
    ExtenderError,
    bind_args,
    extender_args,
    is_interested,
    parse_bind_result,
    parse_filter_result,
    parse_prioritize_result,
)
from koordpy_testkit.schedulerdriver.queue import EXTENDER, IN_TREE, SchedulingQueue


def test_filter_request_is_exactly_what_kube_scheduler_sends() -> None:
    pod = make_pod("p")
    body = extender_args(pod, ["n1", "n2"])
    # Go field order and names; Nodes is null with nodeCacheCapable; the pod is embedded whole.
    assert body.startswith(b'{"Pod":')
    assert orjson.loads(body) == {"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]}
    assert list(orjson.loads(body)) == ["Pod", "Nodes", "NodeNames"]
    bind = orjson.loads(bind_args("p", "ns", "u-1", "n1"))
    assert list(bind.items()) == [("PodName", "p"), ("PodNamespace", "ns"), ("PodUID", "u-1"), ("Node", "n1")]


def test_filter_result_subset_and_maps() -> None:
    body = orjson.dumps(
        {
            "Nodes": None,
            "NodeNames": ["n1"],
            "FailedNodes": {"n2": "hot", "n3": "hot"},
            "FailedAndUnresolvableNodes": {"n3": "gone"},
            "Error": "",
        }
    )
    result = parse_filter_result(200, body, ["n1", "n2", "n3"])
    assert result.passed == ["n1"]
    assert result.failed == {"n2": "hot"}  # unresolvable wins for n3
    assert result.unresolvable == {"n3": "gone"}
    assert result.noncanonical_keys == []


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, {"NodeNames": ["n9"]}, "not found in the input node list"),
        (200, {"NodeNames": ["n1"], "Error": "boom"}, "boom"),
        (500, {"NodeNames": ["n1"]}, "code 500"),
        (200, {"NodeNames": "n1"}, "array of strings"),
        (200, {"FailedNodes": {"n1": 3}}, "map of strings"),
    ],
)
def test_filter_result_errors(status: int, body: object, message: str) -> None:
    with pytest.raises(ExtenderError, match=message) as info:
        parse_filter_result(status, orjson.dumps(body), ["n1", "n2"])
    assert info.value.verb == "filter"


def test_filter_result_null_node_names_means_zero_nodes_and_keys_fold_like_go() -> None:
    assert parse_filter_result(200, b'{"NodeNames": null, "Error": ""}', ["n1"]).passed == []
    folded = parse_filter_result(200, b'{"nodenames": ["n1"], "extra": 1}', ["n1"])
    assert folded.passed == ["n1"]
    assert folded.noncanonical_keys == ["ExtenderFilterResult.nodenames"]


def test_prioritize_result_is_not_clamped_and_types_are_checked() -> None:
    result = parse_prioritize_result(200, b'[{"Host": "n1", "Score": 100}, {"Host": "n2", "Score": 3}]')
    assert result.scores == [("n1", 100), ("n2", 3)]
    with pytest.raises(ExtenderError, match="int64"):
        parse_prioritize_result(200, b'[{"Host": "n1", "Score": 7.5}]')
    with pytest.raises(ExtenderError):
        parse_prioritize_result(200, b'{"Host": "n1"}')


def test_bind_result() -> None:
    assert parse_bind_result(200, b'{"Error": ""}') == []
    with pytest.raises(ExtenderError, match="conflict"):
        parse_bind_result(200, b'{"Error": "conflict"}')
    with pytest.raises(ExtenderError, match="code 404"):
        parse_bind_result(404, b"{}")


def test_config_from_kube_scheduler_configuration() -> None:
    config = ExtenderConfig.from_dict(
        {
            "urlPrefix": "http://127.0.0.1:10262",
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "bindVerb": "bind",
            "weight": 2,
            "httpTimeout": "30s",
            "nodeCacheCapable": True,
            "ignorable": False,
            "managedResources": [{"name": "koordpy.io/scheduled", "ignoredByScheduler": True}],
        },
        url_prefix="http://127.0.0.1:5555/",
    )
    assert config.url("filter") == "http://127.0.0.1:5555/filter"
    assert (config.http_timeout, config.weight) == (30.0, 2)
    with pytest.raises(ValueError, match="weight"):
        ExtenderConfig.from_dict({"urlPrefix": "x", "prioritizeVerb": "p", "nodeCacheCapable": True})
    pod = make_pod("p")
    assert not is_interested(pod, config.managed_resources)
    pod["spec"]["containers"][0]["resources"]["limits"] = {"koordpy.io/scheduled": "1"}
    assert is_interested(pod, config.managed_resources)


def test_node_resources_fit_counts_assumed_requests_and_pods() -> None:
    # node: 4 cpu = 4000m, 3 pods. Pod asks 1500m.
    node = node_from_dict(NodeBuilder("n").allocatable(cpu="4", memory="8Gi", pods="3").build())
    pod = make_pod("p", cpu="1500m", memory="1Gi")
    requests = {"cpu": 1500, "memory": 1 << 30}
    # 2 × 1500m on the node already → 3000m + 1500m > 4000m.
    assert filter_node(pod, requests, node, NodeUsage.of([requests, requests])) == "Insufficient cpu"
    assert filter_node(pod, requests, node, NodeUsage.of([requests])) is None
    tiny = {"cpu": 1}
    assert filter_node(pod, tiny, node, NodeUsage.of([tiny, tiny, tiny])) == "Too many pods"
    # LeastAllocated: cpu (4000−1500)·100//4000 = 62, memory (8Gi−1Gi)·100//8Gi = 87 → (62+87)//2 = 74.
    assert least_allocated_score(requests, node, NodeUsage({})) == 74
    tainted = node_from_dict({**make_node("t"), "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})
    assert filter_node(pod, requests, tainted, NodeUsage({})) is not None


def test_backoff_doubles_from_one_second_to_ten() -> None:
    queue = SchedulingQueue(lambda: 0.0)
    assert [queue.backoff_duration(n) for n in (1, 2, 3, 4, 5, 6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_queue_unschedulable_pods_wait_for_an_event_then_serve_their_backoff() -> None:
    clock = _Clock()
    queue = SchedulingQueue(clock, max_in_unschedulable=300.0, pop_from_backoff=False)
    queue.add("a", priority=0)
    popped = await queue.pop()
    assert (popped.uid, popped.attempts) == ("a", 1)
    queue.failed("a", unschedulable=True, rejectors={IN_TREE})
    assert "a" in queue.unschedulable
    clock.now += 0.5
    queue.cluster_event("NodeChange")  # 0.5 s after the failure: backoff (1 s) not served yet → backoffQ
    assert queue.backoff == {"a": 101.0} and not queue.unschedulable
    clock.now += 0.6
    assert (await queue.pop()).attempts == 2


async def test_queue_event_during_the_cycle_sends_the_pod_to_backoff() -> None:
    clock = _Clock()
    queue = SchedulingQueue(clock)
    queue.add("a", priority=0)
    await queue.pop()
    queue.cluster_event("AssignedPodAdd")  # moveRequestCycle >= the pod's cycle
    queue.failed("a", unschedulable=True, rejectors={EXTENDER})
    assert "a" in queue.backoff and "a" not in queue.unschedulable


async def test_queue_priority_order_and_the_flush_every_30_seconds() -> None:
    clock = _Clock()
    queue = SchedulingQueue(clock, max_in_unschedulable=60.0)
    queue.add("low", priority=1)
    queue.add("high", priority=10)
    assert (await queue.pop()).uid == "high"
    queue.failed("high", unschedulable=True, rejectors={EXTENDER})
    assert (await queue.pop()).uid == "low"
    queue.failed("low", unschedulable=True, rejectors={EXTENDER})
    # No event at all: flushed once it waited longer than podMaxInUnschedulablePodsDuration (60 s here),
    # at the flush that runs every 30 s: the flushes at 30 s and 60 s are too early (60 is not > 60).
    for _ in range(2):
        clock.now += 30.0
        queue.flush()
        assert set(queue.unschedulable) == {"high", "low"}
    clock.now += 30.0
    assert (await queue.pop()).uid == "high"


@pytest.mark.parametrize(
    ("rejectors", "event", "moved"),
    [
        # kube-scheduler v1.37: a new pending pod moves nobody (GenericWorkload is off by default)...
        ({EXTENDER}, "pending pod added", False),
        # ...an assigned pod, a node or a failed bind moves every rejected pod...
        ({EXTENDER}, "AssignedPodAdd", True),
        ({IN_TREE}, "AssignedPodDelete", True),
        ({EXTENDER}, "NodeChange", True),
        ({EXTENDER}, "BindFailure", True),
        # ...and an update of the pod itself (its condition too) moves it when the extender rejected it.
        ({EXTENDER}, "own update", True),
        ({IN_TREE}, "own update", False),
    ],
)
async def test_queue_moves_only_on_the_events_kube_scheduler_registers(
    rejectors: set[str], event: str, moved: bool
) -> None:
    clock = _Clock()
    queue = SchedulingQueue(clock)
    queue.add("a", priority=0)
    await queue.pop()
    queue.failed("a", unschedulable=True, rejectors=rejectors)
    clock.now += 5.0
    if event == "pending pod added":
        queue.add("b", priority=0)
    elif event == "own update":
        queue.pod_updated("a")
    else:
        queue.cluster_event(event)
    assert ("a" not in queue.unschedulable) is moved


async def test_queue_pops_unschedulable_backoff_early_but_never_error_backoff() -> None:
    clock = _Clock()
    queue = SchedulingQueue(clock)
    for uid in ("err", "uns"):
        queue.add(uid, priority=0)
        await queue.pop()
    queue.failed("err", unschedulable=False)
    queue.failed("uns", unschedulable=True, rejectors={EXTENDER})
    queue.pod_updated("uns")  # its condition was written: moved, into backoffQ (1 s not served)
    assert set(queue.backoff) == {"err", "uns"}
    # SchedulerPopFromBackoffQ: activeQ is empty, so the unschedulable one is popped before its backoff
    # ends; the one that failed with an error waits it out.
    assert (await queue.pop()).uid == "uns"
    assert set(queue.backoff) == {"err"}


def test_config_from_two_entries_as_kube_scheduler_uses_them() -> None:
    main = {
        "urlPrefix": "http://a",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": 1,
        "httpTimeout": "5s",
        "nodeCacheCapable": True,
    }
    binder = {"urlPrefix": "http://b", "bindVerb": "bind", "httpTimeout": "660s", "nodeCacheCapable": True}
    config = ExtenderConfig.from_entries([binder, main])  # order does not matter
    assert (config.url("filter"), config.url("bind")) == ("http://a/filter", "http://b/bind")
    assert (config.timeout("filter"), config.timeout("prioritize"), config.timeout("bind")) == (5.0, 5.0, 660.0)
    # One entry: as before, every verb with its timeout.
    single = ExtenderConfig.from_entries([{**main, "bindVerb": "bind"}])
    assert single.timeout("bind") == 5.0
    with pytest.raises(ValueError, match=r"extenders\[1\]: the driver runs one filter/prioritize extender"):
        ExtenderConfig.from_entries([main, main])
    with pytest.raises(ValueError, match=r"managedResources"):
        ExtenderConfig.from_entries([main, {**binder, "managedResources": [{"name": "x"}]}])
    with pytest.raises(ValueError, match=r"extenders\[1\].bindVerb: only one extender can implement bind"):
        ExtenderConfig.from_entries([{**main, "bindVerb": "bind"}, binder])
    with pytest.raises(ValueError, match="expected one filter/prioritize entry and one binder"):
        ExtenderConfig.from_entries([main, {"urlPrefix": "http://c", "nodeCacheCapable": True}])
