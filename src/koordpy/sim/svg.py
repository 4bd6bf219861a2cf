"""Minimal inline-SVG charts (line chart, heat map) for the simulation report; no plotting library.

Line charts: round ticks (``koordpy.sim.ticks``), a time axis in ``h:mm`` since the start with
ticks inside the run only, axis labels as given (they carry the units), and the legend in a band
of its own between the title and the plot area, so it never covers a curve. The legend is a
``<g class="legend">`` whose first child is its bounding ``<rect class="legend-box">``; the plot
area is ``<rect class="plot-area">``.

Heat maps: rows grouped by pool (names on the left), time ticks, a colour scale with % ticks and
the hot threshold marked on it (a dark bar labelled "hot above 65%"; hot cells are outlined in the
same colour). The plot is at least ``MIN_HEATMAP_HEIGHT`` px high whatever the node count, and
labels are placed from the font's advance widths (:mod:`koordpy.sim.textmetrics`): pool labels are
stacked, time ticks spaced by their widest label (a label that would still touch the one before
is left out).

Not guaranteed: text widths in a font other than DejaVu Sans (the first the SVG asks for).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.sim.heatrows import heat_rows, ramp_rgb, stack_labels
from koordpy.sim.textmetrics import FONT_FAMILY, text_width
from koordpy.sim.ticks import clock_label, nice_axis, tick_label, time_ticks, whole_axis

__all__ = ["HOT", "MIN_HEATMAP_HEIGHT", "Series", "heatmap", "line_chart"]

WIDTH = 720
LEFT, RIGHT, TITLE_BAND, BOTTOM = 64, 16, 28, 44
LEGEND_ROW = 16
LABEL_LINE = 13
TEXT = 11
"""Font size (px) of labels; counts under pool names are 10 px."""
MIN_HEATMAP_HEIGHT = 120
"""A heat map's rows take at least this many pixels in all (one node is a band, not a line)."""
TICK_GAP = 8
HOT = "#400"
"""The hot threshold's colour: heat-map outlines and mark, the threshold line of the report's plots."""


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


def _legend(series: Sequence[Series], top: float, width: float) -> tuple[list[str], float]:
    """Legend items laid out left to right, wrapping inside ``width``; returns (svg parts, height)."""
    items: list[tuple[float, int, Series]] = []
    x, row = 0.0, 0
    for s in series:
        item_w = 24 + text_width(s.label, TEXT) + 18
        if x > 0 and x + item_w > width:
            x, row = 0.0, row + 1
        items.append((x, row, s))
        x += item_w
    rows = row + 1 if series else 0
    height = rows * LEGEND_ROW + 4 if rows else 0.0
    used = max((x + 24 + text_width(s.label, TEXT) for x, _, s in items), default=0.0)
    parts = [
        '<g class="legend">',
        f'<rect class="legend-box" x="{LEFT}" y="{_num(top)}" width="{_num(used + 8)}" height="{_num(height)}"'
        ' fill="none" stroke="none"/>',
    ]
    for x, row, s in items:
        lx, ly = LEFT + 4 + x, top + 2 + row * LEGEND_ROW + LEGEND_ROW / 2
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(
            f'<line x1="{_num(lx)}" x2="{_num(lx + 18)}" y1="{_num(ly)}" y2="{_num(ly)}"'
            f' stroke="{s.color}" stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{_num(lx + 24)}" y="{_num(ly + 4)}" font-size="11">{html.escape(s.label)}</text>')
    parts.append("</g>")
    return parts, height


