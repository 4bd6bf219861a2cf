"""One notion of hot: the inequalities between the scheduler's, the descheduler's and the agent's thresholds that
rule out a loop, checked once, here (the ``koordpy thresholds`` command and the chart's test call it).

Three components judge a node's load, each with its own number per resource (cpu, memory):

* the extender's ``loadAware.usageThresholds`` ``T`` (or, when set, ``aggregated.usageThresholds``; for Prod pods
  ``prodUsageThresholds``): it **places** a pod on a node only while the node's estimated usage with the pod stays at
  or below ``T`` % of its raw allocatable;
* the descheduler's ``lowNodeLoad.highThresholds`` ``H`` (per pool; ``prodHighThresholds`` on Prod usage): it
  **moves** pods off a node above ``H`` %, and only onto a node that stays at or below ``H`` % with the pod;
* the agent's waterlines ``W``: a NodeQOSEnsurancePolicy (or NodeQOS) rule on ``cpu_total_utilization`` /
  ``memory_total_utilization`` whose AvoidanceAction **evicts** when the node's usage is above ``W`` % of its
  capacity (``cpu_total_usage`` / ``memory_total_usage``: an amount).

The contract, each inequality and the loop its breach allows:

==========================  =====================================================================================
``T <= H``                  else **scheduler → descheduler**: the extender fills nodes into ``(H, T]``, the
                            descheduler drains them, the extender fills them again. ``T = 0`` (no filter) breaks it
                            for any ``H`` below 100.
``PT <= PH``                the same on Prod usage (``prodUsageThresholds`` against ``prodHighThresholds``).
``H × alloc <= W × cap``    else **descheduler → agent**: the descheduler moves a pod onto a node it keeps at or
                            below ``H``, where the agent evicts above ``W``.
``T × alloc <= W × cap``    else **scheduler → agent**: the extender places a pod where the agent evicts, and the
                            evicted pod is placed there again (reported by Koordinator users: BEMemoryEvict at 65 %
                            against the load-aware filter at 95 %).
==========================  =====================================================================================

``alloc`` is the raw allocatable the extender and the descheduler divide by, ``cap`` the node capacity the agent
divides by (``cap >= alloc``). Without nodes the check takes ``cap = alloc`` (``H <= W``, ``T <= W``), which is the
stricter form; with nodes (a live cluster, a dump) it checks every node a policy and a pool (or the extender)
share, with the node's own thresholds annotation (``scheduling.koordinator.sh/usage-thresholds``, read as the
extender reads it) and raw allocatable, and names the first node that breaks it.

**The estimator's effect.** The extender does not compare measured usage: it adds, for pods placed within a report
interval (and the pod being placed), an estimate, ``scaling factor × request`` (85 % cpu, 70 % memory by
default; the limit when it is higher), and the measurement replaces it once the agent reports the pod. A node
filled to ``T`` by estimates can therefore measure up to ``T × 100 / factor`` once its new pods use their requests:
``T <= H`` keeps the placed pods from being moved only if that stays at or below ``H``; otherwise the node is hot
until the descheduler's anomaly condition has seen it hot for ``consecutiveAbnormalities`` rounds, which is why the
check reports it as a ``note`` (no loop is certain: the pods may use less than requested). The same holds against
``W``.

**Not loops**: the descheduler's own moves never create a hot node (its destination check), whatever these numbers
say; a throttling action (no eviction) squeezes, it does not move pods; a Prod pod placed under
``prodUsageThresholds`` alone (the extender then skips ``usageThresholds``) can take a node above ``H`` or ``W``:
reported as a ``warning``, the agent evicts lower-priority pods first.

Severity: ``contradiction`` (the inequality is broken: the loop can happen), ``warning`` (cannot be checked, or
only a possibility), ``note`` (information). The command exits non-zero on a contradiction, the chart refuses one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from koordpy.agent.policy.metrics import BUILTIN
from koordpy.config.loadaware import LoadAwareSchedulingArgs
from koordpy.config.lownodeload import LowNodeLoadArgs, NodePool
from koordpy.crds.ensurance import AvoidanceAction, NodeQOSEnsurancePolicy, Strategy, label_selector_matches
from koordpy.model.objects import NodeInfo
from koordpy.scheduler.plugins.loadaware.estimator import estimate_node
from koordpy.scheduler.plugins.loadaware.profile import threshold_profile

__all__ = [
    "LOOP_DESCHEDULER_AGENT",
    "LOOP_SCHEDULER_AGENT",
    "LOOP_SCHEDULER_DESCHEDULER",
    "Finding",
    "Policy",
    "Severity",
    "check_thresholds",
]

Severity = Literal["contradiction", "warning", "note"]
LOOP_SCHEDULER_DESCHEDULER = "scheduler → descheduler"
LOOP_DESCHEDULER_AGENT = "descheduler → agent"
LOOP_SCHEDULER_AGENT = "scheduler → agent"
_LOOPS = {
    LOOP_SCHEDULER_DESCHEDULER: "the scheduler places pods on nodes the descheduler then drains, and places them again",
    LOOP_DESCHEDULER_AGENT: "the descheduler moves pods onto nodes where the agent evicts them",
    LOOP_SCHEDULER_AGENT: "the scheduler places pods on nodes where the agent evicts them, and places them again",
}
_PERCENT_METRICS = {"cpu_total_utilization": "cpu", "memory_total_utilization": "memory"}
_AMOUNT_METRICS = {"cpu_total_usage": "cpu", "memory_total_usage": "memory"}
RESOURCES = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    loop: str
    """Which loop the finding is about (a ``LOOP_*`` constant)."""
    paths: tuple[str, ...]
    """The field paths whose values are compared."""
    message: str

    def as_json(self) -> dict[str, object]:
        return {"severity": self.severity, "loop": self.loop, "paths": list(self.paths), "message": self.message}

    def __str__(self) -> str:
        return f"{self.severity}: {self.loop}: {self.message}"


@dataclass(frozen=True, slots=True)
class Policy:
    """An agent policy and the path to name it by (``NodeQOSEnsurancePolicy/<name>``, ``agent.qosPolicies[0]``)."""

    path: str
    policy: NodeQOSEnsurancePolicy


@dataclass(frozen=True, slots=True)
class _Waterline:
    path: str
    """Of the rule's ``metricRule.value``."""
    resource: str
    percent: float | None
    """Percent of capacity (a utilization rule); None for an amount rule."""
    amount: float | None
    """Millicores or bytes (an amount rule)."""
    policy: NodeQOSEnsurancePolicy
    assumed: bool
    """The action is unknown (no AvoidanceActions given): assumed to evict."""


