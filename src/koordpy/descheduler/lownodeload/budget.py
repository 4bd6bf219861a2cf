"""How many moves one round may make: the descheduler's per-round eviction limits.

Koordinator's ``DeschedulerConfiguration`` fields ``maxNoOfPodsToEvictPerNode``, ``maxNoOfPodsToEvictPerNamespace``
and ``maxNoOfPodsToEvictTotal`` (its ``EvictionLimiter``, one count per descheduling cycle): a move that would make
a count exceed its limit is not made (the pod stays, the round goes on with the next pod). Unset: no limit; 0: no
move at all. The node counted is the one the pod leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EvictionLimits", "RoundBudget"]


@dataclass(frozen=True, slots=True)
class EvictionLimits:
    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None


@dataclass(slots=True)
class RoundBudget:
    """The counts of one round against ``limits``."""

    limits: EvictionLimits
    nodes: dict[str, int] = field(default_factory=dict)
    namespaces: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def refuse(self, node: str, namespace: str) -> str | None:
        """Why one more move off ``node`` in ``namespace`` would exceed a limit, or None."""
        limits = self.limits
        if limits.total is not None and self.total + 1 > limits.total:
            return f"maxNoOfPodsToEvictTotal ({limits.total}) reached this round"
        if limits.per_node is not None and self.nodes.get(node, 0) + 1 > limits.per_node:
            return f"maxNoOfPodsToEvictPerNode ({limits.per_node}) reached on {node} this round"
        if limits.per_namespace is not None and self.namespaces.get(namespace, 0) + 1 > limits.per_namespace:
            return f"maxNoOfPodsToEvictPerNamespace ({limits.per_namespace}) reached in {namespace} this round"
        return None

    def count(self, node: str, namespace: str) -> None:
        self.total += 1
        self.nodes[node] = self.nodes.get(node, 0) + 1
        self.namespaces[namespace] = self.namespaces.get(namespace, 0) + 1
