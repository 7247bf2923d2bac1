"""Board: stones, chains, captures, simple ko and Zobrist hashing. It knows the rules of placing a stone and nothing else.

Terms:
- point: an index into the padded array of coords.Grid (see coords.py). colors[point] is EMPTY, BLACK, WHITE or
  EDGE; EDGE marks the sentinel border, so neighbour loops never check bounds.
- chain: a maximal set of same-coloured stones connected through neighbours. Each stone stores the chain's
  head (chain_head) and the next stone of its chain (chain_next, a circular list), so a chain can be walked and two
  chains spliced in constant time. chain_head is 0 on points without a stone. The per-point arrays are arrays of
  unsigned 16-bit ints rather than lists, so that numpy (features.py reads a whole batch's chain_head in one join)
  and the compiled twin read them as buffers.
- pseudo-liberties: for a chain, the number of (stone, empty neighbour) pairs; an empty point touching two stones
  of the chain counts twice. It is zero exactly when the chain has no liberty, and a move at p fills a chain's last
  liberty exactly when the chain's pseudo-liberties equal the number of p's neighbours in that chain. That makes
  legality and capture detection exact without ever building liberty sets (the Leela Zero technique).
- simple ko: after a single stone captures a single stone and is itself left with one liberty, the captured point
  (ko_point) may not be played by the other side (ko_color) on the very next move.
- hash: Zobrist hash of the stones alone (who is to move and the ko point are not in it): what positional superko
  compares, and game.py builds its history from it.

Checked play (play) raises IllegalMoveError with the reason; play_unchecked assumes a legal move and is what the
search calls. Superko needs the game's history and lives in game.py. play_unchecked, illegal_reason and hash_after
have a compiled twin (_rules_core.c): IMPLEMENTATIONS (native.py) holds both, and the methods hand their work to the
chosen one; the methods named *_python here are the reference it is tested against.
"""

from __future__ import annotations

import random
from array import array
from typing import Callable, NamedTuple

import numpy as np

from gtp_engine import native
from gtp_engine.coords import PASS, Grid, grid, to_gtp

EMPTY, BLACK, WHITE, EDGE = 0, 1, 2, 3
ASCII_OF_COLOR = {EMPTY: ".", BLACK: "X", WHITE: "O"}
COLOR_OF_ASCII = {".": EMPTY, "+": EMPTY, "X": BLACK, "x": BLACK, "O": WHITE, "o": WHITE}


def opponent(color: int) -> int:
    return 3 - color


