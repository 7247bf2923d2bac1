"""Features: a position becomes the network's input, spatial planes and global values (feature set version 1),
and the network's raw outputs come back to the board as it stands (decode).

Terms:
- own / opponent: the side to move / the other side. Every input is from the side to move's view.
- spatial planes: float32 [B, C, H, W], 1.0 or 0.0 per point, channels named in SPATIAL (their order is the
  network's channel order). The on-board plane is 1 on every point, so a network can tell the edge from
  zero padding and a batch may pad smaller boards into a larger tensor.
- liberty planes: the stones of chains with exactly 1, exactly 2, or 3 or more liberties, per side.
- ko plane: the point the side to move may not play now because of the simple ko rule.
- last-move planes: the point of the move 1..5 moves ago (whoever played it); empty for a pass or before move 1.
- global values: float32 [B, G], named in GLOBAL. Compensation is komi plus the handicap bonus white gets
  under area scoring, from the side to move's view (positive when the side to move receives it), in units
  of 20 points; the prisoner balance counts only under territory scoring.
- position key: bytes holding everything the features read, so equal keys give equal inputs; bytes, because a
  cache hashes each key several times and bytes keep their hash (an 11-field tuple hashed anew each time, 85 ns).
- symmetries: encode can apply a symmetry per position (symmetry.py); it permutes the board before the planes
  are built, which costs less than transforming the finished planes.
- decode: policy logits [B, A + 1] and (win, loss, draw) logits [B, 3] become probabilities and a value (win -
  loss), and the policy and ownership [B, A] of a position encoded under symmetry s are permuted back by s's
  inverse, so that index j is the board's own flat j (pass last).
- compiled twin: _features_core.c builds the spatial planes and the global values, makes the position key and
  decodes; IMPLEMENTATIONS (native.py) holds it and the reference, encode_python, global_inputs_python,
  position_key_python and decode_python, that it is tested against (value for value; decode's softmax sums within a
  few units in the last place). encode, global_inputs, position_key and decode are the chosen one's.

Bump FEATURES_VERSION whenever the meaning or order of any input changes; networks record the version they
were trained with and the engine refuses a mismatch.
"""

from __future__ import annotations

import struct
from types import ModuleType
from typing import TYPE_CHECKING, Callable, NamedTuple, Sequence

import numpy as np

from gtp_engine import native, symmetry
from gtp_engine.board import BLACK, EMPTY, WHITE
from gtp_engine.coords import PASS, Grid

if TYPE_CHECKING:
    from gtp_engine.board import Board
    from gtp_engine.game import GameState

FEATURES_VERSION = 1
HISTORY = 5  # last-move planes

SPATIAL = (
    "on_board",
    "own_stones",
    "opponent_stones",
    "own_1_liberty",
    "own_2_liberties",
    "own_3plus_liberties",
    "opponent_1_liberty",
    "opponent_2_liberties",
    "opponent_3plus_liberties",
    "ko_ban",
) + tuple(f"move_{k}_ago" for k in range(1, HISTORY + 1))

GLOBAL = (
    "compensation",
    "territory_scoring",
    "prisoner_balance",
    "simple_ko",
    "situational_superko",
    "suicide_allowed",
    "last_move_pass",
    "move_before_pass",
)

SPATIAL_CHANNELS = len(SPATIAL)
GLOBAL_FEATURES = len(GLOBAL)
_KO = SPATIAL.index("ko_ban")
_LAST = SPATIAL.index("move_1_ago")
SCALE = 20.0  # points per unit of the global score-like inputs
_INVERSE = np.array(symmetry.INVERSE)


# The position key's fixed part: width, height, board hash, side to move, ko ban, number of recent moves, the
# recent moves' points (padded with 0), compensation, territory scoring, prisoner balance, suicide allowed. The ko
# rule's name (UTF-8) follows.
_KEY = struct.Struct(f"<HHQBiB{HISTORY}idBqB")


def position_key_python(state: GameState) -> bytes:
    """position_key in Python, the reference: everything encode() reads from `state`, as bytes."""
    board = state.board
    g = board.grid
    rules = state.rules
    territory = rules.scoring == "territory"
    recent = [point for _, point in state.moves[-HISTORY:]]
    return _KEY.pack(g.width, g.height, board.hash, state.to_play, _ko_ban(state), len(recent),
                     *recent, *[0] * (HISTORY - len(recent)), _compensation(state), territory,
                     _prisoner_balance(state) if territory else 0, rules.suicide_allowed) + rules.ko.encode()


