"""What a plugin is: a listener for cluster events plus optional vectorised filter and score.

Filter and score take an array of node indices and return one verdict or score per index, so a
5,000-node request is one numpy pass instead of 5,000 Python calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo

__all__ = ["ClusterListener", "FilterPlugin", "FilterVerdicts", "Plugin", "ScorePlugin"]

IndexArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class FilterVerdicts:
    """Per requested index: ``codes[i]`` (a ``Code`` value) and ``reasons[reason_ids[i]]``."""

    codes: npt.NDArray[np.int8]
    reason_ids: npt.NDArray[np.int16]
    reasons: Sequence[str]

    @staticmethod
    def all_pass(count: int) -> FilterVerdicts:
        return FilterVerdicts(np.zeros(count, np.int8), np.zeros(count, np.int16), ("",))


class ClusterListener(Protocol):
    """Receives cluster changes. ``index`` is the node's slot in the shared ``NodeIndex``."""

    def on_capacity(self, capacity: int) -> None: ...
    def on_node(self, index: int, node: NodeInfo) -> None: ...
    def on_node_removed(self, index: int, name: str) -> None: ...
    def on_metric(self, name: str, metric: NodeMetricInfo | None) -> None: ...
    def on_pod_assigned(self, index: int | None, node_name: str, pod: PodInfo, now: float) -> None: ...
    def on_pod_unassigned(self, index: int | None, node_name: str, pod: PodInfo) -> None: ...


class Plugin(ClusterListener, Protocol):
    name: str


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, pod: PodInfo, indices: IndexArray, now: float) -> FilterVerdicts: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str
    weight: int

    def score(self, pod: PodInfo, indices: IndexArray, now: float) -> npt.NDArray[np.int64]:
        """Scores 0..100 per index."""
        ...
