"""The heat-map PNG: a valid image with a title, panel names, pool labels, time ticks and a colour scale
around panels whose pixels follow the utilisation ramp; and the bitmap font that draws the text."""

from __future__ import annotations

import itertools
import struct
import zlib

import numpy as np
import pytest

from koordpy.sim.bitmapfont import CELL_WIDTH, GLYPH_HEIGHT, draw_text, text_mask, text_width
from koordpy.sim.heatrows import heat_rows, stack_labels
from koordpy.sim.png import FONT, HOT, MIN_PLOT_HEIGHT, PAD, TITLE, Label, heatmaps_picture, heatmaps_png


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


def _pixels(image: np.ndarray, colour: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(ys, xs) of every pixel of exactly this colour."""
    ys, xs = np.nonzero((image == np.array(colour, np.uint8)).all(axis=-1))
    assert ys.size, f"no pixel of colour {colour}"
    return ys, xs


def _ink(image: np.ndarray, top: int, left: int, bottom: int, right: int) -> int:
    """Dark (text) pixels in a region."""
    return int((image[max(top, 0) : bottom, max(left, 0) : right].max(axis=-1) < 128).sum())


RED, YELLOW, BLUE = [255, 40, 30], [255, 245, 120], [220, 235, 250]


def _picture(scale: int = 4) -> np.ndarray:
    cool_then_hot = np.array([[0.0, 0.0], [1.0, 0.5]])  # node 1 is hotter: drawn on top
    data = heatmaps_png(
        [cool_then_hot, np.full((2, 2), 0.5)], ["koordpy", "baseline"], [("pool", 2)], 300.0, 600.0, scale=scale
    )
    return _decode(data)


def test_panels_keep_the_ramp_and_hottest_row_first() -> None:
    image = _picture()
    ys, xs = _pixels(image, RED)
    top, left = int(ys.min()), int(xs.min())  # the first red pixel: node 1, column 0 of the first panel
    # the cell: 2 columns stretched to the 160-pixel minimum panel → 80 wide; 2 rows stretched to the
    # 200-pixel minimum panel height → 100 high
    cell = (image[top : top + 100, left : left + 80] == np.array(RED, np.uint8)).all(axis=-1)
    assert cell.all()
    assert image[top, left + 80].tolist() == YELLOW  # 50% → yellow, next column
    assert image[top + 100, left].tolist() == BLUE  # 0% → pale blue, the row below (cooler node)


def test_margins_hold_title_panel_names_pool_label_ticks_and_colour_scale() -> None:
    image = _picture()
    height, width, _ = image.shape
    ys, xs = _pixels(image, RED)
    cell_top, cell_left = int(ys.min()), int(xs.min())
    panel_h, line = MIN_PLOT_HEIGHT, GLYPH_HEIGHT * FONT
    # margins around two 160 × 200 panels
    assert width >= text_width(TITLE, FONT) + 2 * PAD
    assert cell_top >= 2 * line  # title and panel names above
    assert height - (cell_top + panel_h) >= 2 * line  # tick labels and caption below
    assert cell_left >= text_width("pool", FONT)  # pool name on the left
    # the font renderer put ink where the title is (top-left, after the padding) ...
    assert _ink(image, PAD, PAD, PAD + line, PAD + text_width(TITLE, FONT)) > 200
    # ... and nowhere in the blank band between the title and the panel names
    assert _ink(image, PAD + line + 1, 0, PAD + line + 6, width) == 0
    # panel names just above the panels, the pool name and node count left of the rows
    assert _ink(image, cell_top - 2 * line, cell_left, cell_top, cell_left + text_width("koordpy", FONT)) > 40
    assert _ink(image, cell_top - line, 0, cell_top + panel_h + 2 * line, cell_left - 6) > 40
    # time ticks under the panels ("0:00" at the first panel's left edge)
    assert _ink(image, cell_top + panel_h + 2, cell_left - 4, cell_top + panel_h + 2 + 2 * line, cell_left + 60) > 20
    # the colour scale right of the second panel: red on top, pale blue at the bottom, "%" ticks beside
    _, yellow_xs = _pixels(image, YELLOW)
    panels_right = int(yellow_xs.max())
    bar = xs > panels_right
    assert bar.any()
    bar_top, bar_left, bar_right = int(ys[bar].min()), int(xs[bar].min()), int(xs[bar].max())
    blue_ys, blue_xs = _pixels(image, BLUE)
    bar_bottom = int(blue_ys[blue_xs > panels_right].max())
    assert bar_bottom > bar_top and bar_right - bar_left + 1 == 14
    assert _ink(image, bar_top - line, bar_right + 1, bar_bottom + line, width) > 4 * 30  # 0% … 100%


def test_pool_rows_are_grouped_and_limited() -> None:
    matrix = np.array([[0.1], [0.9], [0.5], [0.7], [0.2]])
    order, groups = heat_rows(matrix, [("a", 2), ("b", 3)], max_rows=4)
    # a keeps ceil(2 × 4 / 5) = 2 rows, hottest first (node 1, then 0); b keeps ceil(3 × 4 / 5) = 3
    assert order.tolist() == [1, 0, 3, 2, 4]
    assert [(g.name, g.first, g.shown, g.nodes) for g in groups] == [("a", 0, 2, 2), ("b", 2, 3, 3)]
    order, groups = heat_rows(matrix, [("a", 2), ("b", 3)], max_rows=2)
    # a keeps ceil(2 × 2 / 5) = 1, b ceil(3 × 2 / 5) = 2: the hottest of each
    assert order.tolist() == [1, 3, 2]
    with pytest.raises(ValueError, match="pools cover 4 nodes"):
        heat_rows(matrix, [("a", 4)])


def test_font_draws_known_glyphs_and_blanks_unknown_ones() -> None:
    one = text_mask("1")
    assert one.shape == (7, 5)
    assert one[:, 2].all()  # the stem of "1"
    assert text_mask("a").tolist() == text_mask("A").tolist()  # lower case drawn as capitals
    assert not text_mask("~").any()
    assert text_mask("10%", scale=2).shape == (14, (3 * CELL_WIDTH - 1) * 2)
    image = np.full((20, 20, 3), 255, np.uint8)
    draw_text(image, 15, 15, "88", colour=(0, 0, 0))  # clipped at the edges, no error
    assert (image[15:, 15:] == 0).any() and (image[:15, :15] == 255).all()


def test_pool_labels_never_overlap() -> None:
    # spans (top, bottom) in pixels: a tall pool, then two 8-pixel pools whose 16-pixel labels cannot be centred
    # label 1: centre 50 - 8 = 42; label 2: centre 104 - 8 = 96 but the floor is 42 + 16 + 2 = 60 → 96;
    # label 3: centre 112 - 8 = 104, floor 96 + 16 + 2 = 114 → 114 (pushed below its pool, not over label 2)
    assert stack_labels([(0, 100), (100, 108), (108, 116)], [16, 16, 16]) == [42, 96, 114]
    # a label taller than the first pool does not rise above the plot's top
    assert stack_labels([(10, 14), (14, 200)], [32, 16]) == [10, 99]  # 10 (not -4); centre 107 - 8


def test_a_short_run_on_small_pools_is_stretched_to_stay_readable() -> None:
    # one 5-minute column, twelve one-node pools: cells stretch to a 160-pixel panel and 17-pixel rows
    # (ceil(200 / 12) for the minimum height; one 16-pixel text line each), so every label has room
    matrix = np.full((12, 1), 0.5)
    pools = [(f"pool-{i}", 1) for i in range(12)]
    image = _decode(heatmaps_png([matrix, matrix], ["koordpy", "baseline"], pools, 300.0, 240.0))
    ys, xs = _pixels(image, YELLOW)
    first_panel = xs < int(xs.min()) + 170  # the second panel starts 16 pixels after the first
    assert int(xs[first_panel].max()) - int(xs.min()) + 1 == 160  # ceil(160 / 1 column) pixels wide
    assert int(ys.max()) - int(ys.min()) + 1 == 12 * 17  # ceil(200 / 12) pixels per node
    assert image.shape[0] >= int(ys.max()) + 2 * GLYPH_HEIGHT * FONT  # room for ticks and caption below


# node count → pools: one pool, or pools of very different sizes (a one-node pool among big ones)
POOLS: dict[int, list[tuple[str, int]]] = {
    1: [("node", 1)],
    3: [("gpu", 1), ("cpu-large", 2)],
    10: [("a", 1), ("b", 2), ("general-purpose", 7)],
    100: [("node", 100)],
    1000: [("tiny", 1), ("small", 9), ("big", 990)],
}
MIN_GAP = 2  # pixels between any two labels' boxes


def _apart(a: Label, b: Label) -> bool:
    """The two boxes, each grown by MIN_GAP / 2 on every side, do not overlap."""
    return (
        a.x + a.width + MIN_GAP <= b.x
        or b.x + b.width + MIN_GAP <= a.x
        or a.y + a.height + MIN_GAP <= b.y
        or b.y + b.height + MIN_GAP <= a.y
    )


@pytest.mark.parametrize("nodes", sorted(POOLS))
@pytest.mark.parametrize(("hours", "threshold"), [(0.25, 70.0), (6.0, 65.0), (48.0, 98.0), (2.0, 3.0)])
def test_no_two_labels_touch_at_any_node_count(nodes: int, hours: float, threshold: float) -> None:
    cols = round(hours * 12)
    matrix = np.linspace(0.0, 1.0, nodes * cols).reshape(nodes, cols)
    image, labels = heatmaps_picture(
        [matrix, matrix[::-1]], ["koordpy", "baseline"], POOLS[nodes], 300.0, hours * 3600, threshold=threshold
    )
    height, width, _ = image.shape
    close = [(a.text, b.text) for a, b in itertools.combinations(labels, 2) if not _apart(a, b)]
    assert close == []
    for label in labels:  # inside the picture, and the font drew it inside its box
        assert min(label.x, label.y) >= 0
        assert label.x + label.width <= width and label.y + label.height <= height
        assert _ink(image, label.y, label.x, label.y + label.height, label.x + label.width) > 0, label.text
    texts = [label.text for label in labels]
    assert TITLE.upper() in texts and texts.count("KOORDPY") == 1 and "CPU" in texts
    assert f"HOT >{threshold:g}%" in texts
    assert texts.count("0:00") == 2  # every panel keeps its first time label
    assert {name.upper() for name, _ in POOLS[nodes]} <= {t.split(" (")[0] for t in texts}


@pytest.mark.parametrize("nodes", [1, 3])
def test_a_small_cluster_gets_the_minimum_height_and_the_threshold_mark(nodes: int) -> None:
    matrix = np.full((nodes, 24), 0.5)
    image, labels = heatmaps_picture([matrix], ["koordpy"], POOLS[nodes], 300.0, 7200.0, threshold=65.0)
    ys, xs = _pixels(image, YELLOW)
    panel_h = int(ys.max()) - int(ys.min()) + 1
    assert panel_h == -(-MIN_PLOT_HEIGHT // nodes) * nodes  # 200 (1 node), 3 × 67 = 201 (3 nodes)
    # the mark: the threshold's colour across the colour scale, at 65% of its height from the bottom
    hot_ys, hot_xs = _pixels(image, list(HOT))
    bar = hot_xs > int(xs.max())
    bottom = int(ys.max())
    level = bottom - round(0.65 * (panel_h - 1))
    assert abs(int(np.median(hot_ys[bar])) - level) <= 1
    (mark,) = [label for label in labels if label.text == "HOT >65%"]
    assert mark.y <= level <= mark.y + mark.height  # its label beside it
    # 75% and 50% keep their labels (25 points = 50+ pixels from the mark's), so does every other tick
    assert {"0%", "25%", "50%", "75%", "100%"} <= {label.text for label in labels}


def test_a_tick_label_that_would_touch_the_thresholds_label_is_left_out() -> None:
    # threshold 72: 3 points (6 pixels) under the 75% tick, whose 14-pixel label would overlap "HOT >72%"
    _, labels = heatmaps_picture([np.full((1, 12), 0.5)], ["p"], [("n", 1)], 300.0, 3600.0, threshold=72.0)
    texts = {label.text for label in labels}
    assert "HOT >72%" in texts and "75%" not in texts and {"0%", "25%", "50%", "100%"} <= texts
