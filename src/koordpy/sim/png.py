"""A PNG picture of the per-node heat maps, side by side (no imaging library: zlib + numpy).

Layout: a title on top; one panel per policy, left to right in run order, each named above;
rows are nodes grouped by pool (pool names on the left, hottest node of each pool first),
columns are 5-minute buckets, colour is CPU utilisation (pale blue 0%, yellow 50%, red 100%);
time ticks (``h:mm`` since the start) under the panels and a colour scale with % ticks on the
right. Text uses the built-in bitmap font (capitals).

Not guaranteed: identical bytes across zlib versions (the pixels are identical).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from koordpy.sim.bitmapfont import CELL_HEIGHT, GLYPH_HEIGHT, draw_text, text_width
from koordpy.sim.heatrows import PoolRows, heat_rows, ramp_rgb, stack_labels
from koordpy.sim.ticks import time_ticks

__all__ = ["TITLE", "heatmaps_png", "png_bytes"]

F64 = npt.NDArray[np.float64]
TITLE = "Per-node CPU utilisation (5-minute means)"
INK = (34, 34, 34)
GREY = (120, 120, 120)
WHITE = 255
FONT = 2
LINE = CELL_HEIGHT * FONT
PAD = 8
PANEL_GAP = 16
BAR_WIDTH = 14
TICK = 4
MIN_PANEL_WIDTH = 160
MAX_ROW_HEIGHT = 16


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
    scale: int = 4,
    max_rows: int = 200,
) -> bytes:
    """Each matrix: nodes × buckets of utilisation (0..1), nodes in pool order (``pools``: name, count)."""
    if len(names) != len(matrices):
        raise ValueError("one panel name per matrix")
    laid_out = [heat_rows(m, pools, max_rows) for m in matrices]
    groups = laid_out[0][1] if laid_out else []
    # cells are scale × scale pixels, stretched when a run is too short or a pool too small to label
    cols = max((max(m.shape[1], 1) for m in matrices), default=1)
    min_panel = max([MIN_PANEL_WIDTH, *(text_width(name, FONT) + PANEL_GAP for name in names)])
    x_scale = max(scale, -(-min_panel // cols))
    y_scale = max(scale, min(MAX_ROW_HEIGHT, -(-LINE // max(min((g.shown for g in groups), default=1), 1))))
    panels = []
    for matrix, (order, _) in zip(matrices, laid_out, strict=True):
        shown = matrix[order] if matrix.shape[1] else np.zeros((len(order), 1))
        panels.append(ramp_rgb(shown).repeat(y_scale, axis=0).repeat(x_scale, axis=1))
    plot_h = max((p.shape[0] for p in panels), default=y_scale)
    panel_w = max((p.shape[1] for p in panels), default=x_scale)
    # pool labels: name over node count when the pool's rows are tall enough, else "name (count)"
    labels = [
        [g.name, _count(g)] if g.shown * y_scale >= 2 * LINE else [f"{g.name} ({_count(g).split()[0]})"] for g in groups
    ]
    label_w = max((text_width(line, FONT) for lines in labels for line in lines), default=0)
    left = PAD + label_w + 10
    top = PAD + LINE + 10 + LINE + 4
    panels_w = len(panels) * panel_w + max(len(panels) - 1, 0) * PANEL_GAP
    bar_x = left + panels_w + 20
    right = bar_x + BAR_WIDTH + 7 + text_width("100%", FONT) + PAD
    title_right = PAD + text_width(TITLE, FONT) + PAD
    width = max(right, title_right)
    bottom = top + plot_h
    spans = [(top + g.first * y_scale, top + (g.first + g.shown) * y_scale) for g in groups]
    label_tops = [round(y) for y in stack_labels(spans, [len(lines) * LINE for lines in labels], gap=0)]
    label_bottom = max((y + len(lines) * LINE for y, lines in zip(label_tops, labels, strict=True)), default=0)
    height = max(bottom + TICK + 4 + LINE + 6 + LINE, label_bottom) + PAD
    image = np.full((height, width, 3), WHITE, np.uint8)

    draw_text(image, PAD, PAD, TITLE, colour=INK, scale=FONT)
    for i, (panel, name) in enumerate(zip(panels, names, strict=True)):
        x = left + i * (panel_w + PANEL_GAP)
        image[top : top + panel.shape[0], x : x + panel.shape[1]] = panel
        draw_text(image, x, top - LINE - 2, name, colour=INK, scale=FONT)
        for group in groups[1:]:  # a line between pools
            image[top + group.first * y_scale, x : x + panel.shape[1]] = INK
        for at, label in time_ticks(0.0, duration, max_ticks=max(2, panel_w // (text_width("0:00", FONT) + 24))):
            tx = x + min(round(at / bucket_seconds * x_scale), panel.shape[1] - 1)
            image[bottom : bottom + TICK, tx] = INK
            lx = min(max(tx - text_width(label, FONT) // 2, x), x + panel_w - text_width(label, FONT))
            draw_text(image, lx, bottom + TICK + 4, label, colour=INK, scale=FONT)
    caption = "time since start (h:mm)"
    caption_x = left + (panels_w - text_width(caption, FONT)) // 2
    draw_text(image, caption_x, bottom + TICK + 4 + LINE + 6, caption, colour=GREY, scale=FONT)
    for (y0, y_end), lines, ly in zip(spans, labels, label_tops, strict=True):  # pool names with a bracket
        y1 = y_end - 1
        image[y0 : y1 + 1, left - 5] = INK
        image[y0, left - 5 : left - 1] = INK
        image[y1, left - 5 : left - 1] = INK
        for k, line in enumerate(lines):
            colour = INK if k == 0 else GREY
            draw_text(image, left - 10 - text_width(line, FONT), ly + k * LINE, line, colour=colour, scale=FONT)
    # colour scale: 100% on top, 0% at the bottom, ticks every 25%
    ramp = ramp_rgb(np.linspace(1.0, 0.0, plot_h))
    image[top:bottom, bar_x : bar_x + BAR_WIDTH] = ramp[:, None, :]
    draw_text(image, bar_x, top - LINE - 2, "CPU", colour=INK, scale=FONT)
    for percent in (0, 25, 50, 75, 100):
        y = bottom - 1 - round(percent / 100 * (plot_h - 1))
        image[y, bar_x + BAR_WIDTH : bar_x + BAR_WIDTH + 3] = INK
        ly = min(max(y - GLYPH_HEIGHT * FONT // 2, top - 2), bottom - GLYPH_HEIGHT * FONT + 2)
        draw_text(image, bar_x + BAR_WIDTH + 7, ly, f"{percent}%", colour=INK, scale=FONT)
    return png_bytes(image)
