"""One decision tick: detection, waterlines, gaps, the precise executor plan, the next state.

Execution per tick: evict, then throttle, then restore (restore only for metrics with no down gap
this tick). Within a kind, incompressible metrics (memory) come before compressible ones (cpu).
For each metric the candidates are sorted by that metric's sort key and acted on one at a time
until the gap is closed; every action is credited against *every* open gap it affects (an
eviction frees CPU and memory; a throttle frees CPU), so the next metric may already be satisfied.

In-flight ledger: pods the agent asked to evict (until they are gone or ``eviction_timeout`` +
grace has passed) and pods being deleted by anyone are never candidates, and what they will free is
credited against the gaps once, up front. Throttled pods keep their cap and original in the ledger
and are stepped down further from the cap they have.

Unknown pod usage never pushes the choice up the priority order: a candidate whose usage of the
metric is unknown is not acted on (``PodMetricMissing``), and no candidate of a *higher* QoS
class or priority than it is acted on for that metric this tick either (the walk stops there;
the gap stays open and ``GapNotClosed`` says so). Candidates of the same class and priority may
still close the gap. Rationale: evicting a Guaranteed prod pod because the batch pods below it
have no metric yet would invert the order the seed promises; leaving the gap open one tick (CPU
needs two samples) is the safe side.

Gangs: within one QoS class and priority, the eviction order takes pods in no gang before gang members
(``koordpy.scheduler.plugins.gang.gang_ref``, any gang API): evicting a member breaks a job that runs on
other nodes too. The order across classes and priorities is Crane's; the agent sees one node, so it does
not hold an eviction to keep a gang at its minimum (the migration arbitration does; the agent's
evictions go through the Eviction API, so a PodDisruptionBudget over the gang's members applies).

Not guaranteed: the plan assumes every action succeeds; the caller reports failures with
:func:`forget`, which drops the ledger entries so the pods become candidates again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from koordpy.agent.policy.metrics import BUILTIN, Metric, Registry, ThrottleParams
from koordpy.agent.policy.ordering import SortKey, class_and_priority, general_key
from koordpy.agent.policy.pressure import Protection, protection
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
from koordpy.agent.policy.waterline import RuleView, detect, gaps_from, rules_for_node, waterlines_from
from koordpy.crds.ensurance import AvoidanceAction, NodeQOSEnsurancePolicy, PodQOS, pod_qos_allows
from koordpy.scheduler.plugins.gang.spec import gang_ref

__all__ = ["PlanOptions", "forget", "naive_plan", "plan"]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_DOWN = (ActionKind.EVICT, ActionKind.THROTTLE)
_KINDS = (ActionKind.EVICT, ActionKind.THROTTLE, ActionKind.RESTORE)


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """Knobs of the policy that are not in the CRDs (the agent configuration sets them)."""

    protected_namespaces: frozenset[str] = frozenset({"kube-system"})
    """Pods in these namespaces are never throttled or evicted."""
    protected_priority_above: int = 1_000_000_000
    """Pods with ``spec.priority`` strictly above this are never touched (system-* classes)."""
    eviction_timeout: float = 300.0
    """Seconds (plus the grace period) an eviction stays in flight before its pod may be picked again."""
    max_sample_gap: float | None = None
    """Samples further apart than this are not consecutive (None: any spacing counts)."""
    metrics: Registry = field(default_factory=lambda: BUILTIN)
    """The metric registry."""


def plan(
    policies: Sequence[NodeQOSEnsurancePolicy],
    actions: Mapping[str, AvoidanceAction] | Sequence[AvoidanceAction],
    node: NodeSample,
    pods: Sequence[PodSample],
    state: AgentState,
    *,
    now: float,
    options: PlanOptions | None = None,
    assume_fired: bool = False,
    pod_qos: Sequence[PodQOS] = (),
) -> Plan:
    """Decide what to do on ``node`` now.

    Inputs: the NodeQOSEnsurancePolicies and AvoidanceActions (a mapping by name or a list), one
    node sample, the node's pods with their usage, the state returned by the previous call
    (``AgentState()`` at first) and ``now`` (epoch seconds; used for cool-downs and the ledger).
    ``assume_fired=True`` treats every rule whose metric is above its line as fired right now and
    ignores cool-downs (``koordpy agent plan``). ``pod_qos``: the PodQOS objects; rules of a
    ``NodeQOS`` act only on pods a PodQOS allows (see :func:`koordpy.crds.ensurance.pod_qos_allows`),
    rules of a NodeQOSEnsurancePolicy on every eligible pod (Crane before v0.8).

    Output: a :class:`Plan` with waterlines and gaps per action kind and metric, candidates in
    action order, the precise ordered actions, Events to emit and the next state. Pure: the
    inputs are not modified.
    """
    return _plan(
        policies,
        actions,
        node,
        pods,
        state,
        now=now,
        options=options or PlanOptions(),
        assume_fired=assume_fired,
        precise=True,
        pod_qos=pod_qos,
    )


def naive_plan(
    policies: Sequence[NodeQOSEnsurancePolicy],
    actions: Mapping[str, AvoidanceAction] | Sequence[AvoidanceAction],
    node: NodeSample,
    pods: Sequence[PodSample],
    state: AgentState,
    *,
    now: float,
    options: PlanOptions | None = None,
    assume_fired: bool = False,
    pod_qos: Sequence[PodQOS] = (),
) -> Plan:
    """The pre-seed baseline for comparison: once a rule fires, act on *every* candidate.

    Same detection, candidates, ledger and cool-downs as :func:`plan`; only the stop-at-the-gap
    rule is gone. Not for production use.
    """
    return _plan(
        policies,
        actions,
        node,
        pods,
        state,
        now=now,
        options=options or PlanOptions(),
        assume_fired=assume_fired,
        precise=False,
        pod_qos=pod_qos,
    )


def forget(state: AgentState, uids: Iterable[str], *, throttles: bool = False) -> AgentState:
    """Drop ledger entries of actions that failed.

    Default: in-flight evictions (e.g. refused with 429), so the pods become candidates again.
    ``throttles=True``: throttle entries instead (the cap could not be written); the caller then
    restores whatever cap it still holds for them.
    """
    gone = set(uids)
    if throttles:
        return replace(state, throttled={k: v for k, v in state.throttled.items() if k not in gone})
    return replace(state, evicting={k: v for k, v in state.evicting.items() if k not in gone})


def is_protected(sample: PodSample, options: PlanOptions) -> bool:
    pod = sample.pod
    return (
        pod.namespace in options.protected_namespaces
        or (pod.priority is not None and pod.priority > options.protected_priority_above)
        or MIRROR_ANNOTATION in pod.annotations
    )


@dataclass
class _Tick:
    node: NodeSample
    metrics: Registry
    gaps: dict[ActionKind, dict[str, float]]
    acted: set[str] = field(default_factory=set)
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def credit(self, sample: PodSample, kind: ActionKind, new_cap: float | None) -> dict[str, float]:
        """Subtract what acting on ``sample`` frees from every open down gap; return it per metric."""
        freed: dict[str, float] = {}
        names = {m for k in _DOWN for m in self.gaps[k]}
        for name in names:
            amount = _freed(self.metrics[name], sample, self.node, kind, new_cap)
            if amount:
                freed[name] = amount
        for k in _DOWN:
            for name in list(self.gaps[k]):
                self.gaps[k][name] -= freed.get(name, 0.0)
        return freed


def _freed(metric: Metric, sample: PodSample, node: NodeSample, kind: ActionKind, new_cap: float | None) -> float:
    if kind is ActionKind.EVICT:
        value = metric.evict(sample, node) if metric.evict_qualified and metric.evict is not None else None
    elif new_cap is not None and metric.throttle_qualified and metric.throttle_released is not None:
        value = metric.throttle_released(sample, node, new_cap)
    else:
        value = None
    return value or 0.0


def _plan(
    policies: Sequence[NodeQOSEnsurancePolicy],
    actions_in: Mapping[str, AvoidanceAction] | Sequence[AvoidanceAction],
    node: NodeSample,
    pods: Sequence[PodSample],
    state: AgentState,
    *,
    now: float,
    options: PlanOptions,
    assume_fired: bool,
    precise: bool,
    pod_qos: Sequence[PodQOS],
) -> Plan:
    metrics = options.metrics
    actions = actions_in if isinstance(actions_in, Mapping) else {a.metadata.name: a for a in actions_in}
    rules, events = rules_for_node(policies, actions, node, metrics)
    node_rules = sorted({r.metric for r in rules if metrics[r.metric].scope == "node"})
    node_values = {name: metrics[name].node_value(node) for name in node_rules}
    for name, value in node_values.items():
        if value is None:
            events.append(Event("MetricMissing", f"node metric {name} is unavailable: no action on it", True))
    protections: dict[str, Protection] = {}
    for view in rules:
        metric = metrics[view.metric]
        if metric.scope != "pods":
            continue
        found = protection(view, metric, pods, _candidate_of(view, options, pod_qos))
        protections[view.key] = found
        events.extend(found.events)
        if found.value is None:
            events.append(
                Event("MetricMissing", f"rule {view.key}: {view.metric} of the pods it protects is unavailable", True)
            )
    values = {r.key: protections[r.key].value if r.key in protections else node_values[r.metric] for r in rules}

    if assume_fired:
        rule_states = dict(state.rules)
        firing = [r for r in rules if (v := values[r.key]) is not None and v > r.line]
        restoring = [r for r in rules if (v := values[r.key]) is not None and v <= r.line]
    else:
        rule_states, detected = detect(rules, values, state.rules, node.time, options.max_sample_gap)
        events.extend(detected)
        firing = [r for r in rules if rule_states[r.key].above >= r.rule.avoidance_threshold]
        restoring = [r for r in rules if rule_states[r.key].below >= r.rule.restore_threshold]
    for view in firing:
        if view.preview:
            events.append(Event("PreviewOnly", f"rule {view.key} fired; strategy Preview: no action"))
    acting = [r for r in rules if not r.preview and r.action is not None]
    firing = [r for r in firing if not r.preview and r.action is not None]
    restoring = [r for r in restoring if not r.preview and r.action is not None]

    by_uid = {p.uid: p for p in pods}
    evicting: dict[str, Evicting] = {}
    for uid, prior in state.evicting.items():
        if uid not in by_uid:
            continue
        if prior.expires <= now:
            events.append(
                Event("EvictionTimedOut", f"pod still present {now - prior.since:.0f}s after eviction", True, prior.key)
            )
            continue
        evicting[uid] = prior
    throttled = {uid: t for uid, t in state.throttled.items() if uid in by_uid}

    # What pods already on their way out will free, credited once.
    pending: dict[str, float] = {}
    for sample in pods:
        entry = evicting.get(sample.uid)
        if entry is not None:
            for name, amount in entry.released.items():
                pending[name] = pending.get(name, 0.0) + amount
        elif sample.pod.deletion_time is not None:
            for name in {r.metric for r in rules}:
                amount = _freed(metrics[name], sample, node, ActionKind.EVICT, None)
                pending[name] = pending.get(name, 0.0) + amount

    all_lines = {k: waterlines_from(acting, k) for k in _KINDS}
    gaps: dict[ActionKind, dict[str, float]] = {}
    down_metrics: set[str] = set()
    for kind in _DOWN:
        raw = gaps_from(firing, values, kind)
        down_metrics.update(raw)
        gaps[kind] = {m: g - pending.get(m, 0.0) for m, g in raw.items() if g - pending.get(m, 0.0) > 0}
    shown_gaps = {k: dict(v) for k, v in gaps.items()}
    # A family with a throttling metric above its line gives nothing back (its restores would undo its throttles).
    down_families = {metrics[m].family for m in down_metrics if metrics[m].throttleable}
    up = gaps_from(restoring, values, ActionKind.RESTORE)
    gaps[ActionKind.RESTORE] = {
        m: g for m, g in up.items() if m not in down_metrics and metrics[m].family not in down_families
    }
    shown_gaps[ActionKind.RESTORE] = dict(gaps[ActionKind.RESTORE])

    tick = _Tick(node=node, metrics=metrics, gaps=gaps, events=events)
    new_last = dict(state.last_acted)
    cooling: list[str] = []
    candidates: dict[str, tuple[str, ...]] = {str(k): () for k in _KINDS}

    eligible = [
        p
        for p in pods
        if not is_protected(p, options)
        and not p.pod.terminated
        and p.pod.deletion_time is None
        and p.uid not in evicting
    ]
    for kind in _DOWN:
        kind_rules = [r for r in firing if kind in r.kinds() and r.metric in gaps[kind]]
        if not gaps[kind] or not kind_rules:
            continue
        names = sorted({r.rule.action_name for r in kind_rules})
        if not assume_fired and not _ready(kind, names, actions, state.last_acted, now):
            cooling.append(str(kind))
            continue
        pool = [
            p
            for p in eligible
            if p.uid not in tick.acted
            and not (kind is ActionKind.EVICT and p.pod.is_daemonset_pod)
            and _allowed(p, kind_rules, pod_qos)
        ]
        before = len(tick.actions)
        order = _run_down(
            tick,
            kind=kind,
            pool=pool,
            rules=kind_rules,
            throttled=throttled,
            precise=precise,
            may_act=_pressure_filter(kind_rules, protections, pod_qos),
        )
        candidates[str(kind)] = order
        if len(tick.actions) > before:
            for name in names:
                new_last[f"{kind}/{name}"] = now

    restore_order = _run_restore(
        tick,
        by_uid=by_uid,
        throttled=throttled,
        evicting=evicting,
        acting=acting,
        restoring=restoring,
        actions=actions,
        state=state,
        now=now,
        assume_fired=assume_fired,
        cooling=cooling,
        new_last=new_last,
    )
    candidates[str(ActionKind.RESTORE)] = restore_order

    next_state = _next_state(
        state,
        rule_states=rule_states,
        last_acted=new_last,
        evicting=evicting,
        throttled=throttled,
        actions=tick.actions,
        by_uid=by_uid,
        node=node,
        now=now,
        options=options,
    )
    return Plan(
        node=node.name,
        waterlines={str(k): v for k, v in all_lines.items()},
        gaps={str(k): v for k, v in shown_gaps.items()},
        candidates=candidates,
        actions=tuple(tick.actions),
        events=tuple(tick.events),
        state=next_state,
        fired=tuple(r.key for r in firing),
        cooling_down=tuple(cooling),
    )


def _allowed(sample: PodSample, rules: Sequence[RuleView], pod_qos: Sequence[PodQOS]) -> bool:
    """Some rule driving this kind may act on the pod: an unscoped one, or a NodeQOS rule a PodQOS allows."""
    return any(not r.scoped or pod_qos_allows(pod_qos, sample.pod, r.rule.action_name) for r in rules)


def _candidate_of(view: RuleView, options: PlanOptions, pod_qos: Sequence[PodQOS]) -> Callable[[PodSample], bool]:
    """Whether ``view``'s action may act on a pod at all (eligible and, for NodeQOS, allowed by a PodQOS)."""

    def candidate(sample: PodSample) -> bool:
        return not is_protected(sample, options) and _allowed(sample, [view], pod_qos)

    return candidate