def decode_python(policy_logits: np.ndarray, value_logits: np.ndarray, ownership: np.ndarray, grid: Grid,
                  symmetries: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """decode in numpy, the reference: (policy [B, A + 1], value [B], ownership [B, A]) from raw outputs, float32,
    in the board's own orientation (see the module docstring); symmetries: the int64 symmetry each position was
    encoded under, or None."""
    policy = _softmax(policy_logits)
    ownership = ownership.reshape(len(ownership), grid.area)
    if symmetries is not None:
        # Back to the original board: original[j] = transformed[permutation of the inverse symmetry][j].
        back = _INVERSE[symmetries]
        rows = np.arange(len(symmetries))[:, None]
        ownership = ownership[rows, symmetry.permutation_table(grid.height, grid.width)[back]]
        policy = policy[rows, symmetry.policy_permutation_table(grid.height, grid.width)[back]]
    wdl = _softmax(value_logits)
    return policy, wdl[:, 0] - wdl[:, 1], ownership


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def global_inputs_python(states: Sequence[GameState]) -> np.ndarray:
    """global_inputs in Python, the reference: the global values, float32 [B, G]."""
    rows = []
    for s in states:
        rules = s.rules
        territory = rules.scoring == "territory"
        recent = s.moves[-2:]
        rows.append((
            _compensation(s) / SCALE,
            territory,
            _prisoner_balance(s) / SCALE if territory else 0.0,
            rules.ko == "simple",
            rules.ko == "situational",
            rules.suicide_allowed,
            len(recent) >= 1 and recent[-1][1] == PASS,
            len(recent) >= 2 and recent[-2][1] == PASS,
        ))
    return np.array(rows, np.float32)


def encode_python(states: Sequence[GameState], symmetries: Sequence[int] | None = None) -> tuple[np.ndarray,
                                                                                                  np.ndarray]:
    """encode in numpy and Python, the reference: spatial float32 [B, C, H, W] and global float32 [B, G] inputs for
    positions of one board size.

    With `symmetries` (one per position, all keeping one output shape), position i is encoded as if the board
    had been transformed by symmetries[i]; a transpose swaps H and W.
    """
    g = states[0].board.grid
    height, width = g.height, g.width
    count, area = len(states), g.area
    boards = [s.board for s in states]
    colors = np.frombuffer(b"".join([b.colors for b in boards]), np.uint8).reshape(count, g.array_size)
    to_play = np.array([s.to_play for s in states], np.uint8)[:, None]
    # A code per point: 4 * side (0 empty, 1 own stone, 2 opponent stone) + the stone's chain's liberties up to 3.
    codes = _SIDE_CODE[to_play * 4 + colors[:, g.point_of]]
    codes += np.minimum(batch_liberties(boards, colors), 3).astype(np.uint8)

    # Points named by position (ko ban, last moves) as (position, channel, point) triples.
    rows, channels, points = [], [], []
    for i, s in enumerate(states):
        ko = _ko_ban(s)
        if ko != PASS:
            rows.append(i)
            channels.append(_KO)
            points.append(ko)
        recent = s.moves[-HISTORY:]
        for k, (_, point) in enumerate(reversed(recent)):
            if point != PASS:
                rows.append(i)
                channels.append(_LAST + k)
                points.append(point)
    flats = g.flat_of[points] if points else np.zeros(0, np.int64)

    if symmetries is not None:
        syms = np.asarray(symmetries, np.int64)
        table = symmetry.permutation_table(height, width)
        codes = codes[np.arange(count)[:, None], table[syms]]
        if len(flats):
            # The point at original flat j lands at inverse_perm[j] (square boards: the inverse's permutation).
            inverse_syms = _INVERSE[syms[rows]]
            flats = table[inverse_syms, flats]
        if syms[0] & symmetry.TRANSPOSE:
            height, width = width, height

    planes = np.empty((count, SPATIAL_CHANNELS, area), np.float32)
    planes[:, 0] = 1.0
    np.equal((codes >> 2)[:, None], _STONE_SIDES, out=planes[:, 1:3], casting="unsafe")
    np.equal(codes[:, None], _LIBERTY_CODES, out=planes[:, 3:_KO], casting="unsafe")
    planes[:, _KO:] = 0.0
    planes[rows, channels, flats] = 1.0
    return planes.reshape(count, SPATIAL_CHANNELS, height, width), global_inputs_python(states)



# _SIDE_CODE[4 * to_play + color]: 4 * side (see encode) of a point of that colour.
_SIDE_CODE = np.zeros(12, np.uint8)
_SIDE_CODE[4 * BLACK + BLACK] = _SIDE_CODE[4 * WHITE + WHITE] = 4
_SIDE_CODE[4 * BLACK + WHITE] = _SIDE_CODE[4 * WHITE + BLACK] = 8
# The side of the stones of planes own_stones, opponent_stones, and the codes of the liberty planes that follow them.
_STONE_SIDES = np.array([1, 2], np.uint8)[:, None]
_LIBERTY_CODES = np.array([4 * side + liberties for side in (1, 2) for liberties in (1, 2, 3)], np.uint8)[:, None]


def batch_liberties(boards: Sequence[Board], colors: np.ndarray | None = None) -> np.ndarray:
    """Board.liberties() of every board, int [B, area], in one pass over the whole batch.

    The method of Board._liberties_by_head, vectorised across boards: every empty point adds one liberty to each
    distinct chain among its neighbours. Chains are labelled board * array_size + Board.chain_head, so that one
    bincount serves all boards; label board * array_size (the board's sentinel point 0) stands for "no chain".
    """
    g = boards[0].grid
    count, size = len(boards), g.array_size
    if colors is None:
        colors = np.frombuffer(b"".join([b.colors for b in boards]), np.uint8).reshape(count, size)
    labels = np.frombuffer(b"".join([b.chain_head for b in boards]), np.uint16).astype(np.intp).reshape(count, size)
    labels += np.arange(0, count * size, size)[:, None]
    empty = np.flatnonzero(colors.ravel() == EMPTY)
    around = labels.ravel()[empty + _directions(g)]  # [4, empty points]: the chain on each side of each empty point
    # Each neighbour that repeats an earlier one of its empty point becomes "no chain" (the rows rewritten last
    # to first, so that every comparison sees the original labels).
    first, second, third, fourth = around
    fourth[(fourth == first) | (fourth == second) | (fourth == third)] = 0
    third[(third == first) | (third == second)] = 0
    second[second == first] = 0
    by_label = np.bincount(around.ravel(), minlength=count * size)
    by_label[::size] = 0
    return by_label[labels[:, g.point_of]]


_directions_cache: dict[Grid, np.ndarray] = {}


def _directions(g: Grid) -> np.ndarray:
    """g.directions as an int column [4, 1]."""
    column = _directions_cache.get(g)
    if column is None:
        column = _directions_cache[g] = np.array(g.directions, np.intp)[:, None]
    return column


def _ko_ban(state: GameState) -> int:
    """The simple-ko point the side to move may not play, or PASS (the ban binds only board.ko_color, which is
    not the side to move after set_to_play)."""
    board = state.board
    return board.ko_point if board.ko_color == state.to_play else PASS


def _compensation(state: GameState) -> float:
    """Komi plus white's handicap bonus under area scoring, from the side to move's view."""
    points = white_compensation(state)
    return points if state.to_play == WHITE else -points


def white_compensation(state: GameState) -> float:
    """Komi plus white's handicap bonus under area scoring: the compensation from White's view."""
    points = state.komi
    if state.handicap_stones > 0 and state.rules.scoring == "area":
        bonus = state.rules.white_handicap_bonus
        points += {"0": 0, "N": state.handicap_stones, "N-1": state.handicap_stones - 1}[bonus]
    return points


def _prisoner_balance(state: GameState) -> int:
    """Stones the side to move has captured minus stones the opponent has captured."""
    captures = state.board.captures
    own = state.to_play
    return captures[own] - captures[BLACK + WHITE - own]


class FeatureFunctions(NamedTuple):
    """What features has in Python and in its twin; each does what its reference (encode_python, ...) says."""

    encode: Callable[..., tuple[np.ndarray, np.ndarray]]
    global_inputs: Callable[[Sequence[GameState]], np.ndarray]
    position_key: Callable[[GameState], bytes]
    decode: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]


