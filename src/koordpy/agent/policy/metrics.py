"""The metric registry: every waterline metric declares what can be done about it and how.

A metric brings its node value, its waterline unit conversion, an optional sort key and, per
action, whether the action applies (``*able``), whether the amount it frees can be computed
(``*_qualified``) and the functions that compute it. The executor only calls these; adding a
metric means adding a :class:`Metric` here (or passing a custom registry), never touching the
executor.

Pressure metrics (koordpy's, unknown to Crane; :data:`PRESSURE`) are *stepwise*: pressure says that
tasks wait, not how much CPU would end the wait, so there is no gap to close. A firing rule steps every
candidate down by ``stepCPURatio`` per round (an eviction takes one pod per round) and a restoring one
steps every pod it throttled back up. ``scope="pods"`` metrics are read from the pods a rule protects
(:mod:`koordpy.agent.policy.pressure`), ``scope="node"`` ones from ``/proc/pressure``.

Not guaranteed: ``throttle_released`` credits only the CPU the cap takes away at the current
usage; the real release depends on demand and lands over the next CFS periods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from koordpy.agent.policy import throttle as cpu
from koordpy.agent.policy.ordering import SortKey, cpu_usage_key, memory_usage_key
from koordpy.agent.policy.types import NodeSample, PodSample

__all__ = [
    "BUILTIN",
    "CPU_TOTAL_USAGE",
    "CPU_TOTAL_UTILIZATION",
    "MEMORY_TOTAL_USAGE",
    "MEMORY_TOTAL_UTILIZATION",
    "PRESSURE",
    "Metric",
    "Registry",
    "ThrottleParams",
    "registry",
]


@dataclass(frozen=True, slots=True)
class ThrottleParams:
    min_cpu_ratio: int
    step_cpu_ratio: int


ThrottleFn = Callable[[PodSample, NodeSample, float | None, ThrottleParams], float | None]
"""(pod, node, current cap, params) -> new cap in cores, or None when no step would help."""
ReleasedFn = Callable[[PodSample, NodeSample, float], float | None]
"""(pod, node, new cap) -> amount freed in the metric's unit (None: cannot tell)."""
RestoreFn = Callable[[PodSample, NodeSample, float, float | None, ThrottleParams], tuple[cpu.RestoreStep, float]]
"""(pod, node, cap, original, params) -> (step, amount handed back in the metric's unit)."""
EvictFn = Callable[[PodSample, NodeSample], float | None]
"""(pod, node) -> amount an eviction frees in the metric's unit (None: pod usage unknown)."""


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    unit: str  # "cores" | "bytes" | "percent"
    compressible: bool  # incompressible metrics are acted on first
    node_value: Callable[[NodeSample], float | None]
    waterline: Callable[[Fraction], float]  # Crane's rule value -> the metric's unit
    sort_key: SortKey | None = None
    throttleable: bool = False
    throttle_qualified: bool = False
    throttle: ThrottleFn | None = None
    throttle_released: ReleasedFn | None = None
    restore: RestoreFn | None = None
    evictable: bool = False
    evict_qualified: bool = False
    evict: EvictFn | None = None
    stepwise: bool = False
    """No gap to close: throttle steps every candidate, evict takes one pod, restore steps every pod."""
    family: str = "usage"
    """A throttled pod is given CPU back by restoring rules of the family that throttled it last, and not
    while a rule of that family is above its line."""
    scope: str = "node"
    """``node``: one value from :attr:`node_value`; ``pods``: the highest :attr:`pod_value` among the pods a
    rule protects."""
    pod_value: Callable[[PodSample], float | None] | None = None
    resource: str = ""
    """For pressure: ``cpu``, ``memory`` or ``io`` (whose own limit excludes a pod, see ``pressure``)."""
    window: float = 0.0
    """For pressure: seconds the kernel averages over (10, 60, 300)."""

    @property
    def sortable(self) -> bool:
        return self.sort_key is not None


Registry = Mapping[str, Metric]


def _cpu_throttle(pod: PodSample, node: NodeSample, cap: float | None, params: ThrottleParams) -> float | None:
    if pod.cpu is None:
        return None
    floor = cpu.cpu_floor(pod.pod, params.min_cpu_ratio)
    return cpu.step_down(pod.cpu, cap, floor, params.step_cpu_ratio)


def _cores_released(pod: PodSample, node: NodeSample, new_cap: float) -> float | None:
    return None if pod.cpu is None else max(0.0, pod.cpu - new_cap)


def _cpu_percent(cores: float | None, node: NodeSample) -> float | None:
    if cores is None or not node.cpu_capacity:
        return None
    return cores / node.cpu_capacity * 100


def _pct_released(pod: PodSample, node: NodeSample, new_cap: float) -> float | None:
    return _cpu_percent(_cores_released(pod, node, new_cap), node)


def _cores_restore(
    pod: PodSample, node: NodeSample, cap: float, original: float | None, params: ThrottleParams
) -> tuple[cpu.RestoreStep, float]:
    step = cpu.step_up(cap, original, cpu.cpu_ceiling(pod.pod, node.cpu_capacity), params.step_cpu_ratio)
    return step, step.handed_back


