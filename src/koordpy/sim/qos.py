"""The seam between the simulated nodes and the agent's QoS planner.

Each QoS tick the engine hands a ``ClusterView`` (what every node's agent could measure) to a
``QosPlanner`` and applies the ``QosAction`` list it returns: throttle and restore set a pod's
CPU cap, evict removes the pod (its controller recreates it). The planner adapts the agent's own
plan functions; nothing in this module decides anything.

Not guaranteed: actions on pods that left their node since the view was taken are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import PodInfo

__all__ = ["ClusterView", "PodUsage", "QosAction", "QosPlanner"]

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class QosAction:
    kind: Literal["throttle", "evict", "restore"]
    pod: int
    """Trace pod id."""
    cpu_millis: float | None = None
    """New CPU cap for throttle/restore; None = uncapped."""


@dataclass(frozen=True, slots=True)
class PodUsage:
    pod_id: int
    pod: PodInfo
    cpu_millis: float
    memory_bytes: float
    cap_millis: float | None
    """The CPU cap the agent set, if any."""
    started: float
    """Epoch seconds the pod started running."""
    demand_millis: float = 0.0
    """What the pod would use if nothing limited it (its limit, the agent's cap or its neighbours)."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Measured usage of every node at one instant (epoch ``time``); pods fetched per node."""

    time: float
    names: Sequence[str]
    labels: Sequence[Mapping[str, str]]
    cpu_millis: F64
    cpu_capacity_millis: F64
    memory_bytes: F64
    memory_capacity_bytes: F64
    pods_of: Callable[[int], list[PodUsage]]


class QosPlanner(Protocol):
    name: str
    plans: int
    """Node plans computed so far (reported as ``qosPlans``)."""

    def step(self, view: ClusterView) -> list[QosAction]: ...
