"""``lowNodeLoad:`` section of the manager configuration: Koordinator's ``LowNodeLoadArgs``.

Field names and defaults follow Koordinator's ``LowNodeLoadArgs`` (descheduler/v1alpha2, v1.8), so the
``args`` of its ``LowNodeLoad`` plugin config can be pasted here unchanged:

.. code-block:: yaml

    lowNodeLoad:
      lowThresholds: {cpu: 45, memory: 55}      # a node is idle when every resource is at or below
      highThresholds: {cpu: 75, memory: 80}     # a node is hot when a resource is above
      prodLowThresholds: {}                     # the same on the usage of Prod pods only
      prodHighThresholds: {}
      useDeviationThresholds: false             # true: thresholds are deviations from the pool's mean
      resourceWeights: {cpu: 1, memory: 1}      # which hot node goes first (weighted usage)
      anomalyCondition: {timeout: 1m, consecutiveAbnormalities: 5, consecutiveNormalities: 3}
      numberOfNodes: 0                          # act only with more idle nodes than this
      evictableNamespaces: {exclude: [kube-system]}
      nodeSelector: {}                          # the nodes of the default pool (metav1.LabelSelector)
      podSelectors: [{name: web, selector: {matchLabels: {app: web}}}]
      nodeFit: true                             # move a pod only where it fits and stays cool
      nodePools: [{name: batch, nodeSelector: {matchLabels: {pool: batch}}, highThresholds: {cpu: 85}}]
      nodeMetricExpirationSeconds: 180          # an older NodeMetric makes its node neither hot nor idle
      detectorCacheTimeout: 5m
      paused: false
      dryRun: false

**Defaults** (Koordinator's ``SetDefaults_LowNodeLoadArgs``): ``nodeFit`` true; ``anomalyCondition``
``{timeout: 1m, consecutiveAbnormalities: 5, consecutiveNormalities: 3}``, each count that is unset or 0
defaulted on its own (upstream's ``else if`` chain leaves ``consecutiveNormalities`` at 0 when both are 0);
``detectorCacheTimeout`` 5m; ``nodeMetricExpirationSeconds`` 180; ``resourceWeights`` 1 for cpu, memory and
every resource of ``lowThresholds``/``highThresholds``, a weight of 0 (or less) replaced by that default.

**Node pools.** The top-level thresholds form the default pool (upstream's ``__default_node_pool__``), over
the nodes that ``nodeSelector`` selects and no named pool does; it exists only when the top level sets a
threshold. Each ``nodePools[]`` entry takes every field it leaves unset from the top level: the four threshold
maps, ``resourceWeights``, ``anomalyCondition`` (each count and the timeout on its own) and, unlike upstream,
``useDeviationThresholds`` (upstream resets it to false, so a pool inheriting deviation thresholds reads them
as absolute percentages). Named pools may not overlap: two pools' ``nodeSelector`` must contradict each other
on some label key (``pool: a`` and ``pool: b``), so a node has one set of thresholds.

**Validation** (refused at load, with the field path): a threshold outside 0..100 (upstream accepts more), a
resource other than ``cpu``, ``memory`` and ``pods`` (koordpy's NodeMetric reports cpu and memory; pods are
counted), a low threshold above the high one (node and Prod; not with ``useDeviationThresholds``, where both
are distances from the mean), a Prod high threshold above the node one, overlapping or same-named pools, a
label selector that does not parse (``metav1.LabelSelectorAsSelector``'s rules), ``numberOfNodes`` below 0,
``nodeMetricExpirationSeconds`` not positive, ``evictableNamespaces`` with both include and exclude.

Not guaranteed: that a pool selects any node. Thresholds are percentages of the node's raw allocatable
(``node.koordinator.sh/raw-allocatable``, else ``status.allocatable``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    WithJsonSchema,
    model_validator,
)

from koordpy.config.errors import field_problems
from koordpy.config.migration import LabelSelector, MigrationNamespaces
from koordpy.model.durations import DURATION_PATTERN, DurationError, parse_duration
from koordpy.model.selectors import selectors_disjoint

__all__ = [
    "DEFAULT_POOL",
    "RESOURCES",
    "AnomalyCondition",
    "LoadAnomalyCondition",
    "LowNodeLoadArgs",
    "LowNodeLoadNodePool",
    "LowNodeLoadPodSelector",
    "NodePool",
]

DEFAULT_POOL = "__default_node_pool__"
"""Name of the pool the top-level thresholds form (upstream's name)."""
RESOURCES = ("cpu", "memory", "pods")
"""Resources a threshold may name: cpu and memory as the NodeMetric reports them, pods as a count."""
DEFAULT_TIMEOUT = 60.0
DEFAULT_ABNORMALITIES = 5
DEFAULT_NORMALITIES = 3
DEFAULT_DETECTOR_CACHE_TIMEOUT = 300.0
DEFAULT_EXPIRATION = 180


def _percent(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number (a percentage)")
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise ValueError(f"must be between 0 and 100, got {value!r}")
    return float(value)


Percent = Annotated[float, BeforeValidator(_percent), WithJsonSchema({"type": "number", "minimum": 0, "maximum": 100})]
"""A percentage 0..100, an integer or a float (upstream's ``Percentage`` is a float64)."""
Thresholds = dict[str, Percent]


def _duration(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a Go duration string or a number of seconds")
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except DurationError as exc:
            raise ValueError(str(exc)) from None
    return value


Seconds = Annotated[
    float,
    BeforeValidator(_duration),
    WithJsonSchema({"anyOf": [{"type": "string", "pattern": DURATION_PATTERN}, {"type": "number", "minimum": 0}]}),
]
"""A Go duration (``"5m"``) or a number of seconds, kept as seconds."""
Count = Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)]
"""An uint32 as upstream; 0 means the default (or, in a pool, the top level's)."""
Weight = Annotated[int, Field(strict=True, ge=0, le=100)]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)


