"""The load-aware oracle: what the extender should have decided, from the same plugin code.

:func:`sandwich_violations` replays kube-scheduler's calls to the extender (``extender_calls``, as the
recording proxy between them saw them). The extender learns a placement at bind time (the pod watch
only confirms it later), and binds run concurrently with later filter calls, so for each filter call the extender's
knowledge is only bracketed: it surely knew the pods whose bind *answered* before the filter was
sent, and at most knew the pods whose bind was *sent* before the filter answered. The load-aware
filter is monotone in the set of assigned pods (more pods, more estimated load), so the extender's
answer must satisfy ``passed(at most) ⊆ answer ⊆ passed(surely)``.

:func:`final_usage` computes each node's estimated usage after all bindings, as the plugin does.

Not guaranteed: NodeMetrics must not change during the replayed run (the oracle uses one snapshot).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender_calls import Decision

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.objects import node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.plugins.loadaware.estimator import go_round
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin
from koordpy.scheduler.profile import build_plugins

__all__ = ["NodeUsagePercent", "final_usage", "sandwich_violations", "score_mismatches"]

Raw = dict[str, Any]


def _state(
    config: SchedulerConfiguration,
    nodes: Sequence[Raw],
    metrics: Sequence[Raw],
    assigned: Sequence[Raw] = (),
    now: float = 0.0,
) -> ClusterState:
    state = ClusterState(build_plugins(config))
    for node in nodes:
        state.upsert_node(node_from_dict(node))
    for metric in metrics:
        state.upsert_metric(nodemetric_from_dict(metric))
    for pod in assigned:
        state.upsert_pod(pod_from_dict(pod), now)
    return state


class _Bracket:
    """The two states bracketing what the extender knew when it answered a call sent at ``sent``
    and answered at ``done``: ``surely`` holds pods whose bind answered before ``sent``, ``at_most``
    those whose bind was sent before ``done``. Calls must be fed in order; pods are added once each.
    """

    def __init__(
        self,
        config: SchedulerConfiguration,
        nodes: Sequence[Raw],
        metrics: Sequence[Raw],
        decisions: Sequence[Decision],
        pods: Mapping[str, Raw],
        now: float,
        assigned: Sequence[Raw] = (),
    ) -> None:
        self.surely = _state(config, nodes, metrics, assigned, now)
        self.at_most = _state(config, nodes, metrics, assigned, now)
        self._placed = [d for d in decisions if d.node is not None and d.bind_sent is not None]
        self._pods, self._now = pods, now
        # Keyed by (uid, cycle): a pod placed again after a failed bind moves to its new node (same uid).
        self._in_surely: set[tuple[str, int]] = set()
        self._in_at_most: set[tuple[str, int]] = set()

    def advance(self, sent: float, done: float) -> None:
        for other in self._placed:
            assert other.bind_sent is not None and other.node is not None
            answered = other.bind_outcome == "ok" and other.bind_done is not None
            key = (other.uid, other.cycle)
            if key not in self._in_surely and answered and other.bind_done < sent:
                self.surely.assume(pod_from_dict(self._pods[other.uid]), other.node, self._now)
                self._in_surely.add(key)
            if key not in self._in_at_most and other.bind_sent < done:
                self.at_most.assume(pod_from_dict(self._pods[other.uid]), other.node, self._now)
                self._in_at_most.add(key)


def sandwich_violations(
    decisions: Sequence[Decision],
    pods: Mapping[str, Raw],
    nodes: Sequence[Raw],
    metrics: Sequence[Raw],
    config: SchedulerConfiguration,
    now: float,
    *,
    assigned: Sequence[Raw] = (),
) -> tuple[list[str], int]:
    """Problems found, and how many filter answers were checked. ``assigned``: pods bound before the run
    (the extender listed them), ``pods``: the run's pods by uid."""
    bracket = _Bracket(config, nodes, metrics, decisions, pods, now, assigned)
    problems: list[str] = []
    checked = 0
    for decision in decisions:
        if decision.filter_sent is None or decision.filter_done is None or decision.outcome.endswith("-error"):
            continue  # no filter call, or it failed (a bind error later does not matter here)
        bracket.advance(decision.filter_sent, decision.filter_done)
        pod = pod_from_dict(pods[decision.uid])
        upper = set(bracket.surely.filter(pod, decision.candidates, now).passed)
        lower = set(bracket.at_most.filter(pod, decision.candidates, now).passed)
        answer = set(decision.passed)
        checked += 1
        if not answer <= upper:
            problems.append(
                f"{decision.pod} cycle {decision.cycle}: passed {sorted(answer - upper)} the oracle rejects"
            )
        if not lower <= answer:
            problems.append(
                f"{decision.pod} cycle {decision.cycle}: rejected {sorted(lower - answer)} the oracle passes"
            )
    return problems, checked


