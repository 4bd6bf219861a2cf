"""Object conversion turns every bad quantity or shape into an ObjectError naming the field
(hostile quantities such as 1e99999999 and 1e400 included)."""

import pytest

from koordpy.model.objects import ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy_testkit import NodeBuilder


def _metric(usage: object, **status: object) -> dict[str, object]:
    return {
        "metadata": {"name": "n0"},
        "status": {"nodeMetric": {"nodeUsage": {"resources": usage}}, **status},
    }


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (_metric({"cpu": "1e99999999"}), r"status\.nodeMetric\.nodeUsage\.resources\.cpu: quantity out of range"),
        (_metric({"cpu": "1e400"}), r"status\.nodeMetric\.nodeUsage\.resources\.cpu: quantity out of range"),
        # Negative usage would score best and pass every threshold: refused.
        (_metric({"cpu": "-1"}), r"status\.nodeMetric\.nodeUsage\.resources\.cpu: negative"),
        (_metric({"memory": "\u0663Gi"}), r"nodeUsage\.resources\.memory: not a quantity"),
        (
            _metric({}, podsMetric=[{"name": "p", "podUsage": {"resources": {"cpu": "-5m"}}}]),
            r"status\.podsMetric\[0\]\.podUsage\.resources\.cpu: negative",
        ),
        (
            {"metadata": {"name": "n0"}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 10**400}}},
            r"spec\.metricCollectPolicy\.reportIntervalSeconds: out of range",
        ),
        (
            _metric({}, nodeMetric={"aggregatedNodeUsages": [{"duration": "1e400s"}]}),
            r"aggregatedNodeUsages\[0\]\.duration",
        ),
        (
            _metric({}, nodeMetric={"aggregatedNodeUsages": [{"duration": ["5m"]}]}),
            r"aggregatedNodeUsages\[0\]\.duration",
        ),
    ],
)
def test_nodemetric_errors_name_the_field(raw: dict[str, object], path: str) -> None:
    with pytest.raises(ObjectError, match=path):
        nodemetric_from_dict(raw)


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"containers": [None, 5]}, r"spec\.containers\[0\]: expected an object"),
        ({"containers": [{"resources": "abc"}]}, r"spec\.containers\[0\]\.resources: expected an object"),
        ({"containers": "abc"}, r"spec\.containers: expected a list"),
        (
            {"containers": [{"resources": {"requests": {"cpu": "1e400"}}}]},
            r"spec\.containers\[0\]\.resources\.requests\.cpu: quantity out of range",
        ),
        (
            {"containers": [{}], "initContainers": [{"resources": {"limits": {"cpu": "1e99999999"}}}]},
            r"spec\.initContainers\[0\]\.resources\.limits\.cpu",
        ),
        ({"containers": [{}], "overhead": {"memory": "1e400"}}, r"spec\.overhead\.memory"),
    ],
)
def test_pod_errors_name_the_field(spec: dict[str, object], path: str) -> None:
    with pytest.raises(ObjectError, match=path):
        pod_from_dict({"metadata": {"name": "p"}, "spec": spec})


def test_node_allocatable_out_of_range_names_the_field() -> None:
    raw = NodeBuilder("n").allocatable(cpu="1e400").build()
    with pytest.raises(ObjectError, match=r"status\.allocatable\.cpu: quantity out of range"):
        node_from_dict(raw)


def test_raw_allocatable_is_parsed_with_the_node() -> None:
    raw = NodeBuilder("n").allocatable(cpu="32").annotation("node.koordinator.sh/raw-allocatable", '{"cpu":"16"}')
    assert node_from_dict(raw.build()).raw_allocatable == {"cpu": 16000}
    assert node_from_dict(NodeBuilder("n").build()).raw_allocatable is None


def test_labels_with_an_unprintable_integer_name_the_field() -> None:
    # A YAML/JSON reader can produce a 5,000-digit integer; str() of it raises ValueError in Python.
    with pytest.raises(ObjectError, match=r"metadata\.labels"):
        pod_from_dict({"metadata": {"name": "p", "labels": {"a": 10**5000}}, "spec": {}})


class _CountingEntry(dict[str, object]):
    """A ``podsMetric`` entry that is not a plain dict (so it takes the checked path) and counts comparisons."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountingEntry.compared += 1
        return dict.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


def test_podsmetric_entries_on_the_checked_path_are_never_compared_with_each_other() -> None:
    # Linear work whatever the entries: finding an entry's position by comparing it with the earlier ones would
    # cost n²/2 comparisons (5·10^9 for a hostile 100,000-entry report), so none may happen at all.
    entries = [_CountingEntry(namespace="ns", name=f"p{i}", podUsage={"resources": {"cpu": "1m"}}) for i in range(300)]
    _CountingEntry.compared = 0
    metric = nodemetric_from_dict(_metric({}, podsMetric=entries))
    assert len(metric.pods) == 300 and metric.pods[299].name == "p299" and metric.pods[299].qos == ""
    assert _CountingEntry.compared == 0


def test_a_bad_entry_after_equal_good_ones_is_named_by_its_own_position() -> None:
    good = {"namespace": "ns", "name": "p", "podUsage": {"resources": {"cpu": "1m"}}}
    with pytest.raises(ObjectError, match=r"status\.podsMetric\[2\]\.podUsage\.resources\.cpu: negative"):
        nodemetric_from_dict(
            _metric({}, podsMetric=[good, dict(good), {"name": "p", "podUsage": {"resources": {"cpu": "-1m"}}}])
        )
