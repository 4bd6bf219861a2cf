"""The opening every simulator report page shares: doctype, title, style sheet and heading.

Not guaranteed: anything about the page after the heading (each report writes its own body).
"""

from __future__ import annotations

import html

__all__ = ["page_head"]

STYLE = """body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 780px; }
table { border-collapse: collapse; margin: 12px 0; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th:first-child { text-align: left; }
section { margin: 20px 0; }
pre { background: #f4f4f4; padding: 8px; overflow-x: auto; white-space: pre-wrap; font-size: 12px; }
"""


def page_head(title: str) -> str:
    """From ``<!DOCTYPE html>`` to the ``<h1>`` with ``title`` (escaped here), ending in a newline."""
    escaped = html.escape(title)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>{escaped}</title>\n<style>\n{STYLE}</style></head><body>\n<h1>{escaped}</h1>\n"
    )