MayAct = Callable[[PodSample, Metric], bool]


def _pressure_filter(
    rules: Sequence[RuleView], protections: Mapping[str, Protection], pod_qos: Sequence[PodQOS]
) -> MayAct:
    """For a pod-scope metric: some firing rule of it allows the pod and ranks it below a pod it protects
    (:meth:`Protection.may_act_on`). Every other metric: no further condition."""

    def may_act(sample: PodSample, metric: Metric) -> bool:
        if metric.scope != "pods":
            return True
        return any(
            r.metric == metric.name
            and (p := protections.get(r.key)) is not None
            and p.may_act_on(sample)
            and _allowed(sample, [r], pod_qos)
            for r in rules
        )

    return may_act


def _ready(
    kind: ActionKind,
    names: Sequence[str],
    actions: Mapping[str, AvoidanceAction],
    last: Mapping[str, float],
    now: float,
) -> bool:
    """A kind may act if at least one of the actions driving it is out of its cool-down."""
    for name in names:
        action = actions[name]
        stamp = last.get(f"{kind}/{name}", -math.inf)
        if now >= stamp + action.spec.cool_down_seconds:
            return True
    return False


def _throttle_params(rules: Iterable[RuleView]) -> ThrottleParams:
    """The larger minCPURatio and stepCPURatio win when several actions throttle."""
    min_ratio = step = 0
    for view in rules:
        spec = view.action.spec if view.action is not None else None
        cpu = spec.throttle.cpu_throttle if spec is not None and spec.throttle is not None else None
        if cpu is not None:
            min_ratio = max(min_ratio, cpu.min_cpu_ratio)
            step = max(step, cpu.step_cpu_ratio)
    return ThrottleParams(min_ratio, step)


