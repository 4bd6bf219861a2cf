"""LowNodeLoad: move pods off hot nodes through PodMigrationJobs (Koordinator v1.8 semantics), pure.

The round in small parts, each its own module:

* :mod:`.state`: the descheduler's view (usage rows per node, pods per node), fed by object events;
* :mod:`.thresholds`: a pool's thresholds as amounts, and the node classes;
* :mod:`.anomaly`: when a hot node has been hot long enough (a state machine, time passed in);
* :mod:`.ledger`: recent moves, counted until the NodeMetrics show them;
* :mod:`.filters`, :mod:`.ordering`: which pods may move, in which order, and which node goes first;
* :mod:`.destination`: where the scheduler would put a pod (the extender's own filter and score) and whether
  that node stays cool with it;
* :mod:`.budget`: the per-round eviction limits;
* :mod:`.balance`: one round (:func:`plan_round`), returning a :class:`BalanceRound`;
* :mod:`.manifest`: the PodMigrationJob of a planned move.

The threshold contract between the scheduler, this plugin and the agent is :mod:`koordpy.descheduler.contract`.
"""

from koordpy.descheduler.lownodeload.anomaly import AnomalyState
from koordpy.descheduler.lownodeload.balance import overutilized_reason, plan_round
from koordpy.descheduler.lownodeload.budget import EvictionLimits
from koordpy.descheduler.lownodeload.destination import Landing
from koordpy.descheduler.lownodeload.ledger import RecentMove, prune
from koordpy.descheduler.lownodeload.manifest import LABEL_PLUGIN, NAME, migration_job
from koordpy.descheduler.lownodeload.result import (
    BalanceRound,
    KeptPod,
    NodeReport,
    NodeStop,
    PlannedMove,
    PoolReport,
    ResourceLoad,
)
from koordpy.descheduler.lownodeload.state import BalancePod, BalanceState

__all__ = [
    "LABEL_PLUGIN",
    "NAME",
    "AnomalyState",
    "BalancePod",
    "BalanceRound",
    "BalanceState",
    "EvictionLimits",
    "KeptPod",
    "Landing",
    "NodeReport",
    "NodeStop",
    "PlannedMove",
    "PoolReport",
    "RecentMove",
    "ResourceLoad",
    "migration_job",
    "overutilized_reason",
    "plan_round",
    "prune",
]
