from koordpy.sim.table import cell, html_side_by_side, side_by_side


def test_cells_and_columns_line_up_under_each_mode() -> None:
    table = side_by_side(
        ["koordpy", "baseline"],
        [{"p50": 1.5, "n": 3, "gone": None}, {"p50": 7773.06, "n": 1234, "gone": 2}],
        [("p50", "latency p50 (s)", "{:,.1f}"), ("n", "jobs", "{:,}"), ("gone", "never started", "{:,}")],
    )
    # label width 15 (longest label), column width 8 ("baseline"); every cell right-aligned to it, formatted
    # by its row: one decimal and thousands separators for seconds, separators for counts, "-" for None
    assert table.splitlines() == [
        "                  koordpy  baseline",
        "latency p50 (s)       1.5   7,773.1",
        "jobs                    3     1,234",
        "never started           -         2",
    ]


def test_a_cell_wider_than_the_mode_widens_every_column() -> None:
    table = side_by_side(["a"], [{"x": 1234567}], [("x", "x", "{:,}")])
    assert table.splitlines() == ["           a", "x  1,234,567"]
    assert (cell(None, "{:,}"), cell(0.1, "{:.2f}"), cell(True)) == ("-", "0.10", "True")


def test_the_html_table_shows_the_same_cells_escaped() -> None:
    html = html_side_by_side(["a<b"], [{"x": 1850.5}], [("x", "  x & y", "{:,.1f}")])
    assert html == "<table><tr><th></th><th>a&lt;b</th></tr><tr><th>x &amp; y</th><td>1,850.5</td></tr></table>"
