import pytest

from koordpy.model.objects import ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.model.priority import PriorityClass
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder


def test_pod_view() -> None:
    raw = (
        PodBuilder("web", "shop")
        .requests(cpu="1", memory="1Gi")
        .limits(cpu="2", memory="1Gi")
        .node("n1")
        .owner("DaemonSet")
        .scheduled_at(100.0)
        .condition("Initialized", 110.0)
        .build()
    )
    pod = pod_from_dict(raw)
    assert pod.key == "shop/web"
    assert pod.node_name == "n1"
    assert pod.requests == {"cpu": 1000, "memory": 2**30}
    assert pod.limits == {"cpu": 2000, "memory": 2**30}
    assert pod.priority_class is PriorityClass.PROD
    assert pod.is_daemonset_pod
    assert pod.scheduled_time == 100.0
    assert pod.initialized_time == 110.0
    assert not pod.terminated
    assert pod.termination_grace_seconds is None


def test_pod_grace_period_is_read() -> None:
    raw = PodBuilder("p").build()
    raw["spec"]["terminationGracePeriodSeconds"] = 5
    assert pod_from_dict(raw).termination_grace_seconds == 5


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda r: r["metadata"].pop("name"), "metadata.name"),
        (lambda r: r["spec"].__setitem__("priority", "high"), "spec.priority"),
        (lambda r: r["spec"]["containers"][0].__setitem__("resources", {"requests": {"cpu": "x"}}), "cpu"),
        (lambda r: r["status"].__setitem__("conditions", "nope"), "status.conditions"),
        (
            lambda r: r["status"].__setitem__(
                "conditions", [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "bad"}]
            ),
            "status.conditions[0].lastTransitionTime",
        ),
        (lambda r: r.__setitem__("metadata", []), "metadata"),
        (lambda r: r["spec"].__setitem__("terminationGracePeriodSeconds", -1), "spec.terminationGracePeriodSeconds"),
        (lambda r: r["spec"].__setitem__("terminationGracePeriodSeconds", "30"), "spec.terminationGracePeriodSeconds"),
    ],
)
def test_pod_errors_name_the_field(mutate: object, path: str) -> None:
    raw = PodBuilder("p").requests(cpu="1").build()
    mutate(raw)  # type: ignore[operator]
    with pytest.raises(ObjectError, match=path.replace("[", r"\[").replace("]", r"\]")):
        pod_from_dict(raw)


def test_node_view() -> None:
    node = node_from_dict(NodeBuilder("n1").allocatable(cpu="8", memory="32Gi").annotation("a", "b").build())
    assert node.allocatable == {"cpu": 8000, "memory": 32 * 2**30}
    assert node.annotations == {"a": "b"}
    with pytest.raises(ObjectError, match="status.allocatable.cpu"):
        node_from_dict(NodeBuilder("n1").allocatable(cpu="eight").build())


def test_nodemetric_view() -> None:
    raw = (
        NodeMetricBuilder("n1")
        .updated(1000.0)
        .report_interval(30)
        .usage(cpu="2", memory="4Gi")
        .aggregated("5m", "p95", cpu="3")
        .aggregated("5m", "p50", cpu="1")
        .aggregated("30m", "p95", cpu="4")
        .pod("default", "a", cpu="500m", memory="1Gi")
        .build()
    )
    metric = nodemetric_from_dict(raw)
    assert metric.update_time == 1000.0
    assert metric.report_interval == 30.0
    assert metric.node_usage == {"cpu": 2000, "memory": 4 * 2**30}
    assert [(a.duration, dict(a.usage)) for a in metric.aggregated] == [
        (300.0, {"p95": {"cpu": 3000}, "p50": {"cpu": 1000}}),
        (1800.0, {"p95": {"cpu": 4000}}),
    ]
    assert metric.pods[0].usage == {"cpu": 500, "memory": 2**30}
    assert metric.pods[0].priority == "koord-prod"


def test_nodemetric_without_status_has_no_usage() -> None:
    metric = nodemetric_from_dict(NodeMetricBuilder("n1").build())
    assert metric.node_usage is None
    assert metric.update_time is None


def test_nodemetric_bad_duration_is_named() -> None:
    raw = NodeMetricBuilder("n1").usage(cpu="1").build()
    raw["status"]["nodeMetric"]["aggregatedNodeUsages"] = [{"duration": "soon", "usage": {}}]
    with pytest.raises(ObjectError, match=r"aggregatedNodeUsages\[0\].duration"):
        nodemetric_from_dict(raw)
