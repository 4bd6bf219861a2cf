"""The report's SVG plots: legends clear of every data point, round ticks inside the run, labelled heat maps.

Checked geometrically on the generated SVG (parsed as XML), not on the code that places things.
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from koordpy.sim.svg import MIN_HEATMAP_HEIGHT, Series, heatmap, line_chart
from koordpy.sim.textmetrics import ASCENT, DESCENT, text_width

NS = {"s": "http://www.w3.org/2000/svg"}


def _rect(element: ET.Element) -> tuple[float, float, float, float]:
    x, y = float(element.get("x", 0)), float(element.get("y", 0))
    return x, y, x + float(element.get("width", 0)), y + float(element.get("height", 0))


def _points(svg: ET.Element) -> list[tuple[float, float]]:
    out = []
    for line in svg.iterfind("s:polyline", NS):
        for pair in line.get("points", "").split():
            x, y = pair.split(",")
            out.append((float(x), float(y)))
    return out


def _texts(svg: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter("{http://www.w3.org/2000/svg}text")]


def _busy_series(count: int) -> list[Series]:
    """Curves that fill the whole plot, corners included (top-left is where legends used to sit)."""
    xs = [float(x) for x in range(0, 21601, 600)]
    out = []
    for k in range(count):
        ys = [100.0 if (i + k) % 2 else 0.0 for i in range(len(xs))]
        out.append(Series(f"policy-{k} with a fairly long legend label ({k})", xs, ys, "#123456", dashed=k % 2 == 1))
    return out


@pytest.mark.parametrize("count", [1, 2, 4, 7])
def test_legend_box_holds_its_items_and_no_data_point(count: int) -> None:
    svg = ET.fromstring(
        line_chart("t", _busy_series(count), "time (h:mm)", "CPU (%)", x_range=(0, 21600), time_axis=True)
    )
    legend = svg.find("s:g[@class='legend']", NS)
    assert legend is not None
    box = legend.find("s:rect[@class='legend-box']", NS)
    plot = svg.find("s:rect[@class='plot-area']", NS)
    assert box is not None and plot is not None
    bx0, by0, bx1, by1 = _rect(box)
    px0, py0, px1, py1 = _rect(plot)
    points = _points(svg)
    assert len(points) == count * 37  # every series drawn (36 intervals + 1 points each)
    inside = [(x, y) for x, y in points if bx0 <= x <= bx1 and by0 <= y <= by1]
    assert inside == []
    assert by1 <= py0  # the band lies above the plot area, so no curve segment crosses it either
    assert all(px0 <= x <= px1 and py0 <= y <= py1 for x, y in points)
    # the legend's own items lie inside its box
    for line in legend.iterfind("s:line", NS):
        assert bx0 <= float(line.get("x1", -1)) and float(line.get("x2", 1e9)) <= bx1
        assert by0 <= float(line.get("y1", -1)) <= by1
    assert len(legend.findall("s:text", NS)) == count


def test_time_axis_ticks_are_round_hours_inside_the_run_and_value_ticks_round() -> None:
    series = [Series("a", [0.0, 3600.0, 21600.0], [0.0, 47.3, 12.0], "#000")]
    svg = ET.fromstring(line_chart("t", series, "time (h:mm)", "CPU (%)", x_range=(0, 21600), time_axis=True))
    texts = _texts(svg)
    assert [t for t in texts if re.fullmatch(r"\d+:\d\d", t)] == [f"{h}:00" for h in range(7)]
    assert [t for t in texts if re.fullmatch(r"\d+", t)] == ["0", "20", "40", "60"]  # 47.3 → axis to 60
    assert "time (h:mm)" in texts and "CPU (%)" in texts


def test_value_x_axis_ticks_stay_inside_the_data_range() -> None:
    series = [Series("a", [0.0, 130.0], [0.0, 100.0], "#000", step=True)]
    svg = ET.fromstring(line_chart("t", series, "pending time (s)", "pods (%)", y_max=100.0))
    plot = svg.find("s:rect[@class='plot-area']", NS)
    assert plot is not None
    x0, _, x1, _ = _rect(plot)
    bottom_labels = [t for t in svg.iterfind("s:text", NS) if t.get("text-anchor") == "middle" and t.text != "t"]
    ticks = [t for t in bottom_labels if (t.text or "").replace(",", "").isdigit()]
    assert [t.text for t in ticks] == ["0", "25", "50", "75", "100", "125"]  # 150 would lie outside 0..130
    assert all(x0 <= float(t.get("x", -1)) <= x1 for t in ticks)
    y_ticks = [t.text for t in svg.iterfind("s:text", NS) if t.get("text-anchor") == "end"]
    assert y_ticks == ["0", "25", "50", "75", "100"]


def test_heatmap_names_pools_has_time_ticks_and_a_colour_scale() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.uniform(0, 1, (30, 73))  # 6 h of 5-minute buckets plus the closing sample
    svg_text = heatmap("Per-node CPU", matrix, 300.0, 65, pools=[("general", 27), ("gpu", 3)], duration=21600)
    svg = ET.fromstring(svg_text)
    texts = _texts(svg)
    # 30 rows of min(8, 300 / 30) = 8 px (240 px ≥ the 120-px minimum): general spans 216 px (name over
    # count), gpu 24 px (< 2 lines of 13 px: one line)
    assert "general" in texts and "27 nodes" in texts and "gpu (3 nodes)" in texts
    assert [t for t in texts if re.fullmatch(r"\d+:\d\d", t)] == [f"{h}:00" for h in range(7)]
    assert [t for t in texts if re.fullmatch(r"\d+%", t)] == ["0%", "25%", "50%", "75%", "100%"]
    assert "hot above 65%" in texts  # the threshold's label on the colour scale
    cells = svg.findall("s:g/s:rect", NS)
    assert len(cells) == 30 * 73


def test_heatmap_rows_grouped_by_pool_hottest_first_within_each() -> None:
    # pool a: nodes 0, 1 (means 0.1, 0.9); pool b: node 2 (mean 0.5)
    matrix = np.array([[0.1, 0.1], [0.9, 0.9], [0.5, 0.5]])
    svg = ET.fromstring(heatmap("t", matrix, 300.0, 65, pools=[("a", 2), ("b", 1)], duration=600))
    fills = [c.get("fill") for c in svg.findall("s:g/s:rect", NS)][::2]  # first column of each row
    # ramp: 0.9 → r 255, g 245 - 205 × 0.8 = 81, b 120 - 90 × 0.8 = 48; 0.1 → 227, 237, 224; 0.5 → 255, 245, 120
    assert fills == ["#ff5130", "#e3ede0", "#fff578"]


# node count → pools: one pool, or pools of very different sizes (a one-node pool among big ones)
POOLS: dict[int, list[tuple[str, int]]] = {
    1: [("node", 1)],
    3: [("gpu", 1), ("cpu-large", 2)],
    10: [("a", 1), ("b", 2), ("general-purpose", 7)],
    100: [("node", 100)],
    1000: [("tiny", 1), ("small", 9), ("a-pool-with-a-long-name", 990)],
}


def _text_boxes(svg: ET.Element) -> list[tuple[str, float, float, float, float]]:
    """(text, x0, y0, x1, y1) of every <text>, from DejaVu Sans's advance widths and its ascent and descent."""
    boxes = []
    for element in svg.iter(f"{{{NS['s']}}}text"):
        size = float(element.get("font-size", "11"))
        width = text_width(element.text or "", size)
        tallest = size
        for span in element:
            span_size = float(span.get("font-size", size))
            width += text_width(span.text or "", span_size) + text_width(span.tail or "", size)
            tallest = max(tallest, span_size)
        x, y = float(element.get("x", "0")), float(element.get("y", "0"))
        anchor = element.get("text-anchor", "start")
        x0 = x - width if anchor == "end" else x - width / 2 if anchor == "middle" else x
        boxes.append(("".join(element.itertext()), x0, y - ASCENT * tallest, x0 + width, y + DESCENT * tallest))
    return boxes


