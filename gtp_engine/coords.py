"""Coordinates: the only place that converts between the ways a point on the board is named.

Terms:
- grid: the geometry of one board size (width x height), built once per size and cached.
- point: an index into the board's padded 1-D array. The array has one sentinel row above and below
  the board and one sentinel column shared by the right and left edges (stride = width + 1), so the four
  neighbours of any on-board point are point - stride, point - 1, point + 1 and point + stride, and
  no bounds check is ever needed. PASS is the pass move.
- (row, col): row 0 is the top row, col 0 the left column (column A).
- flat index: row * width + col, the order of network planes and policy vectors; the pass move is the
  flat index width * height, the last entry of a policy vector.
- GTP vertex: a letter (A..Z skipping I) for the column and a number counting rows from the bottom,
  e.g. D4, or "pass".
- SGF point: two letters, column then row from the top ("aa" is the top-left corner); "" is a pass,
  and so is "tt" on boards up to 19x19.

For a 19x19 grid: point(0, 0) is A19 is SGF "aa", point(18, 18) is T1 is SGF "ss".
"""

from __future__ import annotations

import functools

import numpy as np

PASS = -1
MAX_SIZE = 25
GTP_COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"  # GTP skips I so that it cannot be read as J or 1
SGF_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class Grid:
    """Lookup tables for one board size. Build through grid(width, height), which caches them."""

    def __init__(self, width: int, height: int):
        if not (1 <= width <= MAX_SIZE and 1 <= height <= MAX_SIZE):
            raise ValueError(f"board size {width}x{height} is outside 1..{MAX_SIZE}")
        self.width = width
        self.height = height
        self.stride = width + 1
        self.array_size = (height + 2) * self.stride + 1
        self.area = width * height
        self.pass_index = self.area
        self.points: tuple[int, ...] = tuple(
            (row + 1) * self.stride + col for row in range(height) for col in range(width)
        )
        flat_of = np.full(self.array_size, -1, dtype=np.int64)
        flat_of[list(self.points)] = np.arange(self.area)
        self.flat_of = flat_of
        self.flat_of.setflags(write=False)
        self.point_of = np.array(self.points, dtype=np.int64)
        self.point_of.setflags(write=False)
        self.on_board = flat_of >= 0
        self.on_board.setflags(write=False)
        self.directions = (-self.stride, -1, 1, self.stride)
        self.neighbors: tuple[tuple[int, ...], ...] = self._neighbor_table()

    def _neighbor_table(self) -> tuple[tuple[int, ...], ...]:
        """neighbors[p] for every array index; sentinel indices get clamped neighbours they never use."""
        last = self.array_size - 1
        return tuple(
            tuple(min(max(p + d, 0), last) for d in self.directions) for p in range(self.array_size)
        )

    def __repr__(self) -> str:
        return f"Grid({self.width}, {self.height})"

    def point(self, row: int, col: int) -> int:
        if not (0 <= row < self.height and 0 <= col < self.width):
            raise ValueError(f"({row}, {col}) is off a {self.width}x{self.height} board")
        return (row + 1) * self.stride + col

    def row_col(self, point: int) -> tuple[int, int]:
        row, col = divmod(point, self.stride)
        return row - 1, col

    def flat(self, point: int) -> int:
        return self.pass_index if point == PASS else int(self.flat_of[point])

    def from_flat(self, index: int) -> int:
        if index == self.pass_index:
            return PASS
        if not 0 <= index < self.area:
            raise ValueError(f"flat index {index} is outside 0..{self.area}")
        return self.points[index]

    def is_on_board(self, point: int) -> bool:
        return 0 <= point < self.array_size and bool(self.on_board[point])


def grid(width: int, height: int | None = None) -> Grid:
    """The one Grid of a size: grid(9) is grid(9, 9), so boards of one size can be compared by their grid."""
    return _cached_grid(width, width if height is None else height)


@functools.lru_cache(maxsize=None)
def _cached_grid(width: int, height: int) -> Grid:
    return Grid(width, height)


def to_gtp(g: Grid, point: int) -> str:
    if point == PASS:
        return "pass"
    row, col = g.row_col(point)
    return f"{GTP_COLUMNS[col]}{g.height - row}"


def from_gtp(g: Grid, text: str) -> int:
    """Parses a GTP vertex (any case). Raises ValueError for anything that is not a point of this grid."""
    vertex = text.strip().upper()
    if vertex == "PASS":
        return PASS
    if len(vertex) < 2 or vertex[0] not in GTP_COLUMNS or not vertex[1:].isdigit():
        raise ValueError(f"not a GTP vertex: {text!r}")
    col = GTP_COLUMNS.index(vertex[0])
    number = int(vertex[1:])
    if col >= g.width or not 1 <= number <= g.height:
        raise ValueError(f"vertex {text!r} is off a {g.width}x{g.height} board")
    return g.point(g.height - number, col)


def to_sgf(g: Grid, point: int) -> str:
    if point == PASS:
        return ""
    row, col = g.row_col(point)
    return SGF_LETTERS[col] + SGF_LETTERS[row]


def from_sgf(g: Grid, text: str) -> int:
    """Parses an SGF point; "" and, on boards up to 19x19, "tt" are passes."""
    if text == "" or (text == "tt" and g.width <= 19 and g.height <= 19):
        return PASS
    if len(text) != 2 or text[0] not in SGF_LETTERS or text[1] not in SGF_LETTERS:
        raise ValueError(f"not an SGF point: {text!r}")
    col, row = SGF_LETTERS.index(text[0]), SGF_LETTERS.index(text[1])
    return g.point(row, col)