@dataclass(frozen=True, slots=True)
class _Limit:
    """A scheduler threshold: ``percent`` (0: no filter) at ``path``."""

    path: str
    resource: str
    percent: float
    prod: bool


def _fmt(value: float) -> str:
    return f"{value:g}"


def _waterlines(policies: Sequence[Policy], actions: Mapping[str, AvoidanceAction] | None) -> list[_Waterline]:
    """The evicting rules on node cpu and memory (Preview rules and throttle-only actions do not evict)."""
    out = []
    for source in policies:
        spec = source.policy.spec
        field = "rules" if source.policy.kind == "NodeQOS" else "objectiveEnsurances"
        for i, rule in enumerate(spec.objective_ensurances):
            name = rule.metric_rule.name
            resource = _PERCENT_METRICS.get(name) or _AMOUNT_METRICS.get(name)
            if resource is None or rule.strategy is Strategy.PREVIEW:
                continue
            assumed = actions is None
            if actions is not None:
                action = actions.get(rule.action_name)
                if action is None or action.spec.eviction is None:
                    continue
            metric = BUILTIN[name]
            line = metric.waterline(rule.metric_rule.threshold)  # the agent's own unit: percent, cores or bytes
            path = f"{source.path}.spec.{field}[{i}].metricRule.value"
            if name in _PERCENT_METRICS:
                out.append(_Waterline(path, resource, line, None, source.policy, assumed))
            else:
                amount = line * 1000 if resource == "cpu" else line  # cores -> millicores
                out.append(_Waterline(path, resource, None, amount, source.policy, assumed))
    return out


