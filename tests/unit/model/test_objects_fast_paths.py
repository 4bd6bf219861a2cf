"""The unchecked fast paths of conversion give exactly what the checked path gives, and hand every
unusual shape to the checked path (which names the bad field)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.model import objects
from koordpy.model.objects import ObjectError, _pod_metric, _pod_metrics, nodemetric_from_dict, pod_from_dict
from koordpy.model.priority import KubeQoS, kube_qos
from koordpy.model.resources import parse_resource_list, pod_limits, pod_requests
from koordpy_testkit import PodBuilder

USUAL = {
    "namespace": "shop",
    "name": "web-0",
    "podUsage": {"resources": {"cpu": "700m", "memory": "2Gi"}},
    "priority": "koord-prod",
    "qos": "LS",
}


@pytest.mark.parametrize(
    "entry",
    [
        USUAL,
        {**USUAL, "podUsage": None},  # no usage: an empty list
        {**USUAL, "podUsage": {}},
        {**USUAL, "podUsage": {"resources": None}},
        {**USUAL, "priority": "", "qos": ""},
    ],
)
def test_fast_path_equals_checked_path(entry: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    checked = _pod_metric(entry, "status.podsMetric[0]")
    taken: list[str] = []
    monkeypatch.setattr(objects, "_pod_metric", lambda entry, path: taken.append(path))
    assert _pod_metrics([entry])[0] == (checked,)
    assert taken == []  # read inline, not by the checked path


@pytest.mark.parametrize(
    "entry",
    [
        ["not", "a", "dict"],
        {**USUAL, "namespace": 7},  # the checked path turns it into "7"
        {**USUAL, "podUsage": {"resources": {"cpu": "-1"}}},  # negative: an error with its path
        {**USUAL, "podUsage": {"resources": {"cpu": "-1m", "memory": "1Gi"}}},  # negative, parsed in full
        {**USUAL, "podUsage": {"resources": {"cpu": "lots"}}},  # unreadable quantity
        {**USUAL, "podUsage": {"resources": ["cpu"]}},
        {**USUAL, "podUsage": "700m"},
        {**USUAL, "podUsage": ["cpu"]},
        {**USUAL, "podUsage": {"resources": {"cpu": ["1"]}}},  # unhashable quantity
        {"name": "bare"},  # missing fields: the checked path reads them as ""
        {**USUAL, "priority": None},
    ],
)
def test_unusual_shapes_take_the_checked_path(entry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []

    def checked(entry: Any, path: str) -> Any:
        taken.append(path)
        return "checked"

    monkeypatch.setattr(objects, "_pod_metric", checked)
    assert _pod_metrics([USUAL, entry])[0] == (_pod_metrics([USUAL])[0][0], "checked")
    assert taken == ["status.podsMetric[1]"]


def test_aggregated_fast_path_equals_checked_path_and_names_bad_fields() -> None:
    def metric(*entries: Any) -> dict[str, Any]:
        node_metric = {"nodeUsage": {"resources": {"cpu": "1"}}, "aggregatedNodeUsages": list(entries)}
        return {"metadata": {"name": "n1"}, "status": {"nodeMetric": node_metric}}

    usual = {"duration": "5m", "usage": {"p95": {"resources": {"cpu": "2", "memory": "1Gi"}}, "avg": {}}}
    for _ in range(2):  # the first reads the duration the long way, the second from the memo
        (read,) = nodemetric_from_dict(metric(usual)).aggregated
        assert (read.duration, read.usage) == (300.0, {"p95": {"cpu": 2000, "memory": 2**30}, "avg": {}})
        assert read == objects._aggregated(usual, 0)
    bad = {"duration": "5m", "usage": {"p95": {"resources": {"cpu": "-1"}}}}
    with pytest.raises(ObjectError, match=r"aggregatedNodeUsages\[1\]\.usage\.p95\.resources\.cpu: negative"):
        nodemetric_from_dict(metric(usual, bad))
    with pytest.raises(ObjectError, match=r"aggregatedNodeUsages\[0\]\.usage\.p95: expected an object"):
        nodemetric_from_dict(metric({"duration": "5m", "usage": {"p95": "2"}}))


def test_update_times_read_before_give_the_same_seconds() -> None:
    raw = {"metadata": {"name": "n1"}, "status": {"updateTime": "2026-11-21T10:00:00Z"}}
    first, second = nodemetric_from_dict(raw).update_time, nodemetric_from_dict(raw).update_time
    assert first == second == 1795255200.0  # 2026-11-21T10:00:00Z in epoch seconds
    raw["status"]["updateTime"] = "2026-11-21T10:00:01Z"
    assert nodemetric_from_dict(raw).update_time == 1795255201.0


def test_checked_path_still_names_the_field() -> None:
    raw = {
        "metadata": {"name": "n1"},
        "status": {"podsMetric": [USUAL, {**USUAL, "podUsage": {"resources": {"cpu": "-1"}}}]},
    }
    with pytest.raises(ObjectError, match=r"status\.podsMetric\[1\]\.podUsage\.resources\.cpu: negative"):
        nodemetric_from_dict(raw)
    raw["status"]["podsMetric"][1] = {**USUAL, "namespace": 7}
    assert nodemetric_from_dict(raw).pods[1].namespace == "7"
    raw["status"]["podsMetric"][1] = {"name": "bare", "priority": None}
    assert nodemetric_from_dict(raw).pods[1] == ("", "bare", {}, "", "")
    # the same bad entry twice: the first one is named
    raw["status"]["podsMetric"] = [USUAL, {"name": 5, "podUsage": 1}, {"name": 5, "podUsage": 1}]
    with pytest.raises(ObjectError, match=r"status\.podsMetric\[1\]\.podUsage: expected an object"):
        nodemetric_from_dict(raw)


def test_memoised_quantities_stay_exact_and_negative_ones_stay_rejected() -> None:
    # 700m cpu = 700 millicores; 2Gi = 2 * 1024^3 bytes; the second call is served from the memo
    for _ in range(2):
        assert parse_resource_list({"cpu": "700m", "memory": "2Gi"}) == {"cpu": 700, "memory": 2147483648}
    raw = {"metadata": {"name": "n1"}, "status": {"podsMetric": [{"podUsage": {"resources": {"cpu": "-5m"}}}]}}
    for _ in range(2):
        with pytest.raises(ObjectError, match="negative"):
            nodemetric_from_dict(raw)


def test_requests_limits_and_qos_from_one_parse_of_each_container() -> None:
    # app: 1 cpu + 500m = 1500m; init peak 2 cpu; sidecar 100m runs beside the app: max(1600, 2000) = 2000m
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}},
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "2"}}},
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
        ],
    }
    assert pod_requests(spec) == {"cpu": 2000, "memory": 1073741824}
    assert pod_limits(spec) == {"cpu": 1000, "memory": 2147483648}
    assert kube_qos(spec) is KubeQoS.BURSTABLE
    # a limit without a request defaults the request to it: Guaranteed, and the raw spec is untouched
    only_limits = {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}
    assert kube_qos(only_limits) is KubeQoS.GUARANTEED
    assert only_limits["containers"][0]["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"}}


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def _resources_of(pod: Any) -> tuple[Any, Any, Any]:
    return pod.requests, pod.limits, pod.qos


SHAPES: list[dict[str, Any]] = [
    {"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]},
    {
        "containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
        ]
    },
    {"containers": [{"name": "no-resources"}], "overhead": {"cpu": "250m"}},
    {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"resources": {"requests": {"cpu": "3"}}},
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        ],
    },
    # the same lists as the previous one, but the sidecar is an ordinary init container: 3 cpu, not 3.5
    {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"resources": {"requests": {"cpu": "3"}}},
            {"resources": {"requests": {"cpu": "500m"}}},
        ],
    },
    # one container moved from app to init: another shape
    {"containers": [], "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]},
    {"containers": [{"resources": {"requests": {"cpu": "1"}}}], "initContainers": []},
]


@pytest.mark.parametrize("spec", SHAPES)
def test_memoised_pod_resources_equal_a_fresh_conversion(spec: dict[str, Any]) -> None:
    objects._POD_RESOURCES.clear()
    fresh = _resources_of(pod_from_dict(_pod(spec)))
    assert objects._resources_shape(spec) in objects._POD_RESOURCES  # the second conversion is a memo hit
    again = pod_from_dict(_pod(spec))
    assert _resources_of(again) == fresh
    again.requests["cpu"] = -1  # a caller changing its copy does not change the memo
    assert _resources_of(pod_from_dict(_pod(spec))) == fresh


def test_every_memoised_shape_keeps_its_own_result() -> None:
    # all the shapes above converted one after the other through the memo give what each gives alone
    objects._POD_RESOURCES.clear()
    alone = []
    for spec in SHAPES:
        objects._POD_RESOURCES.clear()
        alone.append(_resources_of(pod_from_dict(_pod(spec))))
    objects._POD_RESOURCES.clear()
    for _ in range(2):
        assert [_resources_of(pod_from_dict(_pod(spec))) for spec in SHAPES] == alone
    assert len({objects._resources_shape(spec) for spec in SHAPES}) == len(SHAPES)


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": [{"resources": {"requests": {"cpu": 1}}}]},  # a number: 1 and True would share a key
        {"containers": [{"resources": {"requests": {"cpu": True}}}]},
        {"containers": [{"resources": {"requests": ["cpu"]}}]},
        {"containers": "x"},
        {"containers": [{"resources": {"requests": {"cpu": "1"}}}], "overhead": {"cpu": 1}},
    ],
)
def test_unusual_resource_shapes_are_not_memoised(spec: dict[str, Any]) -> None:
    assert objects._resources_shape(spec) is None


def test_a_bad_quantity_is_refused_on_every_conversion() -> None:
    objects._POD_RESOURCES.clear()
    spec = {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}
    for _ in range(2):
        with pytest.raises(ObjectError, match=r"spec\.containers\[0\]\.resources\.requests\.cpu"):
            pod_from_dict(_pod(spec))
    assert objects._POD_RESOURCES == {}
    # True read as a quantity is refused although 1 cpu of the same shape was converted before
    pod_from_dict(_pod({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}))
    with pytest.raises(ObjectError):
        pod_from_dict(_pod({"containers": [{"resources": {"requests": {"cpu": True}}}]}))


def test_memoised_aggregation_durations_stay_exact_and_bad_ones_stay_refused() -> None:
    # "5m" = 300 s, "1h30m" = 5,400 s: the second conversion is served from the memo; a negative or
    # unreadable duration is refused every time (never memoised)
    def with_duration(duration: Any) -> dict[str, Any]:
        usage = {"p95": {"resources": {"cpu": "1"}}}
        entries = [{"duration": duration, "usage": usage}]
        return {"metadata": {"name": "n"}, "status": {"nodeMetric": {"aggregatedNodeUsages": entries}}}

    for _ in range(2):
        assert nodemetric_from_dict(with_duration("5m")).aggregated[0].duration == 300.0
        assert nodemetric_from_dict(with_duration("1h30m")).aggregated[0].duration == 5400.0
        for bad in ("-5m", "5 minutes", [5]):
            with pytest.raises(ObjectError, match=r"aggregatedNodeUsages\[0\]\.duration"):
                nodemetric_from_dict(with_duration(bad))
    assert "-5m" not in objects._DURATIONS and objects._DURATIONS["5m"] == 300.0


@pytest.mark.parametrize(
    ("node_usage", "expected"),
    [
        ({"resources": {"cpu": "2", "memory": "1Gi"}}, {"cpu": 2000, "memory": 2**30}),  # 2 cores, 1Gi
        ({"resources": None}, {}),
        ({}, {}),
        (None, {}),
    ],
)
def test_resource_maps_read_without_paths_equal_the_checked_reading(node_usage: Any, expected: Any) -> None:
    raw = {"metadata": {"name": "n1"}, "status": {"nodeMetric": {"nodeUsage": node_usage}}}
    read = nodemetric_from_dict(raw)
    assert (read.node_usage, read.system_usage) == (expected, {})


@pytest.mark.parametrize(
    ("node_metric", "error"),
    [
        ({"nodeUsage": {"resources": {"cpu": "-1"}}}, r"status\.nodeMetric\.nodeUsage\.resources\.cpu: negative"),
        ({"systemUsage": {"resources": {"cpu": "x"}}}, r"status\.nodeMetric\.systemUsage\.resources\.cpu"),
        ({"nodeUsage": {"resources": ["cpu"]}}, r"status\.nodeMetric\.nodeUsage\.resources: expected an object"),
        ({"nodeUsage": "2"}, r"status\.nodeMetric\.nodeUsage: expected an object"),
    ],
)
def test_odd_resource_maps_are_named(node_metric: Any, error: str) -> None:
    with pytest.raises(ObjectError, match=error):
        nodemetric_from_dict({"metadata": {"name": "n1"}, "status": {"nodeMetric": node_metric}})


@pytest.mark.parametrize(("seconds", "read"), [(60, 60.0), (1.5, 1.5), (None, None), (True, "error"), ("60", "error")])
def test_report_interval_is_a_number_of_seconds(seconds: Any, read: Any) -> None:
    raw = {"metadata": {"name": "n1"}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": seconds}}}
    if read == "error":
        with pytest.raises(ObjectError, match="reportIntervalSeconds: expected a number of seconds"):
            nodemetric_from_dict(raw)
    else:
        assert nodemetric_from_dict(raw).report_interval == read


def test_pods_of_one_namespace_share_its_name_and_the_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objects, "_NAMESPACES", {})
    monkeypatch.setattr(objects, "_NAMESPACES_MAX", 2)
    # separate decoded strings (built at run time, not one constant)
    first, second = (pod_from_dict(PodBuilder(f"p{i}", "".join(["team", "-a"])).build()) for i in range(2))
    assert first.namespace == second.namespace == "team-a"
    assert first.namespace is second.namespace
    long = "n" * 64  # longer than a DNS label: never kept
    assert pod_from_dict(PodBuilder("p", long).build()).namespace == long
    for namespace in ("team-b", "team-c", "team-d"):
        pod_from_dict(PodBuilder("p", namespace).build())
    assert sorted(objects._NAMESPACES) == ["team-a", "team-b"]  # full at two: later ones are read, not kept


def test_negative_quantities_stay_out_of_the_memo() -> None:
    # podsMetric's inline read trusts a memo hit to be non-negative: a negative one must never be in it
    assert parse_resource_list({"cpu": "-3m", "memory": "5Mi"}) == {"cpu": -3, "memory": 5 * 2**20}
    assert ("cpu", "-3m") not in objects.QUANTITY_MEMO
    assert objects.QUANTITY_MEMO[("memory", "5Mi")] == 5 * 2**20
    entry = {**USUAL, "podUsage": {"resources": {"cpu": "-3m"}}}
    for _ in range(2):  # the second read too names the negative amount
        with pytest.raises(ObjectError, match=r"podsMetric\[0\]\.podUsage\.resources\.cpu: negative"):
            _pod_metrics([entry])
