"""What one balance round decided, as values (the manager files the moves, the CLI prints them, the simulator
applies them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from koordpy.descheduler.lownodeload.anomaly import AnomalyState
from koordpy.descheduler.lownodeload.destination import Landing
from koordpy.descheduler.lownodeload.ledger import RecentMove
from koordpy.model.durations import format_rfc3339

__all__ = [
    "AnomalyKey",
    "BalanceRound",
    "KeptPod",
    "Kind",
    "NodeReport",
    "NodeState",
    "NodeStop",
    "PlannedMove",
    "PoolReport",
    "ResourceLoad",
]

Kind = Literal["node", "prod"]
"""Which usage a decision is about: the node's, or its Prod pods'."""
NodeState = Literal["hot", "normal", "idle", "stale", "unknown"]
"""A node's class for one kind: ``stale`` (its NodeMetric is older than ``nodeMetricExpirationSeconds``) and
``unknown`` (no NodeMetric, or one without ``status.nodeMetric``) are neither hot nor idle."""
AnomalyKey = tuple[Kind, str]
"""(kind, node name)."""


@dataclass(frozen=True, slots=True)
class ResourceLoad:
    """One resource of a node against its pool's thresholds (percentages are of the raw allocatable)."""

    resource: str
    usage: int
    allocatable: int
    percent: float | None
    """``100 × usage / allocatable``; None when allocatable is 0."""
    low: float
    high: float
    state: Literal["idle", "normal", "hot"]
    """At or below ``low``: idle; above ``high``: hot (compared in amounts, as the classification)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "usage": self.usage,
            "allocatable": self.allocatable,
            "percent": None if self.percent is None else round(self.percent, 2),
            "low": round(self.low, 2),
            "high": round(self.high, 2),
            "state": self.state,
        }


@dataclass(frozen=True, slots=True)
class NodeReport:
    name: str
    pool: str
    state: NodeState
    resources: tuple[ResourceLoad, ...] = ()
    prod_state: NodeState | None = None
    """None when the pool has no Prod thresholds."""
    prod_resources: tuple[ResourceLoad, ...] = ()
    schedulable: bool = True
    metric_age: float | None = None
    """Seconds since the NodeMetric's ``updateTime``; None without one."""
    acted: bool = False
    """Hot and abnormal long enough this round: its pods were tried (node usage)."""
    prod_acted: bool = False
    anomaly: AnomalyState | None = None
    prod_anomaly: AnomalyState | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "pool": self.pool,
            "state": self.state,
            "schedulable": self.schedulable,
            "metricAgeSeconds": None if self.metric_age is None else round(self.metric_age, 3),
            "resources": {r.resource: r.as_json() for r in self.resources},
            "acted": self.acted,
            "anomaly": _anomaly(self.anomaly),
        }
        if self.prod_state is not None:
            out["prod"] = {
                "state": self.prod_state,
                "resources": {r.resource: r.as_json() for r in self.prod_resources},
                "acted": self.prod_acted,
                "anomaly": _anomaly(self.prod_anomaly),
            }
        return out


def _anomaly(state: AnomalyState | None) -> dict[str, Any]:
    if state is None:
        return {"abnormal": False, "hotRounds": 0, "normalRounds": 0}
    return {
        "abnormal": state.is_abnormal,
        "abnormalUntil": None if state.abnormal_until is None else format_rfc3339(state.abnormal_until),
        "hotRounds": state.abnormal,
        "normalRounds": state.normal,
    }


@dataclass(frozen=True, slots=True)
class PlannedMove:
    """One pod to move: the PodMigrationJob to file (see :func:`..manifest.migration_job`)."""

    pod: str
    """``namespace/name``."""
    uid: str
    node: str
    pool: str
    kind: Kind
    reason: str
    """``node is overutilized, cpu usage(83.20%)>threshold(70.00%)``: the job's ``koordinator.sh/evict-reason``."""
    usage: tuple[int, int]
    """The pod's cpu (millicores) and memory (bytes) in its node's NodeMetric."""
    prod: bool
    landing: Landing
    """The scheduler's pick for it (``landing.node`` None: no node passes; only without ``nodeFit``)."""
    destination_after: tuple[ResourceLoad, ...] = ()
    """The pick's resources with the pod added, against the pick's pool thresholds (empty: no pool, no pick)."""
    checked: bool = True
    """Whether the pick was required to stay cool (``nodeFit``)."""
    over: tuple[str, ...] = ()
    """The resources above their high threshold when the pod was picked, name-sorted (``cpu``, ``memory``): the
    reason as a label."""

    def recent(self, at: float) -> RecentMove:
        """The ledger entry of this move, filed at ``at``."""
        return RecentMove(self.pod, self.node, self.landing.node, at, self.usage[0], self.usage[1], self.prod)

    def as_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "pool": self.pool,
            "kind": self.kind,
            "reason": self.reason,
            "usage": {"cpu": self.usage[0], "memory": self.usage[1]},
            "destination": _landing(self.landing, self.destination_after, self.checked),
        }


