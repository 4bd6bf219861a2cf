"""A PNG picture of the per-node heat maps, side by side (no imaging library: zlib + numpy).

One panel per policy, left to right in run order: rows are nodes (hottest on top), columns are
5-minute buckets, colour is CPU utilisation (pale blue 0%, yellow 50%, red 100%); a dark pixel
column separates panels. No text: the caption lives wherever the picture is shown.

Not guaranteed: identical bytes across zlib versions (the pixels are identical).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["heatmaps_png"]

F64 = npt.NDArray[np.float64]


def _rgb(values: F64) -> npt.NDArray[np.uint8]:
    """The same ramp as the report's SVG heat map."""
    v = np.clip(values, 0.0, 1.0)
    low = v < 0.5
    t = np.where(low, v / 0.5, (v - 0.5) / 0.5)
    r = np.where(low, 220 + 35 * t, 255)
    g = np.where(low, 235 + 10 * t, 245 - 205 * t)
    b = np.where(low, 250 - 130 * t, 120 - 90 * t)
    out: npt.NDArray[np.uint8] = np.rint(np.stack([r, g, b], axis=-1)).astype(np.uint8)
    return out


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def heatmaps_png(matrices: Sequence[F64], scale: int = 4, max_rows: int = 200) -> bytes:
    """Each matrix: nodes × buckets of utilisation (0..1)."""
    panels = []
    for matrix in matrices:
        order = np.argsort(-matrix.mean(axis=1), kind="stable")[:max_rows] if matrix.size else np.zeros(0, np.int64)
        shown = matrix[order] if matrix.size else np.zeros((1, 1))
        pixels = _rgb(shown).repeat(scale, axis=0).repeat(scale, axis=1)
        panels.append(pixels)
    height = max(p.shape[0] for p in panels) if panels else 1
    gap = np.full((height, 2 * scale, 3), 40, np.uint8)
    padded = []
    for i, panel in enumerate(panels):
        if i:
            padded.append(gap)
        pad = np.full((height - panel.shape[0], panel.shape[1], 3), 255, np.uint8)
        padded.append(np.concatenate([panel, pad], axis=0))
    image = np.concatenate(padded, axis=1) if padded else np.full((1, 1, 3), 255, np.uint8)
    rows = np.concatenate([np.zeros((image.shape[0], 1), np.uint8), image.reshape(image.shape[0], -1)], axis=1)
    header = struct.pack(">IIBBBBB", image.shape[1], image.shape[0], 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + _chunk(b"IEND", b"")
    )