class IllegalMoveError(ValueError):
    """A move the rules forbid; reason is one of occupied, suicide, ko, superko."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


_ZOBRIST_SEED = 20161  # fixed, so hashes are stable across runs and processes
_zobrist_tables: dict[int, tuple[array, array, array]] = {}


def zobrist_keys(array_size: int) -> tuple[array, array, array]:
    """Unsigned 64-bit keys indexed [color][point] (the EMPTY table is all zero), shared by all boards of one array
    size."""
    keys = _zobrist_tables.get(array_size)
    if keys is None:
        rng = random.Random(_ZOBRIST_SEED + array_size)
        black = array("Q", [rng.getrandbits(64) for _ in range(array_size)])
        white = array("Q", [rng.getrandbits(64) for _ in range(array_size)])
        keys = (array("Q", bytes(8 * array_size)), black, white)
        _zobrist_tables[array_size] = keys
    return keys


class Board:
    __slots__ = (
        "grid", "colors", "chain_head", "chain_next", "chain_size", "chain_libs",
        "hash", "ko_point", "ko_color", "captures", "stone_count", "_zobrist",
    )

    def __init__(self, width: int, height: int | None = None):
        g = grid(width, height)
        self.grid: Grid = g
        colors = bytearray([EDGE]) * g.array_size
        for p in g.points:
            colors[p] = EMPTY
        self.colors = colors
        zeros = bytes(2 * g.array_size)
        self.chain_head = array("H", zeros)
        self.chain_next = array("H", zeros)
        self.chain_size = array("H", zeros)  # indexed by head
        self.chain_libs = array("H", zeros)  # pseudo-liberties, indexed by head
        self.hash = 0
        self.ko_point = PASS
        self.ko_color = EMPTY
        self.captures = [0, 0, 0]  # stones captured by [_, BLACK, WHITE]
        self.stone_count = [0, 0, 0]
        self._zobrist = zobrist_keys(g.array_size)

    @property
    def width(self) -> int:
        return self.grid.width

    @property
    def height(self) -> int:
        return self.grid.height

    def copy(self) -> "Board":
        other = Board.__new__(Board)
        other.grid = self.grid
        other.colors = self.colors[:]
        other.chain_head = self.chain_head[:]
        other.chain_next = self.chain_next[:]
        other.chain_size = self.chain_size[:]
        other.chain_libs = self.chain_libs[:]
        other.hash = self.hash
        other.ko_point = self.ko_point
        other.ko_color = self.ko_color
        other.captures = self.captures[:]
        other.stone_count = self.stone_count[:]
        other._zobrist = self._zobrist
        return other

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Board) and self.grid is other.grid and self.colors == other.colors

    def __hash__(self) -> int:
        return self.hash

    # ---- legality -------------------------------------------------------------------------------------

    def illegal_reason(self, point: int, color: int, allow_suicide: bool = False) -> str | None:
        """None for a legal move, else why not: occupied, ko or suicide."""
        return _illegal_reason(self, point, color, allow_suicide)

    def _illegal_reason_python(self, point: int, color: int, allow_suicide: bool = False) -> str | None:
        if point == PASS:
            return None
        colors = self.colors
        if not 0 <= point < len(colors) or colors[point] == EDGE:
            raise ValueError(f"point {point} is not on a {self.width}x{self.height} board")
        if colors[point] != EMPTY:
            return "occupied"
        if point == self.ko_point and color == self.ko_color:
            return "ko"
        neighbors = self.grid.neighbors[point]
        for n in neighbors:
            if colors[n] == EMPTY:
                return None
        head, libs = self.chain_head, self.chain_libs
        opp = 3 - color
        for n in neighbors:
            c = colors[n]
            if c == opp or c == color:
                h = head[n]
                edges = 0
                for m in neighbors:
                    if head[m] == h and colors[m] == c:
                        edges += 1
                if c == opp:
                    if libs[h] == edges:
                        return None  # captures
                elif libs[h] > edges:
                    return None  # joins a chain that keeps a liberty
        joins_own_chain = any(colors[n] == color for n in neighbors)
        return None if allow_suicide and joins_own_chain else "suicide"

    def is_legal(self, point: int, color: int, allow_suicide: bool = False) -> bool:
        return self.illegal_reason(point, color, allow_suicide) is None

    def play(self, point: int, color: int, allow_suicide: bool = False) -> None:
        reason = self.illegal_reason(point, color, allow_suicide)
        if reason is not None:
            raise IllegalMoveError(reason, f"{_color_name(color)} {self._name(point)} is illegal: {reason}")
        self.play_unchecked(point, color)

    def legal_mask(self, color: int, allow_suicide: bool = False) -> np.ndarray:
        """Board-level legal moves in flat order (no pass): empty, not simple-ko, not suicide."""
        g = self.grid
        colors = np.frombuffer(self.colors, dtype=np.uint8)
        empty = colors[g.point_of] == EMPTY
        mask = empty.copy()
        surrounded = empty & ~_has_empty_neighbor(g, colors)
        if surrounded.any():  # only points without an empty neighbour can be suicide, and they are few
            captures, joins_safe_chain, joins_own_chain = self._surrounded_escapes(color)
            suicides = surrounded & ~captures & ~joins_safe_chain
            mask[suicides & ~joins_own_chain if allow_suicide else suicides] = False
        self._mask_ko(mask, color)
        return mask

    def move_masks(self, color: int, allow_suicide: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(legal moves, legal moves that remove stones: captures and allowed suicides), in flat order.

        Every other legal move changes the stones hash by the key of the stone it adds, which is what lets
        superko be tested for most moves at once (game.py).
        """
        g = self.grid
        colors = np.frombuffer(self.colors, dtype=np.uint8)
        empty = colors[g.point_of] == EMPTY
        captures, joins_safe_chain, joins_own_chain = self._surrounded_escapes(color)
        suicides = empty & ~_has_empty_neighbor(g, colors) & ~captures & ~joins_safe_chain
        legal = empty & ~(suicides & ~joins_own_chain if allow_suicide else suicides)
        self._mask_ko(legal, color)
        return legal, legal & (captures | suicides)

    def _mask_ko(self, mask: np.ndarray, color: int) -> None:
        if self.ko_point != PASS and color == self.ko_color:
            mask[self.grid.flat_of[self.ko_point]] = False

    def _surrounded_escapes(self, color: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat masks: a move by color here would capture (an opponent neighbour chain has its last liberty here);
        it would join a neighbouring chain of its own that keeps another liberty; it would join one at all."""
        g = self.grid
        head, by_head = self._liberties_by_head()
        colors = np.frombuffer(self.colors, dtype=np.uint8)
        captures = np.zeros(g.area, dtype=bool)
        joins_safe_chain = np.zeros(g.area, dtype=bool)
        joins_own_chain = np.zeros(g.area, dtype=bool)
        for around in _mask_tables(g):
            c = colors[around]
            libs = by_head[head[around]]
            captures |= (c == 3 - color) & (libs == 1)
            joins_safe_chain |= (c == color) & (libs >= 2)
            joins_own_chain |= c == color
        return captures, joins_safe_chain, joins_own_chain

    # ---- playing --------------------------------------------------------------------------------------

    def play_unchecked(self, point: int, color: int) -> None:
        """Plays a legal move for color: the stone, its captures (or, where the rules allow it, its suicide), the
        ko point."""
        _play_unchecked(self, point, color)

    def _play_unchecked_python(self, point: int, color: int) -> None:
        if point == PASS:
            self.ko_point = PASS
            return
        colors, head, size, libs = self.colors, self.chain_head, self.chain_size, self.chain_libs
        colors[point] = color
        self.hash ^= self._zobrist[color][point]
        self.stone_count[color] += 1
        head[point] = point
        self.chain_next[point] = point
        size[point] = 1
        libs[point] = 0
        # One pass takes the new stone's pseudo-liberties from every neighbouring chain and joins its own chains
        # (mine: the head of the chain the stone is in so far); a second pass, only when some opponent chain lost
        # its last liberty, removes them. Joining before capturing ends in the same chains and counts.
        opp = 3 - color
        mine = point
        own_libs = 0
        capturing = False  # some opponent chain lost its last liberty
        for n in self.grid.neighbors[point]:
            c = colors[n]
            if c == EMPTY:
                own_libs += 1
            elif c == color:
                h = head[n]
                libs[h] -= 1
                if h != mine:
                    mine = self._merge(mine, h)
            elif c == opp:
                h = head[n]
                libs[h] -= 1
                if not libs[h]:
                    capturing = True
        libs[mine] += own_libs

        if capturing:
            captured = 0
            for n in self.grid.neighbors[point]:
                if colors[n] == opp:
                    h = head[n]
                    if libs[h] == 0:
                        captured += size[h]
                        captured_point = n
                        self._remove_chain(h, opp)
            self.captures[color] += captured
            if captured == 1 and size[mine] == 1 and libs[mine] == 1:
                self.ko_point = captured_point
                self.ko_color = opp
                return
        elif libs[mine] == 0:  # suicide (a move that captures never is), only reached when the rules allow it
            self.captures[opp] += size[mine]
            self._remove_chain(mine, color)
        self.ko_point = PASS

    def _merge(self, a: int, b: int) -> int:
        """Joins the chains headed by a and b under the head of the larger one (a on a tie) and returns it."""
        head, nxt, size, libs = self.chain_head, self.chain_next, self.chain_size, self.chain_libs
        if size[a] < size[b]:
            a, b = b, a
        s = b
        while True:
            head[s] = a
            s = nxt[s]
            if s == b:
                break
        nxt[a], nxt[b] = nxt[b], nxt[a]
        size[a] += size[b]
        libs[a] += libs[b]
        return a

    def _remove_chain(self, h: int, color: int) -> None:
        colors, head, nxt, libs = self.colors, self.chain_head, self.chain_next, self.chain_libs
        keys = self._zobrist[color]
        neighbors = self.grid.neighbors
        removed = self.chain_size[h]
        s = h
        while True:
            colors[s] = EMPTY
            self.hash ^= keys[s]
            s = nxt[s]
            if s == h:
                break
        # Every neighbouring stone of another chain gains one pseudo-liberty per removed neighbour.
        s = h
        while True:
            for n in neighbors[s]:
                c = colors[n]
                if c != EMPTY and c != EDGE:
                    libs[head[n]] += 1
            head[s] = 0
            s = nxt[s]
            if s == h:
                break
        self.stone_count[color] -= removed

    def hash_after(self, point: int, color: int) -> int:
        """The stones hash after color plays a legal move at point, captures (and allowed suicide) included."""
        return _hash_after(self, point, color)

    def _hash_after_python(self, point: int, color: int) -> int:
        if point == PASS:
            return self.hash
        colors, head, libs = self.colors, self.chain_head, self.chain_libs
        neighbors = self.grid.neighbors[point]
        result = self.hash ^ self._zobrist[color][point]
        opp = 3 - color
        seen: list[int] = []
        own_chains: list[int] = []
        has_liberty = False
        for n in neighbors:
            c = colors[n]
            if c == EMPTY:
                has_liberty = True
            elif c == opp or c == color:
                h = head[n]
                if h in seen:
                    continue
                seen.append(h)
                edges = sum(1 for m in neighbors if colors[m] == c and head[m] == h)
                if c == opp:
                    if libs[h] == edges:
                        result ^= self._chain_hash(h, opp)
                        has_liberty = True
                else:
                    own_chains.append(h)
                    if libs[h] > edges:
                        has_liberty = True
        if not has_liberty:  # suicide: the stone and every chain it joined leave the board
            result ^= self._zobrist[color][point]
            for h in own_chains:
                result ^= self._chain_hash(h, color)
        return result

    def _chain_hash(self, h: int, color: int) -> int:
        keys, nxt = self._zobrist[color], self.chain_next
        value, s = 0, h
        while True:
            value ^= keys[s]
            s = nxt[s]
            if s == h:
                return value

    # ---- queries --------------------------------------------------------------------------------------

    def chain(self, point: int) -> list[int]:
        if self.colors[point] not in (BLACK, WHITE):
            return []
        nxt = self.chain_next
        stones, s = [point], nxt[point]
        while s != point:
            stones.append(s)
            s = nxt[s]
        return stones

    def chain_liberty_points(self, point: int) -> set[int]:
        colors, neighbors = self.colors, self.grid.neighbors
        return {n for s in self.chain(point) for n in neighbors[s] if colors[n] == EMPTY}

    def chain_liberties(self, point: int) -> int:
        return len(self.chain_liberty_points(point))

    def liberties(self) -> np.ndarray:
        """Liberties of the chain through each point, in flat order; 0 on empty points."""
        head, by_head = self._liberties_by_head()
        return by_head[head[self.grid.point_of]].astype(np.int32)

    def _liberties_by_head(self) -> tuple[np.ndarray, np.ndarray]:
        """(chain heads by point, exact liberty count by head). Index 0 stands for "no chain" and counts nothing.

        Each empty point adds one liberty to every distinct chain among its neighbours, which counts liberties
        exactly without building sets, in a few vector operations.
        """
        g = self.grid
        colors = np.frombuffer(self.colors, dtype=np.uint8)
        head = np.frombuffer(self.chain_head, dtype=np.uint16).astype(np.int64)
        empty = g.point_of[colors[g.point_of] == EMPTY]
        around = [head[empty + d] for d in g.directions]
        distinct = [around[0]]
        for i in range(1, 4):
            h = around[i]
            fresh = h.copy()
            for j in range(i):
                fresh[h == around[j]] = 0
            distinct.append(fresh)
        by_head = np.bincount(np.concatenate(distinct), minlength=g.array_size)
        by_head[0] = 0
        return head, by_head

    def stones(self, color: int) -> list[int]:
        colors = self.colors
        return [p for p in self.grid.points if colors[p] == color]

    def to_array(self) -> np.ndarray:
        """Stones as int8 (height, width): 0 empty, 1 black, 2 white; row 0 is the top row."""
        values = np.frombuffer(self.colors, dtype=np.uint8)[self.grid.point_of]
        return values.astype(np.int8).reshape(self.height, self.width)

    def to_ascii(self) -> str:
        colors, g = self.colors, self.grid
        rows = []
        for row in range(g.height):
            rows.append(" ".join(ASCII_OF_COLOR[colors[g.point(row, col)]] for col in range(g.width)))
        return "\n".join(rows)

    @classmethod
    def from_ascii(cls, text: str) -> "Board":
        """A board from rows of X (black), O (white) and . or + (empty), top row first; spaces are ignored."""
        rows = [line.replace(" ", "") for line in text.strip().splitlines() if line.strip()]
        if not rows or any(len(r) != len(rows[0]) for r in rows):
            raise ValueError("ASCII board rows must be non-empty and of equal length")
        board = cls(len(rows[0]), len(rows))
        for row, line in enumerate(rows):
            for col, char in enumerate(line):
                if char not in COLOR_OF_ASCII:
                    raise ValueError(f"unexpected character {char!r} in ASCII board")
                if COLOR_OF_ASCII[char] != EMPTY:
                    board.place_stone(board.grid.point(row, col), COLOR_OF_ASCII[char])
        return board

    def place_stone(self, point: int, color: int) -> None:
        """Puts a setup stone (SGF AB/AW, handicap) on an empty point; it captures nothing and clears the ko.

        A setup stone that leaves a chain without liberties is refused: such a position cannot be played from.
        """
        if self.colors[point] != EMPTY:
            raise ValueError(f"setup stone on occupied point {self._name(point)}")
        captures_before = self.captures[:]
        self.play_unchecked(point, color)
        if self.captures != captures_before:
            raise ValueError(f"setup stone at {self._name(point)} would capture or have no liberty")
        self.ko_point = PASS

    def _name(self, point: int) -> str:
        return to_gtp(self.grid, point)


class BoardFunctions(NamedTuple):
    """The board's steps that have a compiled twin, as plain functions of (board, point, color[, allow_suicide])."""

    play_unchecked: Callable[[Board, int, int], None]
    illegal_reason: Callable[[Board, int, int, bool], str | None]
    hash_after: Callable[[Board, int, int], int]


IMPLEMENTATIONS = native.implementations(
    "_rules_core", BoardFunctions(Board._play_unchecked_python, Board._illegal_reason_python, Board._hash_after_python),
    lambda twin: BoardFunctions(twin.board_play, twin.board_illegal_reason, twin.board_hash_after))
# What Board's methods call, bound once (native.py).
_play_unchecked = IMPLEMENTATIONS.chosen.play_unchecked
_illegal_reason = IMPLEMENTATIONS.chosen.illegal_reason
_hash_after = IMPLEMENTATIONS.chosen.hash_after


def _color_name(color: int) -> str:
    return {BLACK: "black", WHITE: "white"}.get(color, f"color {color}")


_mask_table_cache: dict[Grid, tuple[np.ndarray, ...]] = {}


def _has_empty_neighbor(g: Grid, colors: np.ndarray) -> np.ndarray:
    result = np.zeros(g.area, dtype=bool)
    for around in _mask_tables(g):
        result |= colors[around] == EMPTY
    return result


def _mask_tables(g: Grid) -> tuple[np.ndarray, ...]:
    """For each direction, the neighbouring point of every on-board point (flat order)."""
    tables = _mask_table_cache.get(g)
    if tables is None:
        tables = tuple(g.point_of + d for d in g.directions)
        _mask_table_cache[g] = tables
    return tables
