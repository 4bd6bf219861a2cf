"""What both heat maps (the report's SVG and ``heatmap.png``) share: the row layout and the colour ramp.

Rows are grouped by node pool in scenario order (nodes ``<pool>-<i>`` are consecutive rows of the
matrix); within a pool the hottest node (highest mean) comes first. The ramp maps utilisation 0..1
to pale blue (0%), yellow (50%), red (100%), linear in RGB between those stops.

Not guaranteed: which nodes are shown when a pool is cut to its share of ``max_rows`` beyond
"the hottest ones".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["PoolRows", "heat_rows", "ramp_rgb", "stack_labels"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class PoolRows:
    name: str
    first: int
    """First drawn row of this pool."""
    shown: int
    """Rows drawn (the pool's hottest nodes)."""
    nodes: int
    """Nodes in the pool."""


def heat_rows(matrix: F64, pools: Sequence[tuple[str, int]], max_rows: int = 200) -> tuple[I64, list[PoolRows]]:
    """``(matrix row of each drawn row, pool groups)``. ``pools``: (name, node count) in scenario order,
    summing to the matrix's rows; a pool keeps ``ceil(count × max_rows / total)`` rows at most."""
    total = sum(count for _, count in pools)
    if total != matrix.shape[0]:
        raise ValueError(f"pools cover {total} nodes, the heat map has {matrix.shape[0]} rows")
    means = matrix.mean(axis=1) if matrix.shape[1] else np.zeros(matrix.shape[0])
    order: list[int] = []
    groups: list[PoolRows] = []
    start = 0
    for name, count in pools:
        keep = min(count, max(1, math.ceil(count * max_rows / max(total, 1))))
        local = np.argsort(-means[start : start + count], kind="stable")[:keep]
        groups.append(PoolRows(name, len(order), int(local.size), count))
        order.extend((local + start).tolist())
        start += count
    return np.asarray(order, np.int64), groups


def ramp_rgb(values: F64) -> npt.NDArray[np.uint8]:
    """Utilisation (any shape) → RGB bytes (shape + (3,)); values are clipped to 0..1."""
    v = np.clip(np.asarray(values, np.float64), 0.0, 1.0)
    low = v < 0.5
    t = np.where(low, v / 0.5, (v - 0.5) / 0.5)
    r = np.where(low, 220 + 35 * t, 255)
    g = np.where(low, 235 + 10 * t, 245 - 205 * t)
    b = np.where(low, 250 - 130 * t, 120 - 90 * t)
    out: npt.NDArray[np.uint8] = np.rint(np.stack([r, g, b], axis=-1)).astype(np.uint8)
    return out


def stack_labels(spans: Sequence[tuple[float, float]], heights: Sequence[float], gap: float = 2.0) -> list[float]:
    """Top of each label, centred on its (top, bottom) row span, never above the first span's top and
    pushed down so that no label overlaps the one above it (spans in drawing order)."""
    tops: list[float] = []
    floor = spans[0][0] if spans else 0.0
    for (top, bottom), height in zip(spans, heights, strict=True):
        y = max((top + bottom) / 2 - height / 2, floor)
        tops.append(y)
        floor = y + height + gap
    return tops
