"""Kubernetes QoS classes and Koordinator priority classes.

Koordinator's rule (``GetPodPriorityClassWithDefault``): the label ``koordinator.sh/priority-class``
wins; else ``spec.priority`` bands (prod 9000-9999, mid 7000-7999, batch 5000-5999,
free 3000-3999); else derived from the QoS class: label ``koordinator.sh/qosClass``
(LSE/LSR/LS/SYSTEM -> prod, BE -> batch), else the Kubernetes QoS (Guaranteed -> LSR and
Burstable -> LS, both prod; BestEffort -> BE, batch). So an ordinary pod with requests is Prod.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from koordpy.model.resources import ContainerResources, parse_containers

__all__ = [
    "LABEL_KOORD_PRIORITY_CLASS",
    "LABEL_KOORD_QOS",
    "KubeQoS",
    "PriorityClass",
    "kube_qos",
    "kube_qos_of",
    "priority_class",
]

LABEL_KOORD_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_KOORD_QOS = "koordinator.sh/qosClass"


class KubeQoS(enum.StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class PriorityClass(enum.StrEnum):
    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""


_BANDS = (
    (9000, 9999, PriorityClass.PROD),
    (7000, 7999, PriorityClass.MID),
    (5000, 5999, PriorityClass.BATCH),
    (3000, 3999, PriorityClass.FREE),
)
_QOS_TO_PRIORITY = {
    "LSE": PriorityClass.PROD,
    "LSR": PriorityClass.PROD,
    "LS": PriorityClass.PROD,
    "SYSTEM": PriorityClass.PROD,
    "BE": PriorityClass.BATCH,
}
_COMPUTE = ("cpu", "memory")


def kube_qos(spec: Mapping[str, Any]) -> KubeQoS:
    """The Kubernetes QoS class (``status.qosClass``) computed from the spec."""
    app, init = parse_containers(spec)
    return kube_qos_of(app + init)


def kube_qos_of(containers: Iterable[ContainerResources]) -> KubeQoS:
    """The QoS class from every (app and init) container's parsed resource lists."""
    any_set = False
    guaranteed = True
    for container in containers:
        limits = container.limits
        requests = container.requests
        # A missing request defaults to the limit.
        for name in _COMPUTE:
            if name in limits and name not in requests:
                requests = {**requests, name: limits[name]}
        if any(requests.get(n, 0) or limits.get(n, 0) for n in _COMPUTE):
            any_set = True
        for name in _COMPUTE:
            if name not in limits or requests.get(name) != limits[name]:
                guaranteed = False
    if not any_set:
        return KubeQoS.BEST_EFFORT
    return KubeQoS.GUARANTEED if guaranteed else KubeQoS.BURSTABLE


def priority_class(labels: Mapping[str, str], priority: int | None, qos: KubeQoS) -> PriorityClass:
    """Koordinator's priority class with its defaulting chain (see the module docstring)."""
    label = labels.get(LABEL_KOORD_PRIORITY_CLASS)
    if label:
        try:
            return PriorityClass(label)
        except ValueError:
            pass
    if priority is not None:
        for low, high, klass in _BANDS:
            if low <= priority <= high:
                return klass
    koord_qos = labels.get(LABEL_KOORD_QOS)
    if koord_qos in _QOS_TO_PRIORITY:
        return _QOS_TO_PRIORITY[koord_qos]
    return PriorityClass.BATCH if qos is KubeQoS.BEST_EFFORT else PriorityClass.PROD