class LoadAnomalyCondition(_Args):
    """When a hot node counts as abnormal (acted on), and when it is normal again."""

    timeout: Seconds | None = Field(None, ge=0, le=86_400 * 365)
    """How long a node stays abnormal once it is (default ``1m``); then it must be hot again for
    ``consecutiveAbnormalities`` rounds. Unset or 0: the default (in a pool: the top level's)."""
    consecutive_abnormalities: Count = Field(0, alias="consecutiveAbnormalities")
    """A node hot in more than this many consecutive rounds is abnormal (1: at once, as upstream). 0: the
    default, 5 (in a pool: the top level's)."""
    consecutive_normalities: Count = Field(0, alias="consecutiveNormalities")
    """An abnormal node not hot in more than this many consecutive rounds is normal again. 0: the default, 3
    (in a pool: the top level's)."""


class LowNodeLoadPodSelector(_Args):
    name: str = ""
    """A name for the selector (logs only)."""
    selector: LabelSelector | None = None
    """Pods whose labels match may move; a pod moves when any selector matches it."""


class LowNodeLoadNodePool(_Args):
    """One pool of nodes with its own thresholds; every field left unset is the top level's."""

    name: str = ""
    node_selector: LabelSelector | None = Field(None, alias="nodeSelector")
    """The pool's nodes. Unset: every node (then it may be the only named pool)."""
    use_deviation_thresholds: bool | None = Field(None, alias="useDeviationThresholds", strict=True)
    high_thresholds: Thresholds | None = Field(None, alias="highThresholds")
    low_thresholds: Thresholds | None = Field(None, alias="lowThresholds")
    prod_high_thresholds: Thresholds | None = Field(None, alias="prodHighThresholds")
    prod_low_thresholds: Thresholds | None = Field(None, alias="prodLowThresholds")
    resource_weights: dict[str, Weight] | None = Field(None, alias="resourceWeights")
    anomaly_condition: LoadAnomalyCondition | None = Field(None, alias="anomalyCondition")