@dataclass(frozen=True, slots=True)
class NodeUsagePercent:
    node: str
    percent: dict[str, int]
    """Resource → round(estimated usage / allocatable × 100), as the filter computes it."""
    thresholds: dict[str, int]

    def over(self) -> dict[str, tuple[int, int]]:
        return {
            r: (p, self.thresholds[r])
            for r, p in self.percent.items()
            if self.thresholds.get(r, 0) and p > self.thresholds[r]
        }


def final_usage(
    config: SchedulerConfiguration, nodes: Sequence[Raw], metrics: Sequence[Raw], bound_pods: Sequence[Raw], now: float
) -> dict[str, NodeUsagePercent]:
    """Each node's estimated usage (reported usage + estimates of pods bound since) with all bound pods."""
    state = _state(config, nodes, metrics)
    for pod in bound_pods:
        state.upsert_pod(pod_from_dict(pod), now)
    plugin = next(p for p in state.plugins if isinstance(p, LoadAwarePlugin))
    out: dict[str, NodeUsagePercent] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        index = state.index.get(name)
        assert index is not None
        percent: dict[str, int] = {}
        thresholds: dict[str, int] = {}
        for pos, resource in enumerate(plugin.resources):
            alloc = int(plugin.alloc[index][pos])
            if alloc <= 0:
                continue
            percent[resource] = go_round(float(plugin.np_base[index][pos]) / alloc * 100)
            thresholds[resource] = int(plugin.np_thr[index][pos])
        out[name] = NodeUsagePercent(name, percent, thresholds)
    return out


def score_mismatches(
    decisions: Sequence[Decision],
    pods: Mapping[str, Raw],
    nodes: Sequence[Raw],
    metrics: Sequence[Raw],
    config: SchedulerConfiguration,
    now: float,
    *,
    assigned: Sequence[Raw] = (),
) -> tuple[list[str], int, int]:
    """Prioritize answers vs the plugin's extender score, bracketed like the filter answers.

    The score is monotone too (more load, lower or equal score), so each host's answer must lie between
    the score with the pods the extender surely knew and the score with all it may have known. Returns
    problems, the number of host scores checked, and how many of those the bracket pinned to one value.
    """
    bracket = _Bracket(config, nodes, metrics, decisions, pods, now, assigned)
    problems: list[str] = []
    checked = exact = 0
    for decision in decisions:
        if decision.prioritize_sent is None or decision.prioritize_done is None:
            continue
        bracket.advance(decision.prioritize_sent, decision.prioritize_done)
        pod = pod_from_dict(pods[decision.uid])
        names = list(decision.passed)
        high = dict(zip(names, bracket.surely.score(pod, names, now).extender.tolist(), strict=True))
        low = dict(zip(names, bracket.at_most.score(pod, names, now).extender.tolist(), strict=True))
        if not set(decision.extender_scores) <= set(names):
            problems.append(f"{decision.pod} cycle {decision.cycle}: scored {sorted(decision.extender_scores)}")
            continue
        # A host left out of the answer scores 0 (kube-scheduler adds nothing for it).
        for name in names:
            score = decision.extender_scores.get(name, 0)
            checked += 1
            exact += low[name] == high[name]
            if not low[name] <= score <= high[name]:
                problems.append(
                    f"{decision.pod} cycle {decision.cycle}: {name} scored {score}, oracle {low[name]}..{high[name]}"
                )
    return problems, checked, exact
