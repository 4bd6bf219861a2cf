"""A tiny built-in 5×7 bitmap font for the text in ``heatmap.png`` (no imaging library, no font files).

Upper-case letters, digits and ``%:.,-()/>=`` only; lower-case text is drawn in capitals and any
other character as a blank. Each glyph sits in a 6×8 cell (one column and one row of spacing).

Not guaranteed: typographic quality; this is enough for titles, labels and tick values.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["CELL_HEIGHT", "CELL_WIDTH", "GLYPH_HEIGHT", "draw_text", "text_mask", "text_width"]

GLYPH_WIDTH, GLYPH_HEIGHT = 5, 7
CELL_WIDTH, CELL_HEIGHT = 6, 8

_GLYPHS: dict[str, str] = {
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "##### ...#. ..#.. ...#. ....# #...# .###.",
    "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.",
    "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...",
    "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "###.. #..#. #...# #...# #...# #..#. ###..",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#",
    "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.",
    "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",
    "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",
    "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    "%": "##... ##..# ...#. ..#.. .#... #..## ...##",
    ":": "..... .##.. .##.. ..... .##.. .##.. .....",
    ".": "..... ..... ..... ..... ..... .##.. .##..",
    ",": "..... ..... ..... ..... .##.. ..#.. .#...",
    "-": "..... ..... ..... .###. ..... ..... .....",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.",
    ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    "/": "..... ....# ...#. ..#.. .#... #.... .....",
    ">": ".#... ..#.. ...#. ....# ...#. ..#.. .#...",
    "=": "..... ..... ##### ..... ##### ..... .....",
}

_BITMAPS: dict[str, npt.NDArray[np.bool_]] = {
    char: np.array([[c == "#" for c in row] for row in rows.split()], np.bool_) for char, rows in _GLYPHS.items()
}
_BLANK = np.zeros((GLYPH_HEIGHT, GLYPH_WIDTH), np.bool_)


def text_width(text: str, scale: int = 1) -> int:
    """Pixels ``text`` takes (without the trailing spacing column)."""
    return max(len(text) * CELL_WIDTH - 1, 0) * scale


def text_mask(text: str, scale: int = 1) -> npt.NDArray[np.bool_]:
    """Ink of ``text`` as a (7·scale) × (width) boolean array."""
    mask = np.zeros((GLYPH_HEIGHT, max(len(text) * CELL_WIDTH - 1, 0)), np.bool_)
    for i, char in enumerate(text.upper()):
        mask[:, i * CELL_WIDTH : i * CELL_WIDTH + GLYPH_WIDTH] = _BITMAPS.get(char, _BLANK)
    out: npt.NDArray[np.bool_] = mask.repeat(scale, axis=0).repeat(scale, axis=1)
    return out


def draw_text(
    image: npt.NDArray[np.uint8], x: int, y: int, text: str, *, colour: tuple[int, int, int], scale: int = 1
) -> None:
    """Paint ``text`` with its top-left corner at (x, y); ink outside the image is clipped."""
    mask = text_mask(text, scale)
    height, width = mask.shape
    x0, y0 = max(x, 0), max(y, 0)
    x1, y1 = min(x + width, image.shape[1]), min(y + height, image.shape[0])
    if x1 <= x0 or y1 <= y0:
        return
    region = mask[y0 - y : y1 - y, x0 - x : x1 - x]
    image[y0:y1, x0:x1][region] = colour
