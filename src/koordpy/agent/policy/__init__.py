"""Pure waterline QoS policy: the one implementation the agent, ``koordpy agent plan`` and the simulator call.

Entry points::

    plan(policies, actions, node, pods, state, now) -> Plan        # precise (the seed's design)
    naive_plan(policies, actions, node, pods, state, now) -> Plan  # baseline: every candidate
    forget(state, failed_uids) -> AgentState                       # report failed actions

Feed ``plan.state`` into the next call. Units: cores, bytes, percent; ``now`` in epoch seconds.
Nothing here reads the clock or touches the filesystem.
"""

from koordpy.agent.policy.metrics import BUILTIN, Metric, Registry, ThrottleParams, registry
from koordpy.agent.policy.planner import PlanOptions, forget, is_protected, naive_plan, plan
from koordpy.agent.policy.types import (
    Action,
    ActionKind,
    AgentState,
    Event,
    Evicting,
    NodeSample,
    Plan,
    PodSample,
    RuleState,
    Throttled,
)

__all__ = [
    "BUILTIN",
    "Action",
    "ActionKind",
    "AgentState",
    "Event",
    "Evicting",
    "Metric",
    "NodeSample",
    "Plan",
    "PlanOptions",
    "PodSample",
    "Registry",
    "RuleState",
    "ThrottleParams",
    "Throttled",
    "forget",
    "is_protected",
    "naive_plan",
    "plan",
    "registry",
]
