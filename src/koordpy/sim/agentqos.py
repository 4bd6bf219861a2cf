"""The agent's waterline QoS on simulated nodes, through the agent's own pure plan functions.

``AgentQosPlanner`` keeps one ``AgentState`` per node and, each QoS tick, calls the same
``koordpy.agent.policy.plan`` the node agent calls (or ``naive_plan`` for the baseline) with a
``NodeSample`` and ``PodSample``\\ s built from simulated usage, then turns the plan's actions into
``QosAction``\\ s for the engine.

Skipping quiet nodes: a node whose state holds nothing (no rule counting or fired, nothing
throttled or being evicted) and whose metric values are all at or below every line of the rules
that apply to it is not planned: the agent's detection would only count one more below-sample,
which matters solely for a rule that has fired. The lines and values come from the agent's own
``rules_for_node`` and metric registry. ``gate=False`` plans every node every tick (the unit tests
check both give the same run).

Policies: ``qos.policies`` holds NodeQOSEnsurancePolicy and NodeQOS objects (dispatched on ``kind``),
``qos.podQOS`` PodQOS objects; NodeQOS rules act only on pods a PodQOS allows, as in the agent.
:func:`scenario_qos_warnings` lists the objects' problems (the same checks as the agent and
``koordpy agent plan``) against the scenario's nodes.

Pressure rules (koordpy's ``*_pressure_*`` metrics) read the simulated pressure of
:class:`koordpy.sim.qospressure.PressureModel` (given as ``pressure``; without it those rules read no value).
``record=True`` keeps every action in :attr:`AgentQosPlanner.log` (``bench/colocation.py`` compares them with
a real node's).

Not guaranteed: evictions take effect at once (no grace period), throttles at the next sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from koordpy.agent.policy import ActionKind, AgentState, NodeSample, Plan, PlanOptions, PodSample, naive_plan, plan
from koordpy.agent.policy.objectcheck import qos_warnings
from koordpy.agent.policy.pressure import pressure_needs
from koordpy.agent.policy.waterline import rules_for_node
from koordpy.config.errors import ConfigError, validate
from koordpy.config.scenario import Scenario
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, NodeQOSEnsurancePolicy, PodQOS
from koordpy.sim.qos import ClusterView, QosAction
from koordpy.sim.qospressure import PressureModel

__all__ = [
    "AgentQosPlanner",
    "LoggedAction",
    "QosObjects",
    "load_qos",
    "load_qos_objects",
    "pressure_model",
    "scenario_qos_warnings",
]


@dataclass(frozen=True, slots=True)
class LoggedAction:
    """One action of a recorded run (cores for ``cap``; ``original``: a restore back to the pod's own)."""

    time: float
    node: str
    pod: str
    kind: str
    metric: str
    cap: float | None
    original: bool


class PlanFunction(Protocol):
    def __call__(
        self,
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
    ) -> Plan: ...


Check = tuple[Callable[[NodeSample], float | None], float]
"""A rule's node value function and its line (in the metric's unit)."""

PLAN_FUNCTIONS: dict[str, PlanFunction] = {"waterline": plan, "naive": naive_plan}


@dataclass
class QosObjects:
    """The scenario's QoS objects as the agent's models."""

    legacy: list[NodeQOSEnsurancePolicy] = field(default_factory=list)
    node_qos: list[NodeQOS] = field(default_factory=list)
    actions: dict[str, AvoidanceAction] = field(default_factory=dict)
    pod_qos: list[PodQOS] = field(default_factory=list)

    @property
    def policies(self) -> list[NodeQOSEnsurancePolicy]:
        """What the planner takes: the NodeQOSEnsurancePolicies and the converted NodeQOS objects."""
        return [*self.legacy, *(q.to_policy() for q in self.node_qos)]


def load_qos(scenario: Scenario) -> QosObjects:
    """The scenario's ``qos.policies``, ``qos.actions`` and ``qos.podQOS``.

    Raises ``ConfigError`` with paths under ``qos.``.
    """
    problems: list[tuple[str, str]] = []
    out = QosObjects()

    def load(path: str, model: type[Any], raw: Any) -> Any:
        try:
            return validate(model, raw)
        except ConfigError as exc:
            problems.extend((f"{path}.{where}", msg) for where, msg in exc.problems)
            return None

    for i, raw in enumerate(scenario.qos.policies):
        kind = raw.get("kind", "NodeQOSEnsurancePolicy")
        if kind == "NodeQOS":
            if (obj := load(f"qos.policies[{i}]", NodeQOS, raw)) is not None:
                out.node_qos.append(obj)
        elif kind == "NodeQOSEnsurancePolicy":
            if (obj := load(f"qos.policies[{i}]", NodeQOSEnsurancePolicy, raw)) is not None:
                out.legacy.append(obj)
        else:
            problems.append((f"qos.policies[{i}].kind", f"expected NodeQOSEnsurancePolicy or NodeQOS, got {kind!r}"))
    for i, raw in enumerate(scenario.qos.actions):
        if (obj := load(f"qos.actions[{i}]", AvoidanceAction, raw)) is not None:
            out.actions[obj.metadata.name] = obj
    for i, raw in enumerate(scenario.qos.pod_qos):
        if (obj := load(f"qos.podQOS[{i}]", PodQOS, raw)) is not None:
            out.pod_qos.append(obj)
    if problems:
        raise ConfigError(problems)
    return out


def load_qos_objects(scenario: Scenario) -> tuple[list[NodeQOSEnsurancePolicy], dict[str, AvoidanceAction]]:
    """The planner's policies (NodeQOS converted) and the actions by name; see :func:`load_qos`."""
    objects = load_qos(scenario)
    return objects.policies, objects.actions


def pressure_model(scenario: Scenario, objects: QosObjects, options: PlanOptions | None = None) -> PressureModel | None:
    """The scenario's pressure model when some rule reads pressure (``qos.pressure``), else None."""
    needs = pressure_needs(objects.policies, (options or PlanOptions()).metrics)
    if not needs.node and not needs.pods:
        return None
    return PressureModel(scenario.qos.pressure.cpu_contention)


def scenario_qos_warnings(scenario: Scenario, options: PlanOptions | None = None) -> list[str]:
    """The objects' problems (:func:`koordpy.agent.policy.objectcheck.qos_warnings`) against the
    scenario's nodes (labels: ``kubernetes.io/hostname`` plus the pool's, as the engine gives them)."""
    objects = load_qos(scenario)
    nodes = [
        {"kubernetes.io/hostname": f"{pool.name}-{i}", **pool.labels}
        for pool in scenario.node_pools
        for i in range(pool.count)
    ]
    warnings = qos_warnings(
        [*objects.legacy, *objects.node_qos],
        objects.actions,
        objects.pod_qos,
        metrics=(options or PlanOptions()).metrics,
        node_labels=nodes,
    )
    return [w.text for w in warnings]


class AgentQosPlanner:
    """One agent per node, each with its own state, all sharing the policies and actions."""

    def __init__(
        self,
        name: str,
        policies: Sequence[NodeQOSEnsurancePolicy],
        actions: Mapping[str, AvoidanceAction],
        plan_function: PlanFunction,
        *,
        options: PlanOptions | None = None,
        gate: bool = True,
        pod_qos: Sequence[PodQOS] = (),
        pressure: PressureModel | None = None,
        record: bool = False,
    ) -> None:
        self.name = name
        self.pressure = pressure
        self.record = record
        self.log: list[LoggedAction] = []
        """With ``record``: every action, in order."""
        self.pod_qos = list(pod_qos)
        self.policies = list(policies)
        self.actions = dict(actions)
        self.plan_function = plan_function
        self.options = options or PlanOptions()
        self.gate = gate
        self.states: dict[str, AgentState] = {}
        self.busy: set[str] = set()
        """Nodes whose state holds something (a rule counting or fired, a throttle, an eviction)."""
        self.plans = 0
        self._checks: dict[frozenset[tuple[str, str]], list[Check]] = {}
        self._row_checks: list[list[Check] | None] = []

    def _lines(self, sample: NodeSample) -> list[Check]:
        """(node value function, line) of every rule that applies to a node with these labels."""
        key = frozenset(sample.labels.items())
        checks = self._checks.get(key)
        if checks is None:
            rules, _ = rules_for_node(self.policies, self.actions, sample, self.options.metrics)
            checks = [(self.options.metrics[view.metric].node_value, view.line) for view in rules]
            self._checks[key] = checks
        return checks

    def step(self, view: ClusterView) -> list[QosAction]:
        out: list[QosAction] = []
        cpu = view.cpu_millis.tolist()
        cpu_capacity = view.cpu_capacity_millis.tolist()
        memory = view.memory_bytes.tolist()
        memory_capacity = view.memory_capacity_bytes.tolist()
        now = view.time
        if len(self._row_checks) != len(view.names):
            self._row_checks = [None] * len(view.names)
        for row, name in enumerate(view.names):
            sample = NodeSample(
                name,
                now,
                cpu[row] / 1000,
                cpu_capacity[row] / 1000,
                int(memory[row]),
                int(memory_capacity[row]),
                view.labels[row],
            )
            if self.gate and name not in self.busy:
                checks = self._row_checks[row]
                if checks is None:
                    checks = self._row_checks[row] = self._lines(sample)
                quiet = True
                for node_value, line in checks:
                    value = node_value(sample)
                    if value is None or value > line:
                        quiet = False
                        break
                if quiet:
                    continue
            pods = view.pods_of(row)
            by_uid = {p.pod.uid: p.pod_id for p in pods}
            samples = [
                PodSample(
                    pod=p.pod,
                    cpu=p.cpu_millis / 1000,
                    memory=int(p.memory_bytes),
                    cpu_cap=None if p.cap_millis is None else p.cap_millis / 1000,
                )
                for p in pods
            ]
            if self.pressure is not None:
                node_figures, pod_figures, ages = self.pressure.step(name, now, cpu_capacity[row], cpu[row], pods)
                sample = replace(sample, pressure=node_figures)
                samples = [
                    replace(s, pressure=pod_figures.get(p.pod_id, {}), own_limit_age=ages.get(p.pod_id, {}))
                    for s, p in zip(samples, pods, strict=True)
                ]
            state = self.states.get(name) or AgentState()
            result = self.plan_function(
                self.policies, self.actions, sample, samples, state, now=now, options=self.options, pod_qos=self.pod_qos
            )
            self.plans += 1
            self.states[name] = result.state
            if self.record:
                self.log.extend(
                    LoggedAction(now, name, a.pod, str(a.kind), a.metric, a.cpu_cap, a.restore_original)
                    for a in result.actions
                )
            if _holds_something(result.state):
                self.busy.add(name)
            else:
                self.busy.discard(name)
            out.extend(_convert(result, by_uid))
        return out


def _holds_something(state: AgentState) -> bool:
    return bool(state.throttled or state.evicting or any(r.above or r.fired for r in state.rules.values()))


def _convert(result: Plan, by_uid: Mapping[str, int]) -> list[QosAction]:
    out: list[QosAction] = []
    for action in result.actions:
        pod_id = by_uid.get(action.uid)
        if pod_id is None:
            continue
        cap = None if action.cpu_cap is None else action.cpu_cap * 1000
        if action.kind is ActionKind.EVICT:
            out.append(QosAction("evict", pod_id))
        elif action.kind is ActionKind.THROTTLE:
            out.append(QosAction("throttle", pod_id, cap))
        else:
            out.append(QosAction("restore", pod_id, cap))
    return out


PlannerFactory = Callable[[Scenario, str], AgentQosPlanner | None]