@pytest.mark.parametrize("nodes", sorted(POOLS))
@pytest.mark.parametrize(("hours", "threshold"), [(0.25, 70.0), (6.0, 65.0), (48.0, 98.0), (2.0, 3.0)])
def test_heatmap_labels_never_overlap_at_any_node_count(nodes: int, hours: float, threshold: float) -> None:
    cols = round(hours * 12)
    matrix = np.linspace(0.0, 1.0, nodes * cols).reshape(nodes, cols)
    svg = ET.fromstring(heatmap("t", matrix, 300.0, threshold, pools=POOLS[nodes], duration=hours * 3600))
    _, _, width, height = (float(v) for v in svg.get("viewBox", "").split())
    boxes = _text_boxes(svg)
    overlapping = [
        (a[0], b[0])
        for a, b in itertools.combinations(boxes, 2)
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
    ]
    assert overlapping == []
    outside = [text for text, x0, y0, x1, y1 in boxes if x0 < 0 or y0 < 0 or x1 > width or y1 > height]
    assert outside == []
    texts = [text for text, *_ in boxes]
    assert f"hot above {threshold:g}%" in texts and "0:00" in texts
    cells = svg.findall("s:g/s:rect", NS)
    rows = {c.get("y") for c in cells}
    row_height = float(cells[0].get("height", "0"))
    assert len(rows) * row_height >= MIN_HEATMAP_HEIGHT - 1e-6  # one node is a band, not a line


@pytest.mark.parametrize(("top", "expected"), [(0.0, ["0", "1"]), (9.0, ["0", "2", "4", "6", "8", "10"])])
def test_a_count_axis_has_whole_number_ticks(top: float, expected: list[str]) -> None:
    series = [Series("evictions", [0.0, 3600.0], [0.0, top], "#123456", step=True)]
    svg = ET.fromstring(line_chart("t", series, "time", "count", time_axis=True, whole_numbers=True))
    assert [t.text for t in svg.iterfind("s:text", NS) if t.get("text-anchor") == "end"] == expected
