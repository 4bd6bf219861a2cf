"""A pool's thresholds as amounts per node, and the node classes they give (Koordinator's ``newThresholds``,
``getNodeThresholds`` and ``classifyNodes``, utilization_util.go and low_node_load.go, v1.8).

**Percentages.** A pool classifies on every resource one of its four threshold maps names, and memory. A resource
a high map leaves out is 100 % there (never hot on it); one a low map leaves out is at its high percentage (it
keeps a node from being idle only where it makes it hot). With
``useDeviationThresholds`` a value is a distance from the mean usage percentage of the pool's nodes (those with a
fresh NodeMetric and that resource): low = mean − value, high = mean + value, each clamped to 0..100; a value left
out, or 0, is 100 % (upstream's rule). Upstream fills a resource left out of the *low* map with 100 % and
overwrites the high one with 100 % too (``highThresholds: {cpu: 80}`` without a low cpu value never makes a node
hot on cpu); here the high value stands. Upstream averages over every node, counting a node without that
resource as 0 %; here only nodes that have it count.

**Amounts.** ``amount = int(percent × 0.01 × allocatable)`` (truncated, cpu in millicores, memory in bytes, pods as
a count): upstream's ``resourceThreshold``, with the same float64 arithmetic.

**Classes** (Prod classes only when the pool has a Prod threshold: upstream fills absent Prod thresholds with 100 %,
which makes every schedulable node "Prod-idle" and lets nodes that are merely normal count as idle for
``numberOfNodes``):

* idle: schedulable, and every resource at or below its low amount;
* hot: a resource above its high amount (not checked for idle nodes);
* the same on Prod usage: Prod-idle (schedulable) and Prod-hot.

Upstream's five lists follow: ``low`` (idle, neither Prod class), ``bothLow`` (idle and Prod-idle), ``prodHigh``
(Prod-hot and not hot), ``high`` (hot), ``prodLow`` (Prod-idle, neither idle nor hot).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.config.lownodeload import RESOURCES, NodePool

__all__ = ["Classes", "PoolThresholds", "classify", "pool_thresholds", "usage_percent"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]


def usage_percent(usage: I64, alloc: I64) -> F64:
    """``100 × usage / allocatable`` per entry (NaN where allocatable is 0): upstream's ``resourceUsagePercentages``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: F64 = np.where(alloc > 0, usage.astype(np.float64) * 100.0 / alloc.astype(np.float64), np.nan)
    return out


def _mean_percent(usage: I64, alloc: I64) -> F64:
    """Mean usage percentage per column over the rows that have the resource (0 when none has it)."""
    percent = usage_percent(usage, alloc)
    has = alloc > 0
    counts = has.sum(axis=0)
    sums = np.where(has, percent, 0.0).sum(axis=0)
    out: F64 = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    return out


def _percents(given: dict[str, float], resources: Sequence[str], mean: F64 | None, sign: float) -> F64:
    """Effective percentages per resource: absolute values, or the mean ± value (clamped) with deviations."""
    out = np.full(len(resources), 100.0)
    for i, name in enumerate(resources):
        value = given.get(name)
        if value is None:
            continue
        if mean is None:
            out[i] = value
        elif value != 0:
            out[i] = min(max(float(mean[i]) + sign * value, 0.0), 100.0)
    return out


def _unset_as(low: F64, given: dict[str, float], resources: Sequence[str], high: F64) -> F64:
    """A resource the low map leaves out is idle up to its high threshold (so an idle node is never hot)."""
    for i, name in enumerate(resources):
        if name not in given:
            low[i] = high[i]
    return low


@dataclass(frozen=True, slots=True)
class PoolThresholds:
    """A pool's effective percentages (one per resource) and amounts (one row per node)."""

    resources: tuple[str, ...]
    columns: npt.NDArray[np.intp]
    """Columns of the state's usage rows (``RESOURCES`` order) for ``resources``."""
    low_percent: F64
    high_percent: F64
    prod_low_percent: F64
    prod_high_percent: F64
    low: I64
    high: I64
    prod_low: I64
    prod_high: I64


