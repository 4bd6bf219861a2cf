from koordpy.sim.table import cell, side_by_side


def test_cells_and_columns_line_up_under_each_mode() -> None:
    table = side_by_side(
        ["koordpy", "baseline"],
        [{"p50": 1.5, "n": 3, "gone": None}, {"p50": 120.25, "n": 10, "gone": 2}],
        [("p50", "latency p50 (s)"), ("n", "jobs"), ("gone", "never started")],
    )
    # label width 15 (longest label), column width 8 ("baseline"); every cell right-aligned to it
    assert table.splitlines() == [
        "                  koordpy  baseline",
        "latency p50 (s)       1.5    120.25",
        "jobs                    3        10",
        "never started           -         2",
    ]


def test_a_cell_wider_than_the_mode_widens_every_column() -> None:
    table = side_by_side(["a"], [{"x": 1234567}], [("x", "x")])
    assert table.splitlines() == ["         a", "x  1234567"]
    assert (cell(None), cell(0.1), cell(True)) == ("-", "0.1", "True")