def _grace(rules: Iterable[RuleView]) -> int | None:
    """The smallest terminationGracePeriodSeconds among the evicting actions (None: pod's own)."""
    values = [
        r.action.spec.eviction.termination_grace_period_seconds
        for r in rules
        if r.action is not None and r.action.spec.eviction is not None
    ]
    set_values = [v for v in values if v is not None]
    return min(set_values) if set_values else None


def _metric_order(names: Iterable[str], metrics: Registry) -> list[Metric]:
    return sorted((metrics[n] for n in names), key=lambda m: (m.compressible, m.name))


def _run_down(
    tick: _Tick,
    *,
    kind: ActionKind,
    pool: Sequence[PodSample],
    rules: Sequence[RuleView],
    throttled: Mapping[str, Throttled],
    precise: bool,
    may_act: MayAct,
) -> tuple[str, ...]:
    params = _throttle_params(rules)
    grace = _grace(rules)
    action_name = ",".join(sorted({r.rule.action_name for r in rules}))
    shown: tuple[str, ...] | None = None
    for metric in _metric_order(tick.gaps[kind], tick.metrics):
        able = metric.evictable if kind is ActionKind.EVICT else metric.throttleable
        qualified = metric.evict_qualified if kind is ActionKind.EVICT else metric.throttle_qualified
        if not able:
            tick.events.append(
                Event(f"Not{kind.title()}able", f"metric {metric.name} cannot be {kind}d: no action", True)
            )
            continue
        key = metric.sort_key or general_key
        order = sorted(
            (p for p in pool if may_act(p, metric)), key=_gang_members_last(key) if kind is ActionKind.EVICT else key
        )
        if shown is None:
            shown = tuple(p.key for p in order)
        # Stepwise (pressure): no size; every candidate steps down, an eviction takes one pod.
        fallback = metric.stepwise or not (qualified and precise)
        unknown_band: tuple[int, int] | None = None  # class and priority of the first pod of unknown usage
        if not qualified and not metric.stepwise:
            tick.events.append(
                Event("NotQualified", f"{kind} on {metric.name} cannot be measured: acting on every candidate", True)
            )
        evicted = len(tick.actions)
        for sample in order:
            if not fallback and tick.gaps[kind].get(metric.name, 0.0) <= 0:
                break
            if metric.stepwise and kind is ActionKind.EVICT and len(tick.actions) > evicted:
                break
            if unknown_band is not None and class_and_priority(sample) > unknown_band:
                break  # unknown usage below: never reach up the priority order instead
            if sample.uid in tick.acted:
                continue
            if kind is ActionKind.EVICT:
                known = _evict_one(tick, sample, metric=metric, grace=grace, action_name=action_name, fallback=fallback)
            else:
                known = _throttle_one(
                    tick,
                    sample,
                    metric=metric,
                    params=params,
                    throttled=throttled,
                    action_name=action_name,
                    fallback=fallback,
                )
            if not known and unknown_band is None:
                unknown_band = class_and_priority(sample)
        if tick.gaps[kind].get(metric.name, 0.0) > 0 and not fallback and not metric.stepwise:
            tick.events.append(
                Event(
                    "GapNotClosed",
                    f"{kind} on {metric.name}: {tick.gaps[kind][metric.name]:.6g} left, no candidate left",
                    True,
                )
            )
    return shown or ()


