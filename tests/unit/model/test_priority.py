import pytest

from koordpy.model.priority import KubeQoS, PriorityClass, kube_qos, priority_class


def _spec(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, object]:
    return {"containers": [{"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}]}


@pytest.mark.parametrize(
    ("spec", "qos"),
    [
        (_spec(), KubeQoS.BEST_EFFORT),
        (_spec({"cpu": "1"}), KubeQoS.BURSTABLE),
        (_spec({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}), KubeQoS.GUARANTEED),
        # requests default to limits
        (_spec(None, {"cpu": "1", "memory": "1Gi"}), KubeQoS.GUARANTEED),
        (_spec({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}), KubeQoS.BURSTABLE),
    ],
)
def test_kube_qos(spec: dict[str, object], qos: KubeQoS) -> None:
    assert kube_qos(spec) is qos


@pytest.mark.parametrize(
    ("labels", "priority", "qos", "expected"),
    [
        ({"koordinator.sh/priority-class": "koord-batch"}, 9500, KubeQoS.GUARANTEED, PriorityClass.BATCH),
        ({}, 9500, KubeQoS.BEST_EFFORT, PriorityClass.PROD),
        ({}, 7000, KubeQoS.BURSTABLE, PriorityClass.MID),
        ({}, 5999, KubeQoS.BURSTABLE, PriorityClass.BATCH),
        ({}, 3000, KubeQoS.BURSTABLE, PriorityClass.FREE),
        # outside every band -> QoS decides: ordinary pods with requests are Prod
        ({}, 0, KubeQoS.BURSTABLE, PriorityClass.PROD),
        ({}, None, KubeQoS.GUARANTEED, PriorityClass.PROD),
        ({}, None, KubeQoS.BEST_EFFORT, PriorityClass.BATCH),
        ({"koordinator.sh/qosClass": "BE"}, None, KubeQoS.GUARANTEED, PriorityClass.BATCH),
        ({"koordinator.sh/qosClass": "LSR"}, None, KubeQoS.BEST_EFFORT, PriorityClass.PROD),
        ({"koordinator.sh/priority-class": "bogus"}, 5500, KubeQoS.BURSTABLE, PriorityClass.BATCH),
    ],
)
def test_priority_class_defaulting_chain(
    labels: dict[str, str], priority: int | None, qos: KubeQoS, expected: PriorityClass
) -> None:
    assert priority_class(labels, priority, qos) is expected
