"""Text widths for laying out the report's SVG: the advance widths of DejaVu Sans, the font the SVG
asks for first (``FONT_FAMILY``).

Widths are in thousandths of an em, measured in Chromium (``getComputedTextLength`` of the glyph
repeated, at 1000 px) for printable ASCII and the few other characters the report writes; any other
character counts as a full em, wider than every glyph listed. Kerning is ignored (it only narrows).

Not guaranteed: exact widths in another font (Verdana, the fallback, is close; a narrower fallback
leaves more room than needed, never less for the characters listed here).
"""

from __future__ import annotations

__all__ = ["ASCENT", "DESCENT", "FONT_FAMILY", "text_width"]

FONT_FAMILY = "DejaVu Sans, Verdana, sans-serif"
ASCENT = 0.928
"""Height above the baseline of the font's box, in em."""
DESCENT = 0.236
"""Depth below the baseline, in em."""

_GROUPS: dict[int, str] = {
    275: "'",
    278: "ijl",
    295: "IJ",
    318: " ,.·",
    337: "/:;\\|",
    344: "f",
    361: "-",
    390: "()[]",
    392: "t",
    395: "r",
    401: "!²",
    460: '"',
    500: "*_`–",
    521: "s",
    525: "z",
    531: "?",
    550: "c",
    557: "L",
    575: "F",
    579: "k",
    592: "vxy",
    595: "T",
    603: "P",
    611: "Y",
    612: "o",
    613: "a",
    615: "e",
    632: "EΣ",
    634: "hnu",
    635: "Sbdgpq",
    636: "$0123456789{}",
    656: "K",
    684: "V",
    685: "XZ",
    686: "B",
    695: "R",
    698: "C",
    709: "A",
    732: "U",
    748: "N",
    752: "H",
    770: "D",
    775: "G",
    780: "&",
    787: "OQ",
    818: "w",
    838: "#+<=>^~−×→≤≥",
    863: "M",
    950: "%",
    974: "m",
    989: "W",
    1000: "@",
}
_WIDTHS: dict[str, int] = {char: width for width, chars in _GROUPS.items() for char in chars}


def text_width(text: str, size: float) -> float:
    """Pixels ``text`` takes at font size ``size`` (px)."""
    return sum(_WIDTHS.get(char, 1000) for char in text) * size / 1000.0