def _gang_members_last(key: SortKey) -> SortKey:
    """``key`` (which starts with the class and priority, :mod:`~koordpy.agent.policy.ordering`) with
    gang membership right after them: in one class and priority, pods in no gang first."""

    def keyed(sample: PodSample) -> tuple[object, ...]:
        found = key(sample)
        return (*found[:2], gang_ref(sample.pod) is not None, *found[2:])

    return keyed


def _evict_one(
    tick: _Tick, sample: PodSample, *, metric: Metric, grace: int | None, action_name: str, fallback: bool
) -> bool:
    """Evict ``sample`` if that frees something; False when its usage of ``metric`` is unknown."""
    released = metric.evict(sample, tick.node) if metric.evict is not None else None
    if released is None and (not fallback or metric.stepwise):
        tick.events.append(Event("PodMetricMissing", f"{metric.name} usage unknown: not evicted", True, sample.key))
        return False
    if not fallback and released is not None and released <= 0:
        return True  # evicting it would free nothing of this metric
    tick.acted.add(sample.uid)
    tick.credit(sample, ActionKind.EVICT, None)
    tick.actions.append(
        Action(ActionKind.EVICT, sample.key, sample.uid, metric.name, released or 0.0, action_name, grace_seconds=grace)
    )
    return True


def _throttle_one(
    tick: _Tick,
    sample: PodSample,
    *,
    metric: Metric,
    params: ThrottleParams,
    throttled: Mapping[str, Throttled],
    action_name: str,
    fallback: bool,
) -> bool:
    """Throttle ``sample`` one step if a step helps; False when its usage of ``metric`` is unknown."""
    if metric.throttle is None:
        return True
    entry = throttled.get(sample.uid)
    cap = entry.cap if entry is not None else sample.cpu_cap
    new_cap = metric.throttle(sample, tick.node, cap, params)
    if new_cap is None:
        if metric.throttle_released is not None and metric.throttle_released(sample, tick.node, 0.0) is None:
            tick.events.append(
                Event("PodMetricMissing", f"{metric.name} usage unknown: not throttled", True, sample.key)
            )
            return False
        return True
    released = metric.throttle_released(sample, tick.node, new_cap) if metric.throttle_released else None
    if released is None and not fallback:
        tick.events.append(Event("PodMetricMissing", f"{metric.name} usage unknown: not throttled", True, sample.key))
        return False
    tick.acted.add(sample.uid)
    tick.credit(sample, ActionKind.THROTTLE, new_cap)
    tick.actions.append(
        Action(ActionKind.THROTTLE, sample.key, sample.uid, metric.name, released or 0.0, action_name, cpu_cap=new_cap)
    )
    return True


