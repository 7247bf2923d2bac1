"""Rollout policy: AlphaGo's fast linear softmax over cheap local features of each move, and rollouts played with it.

Terms:
- mover: the side whose moves are scored. own / opponent are the mover and the other side.
- candidate: an empty point where the mover may play (not suicide, not the simple-ko point) and that is not one
  of its own eyes. Pass is played only when there is no candidate. Rollouts leave superko to the game: a sampled
  move the game's rules refuse is dropped and another one drawn.
- own eye: an empty point whose four neighbours are own stones or the edge, with no opponent stone on a diagonal
  (on the edge) or at most one (inside). Filling it never helps, and leaving it empty ends rollouts.
- liberties after: the liberties of the mover's chain through the candidate once it is played. Captured stones
  next to the candidate count as liberties; captured stones farther away do not (an undercount that only touches
  snapback-like shapes).
- features of a candidate, one index per group (GROUPS), each with its own weight:
  pattern: the 3x3 cells around the candidate, each empty, edge, or an own / opponent stone whose chain has 1, 2 or
    3+ liberties, canonicalised under the 8 symmetries and looked up in the policy's vocabulary of patterns seen in
    training (an unseen pattern shares one weight); a pattern has a second weight when the candidate touches the
    last move, 8-connected (AlphaGo's response patterns).
  capture: stones removed by the move, bucketed 0, 1, 2, 3-6, 7+.
  escape: the move gives an own chain in atari 2+ liberties: no, yes for one stone, yes for more.
  atari: the move puts an opponent chain in atari (leaves it one liberty).
  self_atari: the liberties after are exactly 1: no, a lone stone, a larger chain.
  last_distance, previous_distance: Manhattan distance to the last move and to the move before it, 1..16, 17 for
    17 and farther, 0 when there is none (a pass, the start of the game) or the candidate is that very point (captured).
  line: the distance to the nearest edge, line 1..4, 5 for farther.
- probabilities: softmax of the summed weights over the candidates, as a vector over flat indices with pass last.
- rollout: the policy plays both sides from a copy of a position until two passes in a row (or max_moves); the
  result is the area count (game.area_score) as +1 / 0 / -1 from the view of the side to move at the start.
- weights file: .npz with format (FORMAT), vocabulary (sorted canonical pattern codes) and weights (float32,
  feature_count(len(vocabulary)) entries); training/alphago/rollout_train.py writes it, with its provenance.

Speed: candidates (a position's candidates and the weight indices of their features, what a rollout's move needs)
has a compiled twin (_rollout_core.c): IMPLEMENTATIONS (native.py) holds both, and candidates_python is the reference
it is tested against. In the reference a move costs one pass of numpy over the empty points; the four neighbours of
a point are read as one number that indexes tables of facts about them (_SIDES). Python runs per point only next to
chains in atari, and where the liberties after need a neighbouring chain's liberties.
"""

from __future__ import annotations

import functools
import zipfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from gtp_engine import native
from gtp_engine.board import BLACK, EDGE, EMPTY, WHITE, Board
from gtp_engine.coords import PASS, Grid

if TYPE_CHECKING:
    from gtp_engine.game import GameState

FORMAT = 1  # bump when the features or their order change; files of another format are refused
MAX_DISTANCE = 17
GROUPS = (
    ("pattern", None),  # 2 * (len(vocabulary) + 1): plain, then response
    ("capture", 5),
    ("escape", 3),
    ("atari", 2),
    ("self_atari", 3),
    ("last_distance", MAX_DISTANCE + 1),
    ("previous_distance", MAX_DISTANCE + 1),
    ("line", 5),
)

# Cell codes of the 3x3 pattern, relative to the mover: 0 empty, 1-3 own stone with 1, 2, 3+ liberties,
# 4-6 opponent stone with 1, 2, 3+ liberties, 7 edge. Indexed [relative colour * 4 + min(liberties, 3)].
_REL_EMPTY, _REL_OWN, _REL_OPP, _REL_EDGE = 0, 1, 2, 3
_CELL = np.array([0, 0, 0, 0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 7, 7], dtype=np.int64)
_RELATIVE = {  # board colour -> relative colour, per mover
    BLACK: np.array([_REL_EMPTY, _REL_OWN, _REL_OPP, _REL_EDGE], dtype=np.int64),
    WHITE: np.array([_REL_EMPTY, _REL_OPP, _REL_OWN, _REL_EDGE], dtype=np.int64),
}
_OFFSETS8 = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1))
_POW8 = 8 ** np.arange(8, dtype=np.int64)
_CAPTURE_BUCKETS = np.array([0, 1, 2, 3, 3, 3, 3, 4], dtype=np.int64)  # by stones captured, 7+ -> 4