def _landing(landing: Landing | None, after: tuple[ResourceLoad, ...], checked: bool) -> dict[str, Any] | None:
    if landing is None:
        return None
    return {
        "node": landing.node,
        "extenderScore": landing.extender_score,
        "score": landing.score,
        "candidates": landing.passed,
        "unfit": [{"node": node, "reason": reason} for node, reason in landing.unfit],
        "refused": dict(landing.refusals),
        "after": {r.resource: r.as_json() for r in after},
        "checked": checked,
    }


@dataclass(frozen=True, slots=True)
class KeptPod:
    """A pod of an acted-on hot node that was tried and stays, with why."""

    pod: str
    node: str
    pool: str
    kind: Kind
    why: str
    landing: Landing | None = None
    destination_after: tuple[ResourceLoad, ...] = ()
    cause: str = ""
    """``why`` as one word, for counting: ``evictableNamespaces``, ``podSelectors``, ``deleting``, ``moving``,
    ``unreadable``, a ``migrationController`` filter's name (``ExpectedReplicas``, ...), ``schedulerNames``,
    ``usageNotReported``, ``evictionLimits``, ``noDestination``, ``destinationUnknown``, ``destinationHot``."""

    def as_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "pool": self.pool,
            "kind": self.kind,
            "cause": self.cause,
            "why": self.why,
            "destination": _landing(self.landing, self.destination_after, True),
        }


@dataclass(frozen=True, slots=True)
class NodeStop:
    """Why the round stopped trying pods of an acted-on node."""

    node: str
    pool: str
    kind: Kind
    why: str
    moved: int
    untried: int
    """Pods of the node not tried after the stop."""

    def as_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pool": self.pool,
            "kind": self.kind,
            "why": self.why,
            "moved": self.moved,
            "untried": self.untried,
        }


class PoolReport:
    """One pool's outcome. ``nodes`` is built on first access (a round at thousands of nodes does not make a
    report per node unless someone reads them)."""

    __slots__ = ("_build", "_nodes", "capacity", "counts", "name", "outcome", "resources")

    def __init__(
        self,
        name: str,
        outcome: str,
        resources: tuple[str, ...],
        *,
        counts: Mapping[str, int],
        nodes: Callable[[], tuple[NodeReport, ...]] | tuple[NodeReport, ...],
        capacity: Mapping[Kind, Mapping[str, tuple[int, int]]] | None = None,
    ) -> None:
        self.name = name
        self.outcome = outcome
        """What the round did with the pool: ``balanced`` or why it did nothing (``no hot node``, ...)."""
        self.resources = resources
        self.counts = dict(counts)
        """Nodes per state (``hot``, ``normal``, ``idle``, ``stale``, ``unknown``)."""
        self.capacity = capacity or {}
        """Per kind and resource: (capacity before the round, capacity left), the idle nodes' ``(high − usage)``."""
        self._nodes = nodes if isinstance(nodes, tuple) else None
        self._build = None if isinstance(nodes, tuple) else nodes

    @property
    def nodes(self) -> tuple[NodeReport, ...]:
        """Every node of the pool, in name order."""
        if self._nodes is None:
            assert self._build is not None
            self._nodes = self._build()
            self._build = None
        return self._nodes

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": self.outcome,
            "resources": list(self.resources),
            "counts": dict(self.counts),
            "capacity": {
                kind: {r: {"before": before, "left": left} for r, (before, left) in values.items()}
                for kind, values in self.capacity.items()
            },
            "nodes": [node.as_json() for node in self.nodes],
        }


@dataclass(frozen=True)
class BalanceRound:
    """One round: per pool the nodes' classes, the moves to make, the pods left in place and why, the anomaly
    state to pass to the next round."""

    now: float
    paused: bool = False
    dry_run: bool = False
    pools: tuple[PoolReport, ...] = ()
    moves: tuple[PlannedMove, ...] = ()
    kept: tuple[KeptPod, ...] = ()
    stops: tuple[NodeStop, ...] = ()
    anomalies: Mapping[AnomalyKey, AnomalyState] = field(default_factory=dict)
    """Give it to the next round (nodes not in it are pristine)."""
    unpooled: tuple[str, ...] = ()
    """Nodes no pool selects (never hot nor idle)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "now": format_rfc3339(self.now),
            "paused": self.paused,
            "dryRun": self.dry_run,
            "pools": [pool.as_json() for pool in self.pools],
            "moves": [move.as_json() for move in self.moves],
            "kept": [kept.as_json() for kept in self.kept],
            "stops": [stop.as_json() for stop in self.stops],
            "unpooled": list(self.unpooled),
        }
