"""The heat-map PNG: a valid image whose pixels follow the utilisation ramp."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from koordpy.sim.png import heatmaps_png


def _decode(data: bytes) -> np.ndarray:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        chunks[kind] = body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 2)
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + 3 * width)
    assert not raw[:, 0].any()  # filter type 0 on every row
    return raw[:, 1:].reshape(height, width, 3)


def test_two_panels_hottest_row_first_and_ramp_colours() -> None:
    cool_then_hot = np.array([[0.0, 0.0], [1.0, 0.5]])  # node 1 is hotter: drawn on top
    image = _decode(heatmaps_png([cool_then_hot, np.full((2, 2), 0.5)], scale=2))
    # 2 panels of 2 columns × scale 2, plus a 4-pixel separator
    assert image.shape == (4, 4 + 4 + 4, 3)
    assert image[0, 0].tolist() == [255, 40, 30]  # 100% -> red
    assert image[0, 2].tolist() == [255, 245, 120]  # 50% -> yellow
    assert image[2, 0].tolist() == [220, 235, 250]  # 0% -> pale blue
    assert image[0, 4].tolist() == [40, 40, 40]  # separator
    assert image[3, 8].tolist() == [255, 245, 120]