def _limits(args: LoadAwareSchedulingArgs, path: str) -> list[_Limit]:
    """The extender's thresholds per resource: aggregated ones when configured (then plain ones are not checked for
    non-Prod pods), else ``usageThresholds``; and ``prodUsageThresholds``."""
    aggregated = args.aggregated
    plain_path = (
        f"{path}.aggregated.usageThresholds" if aggregated and aggregated.filter_enabled else f"{path}.usageThresholds"
    )
    plain = aggregated.usage_thresholds if aggregated and aggregated.filter_enabled else args.usage_thresholds
    out = [_Limit(f"{plain_path}.{r}", r, float(plain.get(r, 0)), False) for r in RESOURCES]
    out.extend(
        _Limit(f"{path}.prodUsageThresholds.{r}", r, float(v), True)
        for r, v in sorted(args.prod_usage_thresholds.items())
        if r in RESOURCES and v
    )
    return out


def _pool_path(descheduler_path: str, pool: NodePool, field: str, resource: str, args: LowNodeLoadArgs) -> str:
    """Where the pool's ``field`` value was written: the pool's own map, else the top level's."""
    if not pool.default:
        raw = args.node_pools[int(pool.path[len("nodePools[") : -1])]
        attr = {"highThresholds": "high_thresholds", "prodHighThresholds": "prod_high_thresholds"}[field]
        if getattr(raw, attr) is not None:
            return f"{descheduler_path}.{pool.path}.{field}.{resource}"
    return f"{descheduler_path}.{field}.{resource}"


def _node_percent(percent: float, node: NodeInfo, resource: str, of_capacity: bool) -> float:
    """``percent`` of the node's raw allocatable, or capacity, as an amount (millicores or bytes)."""
    base = node.capacity if of_capacity else estimate_node(node)
    amount = base.get(resource) or (estimate_node(node).get(resource, 0) if of_capacity else 0)
    return percent / 100 * amount


