"""Rules -> consecutive-sample detection -> waterlines -> gaps.

A sample is *above* a rule when the node value is strictly greater than the rule's waterline.
A rule fires after ``avoidanceThreshold`` consecutive above-samples and keeps firing while it
stays above; it restores after ``restoreThreshold`` consecutive samples at or below the line.
"Consecutive" is strict: a missing value, a repeated sample (same or older ``NodeSample.time``)
or a hole longer than ``max_sample_gap`` seconds resets both counters. (Crane counted
above-samples cumulatively since the last restore.)

Waterline per action kind and metric = the smallest line among the rules that count for that kind.
Gap: evict/throttle ``usage - waterline``; restore ``waterline - usage``. A rule's value is its metric's
node value, or for a pod-scope pressure rule that of the pods it protects (``pressure``), so gaps are
taken rule by rule: the largest excess, the smallest room. Down and up gaps live
in separate maps (Crane wrote both into one map, the up gap overwriting the down gap).

A rule whose value has no finite waterline (it overflows a float) is ignored with an
``InvalidRule`` Event; the other rules go on.

Not guaranteed: ``metricRule.selector`` is evaluated only by pod-scope pressure rules (``pressure``);
every other metric is one node-level series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from koordpy.agent.policy.metrics import Registry
from koordpy.agent.policy.types import ActionKind, Event, NodeSample, RuleState
from koordpy.crds.ensurance import (
    AvoidanceAction,
    NodeQOSEnsurancePolicy,
    ObjectiveEnsurance,
    Strategy,
    label_selector_matches,
)

__all__ = ["RuleView", "detect", "gaps_from", "rules_for_node", "waterlines_from"]


@dataclass(frozen=True, slots=True)
class RuleView:
    """One rule of one policy that applies to this node, with its waterline in the metric's unit."""

    key: str  # "<policy>.<rule>"
    rule: ObjectiveEnsurance
    action: AvoidanceAction | None  # None: the named AvoidanceAction does not exist
    metric: str
    line: float
    scoped: bool = False  # from a NodeQOS: acts only on pods a PodQOS allows (Crane v0.8+)

    @property
    def preview(self) -> bool:
        return self.rule.strategy is Strategy.PREVIEW

    def kinds(self) -> tuple[ActionKind, ...]:
        """Down-kinds this rule drives (restore is implied by throttle)."""
        if self.action is None:
            return ()
        out: list[ActionKind] = []
        if self.action.spec.eviction is not None:
            out.append(ActionKind.EVICT)
        if self.action.spec.throttle is not None and self.action.spec.throttle.cpu_throttle is not None:
            out.append(ActionKind.THROTTLE)
        return tuple(out)


def rules_for_node(
    policies: Iterable[NodeQOSEnsurancePolicy],
    actions: Mapping[str, AvoidanceAction],
    node: NodeSample,
    metrics: Registry,
) -> tuple[list[RuleView], list[Event]]:
    """Rules of policies whose selector matches the node's labels, in policy then rule order."""
    views: list[RuleView] = []
    events: list[Event] = []
    for policy in sorted(policies, key=lambda p: p.metadata.name):
        if not label_selector_matches(policy.spec.selector, node.labels):
            continue
        for rule in policy.spec.objective_ensurances:
            key = f"{policy.metadata.name}.{rule.name}"
            metric = metrics.get(rule.metric_rule.name)
            if metric is None:
                events.append(
                    Event(
                        "UnknownMetric",
                        f"rule {key}: metric {rule.metric_rule.name!r} is a Crane metric koordpy does not act on",
                        True,
                    )
                )
                continue
            action = actions.get(rule.action_name)
            if action is None:
                events.append(
                    Event("UnknownAction", f"rule {key}: AvoidanceAction {rule.action_name!r} not found", True)
                )
            try:
                line = metric.waterline(rule.metric_rule.threshold)
            except (ArithmeticError, ValueError):
                line = math.nan
            if not math.isfinite(line):
                events.append(
                    Event(
                        "InvalidRule",
                        f"rule {key}: value {rule.metric_rule.value!r:.60} is out of range: ignored",
                        True,
                    )
                )
                continue
            views.append(RuleView(key, rule, action, metric.name, line, scoped=policy.kind == "NodeQOS"))
    return views, events


def detect(
    rules: Sequence[RuleView],
    values: Mapping[str, float | None],
    previous: Mapping[str, RuleState],
    sample_time: float,
    max_sample_gap: float | None,
) -> tuple[dict[str, RuleState], list[Event]]:
    """Advance every rule's counters by one sample; see the module docstring. ``values``: each rule's value
    by its key (its metric's node value; for a pod-scope rule, that of the pods it protects)."""
    out: dict[str, RuleState] = {}
    events: list[Event] = []
    for view in rules:
        old = previous.get(view.key, RuleState())
        if old.last_sample is not None and sample_time <= old.last_sample:
            out[view.key] = old  # the same sample again: it is not another consecutive one
            continue
        above, below = old.above, old.below
        if (
            old.last_sample is not None
            and max_sample_gap is not None
            and sample_time - old.last_sample > max_sample_gap
        ):
            above = below = 0
        value = values.get(view.key)
        if value is None:
            out[view.key] = RuleState(0, 0, sample_time, old.fired)
            continue
        fired = old.fired
        if value > view.line:
            above, below = above + 1, 0
            if above == view.rule.avoidance_threshold:
                fired = True
                events.append(
                    Event(
                        "AvoidanceTriggered",
                        f"rule {view.key}: {view.metric} {value:.6g} above {view.line:.6g} "
                        f"for {above} consecutive samples",
                    )
                )
        else:
            above, below = 0, below + 1
            if fired and below == view.rule.restore_threshold:
                fired = False
                events.append(
                    Event(
                        "RestoreTriggered",
                        f"rule {view.key}: {view.metric} {value:.6g} at or below {view.line:.6g} "
                        f"for {below} consecutive samples",
                    )
                )
        out[view.key] = RuleState(above, below, sample_time, fired)
    return out, events


def waterlines_from(rules: Iterable[RuleView], kind: ActionKind) -> dict[str, float]:
    """Smallest line per metric among ``rules`` that drive ``kind`` (restore: throttle rules)."""
    want = ActionKind.THROTTLE if kind is ActionKind.RESTORE else kind
    out: dict[str, float] = {}
    for view in rules:
        if want in view.kinds():
            out[view.metric] = min(out.get(view.metric, view.line), view.line)
    return out


def gaps_from(rules: Iterable[RuleView], values: Mapping[str, float | None], kind: ActionKind) -> dict[str, float]:
    """Positive gaps per metric of the ``rules`` that drive ``kind``, from each rule's value (by rule key).

    Down: the largest ``value - line`` (for one node value: from the smallest line); restore: the smallest
    ``line - value``. Rules without a value are left out (the caller reports them)."""
    want = ActionKind.THROTTLE if kind is ActionKind.RESTORE else kind
    found: dict[str, float] = {}
    for view in rules:
        value = values.get(view.key)
        if value is None or want not in view.kinds():
            continue
        if kind is ActionKind.RESTORE:
            gap = view.line - value
            found[view.metric] = min(found.get(view.metric, gap), gap)
        else:
            gap = value - view.line
            found[view.metric] = max(found.get(view.metric, gap), gap)
    return {metric: gap for metric, gap in found.items() if gap > 0}
