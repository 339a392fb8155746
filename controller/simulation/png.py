"""A tiny PNG line-chart writer (zlib + struct, no plotting library).

``Canvas`` is an RGB buffer with lines, rectangles and a 3×5 pixel font (upper case, digits and a
few signs, scaled); ``write_png`` writes it as an 8-bit RGB PNG (IHDR, one IDAT, IEND).
``line_chart`` draws panels of polylines sharing an x axis, plus a legend colour key row.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RGB = tuple[int, int, int]
WHITE: RGB = (255, 255, 255)
BLACK: RGB = (0, 0, 0)
GREY: RGB = (200, 200, 200)
PALETTE: tuple[RGB, ...] = (
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (23, 190, 207),
)

_FONT_ROWS = {
    "0": "### #.# #.# #.# ###",
    "1": ".#. ##. .#. .#. ###",
    "2": "### ..# ### #.. ###",
    "3": "### ..# .## ..# ###",
    "4": "#.# #.# ### ..# ..#",
    "5": "### #.. ### ..# ###",
    "6": "### #.. ### #.# ###",
    "7": "### ..# .#. .#. .#.",
    "8": "### #.# ### #.# ###",
    "9": "### #.# ### ..# ###",
    "A": ".#. #.# ### #.# #.#",
    "B": "##. #.# ##. #.# ##.",
    "C": ".## #.. #.. #.. .##",
    "D": "##. #.# #.# #.# ##.",
    "E": "### #.. ##. #.. ###",
    "F": "### #.. ##. #.. #..",
    "G": ".## #.. #.# #.# .##",
    "H": "#.# #.# ### #.# #.#",
    "I": "### .#. .#. .#. ###",
    "J": "..# ..# ..# #.# .#.",
    "K": "#.# #.# ##. #.# #.#",
    "L": "#.. #.. #.. #.. ###",
    "M": "#.# ### ### #.# #.#",
    "N": "##. #.# #.# #.# #.#",
    "O": ".#. #.# #.# #.# .#.",
    "P": "##. #.# ##. #.. #..",
    "Q": ".#. #.# #.# ##. .##",
    "R": "##. #.# ##. #.# #.#",
    "S": ".## #.. .#. ..# ##.",
    "T": "### .#. .#. .#. .#.",
    "U": "#.# #.# #.# #.# ###",
    "V": "#.# #.# #.# #.# .#.",
    "W": "#.# #.# ### ### #.#",
    "X": "#.# #.# .#. #.# #.#",
    "Y": "#.# #.# .#. .#. .#.",
    "Z": "### ..# .#. #.. ###",
    "-": "... ... ### ... ...",
    ".": "... ... ... ... .#.",
    ",": "... ... ... .#. #..",
    "%": "#.# ..# .#. #.. #.#",
    "(": ".#. #.. #.. #.. .#.",
    ")": ".#. ..# ..# ..# .#.",
    ":": "... .#. ... .#. ...",
    "/": "..# ..# .#. #.. #..",
    ">": "#.. .#. ..# .#. #..",
    "<": "..# .#. #.. .#. ..#",
    "=": "... ### ... ### ...",
    "+": "... .#. ### .#. ...",
    "×": "... #.# .#. #.# ...",
    " ": "... ... ... ... ...",
}
FONT: dict[str, tuple[str, ...]] = {ch: tuple(rows.split()) for ch, rows in _FONT_ROWS.items()}


class Canvas:
    def __init__(self, width: int, height: int, background: RGB = WHITE) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: RGB) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i : i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: RGB) -> None:
        """Filled rectangle, corners included."""
        for y in range(max(0, min(y0, y1)), min(self.height, max(y0, y1) + 1)):
            for x in range(max(0, min(x0, x1)), min(self.width, max(x0, x1) + 1)):
                self.set(x, y, color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: RGB, thick: int = 1) -> None:
        """Bresenham; `thick` > 1 widens the line downwards and to the right."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for k in range(thick):
                self.set(x0, y0 + k, color)
                self.set(x0 + k, y0, color)
            if x0 == x1 and y0 == y1:
                break
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, text: str, color: RGB = BLACK, scale: int = 2) -> int:
        """Draw `text` with its top-left corner at (x, y); returns the x after it."""
        for ch in text.upper():
            glyph = FONT.get(ch, FONT[" "])
            for row, bits in enumerate(glyph):
                for col, bit in enumerate(bits):
                    if bit == "#":
                        self.rect(x + col * scale, y + row * scale, x + col * scale + scale - 1,
                                  y + row * scale + scale - 1, color)  # fmt: skip
            x += 4 * scale
        return x