class _Checker:
    def __init__(
        self,
        scheduler: LoadAwareSchedulingArgs | None,
        descheduler: LowNodeLoadArgs | None,
        waterlines: list[_Waterline],
        *,
        nodes: Sequence[NodeInfo],
        scheduler_path: str,
        descheduler_path: str,
    ) -> None:
        self.scheduler = scheduler
        self.descheduler = descheduler
        self.waterlines = waterlines
        self.nodes = nodes
        self.scheduler_path = scheduler_path
        self.descheduler_path = descheduler_path
        self.findings: list[Finding] = []

    def add(self, severity: Severity, loop: str, paths: Iterable[str], message: str) -> None:
        self.findings.append(Finding(severity, loop, tuple(paths), message))

    def pools(self) -> list[NodePool]:
        return list(self.descheduler.pools) if self.descheduler is not None else []

    def pool_nodes(self, index: int) -> list[NodeInfo]:
        """The nodes of pool ``index`` (named pools first, the default pool takes the rest)."""
        pools = self.pools()
        out = []
        for node in self.nodes:
            owner = None
            for i, pool in enumerate(pools):
                selector = pool.node_selector
                matches = selector is None or selector.matches(node.labels)
                if pool.default:
                    owner = i if matches and owner is None else owner
                elif matches:
                    owner = i
                    break
            if owner == index:
                out.append(node)
        return out

    def policy_nodes(self, waterline: _Waterline, candidates: Sequence[NodeInfo]) -> list[NodeInfo]:
        return [n for n in candidates if label_selector_matches(waterline.policy.spec.selector, n.labels)]

    # ---- scheduler vs descheduler ----------------------------------------------------------------------------------

    def scheduler_descheduler(self) -> None:
        if self.scheduler is None or self.descheduler is None:
            return
        limits = _limits(self.scheduler, self.scheduler_path)
        for pool in self.pools():
            name = "the default pool" if pool.default else f"pool {pool.name!r}"
            if pool.use_deviation_thresholds:
                self.add(
                    "warning",
                    LOOP_SCHEDULER_DESCHEDULER,
                    [f"{self.descheduler_path}{'.' + pool.path if pool.path else ''}.useDeviationThresholds"],
                    f"{name} uses deviation thresholds (relative to its mean usage): they cannot be compared with the "
                    "extender's absolute ones",
                )
                continue
            for limit in limits:
                field = "prodHighThresholds" if limit.prod else "highThresholds"
                highs = pool.prod_high if limit.prod else pool.high
                high = highs.get(limit.resource)
                if high is None:
                    continue
                high_path = _pool_path(self.descheduler_path, pool, field, limit.resource, self.descheduler)
                paths = (limit.path, high_path)
                if limit.percent == 0:
                    if high < 100:
                        self.add(
                            "contradiction",
                            LOOP_SCHEDULER_DESCHEDULER,
                            paths,
                            f"{limit.path} is 0 (the extender does not limit {limit.resource}) but {high_path} is "
                            f"{_fmt(high)}: {_LOOPS[LOOP_SCHEDULER_DESCHEDULER]}",
                        )
                    continue
                if limit.percent > high:
                    self.add(
                        "contradiction",
                        LOOP_SCHEDULER_DESCHEDULER,
                        paths,
                        f"{limit.path} ({_fmt(limit.percent)}) > {high_path} ({_fmt(high)}): "
                        f"{_LOOPS[LOOP_SCHEDULER_DESCHEDULER]} ({limit.resource} between {_fmt(high)} % and "
                        f"{_fmt(limit.percent)} %)",
                    )
                elif not limit.prod:
                    factor = self.scheduler.estimated_scaling_factors.get(limit.resource, 100)
                    reach = limit.percent * 100 / factor
                    if factor < 100 and reach > high:
                        self.add(
                            "note",
                            LOOP_SCHEDULER_DESCHEDULER,
                            (*paths, f"{self.scheduler_path}.estimatedScalingFactors.{limit.resource}"),
                            f"the extender estimates a new pod at {factor} % of its {limit.resource} request: nodes it "
                            f"fills to {_fmt(limit.percent)} % may measure up to {reach:.1f} % once their new pods use "
                            f"their requests, above {high_path} ({_fmt(high)}) until the next NodeMetric and for "
                            "consecutiveAbnormalities rounds",
                        )
            if self.scheduler.prod_usage_thresholds and pool.high:
                self.add(
                    "warning",
                    LOOP_SCHEDULER_DESCHEDULER,
                    [f"{self.scheduler_path}.prodUsageThresholds"],
                    "Prod pods are placed under prodUsageThresholds alone (the extender then skips usageThresholds): "
                    f"they may take a node of {name} above its highThresholds",
                )

    # ---- against the agent ----------------------------------------------------------------------------------------

    def against_agent(self) -> None:
        for waterline in self.waterlines:
            for pool_index, pool in enumerate(self.pools()):
                high = pool.high.get(waterline.resource)
                if pool.use_deviation_thresholds or high is None or self.descheduler is None:
                    continue
                high_path = _pool_path(
                    self.descheduler_path, pool, "highThresholds", waterline.resource, self.descheduler
                )
                self.compare(
                    waterline,
                    high,
                    high_path,
                    LOOP_DESCHEDULER_AGENT,
                    self.pool_nodes(pool_index) if self.nodes else (),
                )
            if self.scheduler is None:
                continue
            for limit in _limits(self.scheduler, self.scheduler_path):
                if limit.prod or limit.resource != waterline.resource:
                    continue
                self.compare_scheduler(waterline, limit)

    def compare(self, waterline: _Waterline, percent: float, path: str, loop: str, nodes: Sequence[NodeInfo]) -> None:
        """``percent`` of raw allocatable (what the descheduler or extender allows) against the waterline."""
        assumed = " (its AvoidanceAction unknown: assumed to evict)" if waterline.assumed else ""
        if not self.nodes:
            if waterline.percent is None:
                self.add(
                    "warning",
                    loop,
                    (path, waterline.path),
                    f"{waterline.path} is an amount: without nodes it cannot be compared with {path}",
                )
            elif percent > waterline.percent:
                self.add(
                    "contradiction",
                    loop,
                    (path, waterline.path),
                    f"{path} ({_fmt(percent)}) > {waterline.path} ({_fmt(waterline.percent)}){assumed}: {_LOOPS[loop]}",
                )
            return
        for node in self.policy_nodes(waterline, nodes):
            allowed = _node_percent(percent, node, waterline.resource, of_capacity=False)
            if waterline.percent is not None:
                line = _node_percent(waterline.percent, node, waterline.resource, of_capacity=True)
            else:
                assert waterline.amount is not None
                line = waterline.amount
            if allowed > line:
                self.add(
                    "contradiction",
                    loop,
                    (path, waterline.path),
                    f"on node {node.name}, {path} ({_fmt(percent)} % of allocatable, {allowed:.0f}) > {waterline.path} "
                    f"({line:.0f}){assumed}: {_LOOPS[loop]}",
                )
                return

    def compare_scheduler(self, waterline: _Waterline, limit: _Limit) -> None:
        loop = LOOP_SCHEDULER_AGENT
        if limit.percent == 0:
            self.add(
                "contradiction",
                loop,
                (limit.path, waterline.path),
                f"{limit.path} is 0 (the extender does not limit {limit.resource}) but {waterline.path} evicts: "
                f"{_LOOPS[loop]}",
            )
            return
        if not self.nodes or self.scheduler is None:
            self.compare(waterline, limit.percent, limit.path, loop, ())
            return
        # per node, with the node's own thresholds annotation as the extender reads it
        for node in self.policy_nodes(waterline, self.nodes):
            profile = threshold_profile(node.annotations, self.scheduler)
            usage = profile.aggregated.thresholds if profile.aggregated is not None else profile.usage
            percent = float(usage.get(limit.resource, 0))
            before = len(self.findings)
            self.compare(waterline, percent if percent else 100.0, limit.path, loop, [node])
            if len(self.findings) > before:
                return


def check_thresholds(
    *,
    scheduler: LoadAwareSchedulingArgs | None = None,
    descheduler: LowNodeLoadArgs | None = None,
    policies: Sequence[Policy] = (),
    actions: Mapping[str, AvoidanceAction] | None = None,
    nodes: Sequence[NodeInfo] = (),
    scheduler_path: str = "loadAware",
    descheduler_path: str = "lowNodeLoad",
) -> list[Finding]:
    """Every finding for the given configurations (any may be absent). ``actions``: the AvoidanceActions by name
    (None: unknown, every rule is assumed to evict); ``nodes``: check node by node (none: ``cap = alloc`` and every
    policy may apply to every pool). Paths are prefixed with ``scheduler_path``/``descheduler_path`` and each
    policy's own ``path``."""
    checker = _Checker(
        scheduler,
        descheduler,
        _waterlines(policies, actions),
        nodes=nodes,
        scheduler_path=scheduler_path,
        descheduler_path=descheduler_path,
    )
    checker.scheduler_descheduler()
    checker.against_agent()
    return checker.findings
