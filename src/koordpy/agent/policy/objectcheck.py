"""Warnings about QoS objects that would otherwise do nothing, silently.

:func:`qos_warnings` looks at the NodeQOSEnsurancePolicy/NodeQOS, PodQOS and AvoidanceAction
objects together and returns one :class:`PolicyWarning` per problem, naming the object it is
about (the agent records it as an Event on that object; ``koordpy agent plan`` and the simulator
print it). Reasons:

- ``UnknownMetric``: a rule's ``metricRule.name`` is a Crane metric the registry does not act on (the rule
  is skipped; a name neither Crane nor koordpy knows is refused when the object is validated).
- ``UnknownAction``: a rule's ``actionName`` or a PodQOS ``allowedActions`` entry names no AvoidanceAction.
- ``UnsupportedAction``: the AvoidanceAction neither evicts nor throttles CPU (for example Crane's
  ``disablescheduling``, which only has ``coolDownSeconds``): koordpy does not disable scheduling.
- ``SelectsNoNode``: the policy's node selector matches none of the nodes given (only checked when
  the caller knows the nodes).
- ``NoPodAllowed``: a NodeQOS rule's action is listed by no PodQOS, so it acts on no pod (Crane v0.8+).
- ``SelectsNoPod``: a PodQOS has no selector at all, which selects no pod (Crane).
- ``IgnoredField``: a field koordpy keeps but does not act on is set.
- ``ProtectsSystemPodsOnly``: a NodeQOSEnsurancePolicy rule on a ``pod_*_pressure_*`` metric has no
  ``metricRule.selector``: such a policy acts on every eligible pod, so the rule protects only the pods the
  agent never touches (``koordpy.agent.policy.pressure``).

Not guaranteed: a PodQOS whose selectors happen to match no running pod is not reported (pods come
and go); per-tick problems (a metric that cannot be measured) are the planner's Events instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from koordpy.agent.policy.metrics import BUILTIN, Registry
from koordpy.crds.ensurance import (
    AvoidanceAction,
    NodeQOS,
    NodeQOSEnsurancePolicy,
    PodQOS,
    label_selector_matches,
)

__all__ = ["PolicyWarning", "acted_on", "qos_warnings"]


@dataclass(frozen=True, slots=True)
class PolicyWarning:
    """One problem with one object (``kind``/``name``)."""

    kind: str
    name: str
    reason: str
    message: str

    @property
    def text(self) -> str:
        return f"{self.kind} {self.name}: {self.message}"


def qos_warnings(
    policies: Iterable[NodeQOSEnsurancePolicy | NodeQOS],
    actions: Mapping[str, AvoidanceAction] | Sequence[AvoidanceAction],
    pod_qos: Sequence[PodQOS] = (),
    *,
    metrics: Registry = BUILTIN,
    node_labels: Sequence[Mapping[str, str]] | None = None,
) -> list[PolicyWarning]:
    """Every warning, in a stable order (policies by name, then PodQOS by name).

    ``node_labels``: the labels of every node the caller knows; ``None`` skips ``SelectsNoNode``
    (the agent sees only its own node, where a policy for other nodes is normal).
    """
    by_name = actions if isinstance(actions, Mapping) else {a.metadata.name: a for a in actions}
    out: list[PolicyWarning] = []
    allowed = {name for q in pod_qos for name in q.spec.allowed_actions}
    for obj in sorted(policies, key=lambda p: (p.metadata.name, p.kind)):
        kind, name = obj.kind, obj.metadata.name

        def warn(reason: str, message: str, kind: str = kind, name: str = name) -> None:
            out.append(PolicyWarning(kind, name, reason, message))

        if isinstance(obj, NodeQOS):
            for field in obj.spec.ignored_fields():
                warn("IgnoredField", f"spec.{field} is kept but koordpy does not act on it")
            policy = obj.to_policy()
        else:
            policy = obj
        if node_labels is not None and not any(label_selector_matches(policy.spec.selector, n) for n in node_labels):
            warn("SelectsNoNode", "spec.selector matches no node: its rules never apply")
        list_field = "rules" if policy.kind == "NodeQOS" else "objectiveEnsurances"
        for i, rule in enumerate(policy.spec.objective_ensurances):
            where = f"spec.{list_field}[{i}] ({rule.name})"
            metric = metrics.get(rule.metric_rule.name)
            if (
                metric is not None
                and metric.scope == "pods"
                and policy.kind != "NodeQOS"
                and rule.metric_rule.selector is None
            ):
                warn(
                    "ProtectsSystemPodsOnly",
                    f"{where}: {rule.metric_rule.name} without metricRule.selector protects only the pods the agent "
                    "never touches (a NodeQOSEnsurancePolicy acts on every other one): select the pods to protect",
                )
            if metric is None:
                warn(
                    "UnknownMetric",
                    f"{where}: metric {rule.metric_rule.name!r} is a Crane metric koordpy does not act on "
                    f"(it acts on {acted_on(metrics)}): rule skipped",
                )
            action = by_name.get(rule.action_name)
            if action is None:
                warn("UnknownAction", f"{where}: no AvoidanceAction named {rule.action_name!r}: the rule does nothing")
                continue
            if not _acts(action):
                warn(
                    "UnsupportedAction",
                    f"{where}: AvoidanceAction {rule.action_name!r} neither evicts nor throttles CPU "
                    "(koordpy does not disable scheduling): the rule does nothing",
                )
                continue
            if policy.kind == "NodeQOS" and rule.action_name not in allowed:
                warn(
                    "NoPodAllowed",
                    f"{where}: no PodQOS lists {rule.action_name!r} in allowedActions: the rule acts on no pod",
                )
    for q in sorted(pod_qos, key=lambda q: q.metadata.name):
        name = q.metadata.name
        if q.spec.selects_nothing():
            out.append(
                PolicyWarning("PodQOS", name, "SelectsNoPod", "no labelSelector and no scopeSelector: selects no pod")
            )
        if not q.spec.allowed_actions:
            out.append(PolicyWarning("PodQOS", name, "NoPodAllowed", "spec.allowedActions is empty: allows no action"))
        for i, action_name in enumerate(q.spec.allowed_actions):
            if action_name not in by_name:
                out.append(
                    PolicyWarning(
                        "PodQOS",
                        name,
                        "UnknownAction",
                        f"spec.allowedActions[{i}]: no AvoidanceAction named {action_name!r}",
                    )
                )
        for field, value in (("resourceQOS", q.spec.resource_qos), ("podQualityProbe", q.spec.pod_quality_probe)):
            if value:
                out.append(
                    PolicyWarning(
                        "PodQOS", name, "IgnoredField", f"spec.{field} is kept but koordpy does not act on it"
                    )
                )
    return out


def acted_on(metrics: Registry) -> str:
    """The metrics ``metrics`` acts on, for a message: the pressure metrics summed up in one phrase."""
    plain = sorted(name for name, m in metrics.items() if m.family != "pressure")
    pressure = any(m.family == "pressure" for m in metrics.values())
    return ", ".join(plain) + (" and the [pod_]<cpu|memory|io>_pressure_* metrics" if pressure else "")


def _acts(action: AvoidanceAction) -> bool:
    spec = action.spec
    return spec.eviction is not None or (spec.throttle is not None and spec.throttle.cpu_throttle is not None)