def line_chart(
    title: str,
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    *,
    y_min: float | None = 0.0,
    y_max: float | None = None,
    x_range: tuple[float, float] | None = None,
    time_axis: bool = False,
    whole_numbers: bool = False,
    plot_height: int = 190,
) -> str:
    """``time_axis``: xs are seconds since the start, ticks on round minutes/hours within ``x_range``
    (default: the data's range). Otherwise round value ticks inside the x range. ``whole_numbers``:
    the y values are counts, so y ticks are whole numbers (0 and 1 when every value is 0)."""
    xs_all = [x for s in series for x in s.xs]
    ys_all = [y for s in series for y in s.ys]
    x0, x1 = x_range if x_range is not None else ((min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0))
    if x1 <= x0:
        x1 = x0 + 1.0
    lo = y_min if y_min is not None else (min(ys_all) if ys_all else 0.0)
    hi = y_max if y_max is not None else (max(ys_all) if ys_all else 1.0)
    lo, hi, y_ticks = nice_axis(lo, hi if hi > lo else lo + 1.0)
    if whole_numbers and not all(float(t).is_integer() for t in y_ticks):
        lo, hi, y_ticks = whole_axis(lo, hi, y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0)
    if y_max is not None:
        hi = y_max
        y_ticks = [t for t in y_ticks if t <= y_max]
    plot_w = WIDTH - LEFT - RIGHT
    legend_parts, legend_h = _legend(series, TITLE_BAND, plot_w)
    top = TITLE_BAND + legend_h + 6
    height = top + plot_height + BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + plot_height - (min(max(y, lo), hi) - lo) / (hi - lo) * plot_height

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {_num(height)}" width="{WIDTH}"'
        f' height="{_num(height)}" font-family="{FONT_FAMILY}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
        f'<rect class="plot-area" x="{LEFT}" y="{_num(top)}" width="{plot_w}" height="{plot_height}"'
        ' fill="#fafafa" stroke="#ccc"/>',
    ]
    for value in y_ticks:
        y = py(value)
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{_num(y)}" y2="{_num(y)}" stroke="#e4e4e4"/>')
        parts.append(
            f'<text x="{LEFT - 6}" y="{_num(y + 4)}" font-size="11" text-anchor="end">{tick_label(value)}</text>'
        )
    if time_axis:
        x_ticks = time_ticks(x0, x1, max_ticks=9)
    else:
        _, _, candidates = nice_axis(x0, x1, target=6)
        x_ticks = [(t, tick_label(t)) for t in candidates if x0 - 1e-9 <= t <= x1 + 1e-9]
    bottom = top + plot_height
    for value, label in x_ticks:
        x = px(value)
        parts.append(f'<line x1="{_num(x)}" x2="{_num(x)}" y1="{_num(bottom)}" y2="{_num(bottom + 4)}" stroke="#888"/>')
        parts.append(f'<text x="{_num(x)}" y="{_num(bottom + 16)}" font-size="11" text-anchor="middle">{label}</text>')
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{_num(height - 8)}" font-size="11" text-anchor="middle">'
        f"{html.escape(x_label)}</text>"
    )
    mid = top + plot_height / 2
    parts.append(
        f'<text x="14" y="{_num(mid)}" font-size="11" text-anchor="middle"'
        f' transform="rotate(-90 14 {_num(mid)})">{html.escape(y_label)}</text>'
    )
    for s in series:
        points: list[str] = []
        prev_y: float | None = None
        for x, y in zip(s.xs, s.ys, strict=True):
            if s.step and prev_y is not None:
                points.append(f"{_num(px(x))},{_num(py(prev_y))}")
            points.append(f"{_num(px(x))},{_num(py(y))}")
            prev_y = y
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<polyline fill="none" stroke="{s.color}" stroke-width="1.6"{dash} points="{" ".join(points)}"/>')
    parts.extend(legend_parts)
    parts.append("</svg>")
    return "\n".join(parts)


