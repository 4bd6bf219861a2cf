"""A PNG picture of the per-node heat maps, side by side (no imaging library: zlib + numpy).

Layout: a title on top; one panel per policy, left to right in run order, each named above;
rows are nodes grouped by pool (pool names on the left, hottest node of each pool first),
columns are 5-minute buckets, colour is CPU utilisation (pale blue 0%, yellow 50%, red 100%);
time ticks (``h:mm`` since the start) under the panels and a colour scale on the right with %
ticks and the hot threshold marked (a dark bar across the scale, labelled ``HOT >65%``). Text uses
the built-in bitmap font (capitals).

Sizes keep every label legible whatever the node count: panels are at least ``MIN_PLOT_HEIGHT``
pixels high (one node is a tall band, not a 4-pixel line) and at most ``MAX_PLOT_HEIGHT`` (200 rows
of 4 pixels), rows grow so that each pool can carry its label, and label positions come from the
font's cell size: time ticks are spaced by their widest label, colour-scale ticks that would touch the
threshold's label are left out, pool labels are stacked. :func:`heatmaps_picture` returns every
label's box with the pixels, so tests can check that no two overlap.

Not guaranteed: identical bytes across zlib versions (the pixels are identical).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.sim.bitmapfont import CELL_HEIGHT, GLYPH_HEIGHT, draw_text, text_width
from koordpy.sim.heatrows import PoolRows, heat_rows, ramp_rgb, stack_labels
from koordpy.sim.ticks import clock_label, time_ticks

__all__ = ["MIN_PLOT_HEIGHT", "TITLE", "Label", "heatmaps_picture", "heatmaps_png", "png_bytes"]

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]
TITLE = "Per-node CPU utilisation (5-minute means)"
INK = (34, 34, 34)
GREY = (120, 120, 120)
HOT = (68, 0, 0)
WHITE = 255
FONT = 2
LINE = CELL_HEIGHT * FONT
TEXT_HEIGHT = GLYPH_HEIGHT * FONT
PAD = 8
PANEL_GAP = 16
BAR_WIDTH = 14
TICK = 4
MIN_PANEL_WIDTH = 160
MAX_PANEL_WIDTH = 640
"""A long run's columns narrow down to one pixel each to stay within this (a column is never cut)."""
MAX_ROW_HEIGHT = 16
MIN_PLOT_HEIGHT = 200
"""Panels (and the colour scale beside them) are at least this high: the scale's 25 % steps are then
50 pixels apart, room for a tick label and the threshold's label between two of them."""
MAX_PLOT_HEIGHT = 1000
LABEL_GAP = 2
"""Pixels kept free between two labels on the colour scale."""
TICK_GAP = 8
"""Pixels kept free between two time-tick labels."""


@dataclass(frozen=True, slots=True)
class Label:
    """A text drawn in the picture: its box in pixels (top-left corner, width, height)."""

    x: int
    y: int
    width: int
    height: int
    text: str


def _count(group: PoolRows) -> str:
    shown = f"{group.shown} of {group.nodes}" if group.shown < group.nodes else f"{group.nodes}"
    return f"{shown} node" + ("" if group.nodes == 1 else "s")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(image: npt.NDArray[np.uint8]) -> bytes:
    """An 8-bit RGB PNG of an (height, width, 3) array."""
    rows = np.concatenate([np.zeros((image.shape[0], 1), np.uint8), image.reshape(image.shape[0], -1)], axis=1)
    header = struct.pack(">IIBBBBB", image.shape[1], image.shape[0], 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + _chunk(b"IEND", b"")
    )


def heatmaps_png(
    matrices: Sequence[F64],
    names: Sequence[str],
    pools: Sequence[tuple[str, int]],
    bucket_seconds: float,
    duration: float,
    *,
    threshold: float | None = None,
    scale: int = 4,
    max_rows: int = 200,
) -> bytes:
    """Each matrix: nodes × buckets of utilisation (0..1), nodes in pool order (``pools``: name, count);
    ``threshold``: the hot threshold in percent, marked on the colour scale (none if None)."""
    image, _ = heatmaps_picture(
        matrices, names, pools, bucket_seconds, duration, threshold=threshold, scale=scale, max_rows=max_rows
    )
    return png_bytes(image)