def _compiled_functions(twin: ModuleType) -> FeatureFunctions:
    """The twin's planes, global inputs, key and decoding (_features_core.c) behind the references' signatures."""

    def global_inputs(states: Sequence[GameState]) -> np.ndarray:
        out = np.empty((len(states), GLOBAL_FEATURES), np.float32)
        twin.global_inputs(states, out)
        return out

    def encode(states: Sequence[GameState], symmetries: Sequence[int] | None = None) -> tuple[np.ndarray,
                                                                                              np.ndarray]:
        g = states[0].grid
        height, width = g.height, g.width
        table = None
        if symmetries is not None:
            table = symmetry.permutation_table(height, width)
            if symmetries[0] & symmetry.TRANSPOSE:
                height, width = width, height
        planes = np.empty((len(states), SPATIAL_CHANNELS, g.area), np.float32)
        twin.spatial_planes(states, symmetries, table, planes)
        return planes.reshape(len(states), SPATIAL_CHANNELS, height, width), global_inputs(states)

    def decode(policy_logits: np.ndarray, value_logits: np.ndarray, ownership: np.ndarray, grid: Grid,
               symmetries: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        count = len(value_logits)
        policy = np.empty((count, grid.area + 1), np.float32)
        value = np.empty(count, np.float32)
        owned = np.empty((count, grid.area), np.float32)
        table = syms = None
        if symmetries is not None:
            table = symmetry.permutation_table(grid.height, grid.width)
            syms = np.ascontiguousarray(symmetries, np.int64)
        twin.decode(np.ascontiguousarray(policy_logits, np.float32), np.ascontiguousarray(value_logits, np.float32),
                    np.ascontiguousarray(ownership, np.float32), syms, _INVERSE, table, policy, value, owned)
        return policy, value, owned

    return FeatureFunctions(encode, global_inputs, twin.position_key, decode)


IMPLEMENTATIONS = native.implementations(
    "_features_core", FeatureFunctions(encode_python, global_inputs_python, position_key_python, decode_python),
    _compiled_functions)
# The chosen ones, bound once (native.py): what the evaluators call.
encode = IMPLEMENTATIONS.chosen.encode
global_inputs = IMPLEMENTATIONS.chosen.global_inputs
position_key = IMPLEMENTATIONS.chosen.position_key
decode = IMPLEMENTATIONS.chosen.decode
