"""Scenario rules that are valid but do nothing, returned as warnings (``koordpy simulate`` prints them).

Checked, each warning naming the field path:

* a workload whose requests fit no node of any pool (its pods stay pending for the whole run);
* a pool on which no workload's requests fit (its nodes stay empty);
* a workload with no arrivals or whose arrival window starts at the end of the run;
* usage settings the pattern ignores (``peakHour`` on a ``steady`` curve, ...), a ``diurnal`` curve
  with amplitude 0, a ``bursty`` curve with factor 1 or length 0, a burst period not shorter than
  the run, a diurnal peak outside the simulated hours, a lifetime minimum not shorter than the run;
* QoS: policies with ``qos.enabled: false``, a NodeQOSEnsurancePolicy whose selector matches no
  node, a rule with an unknown metric, an AvoidanceAction that does not exist or neither throttles
  nor evicts, an AvoidanceAction no rule names.

The fit on requests is the simulator's own ``RequestsFit`` (on an empty node), the selector and
rule checks are the agent's own ``label_selector_matches`` and ``rules_for_node``.

Not guaranteed: that a scenario without warnings is sensible; only rules that can never act are
reported (a workload that fits only when the cluster is empty is not).
"""

from __future__ import annotations

from koordpy.agent.policy import NodeSample, PlanOptions
from koordpy.agent.policy.waterline import rules_for_node
from koordpy.config.scenario import Scenario
from koordpy.crds.ensurance import AvoidanceAction, NodeQOSEnsurancePolicy, label_selector_matches
from koordpy.sim.engine import scenario_nodes
from koordpy.sim.kubescheduler import RequestsFit
from koordpy.sim.ticks import clock_label
from koordpy.sim.trace import pod_template

__all__ = ["scenario_warnings"]

_PATTERN_FIELDS = {
    "steady": (),
    "diurnal": ("amplitude", "peak_hour"),
    "bursty": ("burst_every", "burst_length", "burst_factor"),
}
_ALIASES = {
    "amplitude": "amplitude",
    "peak_hour": "peakHour",
    "burst_every": "burstEvery",
    "burst_length": "burstLength",
    "burst_factor": "burstFactor",
}


def scenario_warnings(
    scenario: Scenario, policies: list[NodeQOSEnsurancePolicy], actions: dict[str, AvoidanceAction]
) -> list[str]:
    """Warnings in a fixed order (pools and workloads first, then QoS); ``policies`` and ``actions``
    are the scenario's ``qos`` objects as ``load_qos_objects`` returns them."""
    return [*_placement(scenario), *_demand(scenario), *_qos(scenario, policies, actions)]


def _placement(scenario: Scenario) -> list[str]:
    first_nodes = []
    offset = 0
    nodes = scenario_nodes(scenario)
    for pool in scenario.node_pools:
        first_nodes.append(nodes[offset])
        offset += pool.count
    templates = [pod_template(w) for w in scenario.workloads]
    resources = {r for n in first_nodes for r in n.allocatable}
    for template in templates:
        resources.update(r for r, v in template.requests.items() if v)
    fit = RequestsFit(first_nodes, sorted(resources))
    fits = [fit.feasible(fit.vector(t)) for t in templates]  # per workload: per pool, on an empty node
    out = []
    for i, (workload, row) in enumerate(zip(scenario.workloads, fits, strict=True)):
        if workload.arrivals.count and not row.any():
            out.append(
                f"workloads[{i}] ({workload.name}): its requests fit no node of any pool, even an empty one;"
                " its pods stay pending"
            )
    for j, pool in enumerate(scenario.node_pools):
        if not any(bool(row[j]) for w, row in zip(scenario.workloads, fits, strict=True) if w.arrivals.count):
            out.append(f"nodePools[{j}] ({pool.name}): no workload's requests fit its nodes; they stay empty")
    return out


def _demand(scenario: Scenario) -> list[str]:
    out = []
    run = scenario.duration
    start_hour = (scenario.start % 86400) / 3600
    for i, workload in enumerate(scenario.workloads):
        where = f"workloads[{i}] ({workload.name})"
        usage = workload.usage
        if workload.arrivals.count == 0:
            out.append(f"{where}.arrivals.count: 0, the workload submits no pod")
        elif workload.arrivals.start >= run:
            out.append(f"{where}.arrivals: the window starts at the end of the run; no pod ever runs")
        ignored = sorted(
            _ALIASES[name]
            for pattern, names in _PATTERN_FIELDS.items()
            if pattern != usage.pattern
            for name in names
            if name in usage.model_fields_set
        )
        if ignored:
            out.append(f"{where}.usage: {', '.join(ignored)} ignored by pattern {usage.pattern!r}")
        if usage.pattern == "diurnal":
            if usage.amplitude == 0:
                out.append(f"{where}.usage.amplitude: 0, the diurnal curve is flat")
            elif run < 86400 and (usage.peak_hour - start_hour) % 24 > run / 3600:
                out.append(
                    f"{where}.usage.peakHour: {usage.peak_hour:g}:00 UTC is outside the simulated hours"
                    f" ({clock_label(start_hour * 3600)}-{clock_label((start_hour * 3600 + run) % 86400)} UTC)"
                )
        if usage.pattern == "bursty":
            if usage.burst_factor == 1 or usage.burst_length == 0:
                out.append(f"{where}.usage: burstFactor 1 or burstLength 0, the bursts change nothing")
            elif usage.burst_every >= run:
                out.append(
                    f"{where}.usage.burstEvery: {usage.burst_every:g}s is not shorter than the run ({run:g}s);"
                    " a pod bursts at most once"
                )
        if workload.lifetime is not None and workload.lifetime.min >= run:
            out.append(f"{where}.lifetime.min: not shorter than the run; every pod runs to the end")
    return out


def _qos(scenario: Scenario, policies: list[NodeQOSEnsurancePolicy], actions: dict[str, AvoidanceAction]) -> list[str]:
    if not policies and not actions:
        return []
    if not scenario.qos.enabled:
        return ["qos.enabled: false, so qos.policies and qos.actions are not run"]
    out = []
    nodes = scenario_nodes(scenario)
    label_sets = {frozenset(n.labels.items()): n for n in nodes}
    for i, policy in enumerate(policies):
        if not any(label_selector_matches(policy.spec.selector, dict(labels)) for labels in label_sets):
            out.append(f"qos.policies[{i}] ({policy.metadata.name}): its selector matches no node")
    options = PlanOptions()
    seen: set[str] = set()
    for node in label_sets.values():
        sample = NodeSample(node.name, 0.0, None, None, None, None, node.labels)
        views, events = rules_for_node(policies, actions, sample, options.metrics)
        for event in events:
            if event.message not in seen:
                seen.add(event.message)
                out.append(f"qos.policies: {event.message}; the rule never acts")
        for view in views:
            message = f"rule {view.key}: AvoidanceAction {view.rule.action_name!r} neither throttles nor evicts"
            if view.action is not None and not view.kinds() and message not in seen:
                seen.add(message)
                out.append(f"qos.policies: {message}; the rule never acts")
    named = {rule.action_name for policy in policies for rule in policy.spec.objective_ensurances}
    for name in sorted(set(actions) - named):
        out.append(f"qos.actions ({name}): no rule names this AvoidanceAction")
    return out