def text_width(text: str, scale: int = 2) -> int:
    return 4 * scale * len(text)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def encode_png(canvas: Canvas) -> bytes:
    stride = 3 * canvas.width
    raw = bytearray()
    for y in range(canvas.height):
        raw.append(0)  # filter: none
        raw += canvas.pixels[y * stride : (y + 1) * stride]
    header = struct.pack(">IIBBBBB", canvas.width, canvas.height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + _chunk(b"IEND", b"")
    )


def write_png(path: str | Path, canvas: Canvas) -> None:
    Path(path).write_bytes(encode_png(canvas))


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    ys: Sequence[float]  # one value per x sample (shared xs)


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    series: Sequence[Series]
    y_max: float | None = None  # default: the largest value


def _nice(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:.0f}K"
    if value >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.1f}"


def line_chart(
    panels: Sequence[Panel],
    xs: Sequence[float],
    x_label: str,
    width: int = 1100,
    panel_height: int = 260,
) -> Canvas:
    """Panels stacked vertically over the same xs, a legend row (series colours) at the bottom."""
    left, right, top, gap, legend = 80, 20, 16, 54, 40
    height = top + len(panels) * (panel_height + gap) + legend
    canvas = Canvas(width, height)
    plot_w = width - left - right
    x0 = xs[0] if xs else 0.0
    x1 = xs[-1] if xs else 1.0
    span = (x1 - x0) or 1.0
    names: list[str] = []
    for p, panel in enumerate(panels):
        py = top + p * (panel_height + gap) + 18
        canvas.text(left, py - 18, panel.title)
        y_max = panel.y_max or max((max(s.ys, default=0.0) for s in panel.series), default=0.0) or 1.0
        bottom = py + panel_height - 18
        ph = bottom - py
        for k in range(5):  # horizontal grid + y labels
            y = bottom - round(ph * k / 4)
            canvas.line(left, y, left + plot_w, y, GREY)
            label = _nice(y_max * k / 4)
            canvas.text(left - 6 - text_width(label), y - 5, label)
        for k in range(9):  # x ticks + labels
            x = left + round(plot_w * k / 8)
            canvas.line(x, bottom, x, bottom + 4, BLACK)
            label = _nice(x0 + span * k / 8)
            canvas.text(x - text_width(label) // 2, bottom + 8, label)
        canvas.line(left, py, left, bottom, BLACK)
        canvas.line(left, bottom, left + plot_w, bottom, BLACK)
        for s_index, series in enumerate(panel.series):
            if series.name not in names:
                names.append(series.name)
            color = PALETTE[names.index(series.name) % len(PALETTE)]
            prev: tuple[int, int] | None = None
            for x_value, y_value in zip(xs, series.ys, strict=False):
                x = left + round(plot_w * (x_value - x0) / span)
                y = bottom - round(ph * min(max(y_value, 0.0), y_max) / y_max)
                if prev is not None:
                    canvas.line(prev[0], prev[1], x, y, color, thick=2 if s_index == 0 else 1)
                prev = (x, y)
    ly = height - legend + 8
    canvas.text(left, ly + 18, x_label)
    x = left
    for i, name in enumerate(names):
        color = PALETTE[i % len(PALETTE)]
        canvas.rect(x, ly, x + 14, ly + 10, color)
        x = canvas.text(x + 20, ly, name) + 24
    return canvas
