"""Minimal inline-SVG charts (line chart, heat map) for the simulation report; no plotting library.

Not guaranteed: pretty axes. Ticks are evenly spaced, not "nice" numbers beyond a little rounding.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Series", "heatmap", "line_chart"]

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 30, 40


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str
    dashed: bool = False
    step: bool = False


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.3g}"


def _label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def line_chart(
    title: str,
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    *,
    y_min: float | None = 0.0,
    y_max: float | None = None,
) -> str:
    xs_all = [x for s in series for x in s.xs]
    ys_all = [y for s in series for y in s.ys]
    x0, x1 = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    lo = y_min if y_min is not None else (min(ys_all) if ys_all else 0.0)
    hi = y_max if y_max is not None else (max(ys_all) if ys_all else 1.0)
    if hi <= lo:
        hi = lo + 1.0
    if x1 <= x0:
        x1 = x0 + 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (min(max(y, lo), hi) - lo) / (hi - lo) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"'
        f' role="img" aria-label="{html.escape(title)}">',
        f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for i in range(5):
        value = lo + (hi - lo) * i / 4
        y = py(value)
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{_num(y)}" y2="{_num(y)}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{_num(y + 4)}" font-size="11" text-anchor="end">{_label(value)}</text>')
        xv = x0 + (x1 - x0) * i / 4
        parts.append(
            f'<text x="{_num(px(xv))}" y="{TOP + plot_h + 16}" font-size="11" text-anchor="middle">{_label(xv)}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 6}" font-size="11" text-anchor="middle">'
        f"{html.escape(x_label)}</text>"
    )
    parts.append(
        f'<text x="14" y="{TOP + plot_h / 2:.0f}" font-size="11" text-anchor="middle"'
        f' transform="rotate(-90 14 {TOP + plot_h / 2:.0f})">{html.escape(y_label)}</text>'
    )
    for k, s in enumerate(series):
        points: list[str] = []
        prev_y: float | None = None
        for x, y in zip(s.xs, s.ys, strict=True):
            if s.step and prev_y is not None:
                points.append(f"{_num(px(x))},{_num(py(prev_y))}")
            points.append(f"{_num(px(x))},{_num(py(y))}")
            prev_y = y
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<polyline fill="none" stroke="{s.color}" stroke-width="1.6"{dash} points="{" ".join(points)}"/>')
        lx = LEFT + 8 + 150 * k
        parts.append(
            f'<line x1="{lx}" x2="{lx + 18}" y1="{TOP + 10}" y2="{TOP + 10}"'
            f' stroke="{s.color}" stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{lx + 22}" y="{TOP + 14}" font-size="11">{html.escape(s.label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _colour(value: float) -> str:
    """0 -> pale blue, 0.5 -> yellow, 1 -> red (utilisation)."""
    v = min(max(value, 0.0), 1.0)
    if v < 0.5:
        t = v / 0.5
        r, g, b = 220 + 35 * t, 235 + 10 * t, 250 - 130 * t
    else:
        t = (v - 0.5) / 0.5
        r, g, b = 255, 245 - 205 * t, 120 - 90 * t
    return f"#{round(r):02x}{round(g):02x}{round(b):02x}"


def heatmap(
    title: str, matrix: npt.NDArray[np.float64], bucket_seconds: float, threshold: float, max_rows: int = 200
) -> str:
    """Rows = nodes sorted by mean value (hottest on top), columns = time buckets; cells above
    ``threshold`` get a dark outline. Only the ``max_rows`` hottest nodes are drawn."""
    rows, cols = matrix.shape
    order = np.argsort(-matrix.mean(axis=1), kind="stable")[:max_rows] if rows else np.zeros(0, np.int64)
    shown = matrix[order] if rows else matrix
    plot_w = WIDTH - LEFT - RIGHT
    cell_w = plot_w / max(cols, 1)
    cell_h = max(1.0, min(4.0, 300 / max(len(order), 1)))
    height = TOP + cell_h * len(order) + BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}"'
        f' height="{height:.0f}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    for r in range(len(order)):
        y = TOP + r * cell_h
        for c in range(cols):
            value = float(shown[r, c])
            stroke = ' stroke="#400" stroke-width="0.3"' if value * 100 > threshold else ""
            parts.append(
                f'<rect x="{LEFT + c * cell_w:.1f}" y="{y:.1f}" width="{cell_w:.2f}" height="{cell_h:.2f}"'
                f' fill="{_colour(value)}"{stroke}/>'
            )
    bottom = TOP + cell_h * len(order)
    parts.append(
        f'<text x="{LEFT - 6}" y="{TOP + 10}" font-size="11" text-anchor="end">hot</text>'
        f'<text x="{LEFT - 6}" y="{bottom:.0f}" font-size="11" text-anchor="end">cool</text>'
    )
    for i in range(5):
        hours = cols * bucket_seconds / 3600 * i / 4
        parts.append(
            f'<text x="{LEFT + plot_w * i / 4:.0f}" y="{bottom + 16:.0f}" font-size="11" text-anchor="middle">'
            f"{_label(hours)}</text>"
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{bottom + 32:.0f}" font-size="11" text-anchor="middle">'
        "hours (cell colour: CPU utilisation, pale 0% → yellow 50% → red 100%; outlined: above threshold)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)