def _run_restore(
    tick: _Tick,
    *,
    by_uid: Mapping[str, PodSample],
    throttled: Mapping[str, Throttled],
    evicting: Mapping[str, Evicting],
    acting: Sequence[RuleView],
    restoring: Sequence[RuleView],
    actions: Mapping[str, AvoidanceAction],
    state: AgentState,
    now: float,
    assume_fired: bool,
    cooling: list[str],
    new_last: dict[str, float],
) -> tuple[str, ...]:
    if not throttled:
        return ()
    throttle_actions = {r.rule.action_name for r in acting if ActionKind.THROTTLE in r.kinds()}
    # Orphans: the action that throttled them is gone from every policy: restore exactly, now.
    for uid, entry in sorted(throttled.items(), key=lambda kv: kv[1].key):
        if uid in tick.acted or set(entry.actions) & throttle_actions:
            continue
        tick.acted.add(uid)
        tick.actions.append(
            Action(
                ActionKind.RESTORE,
                entry.key,
                uid,
                entry.metric,
                0.0,
                ",".join(entry.actions),
                cpu_cap=entry.original,
                restore_original=True,
            )
        )
    gaps = tick.gaps[ActionKind.RESTORE]
    rules = [r for r in restoring if ActionKind.THROTTLE in r.kinds() and r.metric in gaps]
    if not gaps or not rules:
        return ()
    names = sorted({r.rule.action_name for r in rules})
    if not assume_fired and not _ready(ActionKind.RESTORE, names, actions, state.last_acted, now):
        cooling.append(str(ActionKind.RESTORE))
        return ()
    params = _throttle_params(r for r in acting if ActionKind.THROTTLE in r.kinds())
    shown: tuple[str, ...] | None = None
    acted_before = len(tick.actions)
    for metric in _metric_order(gaps, tick.metrics):
        if not metric.throttleable or metric.restore is None:
            continue
        pool = [
            by_uid[uid]
            for uid, entry in throttled.items()
            if uid not in tick.acted and uid not in evicting and _family(tick.metrics, entry.metric) == metric.family
        ]
        # Restore walks the throttle order backwards: the most important pods get CPU back first.
        order = sorted(pool, key=metric.sort_key or general_key, reverse=True)
        if shown is None:
            shown = tuple(p.key for p in order)
        for sample in order:
            if not metric.stepwise and gaps.get(metric.name, 0.0) <= 0:
                break
            if sample.uid in tick.acted:
                continue
            entry = throttled[sample.uid]
            step, handed_back = metric.restore(sample, tick.node, entry.cap, entry.original, params)
            tick.acted.add(sample.uid)
            for name in list(gaps):
                other = tick.metrics[name]
                if other.stepwise:
                    continue  # no size: nothing to count down
                if other is metric:
                    gaps[name] -= handed_back
                elif other.restore is not None and other.throttleable:
                    gaps[name] -= other.restore(sample, tick.node, entry.cap, entry.original, params)[1]
            tick.actions.append(
                Action(
                    ActionKind.RESTORE,
                    sample.key,
                    sample.uid,
                    metric.name,
                    handed_back,
                    ",".join(entry.actions),
                    cpu_cap=step.cap,
                    restore_original=step.original,
                )
            )
    if len(tick.actions) > acted_before:
        for name in names:
            new_last[f"{ActionKind.RESTORE}/{name}"] = now
    return shown or ()


