"""NonStrict deadlock: waiting GangGroups whose holds together keep each other from completing.

No upstream detects this (the Koordinator proposal names the risk: quota 10, three NonStrict gangs of
5 holding 3/3/4, nobody can complete). koordpy's definition, over a snapshot:

* a *waiting group* has at least one held member and permit verdict ``wait``;
* its *pending* members are the children neither held, bound nor terminated;
* a pod *fits* a node when, for every resource it requests (> 0), the node's free amount is at least the
  request, and when the node lists ``pods`` free, at least one pod slot is free. Only resource requests
  are compared: taints, affinity and load thresholds are not (the snapshot has no room for them);
* **deadlock** ⇔ at least two waiting groups, no pending member of any of them fits any node with the
  free resources as they are (after every hold) — a member kube-scheduler reported unschedulable since
  its last hold counts as fitting nowhere, since its verdict covers the node selectors, affinity and
  taints that requests cannot — and releasing the holds of one of them would let a pending member of
  *another* fit on a node that release frees. Without the last condition the groups are merely waiting
  for capacity; releasing one would help nobody and the wait times decide.

The victim is chosen among the groups whose release helps another: lowest priority (the highest
``spec.priority`` of its members, 0 when unset), then youngest (the latest gang creation time), then the
greatest group id, so the choice is deterministic. The finding names the groups the victim's release
helps (``helped``): ``GangCache`` makes the victim yield the freed room to them.

Not guaranteed: that the freed capacity is actually used by the other group (kube-scheduler decides),
nor detection of deadlocks that other filters (affinity, taints) cause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from koordpy.model.resources import ResourceList

__all__ = ["DeadlockFinding", "WaitingGroup", "find_deadlock", "fits"]


@dataclass(frozen=True, slots=True)
class WaitingGroup:
    group_id: str
    priority: int
    create_time: float
    held_pods: tuple[str, ...]
    holds: tuple[tuple[str, ResourceList], ...]
    """``(node, requests)`` of each held member."""
    pending: tuple[ResourceList, ...]
    """Requests of each pending member."""
    pending_failed: tuple[bool, ...] = ()
    """Per pending member (same order; missing: False): kube-scheduler reported its last attempt
    unschedulable (``PodScheduled=False``) and it was not held since. Its own filters (node selectors,
    affinity, taints) decided that, which requests alone cannot tell."""


@dataclass(frozen=True, slots=True)
class DeadlockFinding:
    groups: tuple[str, ...]
    victim: str
    reason: str
    helped: tuple[str, ...] = ()
    """The groups a pending member of which fits a node the victim's release frees, sorted."""


def fits(requests: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """Whether a pod with ``requests`` fits a node with ``free`` resources (requests only)."""
    if "pods" in free and free["pods"] < 1:
        return False
    return all(amount <= 0 or free.get(name, 0) >= amount for name, amount in requests.items() if name != "pods")


def _any_fits(pending: Sequence[ResourceList], free: Mapping[str, ResourceList]) -> bool:
    return any(fits(req, node_free) for req in pending for node_free in free.values())


def _untried(group: WaitingGroup) -> list[ResourceList]:
    """The pending members kube-scheduler has not found unschedulable since their last hold."""
    failed = group.pending_failed
    return [req for i, req in enumerate(group.pending) if not (i < len(failed) and failed[i])]


def _fits_freed(pending: Sequence[ResourceList], candidate: WaitingGroup, freed: Mapping[str, ResourceList]) -> bool:
    """Whether a pending member fits one of the nodes ``candidate``'s release frees."""
    nodes = {node for node, _ in candidate.holds if node in freed}
    return any(fits(req, freed[node]) for req in pending for node in nodes)


def _without(group: WaitingGroup, free: Mapping[str, ResourceList]) -> dict[str, ResourceList]:
    """Free resources if ``group``'s holds were released."""
    out = {node: dict(res) for node, res in free.items()}
    for node, requests in group.holds:
        if node not in out:
            continue
        target = out[node]
        for name, amount in requests.items():
            target[name] = target.get(name, 0) + amount
        if "pods" in target:
            target["pods"] += 1
    return out


def find_deadlock(groups: Sequence[WaitingGroup], free: Mapping[str, ResourceList]) -> DeadlockFinding | None:
    """The deadlock among ``groups`` given each node's free resources after every hold, or None."""
    if len(groups) < 2:
        return None
    if any(_any_fits(_untried(g), free) for g in groups):
        return None
    helps: dict[str, tuple[str, ...]] = {}
    for candidate in groups:
        freed = _without(candidate, free)
        helped = tuple(
            sorted(
                other.group_id
                for other in groups
                if other.group_id != candidate.group_id and _fits_freed(other.pending, candidate, freed)
            )
        )
        if helped:
            helps[candidate.group_id] = helped
    helpful = [g for g in groups if g.group_id in helps]
    if not helpful:
        return None
    victim = min(helpful, key=lambda g: (g.priority, -g.create_time, _reverse(g.group_id)))
    ids = tuple(sorted(g.group_id for g in groups))
    held = sum(len(g.held_pods) for g in groups)
    reason = (
        f"NonStrict gang deadlock: groups {'; '.join(ids)} hold {held} member(s) and no pending member of any "
        f"of them fits a node; releasing the {len(victim.held_pods)} held member(s) of {victim.group_id} "
        f"(priority {victim.priority}, the lowest-priority, youngest group whose release lets another proceed)"
    )
    return DeadlockFinding(ids, victim.group_id, reason, helps[victim.group_id])


def _reverse(text: str) -> tuple[int, ...]:
    """Sort key making the greatest string the smallest."""
    return (*(-ord(c) for c in text), 1)