def _amounts(percent: F64, alloc: I64) -> I64:
    out: I64 = (percent[None, :] * 0.01 * alloc.astype(np.float64)).astype(np.int64)
    return out


def pool_thresholds(pool: NodePool, alloc: I64, usage: I64, prod_usage: I64) -> PoolThresholds:
    """``alloc``/``usage``/``prod_usage``: the pool's fresh nodes' rows (all ``RESOURCES`` columns)."""
    resources = pool.resources
    columns = np.array([RESOURCES.index(name) for name in resources], np.intp)
    alloc = alloc[:, columns]
    mean = prod_mean = None
    if pool.use_deviation_thresholds:
        mean = _mean_percent(usage[:, columns], alloc)
        prod_mean = _mean_percent(prod_usage[:, columns], alloc)
    high = _percents(pool.high, resources, mean, +1.0)
    low = _unset_as(_percents(pool.low, resources, mean, -1.0), pool.low, resources, high)
    prod_high = _percents(pool.prod_high, resources, prod_mean, +1.0)
    prod_low = _unset_as(_percents(pool.prod_low, resources, prod_mean, -1.0), pool.prod_low, resources, prod_high)
    return PoolThresholds(
        resources,
        columns,
        low,
        high,
        prod_low,
        prod_high,
        _amounts(low, alloc),
        _amounts(high, alloc),
        _amounts(prod_low, alloc),
        _amounts(prod_high, alloc),
    )


@dataclass(frozen=True, slots=True)
class Classes:
    """Per node of the pool (aligned with the rows given to :func:`classify`)."""

    idle: Mask
    hot: Mask
    prod_idle: Mask
    prod_hot: Mask
    over: Mask
    """Per node and resource: above the high amount."""
    under: Mask
    """Per node and resource: at or below the low amount."""
    prod_over: Mask
    prod_under: Mask

    @property
    def low(self) -> Mask:
        """Upstream's ``lowNodes``: idle, neither Prod-hot nor Prod-idle."""
        out: Mask = self.idle & ~self.prod_hot & ~self.prod_idle
        return out

    @property
    def both_low(self) -> Mask:
        out: Mask = self.idle & ~self.prod_hot & self.prod_idle
        return out

    @property
    def sources(self) -> Mask:
        """Upstream's ``sourceNodes``: hot (and not idle)."""
        out: Mask = ~self.idle & self.hot
        return out

    @property
    def prod_sources(self) -> Mask:
        """Upstream's ``prodHighNodes``: Prod-hot and not hot."""
        out: Mask = self.prod_hot & (self.idle | ~self.hot)
        return out

    @property
    def prod_low(self) -> Mask:
        """Upstream's ``prodLowNodes``: Prod-idle, neither idle nor hot nor Prod-hot."""
        out: Mask = ~self.idle & ~self.hot & ~self.prod_hot & self.prod_idle
        return out


def classify(thresholds: PoolThresholds, usage: I64, prod_usage: I64, schedulable: Mask, prod_classes: bool) -> Classes:
    """Classes of the pool's fresh nodes (``usage``/``prod_usage``: their rows, all ``RESOURCES`` columns)."""
    columns = thresholds.columns
    used = usage[:, columns]
    over = used > thresholds.high
    under = used <= thresholds.low
    idle: Mask = schedulable & np.all(under, axis=1)
    hot: Mask = np.any(over, axis=1)
    if prod_classes:
        prod_used = prod_usage[:, columns]
        prod_over = prod_used > thresholds.prod_high
        prod_under = prod_used <= thresholds.prod_low
        prod_idle: Mask = schedulable & np.all(prod_under, axis=1)
        prod_hot: Mask = np.any(prod_over, axis=1)
    else:
        prod_over = np.zeros_like(over)
        prod_under = np.zeros_like(under)
        prod_idle = np.zeros_like(idle)
        prod_hot = np.zeros_like(hot)
    return Classes(idle, hot & ~idle, prod_idle, prod_hot, over, under, prod_over, prod_under)
