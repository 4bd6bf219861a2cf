"""The side-by-side table the scenario families print (text) and put in their reports (HTML): one row per
figure, one column per run.

A row is ``(summary key, label, format)``; the format is a ``str.format`` pattern applied to the figure
(``"{:,}"`` for counts, ``"{:,.1f}"`` for seconds: the patterns the default scenario's table uses, so
every mode prints ``1,850.5`` the same way); a missing figure (``None``) is ``-``.

Not guaranteed: a stable layout for parsing (``summary.json`` is the machine-readable form).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

__all__ = ["Row", "cell", "html_side_by_side", "side_by_side"]

Row = tuple[str, str, str]
"""(summary key, label, format pattern)."""


def cell(value: object, fmt: str = "{}") -> str:
    """``-`` for a missing figure, else ``fmt.format(value)``."""
    if value is None:
        return "-"
    return fmt.format(value)


def side_by_side(modes: Sequence[str], summaries: Sequence[Mapping[str, object]], rows: Sequence[Row]) -> str:
    """Labels left-aligned, cells right-aligned under each mode."""
    width = max(len(label) for _, label, _ in rows)
    cells = [[cell(s[key], fmt) for s in summaries] for key, _, fmt in rows]
    col = max(*(len(mode) for mode in modes), *(len(c) for row in cells for c in row))
    lines = [" " * width + "".join(f"  {mode:>{col}}" for mode in modes)]
    lines += [
        f"{label:<{width}}" + "".join(f"  {c:>{col}}" for c in row)
        for (_, label, _), row in zip(rows, cells, strict=True)
    ]
    return "\n".join(lines)


def html_side_by_side(modes: Sequence[str], summaries: Sequence[Mapping[str, object]], rows: Sequence[Row]) -> str:
    """:func:`side_by_side` as an HTML ``<table>`` (every text escaped)."""
    head = "".join(f"<th>{html.escape(mode)}</th>" for mode in modes)
    body = "".join(
        "<tr><th>{}</th>{}</tr>".format(
            html.escape(label.strip()), "".join(f"<td>{html.escape(cell(s[key], fmt))}</td>" for s in summaries)
        )
        for key, label, fmt in rows
    )
    return f"<table><tr><th></th>{head}</tr>{body}</table>"
