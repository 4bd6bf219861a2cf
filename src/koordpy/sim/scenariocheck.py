"""Scenario rules that are valid but do nothing, returned as warnings (``koordpy simulate`` prints them).

Checked, each warning naming the field path:

* a workload whose requests fit no node of any pool (its pods stay pending for the whole run);
* a pool on which no workload's requests fit (its nodes stay empty);
* a workload with no arrivals or whose arrival window starts at the end of the run;
* usage settings the pattern ignores (``peakHour`` on a ``steady`` curve, ...), a ``diurnal`` curve
  with amplitude 0, a ``bursty`` curve with factor 1 or length 0, a burst period not shorter than
  the run, a diurnal peak outside the simulated hours, a lifetime minimum not shorter than the run;
* QoS: objects with ``qos.enabled: false``; every problem the agent's own
  :func:`koordpy.agent.policy.objectcheck.qos_warnings` reports (selector matching no node, unknown
  metric, missing or do-nothing AvoidanceAction, NodeQOS rule no PodQOS allows, ...), through
  :func:`koordpy.sim.agentqos.scenario_qos_warnings`; an AvoidanceAction nothing names.

The fit on requests is the simulator's own ``RequestsFit`` (on an empty node).

Not guaranteed: that a scenario without warnings is sensible; only rules that can never act are
reported (a workload that fits only when the cluster is empty is not).
"""

from __future__ import annotations

from koordpy.config.scenario import Scenario
from koordpy.descheduler.contract import check_thresholds
from koordpy.sim.agentqos import load_qos, scenario_qos_warnings
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


def scenario_warnings(scenario: Scenario) -> list[str]:
    """Warnings in a fixed order (pools and workloads first, then QoS). Raises ``ConfigError`` when a
    ``qos`` object does not validate (see :func:`koordpy.sim.agentqos.load_qos`)."""
    return [*_placement(scenario), *_demand(scenario), *_qos(scenario), *_thresholds(scenario)]


def _thresholds(scenario: Scenario) -> list[str]:
    """The threshold contract (:func:`koordpy.descheduler.contract.check_thresholds`) between the extender's
    ``loadAware`` and each ``lowNodeLoad`` of ``descheduler``: its contradictions (the loop each allows)."""
    settings = scenario.descheduler
    if settings is None:
        return []
    out = []
    for field, args in (
        ("lowNodeLoad", settings.low_node_load),
        ("compareLowNodeLoad", settings.compare_low_node_load),
    ):
        if args is None:
            continue
        for finding in check_thresholds(
            scheduler=scenario.scheduler.load_aware,
            descheduler=args,
            scheduler_path="scheduler.loadAware",
            descheduler_path=f"descheduler.{field}",
        ):
            if finding.severity == "contradiction":
                out.append(f"descheduler.{field}: {finding}")
    return out


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
    fits = [fit.feasible(fit.vector(t.requests)) for t in templates]  # per workload: per pool, on an empty node
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


def _qos(scenario: Scenario) -> list[str]:
    qos = scenario.qos
    if not (qos.policies or qos.actions or qos.pod_qos):
        return []
    if not qos.enabled:
        return ["qos.enabled: false, so qos.policies, qos.actions and qos.podQOS are not run"]
    out = scenario_qos_warnings(scenario)
    objects = load_qos(scenario)
    named = {rule.action_name for policy in objects.policies for rule in policy.spec.objective_ensurances}
    named |= {name for q in objects.pod_qos for name in q.spec.allowed_actions}
    for name in sorted(set(objects.actions) - named):
        out.append(f"qos.actions ({name}): no rule names this AvoidanceAction")
    return out