def _side_tables() -> dict[str, np.ndarray]:
    """Facts about the four neighbours of a point, indexed by their cell codes as one base-8 number."""
    digits = (np.arange(8 ** 4)[:, None] // 8 ** np.arange(4)) % 8
    own = (digits >= 1) & (digits <= 3)
    return {
        "open": (digits == 0).sum(axis=1),
        "capturing": (digits == 4).sum(axis=1),  # opponent neighbours with one liberty: each a point freed
        "in_atari": (digits == 1).any(axis=1),
        "own_2": (digits == 2).any(axis=1),
        "own_3": (digits == 3).any(axis=1),
        "own": own.any(axis=1),
        "atari": (digits == 5).any(axis=1),  # an opponent chain with two liberties loses one
        "walled": (own | (digits == 7)).all(axis=1),
    }


_SIDES = _side_tables()


class RolloutWeightsError(ValueError):
    """A weights file that cannot be used; the message names the file and the problem."""


def feature_count(vocabulary_size: int) -> int:
    return 2 * (vocabulary_size + 1) + sum(size for _, size in GROUPS[1:])


def _symmetry_permutations() -> np.ndarray:
    """[8, 8]: row t lists, for each pattern cell k, the cell that symmetry t maps k to."""
    index = {offset: k for k, offset in enumerate(_OFFSETS8)}
    maps = (lambda r, c: (r, c), lambda r, c: (c, r), lambda r, c: (-r, c), lambda r, c: (r, -c),
            lambda r, c: (-r, -c), lambda r, c: (c, -r), lambda r, c: (-c, r), lambda r, c: (-c, -r))
    return np.array([[index[f(r, c)] for r, c in _OFFSETS8] for f in maps], dtype=np.int64)


_PERMUTATIONS = _symmetry_permutations()


def canonical_patterns(cells: np.ndarray) -> np.ndarray:
    """[k, 8] cell codes -> [k] the smallest code of the pattern over the 8 symmetries."""
    return (cells[:, _PERMUTATIONS] * _POW8).sum(axis=2).min(axis=1)


def pattern_ids(vocabulary: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The index of each canonical code in the sorted vocabulary, len(vocabulary) for codes not in it."""
    if len(vocabulary) == 0:
        return np.zeros(len(codes), dtype=np.int64)
    found = np.minimum(np.searchsorted(vocabulary, codes), len(vocabulary) - 1)
    return np.where(vocabulary[found] == codes, found, len(vocabulary))


class _Tables:
    """Per-size lookups, in flat order over the board's points."""

    def __init__(self, g: Grid):
        stride = g.stride
        points = g.point_of
        self.neighbors4 = points[:, None] + np.array(g.directions, dtype=np.int64)
        # The top-left corner's upper-left cell would be index -1: clip to 0, which is an edge cell like it.
        self.neighbors8 = np.clip(points[:, None] + np.array([r * stride + c for r, c in _OFFSETS8]),
                                  0, g.array_size - 1)
        self.diagonals = self.neighbors8[:, [0, 2, 5, 7]]
        rows, cols = np.divmod(np.arange(g.area), g.width)
        self.line = np.minimum(np.minimum(rows, g.height - 1 - rows), np.minimum(cols, g.width - 1 - cols))
        self.line = np.minimum(self.line, 4)
        self.on_edge = self.line == 0
        manhattan = np.abs(rows[:, None] - rows[None, :]) + np.abs(cols[:, None] - cols[None, :])
        self.distance = np.minimum(manhattan, MAX_DISTANCE)
        self.touching = np.maximum(np.abs(rows[:, None] - rows[None, :]), np.abs(cols[:, None] - cols[None, :])) == 1


@functools.lru_cache(maxsize=None)
def _tables(g: Grid) -> _Tables:
    return _Tables(g)


class MoveFeatures:
    """The candidates of one position and their feature indices (per group, without group offsets)."""

    __slots__ = ("flat", "groups", "cells")

    def __init__(self, flat: np.ndarray, groups: np.ndarray, cells: np.ndarray):
        self.flat = flat  # [k] flat indices of the candidates
        self.groups = groups  # [k, len(GROUPS)]; the pattern column holds the response flag (0 or 1) for now
        self.cells = cells  # [k, 8] pattern cell codes


def move_features(board: Board, color: int, last: int = PASS, previous: int = PASS) -> MoveFeatures:
    """Candidates of `color` on `board` and their features; last and previous are the points of the last two
    moves (PASS for none)."""
    g = board.grid
    t = _tables(g)
    colors = np.frombuffer(board.colors, dtype=np.uint8)
    relative = _RELATIVE[color][colors]
    libs = np.zeros(g.array_size, dtype=np.int64)
    libs[g.point_of] = board.liberties()
    cell = _CELL[relative * 4 + np.minimum(libs, 3)]

    empty = np.flatnonzero(relative[g.point_of] == _REL_EMPTY)
    around = t.neighbors4[empty]
    sides = (cell[around] * _POW8[:4]).sum(axis=1)
    # Liberties after, exact up to 1 (see the docstring): 2 stands for "2 or more".
    lower = _SIDES["open"][sides] + _SIDES["capturing"][sides]
    few = (lower <= 1) & ~_SIDES["own_3"][sides]
    liberties_after = np.where(few, lower, 2)
    for i in np.flatnonzero(few & _SIDES["own_2"][sides]).tolist():
        liberties_after[i] = min(2, _liberties_after(board, int(g.point_of[empty[i]]), color, libs))

    eye = _SIDES["walled"][sides]
    if eye.any():
        diagonal_opponents = (relative[t.diagonals[empty]] == _REL_OPP).sum(axis=1)
        eye &= diagonal_opponents <= np.where(t.on_edge[empty], 0, 1)
    keep = (liberties_after >= 1) & ~eye
    if board.ko_point != PASS and board.ko_color == color:
        keep &= empty != g.flat_of[board.ko_point]

    flat = empty[keep]
    sides, liberties_after = sides[keep], liberties_after[keep]
    capture = np.zeros(len(flat), dtype=np.int64)
    escape = np.zeros(len(flat), dtype=np.int64)
    for i in np.flatnonzero(_SIDES["capturing"][sides] | _SIDES["in_atari"][sides]).tolist():
        captured, saved = _stones_in_atari(board, g.points[flat[i]], color, libs)
        capture[i] = _CAPTURE_BUCKETS[min(captured, 7)]
        if saved and liberties_after[i] >= 2:
            escape[i] = 1 if saved == 1 else 2
    groups = np.zeros((len(flat), len(GROUPS)), dtype=np.int64)  # column by column: cheaper than np.stack
    if last != PASS:
        groups[:, 0] = t.touching[g.flat_of[last], flat]
        groups[:, 5] = t.distance[g.flat_of[last], flat]
    groups[:, 1] = capture
    groups[:, 2] = escape
    groups[:, 3] = _SIDES["atari"][sides]
    groups[:, 4] = np.where(liberties_after == 1, np.where(_SIDES["own"][sides], 2, 1), 0)
    if previous != PASS:
        groups[:, 6] = t.distance[g.flat_of[previous], flat]
    groups[:, 7] = t.line[flat]
    return MoveFeatures(flat, groups, cell[t.neighbors8[flat]])


def _stones_in_atari(board: Board, point: int, color: int, libs: np.ndarray) -> tuple[int, int]:
    """(opponent stones, own stones) in chains next to point whose one liberty is point."""
    colors, head, size = board.colors, board.chain_head, board.chain_size
    seen: list[int] = []
    counts = [0, 0]
    for n in board.grid.neighbors[point]:
        c = colors[n]
        if (c == BLACK or c == WHITE) and libs[n] == 1 and head[n] not in seen:
            seen.append(head[n])
            counts[c == color] += size[head[n]]
    return counts[0], counts[1]


def _liberties_after(board: Board, point: int, color: int, libs: np.ndarray) -> int:
    """Liberties of color's chain through point once played there (captured neighbours count, see docstring);
    libs: the liberties of the chain through each point of the padded array."""
    colors = board.colors
    liberties: set[int] = set()
    for n in board.grid.neighbors[point]:
        c = colors[n]
        if c == EMPTY:
            liberties.add(n)
        elif c == color:
            liberties |= board.chain_liberty_points(n)
        elif c != EDGE and libs[n] == 1:
            liberties.add(n)
    liberties.discard(point)
    return len(liberties)


def feature_indices(vocabulary: np.ndarray, offsets: np.ndarray, features: MoveFeatures) -> np.ndarray:
    """[k, len(GROUPS)] indices into a policy's weights (its sorted vocabulary, each group's offset) of the features
    of each candidate."""
    size = len(vocabulary)
    indices = features.groups + offsets
    indices[:, 0] = pattern_ids(vocabulary, canonical_patterns(features.cells)) + (size + 1) * features.groups[:, 0]
    return indices


def candidates_python(board: Board, color: int, last: int, previous: int, vocabulary: np.ndarray,
                      offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flat indices of color's candidates, their feature_indices): the reference of the compiled twin."""
    features = move_features(board, color, last, previous)
    return features.flat, feature_indices(vocabulary, offsets, features)


class RolloutFunctions(NamedTuple):
    """The functions of this module that have a compiled twin (native.py)."""

    candidates: Callable[[Board, int, int, int, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _compiled_functions(twin: ModuleType) -> RolloutFunctions:
    def candidates(board: Board, color: int, last: int, previous: int, vocabulary: np.ndarray,
                   offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        area = board.grid.area
        flat = np.empty(area, dtype=np.int64)
        indices = np.empty((area, len(GROUPS)), dtype=np.int64)
        count = twin.candidates(board, color, last, previous, vocabulary, offsets, flat, indices)
        return flat[:count], indices[:count]

    return RolloutFunctions(candidates)


IMPLEMENTATIONS = native.implementations("_rollout_core", RolloutFunctions(candidates_python), _compiled_functions)
candidates = IMPLEMENTATIONS.chosen.candidates


def game_features(state: GameState) -> MoveFeatures:
    """move_features for the side to move of a game, with its last two moves."""
    last, previous = _last_two(state)
    return move_features(state.board, state.to_play, last, previous)


def _last_two(state: GameState) -> tuple[int, int]:
    moves = state.moves
    last = moves[-1][1] if moves else PASS
    previous = moves[-2][1] if len(moves) >= 2 else PASS
    return last, previous


class RolloutPolicy:
    """A linear softmax policy over move features, from a vocabulary of patterns and one weight per feature."""

    def __init__(self, vocabulary: np.ndarray, weights: np.ndarray, info: dict | None = None):
        vocabulary = np.asarray(vocabulary, dtype=np.int64)
        weights = np.asarray(weights, dtype=np.float64)
        if vocabulary.ndim != 1 or np.any(np.diff(vocabulary) <= 0):
            raise ValueError("the pattern vocabulary must be a sorted 1-D array without repeats")
        if weights.shape != (feature_count(len(vocabulary)),):
            raise ValueError(f"expected {feature_count(len(vocabulary))} weights for a vocabulary of "
                             f"{len(vocabulary)} patterns, got shape {weights.shape}")
        if not np.all(np.isfinite(weights)):
            raise ValueError("weights must be finite")
        self.vocabulary = vocabulary
        self.weights = weights
        self.info = dict(info or {})
        sizes = [2 * (len(vocabulary) + 1)] + [size for _, size in GROUPS[1:]]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    @classmethod
    def uniform(cls) -> RolloutPolicy:
        """Every candidate equally likely (all weights zero, empty vocabulary)."""
        return cls(np.zeros(0, np.int64), np.zeros(feature_count(0)))

    @classmethod
    def load(cls, path: str | Path) -> RolloutPolicy:
        """Reads a weights file; raises RolloutWeightsError naming the file and the problem."""
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except FileNotFoundError:
            raise RolloutWeightsError(f"rollout weights {path}: no such file") from None
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
            raise RolloutWeightsError(f"rollout weights {path}: not a readable .npz file ({error})") from None
        missing = {"format", "vocabulary", "weights"} - arrays.keys()
        if missing:
            raise RolloutWeightsError(f"rollout weights {path}: missing {', '.join(sorted(missing))}")
        if int(arrays["format"]) != FORMAT:
            raise RolloutWeightsError(f"rollout weights {path}: format {int(arrays['format'])}, this engine reads "
                                      f"format {FORMAT}; retrain with python -m gtp_engine.training rollout-train")
        info = {key: value.item() if value.ndim == 0 else value.tolist() for key, value in arrays.items()
                if key not in ("format", "vocabulary", "weights")}
        try:
            return cls(arrays["vocabulary"], arrays["weights"], info)
        except ValueError as error:
            raise RolloutWeightsError(f"rollout weights {path}: {error}") from None

    def save(self, path: str | Path, **info) -> None:
        """Writes the weights file (info: scalars or strings describing how it was trained)."""
        with open(path, "wb") as file:
            np.savez_compressed(file, format=np.int64(FORMAT), vocabulary=self.vocabulary.astype(np.int32),
                                weights=self.weights.astype(np.float32), **info)

    # ---- the policy -----------------------------------------------------------------------------------

    def feature_indices(self, features: MoveFeatures) -> np.ndarray:
        """[k, len(GROUPS)] indices into weights of the features of each candidate."""
        return feature_indices(self.vocabulary, self.offsets, features)

    def logits(self, features: MoveFeatures) -> np.ndarray:
        return self.weights[self.feature_indices(features)].sum(axis=1)

    def candidate_logits(self, board: Board, color: int, last: int, previous: int) -> tuple[np.ndarray, np.ndarray]:
        """(flat indices of color's candidates, their logits), through the module's chosen candidates."""
        flat, indices = candidates(board, color, last, previous, self.vocabulary, self.offsets)
        return flat, self.weights[indices].sum(axis=1)

    def probabilities(self, state: GameState) -> np.ndarray:
        """[area + 1] move probabilities for the side to move over its candidates (superko is not looked at here),
        pass last: 1 exactly when there is no candidate."""
        flat, logits = self.candidate_logits(state.board, state.to_play, *_last_two(state))
        result = np.zeros(state.grid.area + 1)
        if len(flat) == 0:
            result[-1] = 1.0
            return result
        p = np.exp(logits - logits.max())
        result[flat] = p / p.sum()
        return result

    # ---- rollouts -------------------------------------------------------------------------------------

    def play_out(self, state: GameState, rng: np.random.Generator, max_moves: int | None = None) -> GameState:
        """A copy of state played on by the policy until two passes in a row, or max_moves moves (default 3x the
        board area); every move is legal under the game's rules."""
        game = state.copy()
        g = game.grid
        points = g.point_of
        board = game.board
        limit = 3 * g.area if max_moves is None else max_moves
        last, previous = _last_two(game)
        check_superko = game.rules.ko != "simple"
        for _ in range(limit):
            if game.is_over:
                break
            move = PASS
            flat, logits = self.candidate_logits(board, game.to_play, last, previous)
            if len(flat):
                weights = np.exp(logits)
                while True:
                    cumulative = np.cumsum(weights)
                    total = cumulative[-1]
                    if total <= 0:
                        break
                    choice = min(int(np.searchsorted(cumulative, rng.random() * total, side="right")),
                                 len(weights) - 1)
                    point = int(points[flat[choice]])
                    if not check_superko or game.illegal_reason(point) is None:
                        move = point
                        break
                    weights[choice] = 0.0
            game.play_unchecked(move)
            last, previous = move, last
        return game

    def rollout(self, state: GameState, rng: np.random.Generator, max_moves: int | None = None) -> float:
        """+1 if the side to move in state wins the played-out game by area counting, -1 if it loses, 0 a draw."""
        return result_for(state.to_play, self.play_out(state, rng, max_moves).area_score())


def result_for(color: int, black_score: float) -> float:
    """+1 / 0 / -1 for `color` from a score of Black's view."""
    score = black_score if color == BLACK else -black_score
    return 1.0 if score > 0 else -1.0 if score < 0 else 0.0