def _row_height(rows: int, smallest_pool: int, scale: int) -> int:
    """Pixels per row: at least ``scale``, enough for ``MIN_PLOT_HEIGHT`` and for one label line per
    pool (at most ``MAX_ROW_HEIGHT`` for that), never above ``MAX_PLOT_HEIGHT`` in all unless the
    rows need ``scale`` each."""
    rows = max(rows, 1)
    wanted = max(scale, -(-MIN_PLOT_HEIGHT // rows), min(MAX_ROW_HEIGHT, -(-LINE // max(smallest_pool, 1))))
    return max(scale, min(wanted, MAX_PLOT_HEIGHT // rows))


def heatmaps_picture(
    matrices: Sequence[F64],
    names: Sequence[str],
    pools: Sequence[tuple[str, int]],
    bucket_seconds: float,
    duration: float,
    *,
    threshold: float | None = None,
    scale: int = 4,
    max_rows: int = 200,
) -> tuple[U8, list[Label]]:
    """The picture of :func:`heatmaps_png` as an (height, width, 3) array, and the box of every label."""
    if len(names) != len(matrices):
        raise ValueError("one panel name per matrix")
    laid_out = [heat_rows(m, pools, max_rows) for m in matrices]
    groups = laid_out[0][1] if laid_out else []
    rows = len(laid_out[0][0]) if laid_out else 1
    # cells are scale × scale pixels, stretched when a run is too short, the cluster small or a pool too small to label
    cols = max((max(m.shape[1], 1) for m in matrices), default=1)
    min_panel = max([MIN_PANEL_WIDTH, *(text_width(name, FONT) + PANEL_GAP for name in names)])
    x_scale = max(scale, -(-min_panel // cols)) if cols * scale <= MAX_PANEL_WIDTH else max(1, MAX_PANEL_WIDTH // cols)
    y_scale = _row_height(rows, min((g.shown for g in groups), default=1), scale)
    panels = []
    for matrix, (order, _) in zip(matrices, laid_out, strict=True):
        shown = matrix[order] if matrix.shape[1] else np.zeros((len(order), 1))
        panels.append(ramp_rgb(shown).repeat(y_scale, axis=0).repeat(x_scale, axis=1))
    plot_h = max((p.shape[0] for p in panels), default=y_scale)
    panel_w = max((p.shape[1] for p in panels), default=x_scale)
    # pool labels: name over node count when the pool's rows are tall enough, else "name (count)"
    labels = [
        [g.name, _count(g)] if g.shown * y_scale >= 2 * LINE else [f"{g.name} ({_count(g).rsplit(' ', 1)[0]})"]
        for g in groups
    ]
    label_w = max((text_width(line, FONT) for lines in labels for line in lines), default=0)
    left = PAD + label_w + 10
    top = PAD + LINE + 10 + LINE + 4
    panels_w = len(panels) * panel_w + max(len(panels) - 1, 0) * PANEL_GAP
    bar_x = left + panels_w + 20
    hot_text = None if threshold is None else f"hot >{threshold:g}%"
    scale_w = max(text_width("100%", FONT), text_width(hot_text or "", FONT))
    right = bar_x + BAR_WIDTH + 7 + scale_w + PAD
    caption = "time since start (h:mm)"
    caption_x = max(left, left + (panels_w - text_width(caption, FONT)) // 2)
    width = max(right, PAD + text_width(TITLE, FONT) + PAD, caption_x + text_width(caption, FONT) + PAD)
    bottom = top + plot_h
    spans = [(top + g.first * y_scale, top + (g.first + g.shown) * y_scale) for g in groups]
    label_tops = [round(y) for y in stack_labels(spans, [len(lines) * LINE for lines in labels], gap=0)]
    label_bottom = max((y + len(lines) * LINE for y, lines in zip(label_tops, labels, strict=True)), default=0)
    # the tick row and the caption go below the panels and below any pool label pushed past them
    ticks_y = max(bottom + TICK + 4, label_bottom + 4)
    caption_y = ticks_y + LINE + 6
    height = caption_y + LINE + PAD
    image = np.full((height, width, 3), WHITE, np.uint8)
    boxes: list[Label] = []

    def text(x: int, y: int, value: str, colour: tuple[int, int, int]) -> None:
        draw_text(image, x, y, value, colour=colour, scale=FONT)
        boxes.append(Label(x, y, text_width(value, FONT), TEXT_HEIGHT, value.upper()))

    text(PAD, PAD, TITLE, INK)
    # time ticks: at most one per widest label and two gaps; a label that would still touch the one before is left out
    widest = max(text_width(clock_label(duration), FONT), text_width("0:00", FONT))
    span = cols * bucket_seconds
    for i, (panel, name) in enumerate(zip(panels, names, strict=True)):
        x = left + i * (panel_w + PANEL_GAP)
        image[top : top + panel.shape[0], x : x + panel.shape[1]] = panel
        text(x, top - LINE - 2, name, INK)
        for group in groups[1:]:  # a line between pools
            image[top + group.first * y_scale, x : x + panel.shape[1]] = INK
        taken = x - PANEL_GAP // 2
        for at, label in time_ticks(0.0, duration, max_ticks=1 + panel_w // (widest + 2 * TICK_GAP)):
            tx = x + min(round(at / span * panel.shape[1]), panel.shape[1] - 1)
            image[bottom : bottom + TICK, tx] = INK
            w = text_width(label, FONT)
            lx = min(max(tx - w // 2, x), x + panel_w - w)
            if lx < taken:  # would touch the previous label: the tick stays, its label goes
                continue
            text(lx, ticks_y, label, INK)
            taken = lx + w + TICK_GAP
    text(caption_x, caption_y, caption, GREY)
    for (y0, y_end), lines, ly in zip(spans, labels, label_tops, strict=True):  # pool names with a bracket
        y1 = y_end - 1
        image[y0 : y1 + 1, left - 5] = INK
        image[y0, left - 5 : left - 1] = INK
        image[y1, left - 5 : left - 1] = INK
        for k, line in enumerate(lines):
            text(left - 10 - text_width(line, FONT), ly + k * LINE, line, INK if k == 0 else GREY)
    _colour_scale(image, text, bar_x=bar_x, top=top, bottom=bottom, threshold=threshold, hot_text=hot_text)
    return image, boxes


def _colour_scale(
    image: U8,
    text: Callable[[int, int, str, tuple[int, int, int]], None],
    *,
    bar_x: int,
    top: int,
    bottom: int,
    threshold: float | None,
    hot_text: str | None,
) -> None:
    """100% on top, 0% at the bottom; the threshold's bar and label first, then the 25% ticks whose
    labels keep ``LABEL_GAP`` pixels from every label already placed."""
    plot_h = bottom - top
    ramp = ramp_rgb(np.linspace(1.0, 0.0, plot_h))
    image[top:bottom, bar_x : bar_x + BAR_WIDTH] = ramp[:, None, :]
    text(bar_x, top - LINE - 2, "CPU", INK)
    label_x = bar_x + BAR_WIDTH + 7

    def level(percent: float) -> int:
        return bottom - 1 - round(min(max(percent, 0.0), 100.0) / 100 * (plot_h - 1))

    def label_top(y: int) -> int:
        return min(max(y - TEXT_HEIGHT // 2, top - 2), bottom - TEXT_HEIGHT + 2)

    placed: list[tuple[int, int]] = []
    if threshold is not None and hot_text is not None:
        y = level(threshold)
        image[max(y - 1, top) : min(y + 2, bottom), bar_x - 3 : bar_x + BAR_WIDTH + 3] = HOT
        ly = label_top(y)
        text(label_x, ly, hot_text, HOT)
        placed.append((ly, ly + TEXT_HEIGHT))
    for percent in (100, 75, 50, 25, 0):
        y = level(percent)
        image[y, bar_x + BAR_WIDTH : bar_x + BAR_WIDTH + 3] = INK
        ly = label_top(y)
        if any(ly < b + LABEL_GAP and a < ly + TEXT_HEIGHT + LABEL_GAP for a, b in placed):
            continue
        text(label_x, ly, f"{percent}%", INK)
        placed.append((ly, ly + TEXT_HEIGHT))