def _pct_restore(
    pod: PodSample, node: NodeSample, cap: float, original: float | None, params: ThrottleParams
) -> tuple[cpu.RestoreStep, float]:
    step, cores = _cores_restore(pod, node, cap, original, params)
    return step, _cpu_percent(cores, node) or 0.0


def _evict_cores(pod: PodSample, node: NodeSample) -> float | None:
    return pod.cpu


def _evict_cpu_pct(pod: PodSample, node: NodeSample) -> float | None:
    return _cpu_percent(pod.cpu, node)


def _evict_bytes(pod: PodSample, node: NodeSample) -> float | None:
    return None if pod.memory is None else float(pod.memory)


def _evict_mem_pct(pod: PodSample, node: NodeSample) -> float | None:
    if pod.memory is None or not node.memory_capacity:
        return None
    return pod.memory / node.memory_capacity * 100


def _node_cpu_pct(node: NodeSample) -> float | None:
    return _cpu_percent(node.cpu, node)


def _node_mem_pct(node: NodeSample) -> float | None:
    if node.memory is None or not node.memory_capacity:
        return None
    return node.memory / node.memory_capacity * 100


def _node_mem(node: NodeSample) -> float | None:
    return None if node.memory is None else float(node.memory)


CPU_TOTAL_USAGE = Metric(
    name="cpu_total_usage",
    unit="cores",
    compressible=True,
    node_value=lambda node: node.cpu,
    waterline=lambda value: float(value) / 1000,  # Crane's unit is milliCPU
    sort_key=cpu_usage_key,
    throttleable=True,
    throttle_qualified=True,
    throttle=_cpu_throttle,
    throttle_released=_cores_released,
    restore=_cores_restore,
    evictable=True,
    evict_qualified=True,
    evict=_evict_cores,
)
CPU_TOTAL_UTILIZATION = Metric(
    name="cpu_total_utilization",
    unit="percent",
    compressible=True,
    node_value=_node_cpu_pct,
    waterline=float,
    sort_key=cpu_usage_key,
    throttleable=True,
    throttle_qualified=True,
    throttle=_cpu_throttle,
    throttle_released=_pct_released,
    restore=_pct_restore,
    evictable=True,
    evict_qualified=True,
    evict=_evict_cpu_pct,
)
MEMORY_TOTAL_USAGE = Metric(
    name="memory_total_usage",
    unit="bytes",
    compressible=False,
    node_value=_node_mem,
    waterline=float,
    sort_key=memory_usage_key,
    evictable=True,
    evict_qualified=True,
    evict=_evict_bytes,
)
MEMORY_TOTAL_UTILIZATION = Metric(
    name="memory_total_utilization",
    unit="percent",
    compressible=False,
    node_value=_node_mem_pct,
    waterline=float,
    sort_key=memory_usage_key,
    evictable=True,
    evict_qualified=True,
    evict=_evict_mem_pct,
)


def _pressure(scope: str, resource: str, degree: str, window: str) -> Metric:
    """``[pod_]<resource>_pressure_<degree>_<window>``: percent of the window, as the kernel writes it."""
    key = f"{resource}_pressure_{degree}_{window}"
    cpu_side = resource == "cpu"

    def node_value(node: NodeSample) -> float | None:
        return node.pressure.get(key)

    def pod_value(pod: PodSample) -> float | None:
        return pod.pressure.get(key)

    return Metric(
        name=f"pod_{key}" if scope == "pods" else key,
        unit="percent",
        compressible=cpu_side,
        node_value=node_value,
        waterline=float,
        sort_key=cpu_usage_key if cpu_side else memory_usage_key if resource == "memory" else None,
        throttleable=cpu_side,
        throttle=_cpu_throttle if cpu_side else None,
        throttle_released=_cores_released if cpu_side else None,
        restore=_cores_restore if cpu_side else None,
        evictable=True,
        evict=_evict_cores if cpu_side else _evict_bytes if resource == "memory" else _evict_any,
        stepwise=True,
        family="pressure",
        scope=scope,
        pod_value=pod_value,
        resource=resource,
        window=float(window.removeprefix("avg")),
    )


def _evict_any(pod: PodSample, node: NodeSample) -> float | None:
    """io pressure: nothing the agent measures says what a pod's eviction frees; every pod may go."""
    return 0.0


PRESSURE: tuple[Metric, ...] = tuple(
    _pressure(scope, resource, degree, window)
    for scope in ("node", "pods")
    for resource in ("cpu", "memory", "io")
    for degree in ("some", "full")
    for window in ("avg10", "avg60", "avg300")
)
"""Every pressure metric, node and pod scope (names in ``koordpy.crds.ensurance.PRESSURE_METRIC_NAMES``)."""

BUILTIN: Registry = {
    m.name: m for m in (CPU_TOTAL_USAGE, CPU_TOTAL_UTILIZATION, MEMORY_TOTAL_USAGE, MEMORY_TOTAL_UTILIZATION, *PRESSURE)
}


def registry(*extra: Metric) -> Registry:
    """The built-in metrics plus ``extra`` (an extra metric with a built-in name replaces it)."""
    out = dict(BUILTIN)
    out.update({m.name: m for m in extra})
    return out
