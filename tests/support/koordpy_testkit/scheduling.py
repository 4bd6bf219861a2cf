"""``ClusterHarness``: a ClusterState with the scheduler's plugins, fed raw JSON, for tests.

Example::

    h = ClusterHarness(usageThresholds={"cpu": 60}).node(make_node("n1")).metric(...)
    assert h.reason(make_pod("p"), "n1") is None
"""

from __future__ import annotations

from typing import Any, Self

from koordpy.config import LoadAwareSchedulingArgs, validate
from koordpy.model.objects import node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework import ClusterState, Status
from koordpy.scheduler.plugins.loadaware import NAME, LoadAwarePlugin
from koordpy_testkit.clock import DEFAULT_START

__all__ = ["NOW", "ClusterHarness"]

NOW = DEFAULT_START


class ClusterHarness:
    def __init__(self, **load_aware_args: Any) -> None:
        self.args = validate(LoadAwareSchedulingArgs, load_aware_args)
        self.plugin = LoadAwarePlugin(self.args)
        self.state = ClusterState([self.plugin])
        self.names: list[str] = []

    def node(self, raw: dict[str, Any]) -> Self:
        node = node_from_dict(raw)
        if node.name not in self.names:
            self.names.append(node.name)
        self.state.upsert_node(node)
        return self

    def metric(self, raw: dict[str, Any]) -> Self:
        self.state.upsert_metric(nodemetric_from_dict(raw))
        return self

    def assigned(self, raw: dict[str, Any], at: float = NOW) -> Self:
        self.state.upsert_pod(pod_from_dict(raw), at)
        return self

    def filter(self, raw_pod: dict[str, Any], now: float = NOW) -> dict[str, Status | None]:
        outcome = self.state.filter(pod_from_dict(raw_pod), self.names, now)
        return {name: outcome.statuses.get(name) for name in self.names}

    def reason(self, raw_pod: dict[str, Any], node: str, now: float = NOW) -> str | None:
        status = self.filter(raw_pod, now)[node]
        return None if status is None else status.reason

    def score(self, raw_pod: dict[str, Any], node: str, now: float = NOW) -> int:
        outcome = self.state.score(pod_from_dict(raw_pod), [node], now)
        return int(outcome.per_plugin[NAME][0])
