"""Values the waterline policy consumes and produces.

Units everywhere in the policy: CPU in cores (float), memory in bytes, utilizations in percent
(0-100). Times are epoch seconds supplied by the caller.

Not guaranteed: the policy never checks that a sample is fresh beyond ``NodeSample.time``
ordering and ``PlanOptions.max_sample_gap``; the caller decides what a sample is.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.model.objects import PodInfo

__all__ = [
    "MAX_MILLIS",
    "Action",
    "ActionKind",
    "AgentState",
    "Event",
    "Evicting",
    "NodeSample",
    "Plan",
    "PodSample",
    "RuleState",
    "Throttled",
    "check_pod",
]


class ActionKind(enum.StrEnum):
    EVICT = "evict"
    THROTTLE = "throttle"
    RESTORE = "restore"


MAX_MILLIS = 2**63 - 1
"""Largest CPU request/limit the policy acts on, in millicores (Kubernetes' int64 milli-value)."""


def check_pod(pod: PodInfo) -> None:
    """Raise ``ValueError`` naming the field when the pod's CPU request or limit is out of range.

    The policy computes caps and floors from these in floating point; a pod outside the range is
    one the caller skips (and reports), never one that fails a whole tick.
    """
    for field_name, amounts in (("requests", pod.requests), ("limits", pod.limits)):
        millis = amounts.get("cpu", 0)
        if not -MAX_MILLIS <= millis <= MAX_MILLIS:
            raise ValueError(f"spec.containers[].resources.{field_name}.cpu: out of range (at most {MAX_MILLIS}m)")


@dataclass(frozen=True, slots=True)
class NodeSample:
    """One node-level sample. ``None`` means the value could not be measured."""

    name: str
    time: float
    cpu: float | None  # cores in use
    cpu_capacity: float | None  # cores on the node
    memory: int | None  # bytes in use (MemTotal - MemAvailable)
    memory_capacity: int | None  # bytes
    labels: Mapping[str, str] = field(default_factory=dict)
    pressure: Mapping[str, float] = field(default_factory=dict)
    """The node's PSI by metric name (``cpu_pressure_some_avg10`` -> percent of the window); only the
    figures some rule uses are read. A missing key means unmeasured."""


@dataclass(frozen=True, slots=True)
class PodSample:
    """A pod on the node with its measured usage.

    ``cpu_cap`` is the pod's current CFS cap in cores as measured (``None``: unlimited or unknown);
    for pods the agent throttled, the ledger in :class:`AgentState` is authoritative instead.
    ``pressure``: the pod cgroup's PSI keyed as the node's (``cpu_pressure_some_avg10`` -> percent).
    ``own_limit_age``: per resource (``cpu``, ``memory``), seconds since the pod's own limit last held it
    back (its ``cpu.stat`` ``throttled_usec`` grew; its ``memory.events`` ``high`` or ``max`` grew); a
    missing key means not seen.
    """

    pod: PodInfo
    cpu: float | None  # cores
    memory: int | None  # working-set bytes
    cpu_cap: float | None = None
    pressure: Mapping[str, float] = field(default_factory=dict)
    own_limit_age: Mapping[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def start_time(self) -> float | None:
        pod = self.pod
        return pod.initialized_time or pod.scheduled_time or pod.creation_time


@dataclass(frozen=True, slots=True)
class RuleState:
    """Consecutive-sample counters of one rule (``<policy>.<rule>``)."""

    above: int = 0
    below: int = 0
    last_sample: float | None = None
    fired: bool = False  # fired in the current episode (reset once restored)


@dataclass(frozen=True, slots=True)
class Evicting:
    """An eviction the agent requested and still counts against the gaps until the pod is gone."""

    key: str
    since: float
    expires: float
    released: Mapping[str, float]  # metric -> amount credited when the eviction was planned


@dataclass(frozen=True, slots=True)
class Throttled:
    """A pod whose CFS cap the agent lowered. ``original`` ``None`` = it was unlimited."""

    key: str
    cap: float
    original: float | None
    metric: str
    actions: tuple[str, ...]
    since: float


@dataclass(frozen=True, slots=True)
class AgentState:
    """Everything the policy remembers between ticks. Immutable; :func:`plan` returns the next one."""

    rules: Mapping[str, RuleState] = field(default_factory=dict)
    last_acted: Mapping[str, float] = field(default_factory=dict)  # "<kind>/<action>" -> time
    evicting: Mapping[str, Evicting] = field(default_factory=dict)  # pod uid ->
    throttled: Mapping[str, Throttled] = field(default_factory=dict)  # pod uid ->

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the simulator and the agent's state file use it)."""
        return {
            "rules": {k: [v.above, v.below, v.last_sample, v.fired] for k, v in self.rules.items()},
            "lastActed": dict(self.last_acted),
            "evicting": {
                k: {"key": v.key, "since": v.since, "expires": v.expires, "released": dict(v.released)}
                for k, v in self.evicting.items()
            },
            "throttled": {
                k: {
                    "key": v.key,
                    "cap": v.cap,
                    "original": v.original,
                    "metric": v.metric,
                    "actions": list(v.actions),
                    "since": v.since,
                }
                for k, v in self.throttled.items()
            },
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> AgentState:
        """Inverse of :meth:`to_dict`; raises ``ValueError``/``KeyError``/``TypeError`` on bad input."""
        if not isinstance(raw, Mapping):
            raise TypeError(f"agent state must be an object, got {type(raw).__name__}")
        return cls(
            rules={k: RuleState(int(v[0]), int(v[1]), v[2], bool(v[3])) for k, v in raw.get("rules", {}).items()},
            last_acted={k: float(v) for k, v in raw.get("lastActed", {}).items()},
            evicting={
                k: Evicting(str(v["key"]), float(v["since"]), float(v["expires"]), dict(v["released"]))
                for k, v in raw.get("evicting", {}).items()
            },
            throttled={
                k: Throttled(
                    str(v["key"]),
                    float(v["cap"]),
                    None if v["original"] is None else float(v["original"]),
                    str(v["metric"]),
                    tuple(v["actions"]),
                    float(v["since"]),
                )
                for k, v in raw.get("throttled", {}).items()
            },
        )


@dataclass(frozen=True, slots=True)
class Action:
    """One planned operation on one pod.

    ``released`` is what this action is expected to free (throttle, evict) or to hand back
    (restore) for ``metric``, in that metric's unit. ``cpu_cap`` is the new CFS cap in cores for
    throttle/restore; ``restore_original`` means "write back exactly what was there before".
    """

    kind: ActionKind
    pod: str
    uid: str
    metric: str
    released: float
    action_name: str
    cpu_cap: float | None = None
    restore_original: bool = False
    grace_seconds: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"action": str(self.kind), "pod": self.pod, "metric": self.metric, "released": _num(self.released)}


@dataclass(frozen=True, slots=True)
class Event:
    """Something to report as a Kubernetes Event and a metric. ``pod`` empty = about the node."""

    reason: str
    message: str
    warning: bool = False
    pod: str = ""


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of one decision tick; see :func:`koordpy.agent.policy.plan`."""

    node: str
    waterlines: Mapping[str, Mapping[str, float]]
    gaps: Mapping[str, Mapping[str, float]]
    candidates: Mapping[str, tuple[str, ...]]
    actions: tuple[Action, ...]
    events: tuple[Event, ...]
    state: AgentState
    fired: tuple[str, ...] = ()  # rule keys above their line for avoidanceThreshold samples
    cooling_down: tuple[str, ...] = ()  # action kinds that fired but wait for a cool-down
    warnings: tuple[str, ...] = ()  # object problems (koordpy.agent.policy.objectcheck), filled by the caller

    def to_json(self) -> dict[str, Any]:
        """The ``koordpy agent plan -o json`` shape."""
        return {
            "node": self.node,
            "waterlines": {k: {m: _num(v) for m, v in ms.items()} for k, ms in self.waterlines.items()},
            "gaps": {k: {m: _num(v) for m, v in ms.items()} for k, ms in self.gaps.items()},
            "candidates": {k: list(v) for k, v in self.candidates.items()},
            "actions": [a.to_json() for a in self.actions],
            "warnings": list(self.warnings),
        }


def _num(value: float) -> float | int:
    """Round away float noise (1e-9) so JSON output is stable; integers stay integers."""
    rounded = round(value, 9)
    return int(rounded) if rounded == int(rounded) and abs(rounded) < 2**53 else rounded