def _hex(rgb: npt.NDArray[np.uint8]) -> str:
    r, g, b = (int(v) for v in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    title: str,
    matrix: npt.NDArray[np.float64],
    bucket_seconds: float,
    threshold: float,
    *,
    pools: Sequence[tuple[str, int]],
    duration: float,
    max_rows: int = 200,
) -> str:
    """Rows = nodes grouped by pool (hottest first in each), columns = time buckets; cells above
    ``threshold`` (percent) get a dark outline, and the colour scale marks the threshold."""
    order, groups = heat_rows(matrix, pools, max_rows)
    cols = matrix.shape[1]
    rows = max(len(order), 1)
    shown = matrix[order] if cols else np.zeros((len(order), 0))
    cell_h = max(1.0, min(8.0, 300 / rows), MIN_HEATMAP_HEIGHT / rows)
    smallest = min((g.shown for g in groups), default=1)
    cell_h = max(cell_h, min(16.0, LABEL_LINE / max(smallest, 1)))  # room for one label line per pool
    top = TITLE_BAND + 6
    bottom = top + cell_h * len(order)
    # pool labels: name over node count when the pool's rows are tall enough, else "name (count)"
    spans = [(top + g.first * cell_h, top + (g.first + g.shown) * cell_h) for g in groups]
    counts = [
        (f"{g.shown} of {g.nodes}" if g.shown < g.nodes else f"{g.nodes}") + (" node" if g.nodes == 1 else " nodes")
        for g in groups
    ]
    two_lines = [y1 - y0 >= 2 * LABEL_LINE for y0, y1 in spans]
    label_tops = stack_labels(spans, [LABEL_LINE * (2 if two else 1) for two in two_lines], gap=0)
    label_widths = [
        max(text_width(g.name, TEXT), text_width(count, 10))
        if two
        else text_width(g.name, TEXT) + text_width(f" ({count})", 10)
        for g, count, two in zip(groups, counts, two_lines, strict=True)
    ]
    scale_name = "CPU utilisation"
    left = round(max(100.0, max(label_widths, default=0.0) + 24, text_width(scale_name, TEXT) + 6 + 8))
    plot_w = WIDTH - left - RIGHT
    cell_w = plot_w / max(cols, 1)
    xs = [round(left + c * cell_w, 1) for c in range(cols + 1)]  # shared edges: no seams between cells
    label_bottom = max(
        (y + LABEL_LINE * (2 if two else 1) for y, two in zip(label_tops, two_lines, strict=True)), default=0
    )
    bottom = max(bottom, label_bottom)
    bar_x, bar_y, bar_w, bar_h = float(left), bottom + 60, min(300.0, float(plot_w)), 12.0
    height = bar_y + bar_h + 44
    colours = ramp_rgb(shown)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}"'
        f' height="{height:.0f}" font-family="{FONT_FAMILY}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    parts.append('<g shape-rendering="crispEdges">')
    for r in range(len(order)):
        y = top + r * cell_h
        for c in range(cols):
            stroke = f' stroke="{HOT}" stroke-width="0.3"' if float(shown[r, c]) * 100 > threshold else ""
            parts.append(
                f'<rect x="{xs[c]:g}" y="{y:.1f}" width="{xs[c + 1] - xs[c]:.1f}" height="{cell_h:.2f}"'
                f' fill="{_hex(colours[r, c])}"{stroke}/>'
            )
    parts.append("</g>")
    for g, (y0, y1), count, two, ly in zip(groups, spans, counts, two_lines, label_tops, strict=True):
        if g.first:
            parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y0:.1f}" y2="{y0:.1f}" stroke="#222"/>')
        parts.append(
            f'<path d="M{left - 4} {y0 + 0.5:.1f} H{left - 8} V{y1 - 0.5:.1f} H{left - 4}" fill="none" stroke="#222"/>'
        )
        name = html.escape(g.name)
        if two:
            parts.append(
                f'<text x="{left - 12}" y="{ly + 10:.1f}" font-size="{TEXT}" text-anchor="end">{name}</text>'
                f'<text x="{left - 12}" y="{ly + 10 + LABEL_LINE:.1f}" font-size="10" fill="#666" text-anchor="end">'
                f"{count}</text>"
            )
        else:
            parts.append(
                f'<text x="{left - 12}" y="{ly + 10:.1f}" font-size="{TEXT}" text-anchor="end">{name}'
                f' <tspan fill="#666" font-size="10">({count})</tspan></text>'
            )
    span = cols * bucket_seconds if cols else 1.0
    widest = max(text_width(clock_label(duration), TEXT), text_width("0:00", TEXT))
    taken = 0.0
    for at, label in time_ticks(0.0, duration, max_ticks=min(9, 1 + int(plot_w // (widest + 2 * TICK_GAP)))):
        x = left + min(at, span) / span * plot_w
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom:.1f}" y2="{bottom + 4:.1f}" stroke="#888"/>')
        half = text_width(label, TEXT) / 2
        if x - half < taken:  # would touch the label before: the tick stays, its label goes
            continue
        parts.append(f'<text x="{x:.1f}" y="{bottom + 16:.1f}" font-size="{TEXT}" text-anchor="middle">{label}</text>')
        taken = x + half + TICK_GAP
    parts.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{bottom + 32:.0f}" font-size="{TEXT}" text-anchor="middle">'
        "time since start (h:mm); rows: nodes by pool, hottest first</text>"
    )
    parts.extend(_colour_scale(threshold, x0=bar_x, y0=bar_y, width=bar_w, height=bar_h, name=scale_name))
    parts.append("</svg>")
    return "\n".join(parts)


def _colour_scale(threshold: float, *, x0: float, y0: float, width: float, height: float, name: str) -> list[str]:
    """50 steps 0..100 %, ticks every 25 % under the bar, the hot threshold as a dark bar across it
    labelled above it, and a line under the ticks saying what the outlines mean."""
    ramp = ramp_rgb(np.linspace(0.0, 1.0, 50))
    parts = [
        f'<rect x="{x0 + i * width / 50:.1f}" y="{y0:.0f}" width="{width / 50 + 0.3:.2f}"'
        f' height="{height:.0f}" fill="{_hex(ramp[i])}"/>'
        for i in range(50)
    ]
    for percent in (0, 25, 50, 75, 100):
        x = x0 + percent / 100 * width
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0 + height:.0f}" y2="{y0 + height + 4:.0f}" stroke="#222"/>'
            f'<text x="{x:.1f}" y="{y0 + height + 16:.0f}" font-size="{TEXT}" text-anchor="middle">{percent}%</text>'
        )
    parts.append(f'<text x="{x0 - 6:.0f}" y="{y0 + 10:.0f}" font-size="{TEXT}" text-anchor="end">{name}</text>')
    tx = x0 + min(max(threshold, 0.0), 100.0) / 100 * width
    mark = f"hot above {threshold:g}%"
    half = text_width(mark, TEXT) / 2
    label_x = min(max(tx, half + 4), WIDTH - 4 - half)  # centred on the mark, inside the picture
    parts.append(
        f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y0 - 3:.0f}" y2="{y0 + height:.0f}" stroke="{HOT}" stroke-width="2"/>'
        f'<text x="{label_x:.1f}" y="{y0 - 6:.0f}" font-size="{TEXT}" text-anchor="middle" fill="{HOT}">{mark}</text>'
        f'<text x="{x0:.0f}" y="{y0 + height + 34:.0f}" font-size="{TEXT}">cells above {threshold:g}% (hot) are'
        f" outlined in the mark's colour</text>"
    )
    return parts
