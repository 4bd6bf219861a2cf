"""Fluent builders for raw Pod, Node and NodeMetric JSON.

Example::

    pod = PodBuilder("web-1").requests(cpu="1", memory="2Gi").limits(cpu="2").node("n1").build()
"""

from __future__ import annotations

import copy
import uuid
from typing import Any, Self

from koordpy.model.durations import format_rfc3339

__all__ = ["NodeBuilder", "NodeMetricBuilder", "PodBuilder", "make_node", "make_pod"]

Raw = dict[str, Any]


def _q(value: str | int | float) -> str:
    return str(value)


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._raw: Raw = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"pod/{namespace}/{name}")),
                "labels": {},
                "annotations": {},
            },
            "spec": {"schedulerName": "koordpy-scheduler", "containers": [{"name": "main", "image": "app"}]},
            "status": {"phase": "Pending"},
        }

    def _container(self) -> Raw:
        container: Raw = self._raw["spec"]["containers"][0]
        return container

    def uid(self, uid: str) -> Self:
        self._raw["metadata"]["uid"] = uid
        return self

    def requests(self, **resources: str | int | float) -> Self:
        res = self._container().setdefault("resources", {}).setdefault("requests", {})
        res.update({k.replace("_", "-"): _q(v) for k, v in resources.items()})
        return self

    def limits(self, **resources: str | int | float) -> Self:
        res = self._container().setdefault("resources", {}).setdefault("limits", {})
        res.update({k.replace("_", "-"): _q(v) for k, v in resources.items()})
        return self

    def resource(self, field: str, name: str, value: str | int) -> Self:
        """Set an arbitrary resource (e.g. ``kubernetes.io/batch-cpu``) on requests or limits."""
        self._container().setdefault("resources", {}).setdefault(field, {})[name] = _q(value)
        return self

    def node(self, name: str) -> Self:
        self._raw["spec"]["nodeName"] = name
        self._raw["status"]["phase"] = "Running"
        return self

    def phase(self, phase: str) -> Self:
        self._raw["status"]["phase"] = phase
        return self

    def priority(self, value: int) -> Self:
        self._raw["spec"]["priority"] = value
        return self

    def label(self, key: str, value: str) -> Self:
        self._raw["metadata"]["labels"][key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._raw["metadata"]["annotations"][key] = value
        return self

    def owner(self, kind: str, name: str = "owner") -> Self:
        self._raw["metadata"].setdefault("ownerReferences", []).append(
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"{kind}-{name}", "controller": True}
        )
        return self

    def condition(self, kind: str, at: float, status: str = "True") -> Self:
        self._raw["status"].setdefault("conditions", []).append(
            {"type": kind, "status": status, "lastTransitionTime": format_rfc3339(at)}
        )
        return self

    def scheduled_at(self, at: float) -> Self:
        return self.condition("PodScheduled", at)

    def scheduling_group(self, pod_group: str) -> Self:
        """``spec.schedulingGroup.podGroupName``: the pod joins that ``scheduling.k8s.io`` PodGroup."""
        self._raw["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
        return self

    def scheduler(self, name: str) -> Self:
        self._raw["spec"]["schedulerName"] = name
        return self

    def build(self) -> Raw:
        return copy.deepcopy(self._raw)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._raw: Raw = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "annotations": {}},
            "spec": {},
            "status": {"allocatable": {}, "capacity": {}},
        }

    def allocatable(self, **resources: str | int | float) -> Self:
        values = {k.replace("_", "-"): _q(v) for k, v in resources.items()}
        self._raw["status"]["allocatable"].update(values)
        self._raw["status"]["capacity"].update(values)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._raw["metadata"]["annotations"][key] = value
        return self

    def label(self, key: str, value: str) -> Self:
        self._raw["metadata"]["labels"][key] = value
        return self

    def build(self) -> Raw:
        return copy.deepcopy(self._raw)


class NodeMetricBuilder:
    """``slo.koordinator.sh/v1alpha1`` NodeMetric JSON."""

    def __init__(self, name: str) -> None:
        self._raw: Raw = {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
            "spec": {},
            "status": {},
        }

    def updated(self, at: float) -> Self:
        self._raw["status"]["updateTime"] = format_rfc3339(at)
        return self

    def report_interval(self, seconds: int) -> Self:
        self._raw["spec"].setdefault("metricCollectPolicy", {})["reportIntervalSeconds"] = seconds
        return self

    def usage(self, **resources: str | int | float) -> Self:
        node_metric = self._raw["status"].setdefault("nodeMetric", {})
        node_metric["nodeUsage"] = {"resources": {k: _q(v) for k, v in resources.items()}}
        return self

    def system_usage(self, **resources: str | int | float) -> Self:
        node_metric = self._raw["status"].setdefault("nodeMetric", {})
        node_metric["systemUsage"] = {"resources": {k: _q(v) for k, v in resources.items()}}
        return self

    def aggregated(self, duration: str, kind: str, **resources: str | int | float) -> Self:
        node_metric = self._raw["status"].setdefault("nodeMetric", {})
        entries = node_metric.setdefault("aggregatedNodeUsages", [])
        for entry in entries:
            if entry["duration"] == duration:
                break
        else:
            entry = {"duration": duration, "usage": {}}
            entries.append(entry)
        entry["usage"][kind] = {"resources": {k: _q(v) for k, v in resources.items()}}
        return self

    def pod(self, namespace: str, name: str, priority: str = "koord-prod", qos: str = "LS", **usage: str | int) -> Self:
        self._raw["status"].setdefault("podsMetric", []).append(
            {
                "namespace": namespace,
                "name": name,
                "priority": priority,
                "qos": qos,
                "podUsage": {"resources": {k: _q(v) for k, v in usage.items()}},
            }
        )
        return self

    def build(self) -> Raw:
        return copy.deepcopy(self._raw)


def make_pod(name: str, cpu: str = "1", memory: str = "1Gi", node: str | None = None, **kw: Any) -> Raw:
    builder = PodBuilder(name, kw.get("namespace", "default")).requests(cpu=cpu, memory=memory)
    if node:
        builder.node(node)
    return builder.build()


def make_node(name: str, cpu: str = "32", memory: str = "128Gi") -> Raw:
    return NodeBuilder(name).allocatable(cpu=cpu, memory=memory, pods="110").build()
