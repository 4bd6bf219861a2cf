"""Pressure rules on the pods a rule protects: which pods it watches, which readings count, and the line.

A rule on a ``pod_*_pressure_*`` metric splits the node's pods in two. Its **candidates** are the pods its
action may act on, as for every rule (eligible pods; for a NodeQOS rule only those a PodQOS allows). The
pods it **protects** are the pods ``metricRule.selector`` selects by their labels, or, without a selector,
every pod of the node that is not a candidate (for a NodeQOSEnsurancePolicy, which acts on every eligible
pod, those are the pods the agent never touches: ``qos.protectedNamespaces``, priorities above
``qos.protectedPriorityAbove``, static pods). A protected pod is never a candidate of that rule.

The rule's value is the highest pressure among the protected pods, with one exclusion: **a pod held back
by its own limit** (:func:`own_limited`) stalls because of its own ``cpu.max`` (or ``memory.high``/``max``),
not because of its neighbours, so its reading does not count. Throttling the neighbours would cost them
work and give the pod nothing.

The line: a firing rule acts only on candidates ranked strictly below the highest-ranked protected pod
above its line (QoS class, then ``spec.priority``, Crane's order), so a pod is never throttled or evicted
for one less important than itself.

Values: no protected pod, or every one excluded by its own limit, reads 0 (nothing to relieve); protected
pods without a reading (cgroup v1 has no PSI) make the value unknown.

Not guaranteed: the exclusion horizon (:data:`OWN_LIMIT_WINDOWS` averaging windows) assumes the kernel's
exponential average, in which a stall weighs less than e^-3 (5 %) of itself three windows later; a pod
both at its own limit and contended counts as at its limit until that horizon passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from koordpy.agent.policy.metrics import Metric, Registry
from koordpy.agent.policy.ordering import class_and_priority
from koordpy.agent.policy.types import Event, PodSample
from koordpy.agent.policy.waterline import RuleView
from koordpy.crds.ensurance import NodeQOSEnsurancePolicy, label_selector_matches

__all__ = ["OWN_LIMIT_WINDOWS", "PressureNeeds", "Protection", "own_limited", "pressure_needs", "protection"]

OWN_LIMIT_WINDOWS = 3.0
"""A pod's own limit excludes its pressure for this many of the metric's averaging windows after it last
held the pod back (avg10: 30 s)."""


@dataclass(frozen=True, slots=True)
class Protection:
    """What a pod-scope pressure rule sees this tick."""

    value: float | None
    """The highest counted pressure among the protected pods (percent); ``None``: none could be read."""
    protected: frozenset[str]
    """UIDs of the pods the rule protects (never its candidates)."""
    bound: tuple[int, int] | None
    """Class and priority of the highest-ranked protected pod above the line (``None``: none is)."""
    events: tuple[Event, ...] = ()

    def may_act_on(self, sample: PodSample) -> bool:
        """Whether the rule may act on ``sample`` (a candidate by every other test)."""
        return sample.uid not in self.protected and self.bound is not None and class_and_priority(sample) < self.bound


def own_limited(sample: PodSample, metric: Metric) -> bool:
    """Whether ``sample``'s ``metric`` reading comes from its own limit (see the module docstring)."""
    age = sample.own_limit_age.get(metric.resource)
    return age is not None and age <= OWN_LIMIT_WINDOWS * metric.window


def protection(
    view: RuleView, metric: Metric, pods: Iterable[PodSample], candidate: Callable[[PodSample], bool]
) -> Protection:
    """Evaluate the pod-scope rule ``view`` over ``pods``; ``candidate`` says whether its action may act on a pod
    (eligibility and PodQOS, as for every rule)."""
    assert metric.pod_value is not None, f"{metric.name} is not a pod-scope metric"
    selector = view.rule.metric_rule.selector
    live = [p for p in pods if not p.pod.terminated and p.pod.deletion_time is None]
    if selector is not None:
        protected = [p for p in live if label_selector_matches(selector, p.pod.labels)]
    else:
        protected = [p for p in live if not candidate(p)]
    readings: list[tuple[PodSample, float]] = []
    unknown = 0
    events: list[Event] = []
    for sample in protected:
        value = metric.pod_value(sample)
        if value is None:
            unknown += 1
        elif own_limited(sample, metric):
            if value > view.line:
                events.append(
                    Event(
                        "OwnLimit",
                        f"rule {view.key}: {metric.name} {value:.6g} comes from the pod's own {metric.resource} "
                        "limit: not counted against its neighbours",
                        pod=sample.key,
                    )
                )
        else:
            readings.append((sample, value))
    uids = frozenset(p.uid for p in protected)
    if not readings:
        return Protection(None if unknown else 0.0, uids, None, tuple(events))
    above = [class_and_priority(p) for p, v in readings if v > view.line]
    return Protection(max(v for _, v in readings), uids, max(above) if above else None, tuple(events))


@dataclass(frozen=True, slots=True)
class PressureNeeds:
    """Which PSI files a tick must read for the rules in force (the others are not read)."""

    node: frozenset[str] = frozenset()
    """Resources (``cpu``, ``memory``, ``io``) of ``/proc/pressure`` that node-scope rules use."""
    pods: frozenset[str] = frozenset()
    """Resources whose ``<resource>.pressure`` every pod cgroup is read for (pod-scope rules)."""


def pressure_needs(policies: Iterable[NodeQOSEnsurancePolicy], metrics: Registry) -> PressureNeeds:
    """What the rules of ``policies`` read, whatever node they select (a selector costs less than a miss)."""
    node: set[str] = set()
    pods: set[str] = set()
    for policy in policies:
        for rule in policy.spec.objective_ensurances:
            metric = metrics.get(rule.metric_rule.name)
            if metric is not None and metric.resource:
                (pods if metric.scope == "pods" else node).add(metric.resource)
    return PressureNeeds(frozenset(node), frozenset(pods))
