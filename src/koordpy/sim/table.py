"""The side-by-side table the scenario families print (text) and put in their reports (HTML): one row per
figure, one column per run.

Not guaranteed: a stable layout for parsing (``summary.json`` is the machine-readable form).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

__all__ = ["cell", "html_side_by_side", "side_by_side"]


def cell(value: object) -> str:
    """``-`` for a missing figure, ``%g`` for floats, ``str`` otherwise."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def side_by_side(
    modes: Sequence[str], summaries: Sequence[Mapping[str, object]], rows: Sequence[tuple[str, str]]
) -> str:
    """``rows`` are ``(summary key, label)``; labels left-aligned, cells right-aligned under each mode."""
    width = max(len(label) for _, label in rows)
    cells = [[cell(s[key]) for s in summaries] for key, _ in rows]
    col = max(*(len(mode) for mode in modes), *(len(c) for row in cells for c in row))
    lines = [" " * width + "".join(f"  {mode:>{col}}" for mode in modes)]
    lines += [
        f"{label:<{width}}" + "".join(f"  {c:>{col}}" for c in row) for (_, label), row in zip(rows, cells, strict=True)
    ]
    return "\n".join(lines)


def html_side_by_side(
    modes: Sequence[str], summaries: Sequence[Mapping[str, object]], rows: Sequence[tuple[str, str]]
) -> str:
    """:func:`side_by_side` as an HTML ``<table>`` (every text escaped)."""
    head = "".join(f"<th>{html.escape(mode)}</th>" for mode in modes)
    body = "".join(
        "<tr><th>{}</th>{}</tr>".format(
            html.escape(label.strip()), "".join(f"<td>{html.escape(cell(s[key]))}</td>" for s in summaries)
        )
        for key, label in rows
    )
    return f"<table><tr><th></th>{head}</tr>{body}</table>"
