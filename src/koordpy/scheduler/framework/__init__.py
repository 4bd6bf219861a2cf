"""Scheduling framework: outcomes as values, a stable node index, and the cluster state that
fans object events out to plugins and runs them in filter/score order.

Pure: no I/O, no clock reads (``now`` is an argument).
"""

from koordpy.scheduler.framework.cluster import ClusterState, FilterOutcome, ScoreOutcome
from koordpy.scheduler.framework.interfaces import ClusterListener, FilterVerdicts, Plugin
from koordpy.scheduler.framework.nodeindex import NodeIndex
from koordpy.scheduler.framework.status import Code, Status

__all__ = [
    "ClusterListener",
    "ClusterState",
    "Code",
    "FilterOutcome",
    "FilterVerdicts",
    "NodeIndex",
    "Plugin",
    "ScoreOutcome",
    "Status",
]