@dataclass(frozen=True, slots=True)
class AnomalyCondition:
    """``anomalyCondition`` with every default applied."""

    timeout: float
    consecutive_abnormalities: int
    consecutive_normalities: int


@dataclass(frozen=True, slots=True)
class NodePool:
    """One pool as the balance round reads it: inherited and defaulted, with the field path it came from."""

    name: str
    path: str
    """``lowNodeLoad`` field path of the pool (``nodePools[1]``; the default pool: the top level, ``""``)."""
    node_selector: LabelSelector | None
    default: bool
    """The default pool: nodes no named pool selects."""
    use_deviation_thresholds: bool
    low: dict[str, float]
    high: dict[str, float]
    prod_low: dict[str, float]
    prod_high: dict[str, float]
    resource_weights: dict[str, int]
    anomaly: AnomalyCondition

    @property
    def resources(self) -> tuple[str, ...]:
        """The resources the pool classifies on, name-sorted: every resource of a threshold, and memory
        (upstream always adds it)."""
        names = {"memory", *self.low, *self.high, *self.prod_low, *self.prod_high}
        return tuple(sorted(names))

    @property
    def has_thresholds(self) -> bool:
        return bool(self.low or self.high or self.prod_low or self.prod_high)

    @property
    def has_prod(self) -> bool:
        return bool(self.prod_low or self.prod_high)


def _weights(low: dict[str, float], high: dict[str, float], given: dict[str, int] | None) -> dict[str, int]:
    """Koordinator's weight defaulting: 1 for cpu, memory and every low/high resource, replacing a weight <= 0."""
    defaults = dict.fromkeys(("cpu", "memory", *low, *high), 1)
    if given is None:
        return defaults
    out = dict(given)
    for name, weight in defaults.items():
        if out.get(name, 0) <= 0:
            out[name] = weight
    return out


