"""Small clusters for the LowNodeLoad balance round: nodes, pods with their measured usage, one NodeMetric per node.

As Koordinator's own LowNodeLoad tests build theirs (``setupNodeMetrics``): a pod's usage in its node's NodeMetric
is its requests unless given, a node's usage is the sum of its pods' (plus ``system`` usage), and every NodeMetric
is ``age`` seconds old at ``now``. The same objects feed the descheduler's view (``BalanceState``) and the
extender's (``ClusterState`` with the default ``loadAware`` args unless given), as the manager feeds both.

Example::

    cluster = BalanceCluster()
    cluster.node("n1", cpu="4")
    cluster.pod("p1", "n1", cpu="400m")
    result = cluster.run({"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50}})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordpy.config.errors import validate
from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.descheduler.lownodeload import (
    AnomalyState,
    BalancePod,
    BalanceRound,
    BalanceState,
    EvictionLimits,
    RecentMove,
    plan_round,
)
from koordpy.descheduler.lownodeload.result import AnomalyKey, Kind
from koordpy.model.durations import format_rfc3339
from koordpy.model.objects import node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.model.quantity import parse_quantity
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.profile import build_plugins
from koordpy_testkit.builders import NodeBuilder, NodeMetricBuilder, PodBuilder

__all__ = ["NOW", "BalanceCluster", "hot_for"]

NOW = 1_800_000_000.0
Raw = dict[str, Any]


def _milli(value: str) -> int:
    return int(parse_quantity(value) * 1000)


def _bytes(value: str) -> int:
    return int(parse_quantity(value))


class BalanceCluster:
    """Nodes, pods and NodeMetrics for one round; see the module docstring."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now
        self.nodes: dict[str, Raw] = {}
        self.pods: list[Raw] = []
        self.usage: dict[str, tuple[int, int]] = {}
        """``namespace/name`` -> (cpu milli, memory bytes) as the NodeMetric reports it (absent: not reported)."""
        self.system: dict[str, tuple[int, int]] = {}
        self.age: dict[str, float | None] = {}
        self.no_metric: set[str] = set()

    def node(
        self,
        name: str,
        cpu: str = "4",
        memory: str = "3000Mi",
        pods: str = "10",
        *,
        unschedulable: bool = False,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        age: float | None = 10.0,
        system: tuple[int, int] = (0, 0),
        metric: bool = True,
    ) -> Raw:
        """A node; ``age``: seconds since its NodeMetric's ``updateTime`` (None: no ``updateTime``)."""
        builder = NodeBuilder(name).allocatable(cpu=cpu, memory=memory, pods=pods)
        for key, value in (labels or {}).items():
            builder.label(key, value)
        for key, value in (annotations or {}).items():
            builder.annotation(key, value)
        raw = builder.build()
        if unschedulable:
            raw["spec"]["unschedulable"] = True
        self.nodes[name] = raw
        self.age[name] = age
        self.system[name] = system
        if not metric:
            self.no_metric.add(name)
        return raw

    def pod(
        self,
        name: str,
        node: str,
        cpu: str | None = "400m",
        memory: str | None = None,
        *,
        namespace: str = "default",
        owner: str | None = "ReplicaSet",
        usage: tuple[int, int] | None = None,
        reported: bool = True,
        priority: int | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        best_effort: bool = False,
        volumes: Iterable[Raw] = (),
        node_selector: Mapping[str, str] | None = None,
        affinity: Raw | None = None,
        created: float | None = None,
        scheduler: str = "koordpy-scheduler",
        limits: Mapping[str, str] | None = None,
    ) -> Raw:
        """A running pod on ``node``; its usage is its requests unless ``usage`` (cpu milli, memory bytes) is given,
        ``reported=False`` leaves it out of the NodeMetric."""
        builder = PodBuilder(name, namespace).node(node).scheduler(scheduler)
        requests: dict[str, str] = {}
        if not best_effort:
            if cpu is not None:
                requests["cpu"] = cpu
            if memory is not None:
                requests["memory"] = memory
            if requests:
                builder.requests(**requests)
            if limits:
                builder.limits(**limits)
        if owner is not None:
            builder.owner(owner, f"{owner.lower()}-{name}" if owner == "Pod" else "workload")
        if priority is not None:
            builder.priority(priority)
        for key, value in (labels or {}).items():
            builder.label(key, value)
        for key, value in (annotations or {}).items():
            builder.annotation(key, value)
        raw = builder.build()
        raw["metadata"]["creationTimestamp"] = format_rfc3339(self.now - 3600 if created is None else created)
        if volumes:
            raw["spec"]["volumes"] = list(volumes)
        if node_selector:
            raw["spec"]["nodeSelector"] = dict(node_selector)
        if affinity:
            raw["spec"]["affinity"] = affinity
        raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        self.pods.append(raw)
        key = f"{namespace}/{name}"
        if reported:
            self.usage[key] = (
                usage if usage is not None else (_milli(requests.get("cpu", "0")), _bytes(requests.get("memory", "0")))
            )
        return raw

    def metrics(self) -> list[Raw]:
        """One NodeMetric per node: its pods' usage, their sum plus its system usage."""
        out = []
        for name in self.nodes:
            if name in self.no_metric:
                continue
            builder = NodeMetricBuilder(name).report_interval(60)
            age = self.age[name]
            if age is not None:
                builder.updated(self.now - age)
            cpu, memory = self.system[name]
            builder.system_usage(cpu=f"{cpu}m", memory=str(memory))
            entries = []
            for raw in self.pods:
                if raw["spec"].get("nodeName") != name:
                    continue
                key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
                if key in self.usage:
                    entries.append((raw, self.usage[key]))
                    cpu += self.usage[key][0]
                    memory += self.usage[key][1]
            builder.usage(cpu=f"{cpu}m", memory=str(memory))
            for raw, (pod_cpu, pod_memory) in entries:
                meta = raw["metadata"]
                builder.pod(meta["namespace"], meta["name"], cpu=f"{pod_cpu}m", memory=str(pod_memory))
            out.append(builder.build())
        return out

    def documents(self) -> list[Raw]:
        """Every object, as a ``kubectl get -o yaml`` dump lists them."""
        return [*self.nodes.values(), *self.pods, *self.metrics()]

    def views(
        self, args: LowNodeLoadArgs, scheduler: SchedulerConfiguration | None = None
    ) -> tuple[BalanceState, ClusterState]:
        """The descheduler's and the extender's view of the objects."""
        state = BalanceState(args)
        cluster = ClusterState(build_plugins(scheduler or validate(SchedulerConfiguration, {})))
        for raw in self.nodes.values():
            node = node_from_dict(raw)
            state.upsert_node(node)
            cluster.upsert_node(node)
        for raw in self.pods:
            info = pod_from_dict(raw)
            state.upsert_pod(BalancePod(info, raw))
            cluster.upsert_pod(info, self.now)
        for raw in self.metrics():
            metric = nodemetric_from_dict(raw)
            state.upsert_metric(metric)
            cluster.upsert_metric(metric)
        return state, cluster

    def run(
        self,
        args: Mapping[str, Any] | LowNodeLoadArgs,
        *,
        migration: Mapping[str, Any] | None = None,
        scheduler: Mapping[str, Any] | None = None,
        anomalies: Mapping[AnomalyKey, AnomalyState] | None = None,
        ledger: Iterable[RecentMove] = (),
        migrating: Iterable[str] = (),
        limits: EvictionLimits | None = None,
    ) -> BalanceRound:
        """One round at ``now``. ``migration`` defaults to schedulerNames ``[koordpy-scheduler]`` (the pods' own)."""
        parsed = args if isinstance(args, LowNodeLoadArgs) else validate(LowNodeLoadArgs, dict(args))
        migration_args = validate(MigrationControllerArgs, migration or {"schedulerNames": ["koordpy-scheduler"]})
        scheduler_config = validate(SchedulerConfiguration, scheduler or {})
        state, cluster = self.views(parsed, scheduler_config)
        return plan_round(
            state,
            cluster,
            parsed,
            migration_args,
            now=self.now,
            anomalies=anomalies,
            ledger=ledger,
            migrating=migrating,
            limits=limits,
        )


def hot_for(nodes: Iterable[str], rounds: int, now: float = NOW, kind: Kind = "node") -> dict[AnomalyKey, AnomalyState]:
    """Anomaly states of nodes hot in the last ``rounds`` rounds (10 s apart) and not yet abnormal."""
    return {(kind, name): AnomalyState(None, rounds, 0, now - 10) for name in nodes}