def _family(metrics: Registry, name: str) -> str:
    """The family of the metric that throttled a pod (a name the registry no longer has: ``usage``)."""
    metric = metrics.get(name)
    return metric.family if metric is not None else "usage"


def _next_state(
    state: AgentState,
    *,
    rule_states: Mapping[str, RuleState],
    last_acted: Mapping[str, float],
    evicting: Mapping[str, Evicting],
    throttled: Mapping[str, Throttled],
    actions: Sequence[Action],
    by_uid: Mapping[str, PodSample],
    node: NodeSample,
    now: float,
    options: PlanOptions,
) -> AgentState:
    new_evicting = dict(evicting)
    new_throttled = dict(throttled)
    for action in actions:
        sample = by_uid[action.uid]
        if action.kind is ActionKind.EVICT:
            released = {
                name: amount
                for name, metric in options.metrics.items()
                if (amount := _freed(metric, sample, node, ActionKind.EVICT, None))
            }
            grace = action.grace_seconds if action.grace_seconds is not None else _pod_grace(sample)
            # A throttled pod keeps its ledger entry: if the eviction is refused, its cap is still ours.
            new_evicting[action.uid] = Evicting(action.pod, now, now + options.eviction_timeout + grace, released)
        elif action.kind is ActionKind.THROTTLE:
            assert action.cpu_cap is not None
            old = new_throttled.get(action.uid)
            original = old.original if old is not None else sample.cpu_cap
            names = tuple(sorted(set(old.actions if old else ()) | set(action.action_name.split(","))))
            new_throttled[action.uid] = Throttled(
                action.pod, action.cpu_cap, original, action.metric, names, old.since if old else now
            )
        elif action.restore_original or action.cpu_cap is None:
            new_throttled.pop(action.uid, None)
        else:
            new_throttled[action.uid] = replace(new_throttled[action.uid], cap=action.cpu_cap)
    return AgentState(
        rules=dict(rule_states),
        last_acted=dict(last_acted),
        evicting=new_evicting,
        throttled=new_throttled,
    )


def _pod_grace(sample: PodSample) -> int:
    grace = sample.pod.termination_grace_seconds
    return 30 if grace is None else grace