class LowNodeLoadArgs(_Args):
    """Koordinator ``LowNodeLoadArgs`` (names and defaults verbatim; see the module docstring)."""

    api_version: str | None = Field(None, alias="apiVersion")
    kind: str | None = None
    paused: bool = Field(False, strict=True)
    """Do nothing (no classification, no moves; the anomaly state is kept)."""
    dry_run: bool = Field(False, alias="dryRun", strict=True)
    """Decide as usual, file no PodMigrationJob (the decisions are logged and counted)."""
    number_of_nodes: int = Field(0, alias="numberOfNodes", strict=True, ge=0, le=2**31 - 1)
    """Act only when more nodes than this are idle (node, Prod, or both)."""
    node_metric_expiration_seconds: int = Field(
        DEFAULT_EXPIRATION, alias="nodeMetricExpirationSeconds", strict=True, gt=0, le=2**31 - 1
    )
    """A node whose NodeMetric is older (or has no ``updateTime``) is neither hot nor idle this round."""
    evictable_namespaces: MigrationNamespaces | None = Field(None, alias="evictableNamespaces")
    """Pods of excluded (or not included) namespaces count in the usage but never move."""
    node_selector: LabelSelector | None = Field(None, alias="nodeSelector")
    """The default pool's nodes (unset: every node no named pool selects)."""
    pod_selectors: tuple[LowNodeLoadPodSelector, ...] = Field((), alias="podSelectors")
    """Only pods some selector matches move (none given: every pod)."""
    node_fit: bool = Field(True, alias="nodeFit", strict=True)
    """Move a pod only when the node the scheduler would pick for it fits it and stays at or below its high
    thresholds with it (koordpy: the extender's own filter and score pick that node)."""
    use_deviation_thresholds: bool = Field(False, alias="useDeviationThresholds", strict=True)
    """Thresholds are distances below (low) and above (high) the mean usage of the pool's nodes."""
    high_thresholds: Thresholds = Field(default_factory=dict, alias="highThresholds")
    low_thresholds: Thresholds = Field(default_factory=dict, alias="lowThresholds")
    prod_high_thresholds: Thresholds = Field(default_factory=dict, alias="prodHighThresholds")
    prod_low_thresholds: Thresholds = Field(default_factory=dict, alias="prodLowThresholds")
    resource_weights: dict[str, Weight] | None = Field(None, alias="resourceWeights")
    """Weights of the resources when hot nodes are ordered (the hottest first) and pods are scored."""
    anomaly_condition: LoadAnomalyCondition | None = Field(None, alias="anomalyCondition")
    detector_cache_timeout: Seconds = Field(
        DEFAULT_DETECTOR_CACHE_TIMEOUT, alias="detectorCacheTimeout", ge=0, le=86_400 * 365
    )
    """A node's anomaly state is forgotten after this long without a round that saw its NodeMetric fresh
    (0: never)."""
    node_pools: tuple[LowNodeLoadNodePool, ...] = Field((), alias="nodePools")

    _pools: tuple[NodePool, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _check(self) -> LowNodeLoadArgs:
        pools = self._effective_pools()
        problems = _resource_problems(self) + _pool_problems(pools, self)
        if problems:
            raise field_problems(problems)
        self._pools = tuple(pool for pool in pools if not pool.default or pool.has_thresholds)
        return self

    @property
    def pools(self) -> tuple[NodePool, ...]:
        """The pools a round processes, in order: the default pool (when the top level sets a threshold), then
        ``nodePools`` in order."""
        return self._pools

    def _anomaly(self) -> AnomalyCondition:
        given = self.anomaly_condition
        if given is None:
            return AnomalyCondition(DEFAULT_TIMEOUT, DEFAULT_ABNORMALITIES, DEFAULT_NORMALITIES)
        return AnomalyCondition(
            given.timeout or DEFAULT_TIMEOUT,
            given.consecutive_abnormalities or DEFAULT_ABNORMALITIES,
            given.consecutive_normalities or DEFAULT_NORMALITIES,
        )

    def _effective_pools(self) -> list[NodePool]:
        top_anomaly = self._anomaly()
        out = [
            NodePool(
                name=DEFAULT_POOL,
                path="",
                node_selector=self.node_selector,
                default=True,
                use_deviation_thresholds=self.use_deviation_thresholds,
                low=dict(self.low_thresholds),
                high=dict(self.high_thresholds),
                prod_low=dict(self.prod_low_thresholds),
                prod_high=dict(self.prod_high_thresholds),
                resource_weights=_weights(self.low_thresholds, self.high_thresholds, self.resource_weights),
                anomaly=top_anomaly,
            )
        ]
        for i, pool in enumerate(self.node_pools):
            low = dict(pool.low_thresholds if pool.low_thresholds is not None else self.low_thresholds)
            high = dict(pool.high_thresholds if pool.high_thresholds is not None else self.high_thresholds)
            given = pool.anomaly_condition
            anomaly = top_anomaly
            if given is not None:
                anomaly = AnomalyCondition(
                    given.timeout or top_anomaly.timeout,
                    given.consecutive_abnormalities or top_anomaly.consecutive_abnormalities,
                    given.consecutive_normalities or top_anomaly.consecutive_normalities,
                )
            weights = pool.resource_weights if pool.resource_weights is not None else self.resource_weights
            out.append(
                NodePool(
                    name=pool.name,
                    path=f"nodePools[{i}]",
                    node_selector=pool.node_selector,
                    default=False,
                    use_deviation_thresholds=(
                        pool.use_deviation_thresholds
                        if pool.use_deviation_thresholds is not None
                        else self.use_deviation_thresholds
                    ),
                    low=low,
                    high=high,
                    prod_low=dict(
                        pool.prod_low_thresholds if pool.prod_low_thresholds is not None else self.prod_low_thresholds
                    ),
                    prod_high=dict(
                        pool.prod_high_thresholds
                        if pool.prod_high_thresholds is not None
                        else self.prod_high_thresholds
                    ),
                    resource_weights=_weights(low, high, weights),
                    anomaly=anomaly,
                )
            )
        return out


_THRESHOLD_FIELDS = (
    ("lowThresholds", "low_thresholds"),
    ("highThresholds", "high_thresholds"),
    ("prodLowThresholds", "prod_low_thresholds"),
    ("prodHighThresholds", "prod_high_thresholds"),
    ("resourceWeights", "resource_weights"),
)


def _resource_problems(args: LowNodeLoadArgs) -> list[str]:
    """Every resource named by a threshold or weight map, top level and pools, must be one of RESOURCES."""
    problems = []
    owners: list[tuple[str, BaseModel]] = [
        ("", args),
        *((f"nodePools[{i}].", p) for i, p in enumerate(args.node_pools)),
    ]
    for prefix, owner in owners:
        for alias, name in _THRESHOLD_FIELDS:
            for resource in getattr(owner, name) or {}:
                if resource not in RESOURCES:
                    problems.append(
                        f"{prefix}{alias}.{resource}: unknown resource (one of {', '.join(RESOURCES)}: the NodeMetric "
                        "reports cpu and memory, pods are counted)"
                    )
    return problems


def _owns(pool: NodePool, args: LowNodeLoadArgs, alias: str) -> bool:
    """Whether the pool sets this threshold map itself (the default pool: always)."""
    if pool.default:
        return True
    raw = args.node_pools[int(pool.path[len("nodePools[") : -1])]
    return getattr(raw, dict(_THRESHOLD_FIELDS)[alias]) is not None


def _pool_problems(pools: list[NodePool], args: LowNodeLoadArgs) -> list[str]:
    """Low above high (node, Prod) and Prod high above node high, each reported once, at the path the user
    wrote: a pool's own map, or the top level's when both maps are inherited (then the default pool reports)."""
    problems: list[str] = []
    for pool in pools:
        if pool.use_deviation_thresholds:
            continue  # low and high are distances from the mean, both directions: any pair is consistent
        pairs = (
            ("lowThresholds", pool.low, "highThresholds", pool.high),
            ("prodLowThresholds", pool.prod_low, "prodHighThresholds", pool.prod_high),
            ("prodHighThresholds", pool.prod_high, "highThresholds", pool.high),
        )
        for lower_alias, lower, upper_alias, upper in pairs:
            lower_own, upper_own = _owns(pool, args, lower_alias), _owns(pool, args, upper_alias)
            if not (lower_own or upper_own):
                continue
            prefix = f"{pool.path}." if pool.path else ""
            for resource in sorted(lower.keys() & upper.keys()):
                low, high = lower[resource], upper[resource]
                if low <= high:
                    continue
                if lower_own:
                    other = f"{prefix}{upper_alias}" if upper_own else f"{upper_alias} (inherited)"
                    problems.append(f"{prefix}{lower_alias}.{resource}: {low:g} is above {other}.{resource} {high:g}")
                else:
                    other = f"{lower_alias} (inherited)"
                    problems.append(f"{prefix}{upper_alias}.{resource}: {high:g} is below {other}.{resource} {low:g}")
    return problems + _pool_name_problems(pools)


def _pool_name_problems(pools: list[NodePool]) -> list[str]:
    problems: list[str] = []
    named = [pool for pool in pools if not pool.default]
    seen: dict[str, str] = {DEFAULT_POOL: "the default pool's name"}
    for pool in named:
        if pool.name in seen:
            problems.append(f"{pool.path}.name: {pool.name!r} is already {seen[pool.name]}")
        else:
            seen[pool.name] = f"the name of {pool.path}"
    for j, later in enumerate(named):
        for earlier in named[:j]:
            if _disjoint(earlier.node_selector, later.node_selector) is None:
                problems.append(
                    f"{later.path}.nodeSelector: may select the same nodes as {earlier.path}.nodeSelector (a node "
                    "belongs to one pool): make them contradict each other on a label key"
                )
    return problems


def _disjoint(first: LabelSelector | None, second: LabelSelector | None) -> str | None:
    def parts(selector: LabelSelector | None) -> tuple[Any, Any]:
        return (None, None) if selector is None else (selector.match_labels, selector.match_expressions)

    return selectors_disjoint(parts(first), parts(second))
