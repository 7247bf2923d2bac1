"""The compiled rules (_rules_core.c) against their Python reference (board.py, game.py): the same boards.

Random games are played twice in lockstep, once through the Python reference and once through the compiled
functions (board.IMPLEMENTATIONS, game.IMPLEMENTATIONS), and after every move the two boards must agree in every
array (colours, chain heads, chain links, sizes, pseudo-liberties) and every count (hash, ko, captures, stones);
before every move both must give the same reason for every point and colour, and the same hash after every legal
move. Small boards make captures, kos, suicides and superko repetitions frequent; the tests check that each of them
happened. Without a built extension, or with GTP_ENGINE_PURE_PYTHON=1, they skip.
"""

from __future__ import annotations

import random
from array import array

import pytest

from gtp_engine import board as board_module
from gtp_engine import game as game_module
from gtp_engine.board import BLACK, WHITE, Board
from gtp_engine.coords import PASS
from gtp_engine.game import GameState, Rules

PYTHON_BOARD, COMPILED_BOARD = board_module.IMPLEMENTATIONS.python, board_module.IMPLEMENTATIONS.compiled
PYTHON_GAME, COMPILED_GAME = game_module.IMPLEMENTATIONS.python, game_module.IMPLEMENTATIONS.compiled
pytestmark = pytest.mark.skipif(COMPILED_BOARD is None, reason="the compiled rules are not built")


@pytest.fixture
def python_board_steps(monkeypatch):
    """The reference GameState methods call Board's methods, which hand their work to the board's chosen
    implementation, the compiled one here: these tests point them at the Python reference instead."""
    monkeypatch.setattr(board_module, "_play_unchecked", PYTHON_BOARD.play_unchecked)
    monkeypatch.setattr(board_module, "_illegal_reason", PYTHON_BOARD.illegal_reason)
    monkeypatch.setattr(board_module, "_hash_after", PYTHON_BOARD.hash_after)


def board_state(board: Board) -> tuple:
    return (bytes(board.colors), board.chain_head.tobytes(), board.chain_next.tobytes(), board.chain_size.tobytes(),
            board.chain_libs.tobytes(), board.hash, board.ko_point, board.ko_color, list(board.captures),
            list(board.stone_count))


def game_state(state: GameState) -> tuple:
    return (board_state(state.board), state.to_play, state.moves, state.consecutive_passes, state._history,
            state._max_stones)


@pytest.mark.parametrize("width, height, allow_suicide, seed", [
    (9, 9, False, 11), (5, 5, False, 2), (4, 4, True, 3), (7, 5, True, 5), (19, 19, False, 5), (1, 3, True, 6),
])
def test_compiled_board_plays_and_judges_as_the_reference(width, height, allow_suicide, seed):
    reference, twin = Board(width, height), Board(width, height)
    rng = random.Random(seed)
    seen = {"capture": 0, "ko": 0, "suicide": 0}
    color = BLACK
    for _ in range(400 if width * height > 25 else 150):
        legal = []
        for point in reference.grid.points:
            for c in (BLACK, WHITE):
                reason = PYTHON_BOARD.illegal_reason(reference, point, c, allow_suicide)
                assert COMPILED_BOARD.illegal_reason(twin, point, c, allow_suicide) == reason
                if reason is None and c == color:
                    legal.append(point)
                    assert COMPILED_BOARD.hash_after(twin, point, c) == PYTHON_BOARD.hash_after(reference, point, c)
                seen["ko"] += reason == "ko"
        point = rng.choice(legal) if legal and rng.random() > 0.03 else PASS
        stones = sum(reference.stone_count)
        PYTHON_BOARD.play_unchecked(reference, point, color)
        COMPILED_BOARD.play_unchecked(twin, point, color)
        assert board_state(twin) == board_state(reference)
        seen["capture"] += sum(reference.stone_count) < stones
        seen["suicide"] += point != PASS and reference.colors[point] == 0
        color = 3 - color
    assert seen["capture"], seen
    if min(width, height) > 1:  # a one-line board has no ko
        assert seen["ko"], seen
    if allow_suicide and width * height > 3:
        assert seen["suicide"], seen


@pytest.mark.parametrize("rules", [Rules.named("chinese"), Rules.named("tromp-taylor"), Rules.named("japanese"),
                                   Rules(ko="situational", name="situational")])
def test_compiled_game_plays_and_judges_superko_as_the_reference(rules, python_board_steps):
    reference, twin = GameState(4, rules=rules), GameState(4, rules=rules)
    rng = random.Random(7)
    superko = 0
    for _ in range(600):
        legal = []
        for point in reference.grid.points:
            for color in (None, BLACK, WHITE):
                reason = PYTHON_GAME.illegal_reason(reference, point, color)
                assert COMPILED_GAME.illegal_reason(twin, point, color) == reason
                superko += reason == "superko"
                if reason is None and color is None:
                    legal.append(point)
        point = rng.choice(legal) if legal and rng.random() > 0.05 else PASS
        PYTHON_GAME.play_unchecked(reference, point)
        COMPILED_GAME.play_unchecked(twin, point)
        assert game_state(twin) == game_state(reference)
        if reference.consecutive_passes >= 2:
            reference, twin = GameState(4, rules=rules), GameState(4, rules=rules)
    if rules.ko != "simple":
        assert superko, "no superko repetition came up: the test did not test it"


@pytest.mark.parametrize("size, rules", [(4, Rules.named("chinese")), (5, Rules.named("tromp-taylor")), (9, Rules())])
def test_compiled_play_line_plays_a_line_as_the_reference_plays_its_moves(size, rules, python_board_steps):
    """game_play_line writes the board's counts back once per line: lines of 1 to 12 moves (passes, captures and
    suicides among them) must leave what playing them one at a time leaves."""
    rng = random.Random(size)
    reference, twin = GameState(size, rules=rules), GameState(size, rules=rules)
    played = 0
    while played < 300:
        line = []
        for _ in range(rng.randint(1, 12)):
            legal = [p for p in reference.grid.points if PYTHON_GAME.illegal_reason(reference, p) is None]
            point = rng.choice(legal) if legal and rng.random() > 0.05 else PASS
            PYTHON_GAME.play_unchecked(reference, point)
            line.append(point)
        COMPILED_GAME.play_line(twin, line)
        assert game_state(twin) == game_state(reference)
        played += len(line)
        if reference.consecutive_passes >= 2:
            reference, twin = GameState(size, rules=rules), GameState(size, rules=rules)
    COMPILED_GAME.play_line(twin, [])
    assert game_state(twin) == game_state(reference)


def test_compiled_game_play_with_an_explicit_colour_and_the_methods_that_use_it():
    state = GameState(9)
    twin = state.copy()
    PYTHON_GAME.play_unchecked(state, state.grid.point(2, 2), WHITE)
    COMPILED_GAME.play_unchecked(twin, twin.grid.point(2, 2), WHITE)
    assert state.moves == twin.moves == [(WHITE, state.grid.point(2, 2))]
    assert state.to_play == twin.to_play == BLACK
    assert state._history == twin._history
    twin.play(twin.grid.point(3, 3))  # the public methods reach the twin where it is built
    assert twin.illegal_reason(twin.grid.point(3, 3)) == "occupied"


def test_bad_input_gets_an_error_not_a_crash():
    board = Board(9)
    with pytest.raises(ValueError, match="not on a 9x9 board"):
        COMPILED_BOARD.illegal_reason(board, 0, BLACK, False)
    with pytest.raises(ValueError, match="not on a 9x9 board"):
        COMPILED_BOARD.play_unchecked(board, 10_000, BLACK)
    with pytest.raises(ValueError, match="neither black"):
        COMPILED_BOARD.play_unchecked(board, board.grid.point(0, 0), 5)
    COMPILED_BOARD.play_unchecked(board, board.grid.point(0, 0), BLACK)
    with pytest.raises(ValueError, match="occupied"):
        COMPILED_BOARD.play_unchecked(board, board.grid.point(0, 0), WHITE)
    board.chain_libs = array("I", bytes(4 * board.grid.array_size))
    with pytest.raises(TypeError, match="chain_libs"):
        COMPILED_BOARD.play_unchecked(board, board.grid.point(1, 1), WHITE)
    with pytest.raises(TypeError):
        COMPILED_GAME.play_unchecked(GameState(9))
    state = GameState(9)
    with pytest.raises(ValueError, match="occupied"):  # what was played before the refused point stays played
        COMPILED_GAME.play_line(state, [state.grid.point(0, 0), state.grid.point(1, 1), state.grid.point(0, 0)])
    assert [point for _, point in state.moves] == [state.grid.point(0, 0), state.grid.point(1, 1)]
    assert state.board.stone_count == [0, 1, 1] and len(state._history) == 3 and state.to_play == BLACK


def test_compiled_copy_is_the_references_copy_and_independent_of_its_source():
    """game_copy (the search's copy of the root position for each descent) gives what GameState.copy gives: the same
    fields, its own board arrays and move lists, the board's grid and Zobrist keys shared; playing on either copy
    leaves the other and the source as they were."""
    rng = random.Random(5)
    state = GameState(7, rules=Rules(ko="positional"))
    for _ in range(40):
        legal = [p for p in state.grid.points if state.is_legal(p)]
        state.play(rng.choice(legal) if legal else PASS)
    twin, reference = COMPILED_GAME.copy(state), state.copy()
    assert type(twin) is GameState and twin.__dict__.keys() == reference.__dict__.keys()
    for name, value in reference.__dict__.items():
        if name == "board":
            assert board_state(twin.board) == board_state(value) and twin.board.grid is state.board.grid
            assert twin.board._zobrist is state.board._zobrist
            assert all(getattr(twin.board, n) is not getattr(state.board, n) for n in
                       ("colors", "chain_head", "chain_next", "chain_size", "chain_libs", "captures", "stone_count"))
        else:
            assert getattr(twin, name) == value, name
    source = (board_state(state.board), list(state.moves), list(state._history))
    point = next(p for p in state.grid.points if twin.is_legal(p))
    twin.play(point)
    reference.play(point)
    assert board_state(twin.board) == board_state(reference.board) and twin.moves == reference.moves
    assert twin._history == reference._history and twin._max_stones == reference._max_stones
    assert (board_state(state.board), list(state.moves), list(state._history)) == source
    with pytest.raises(AttributeError, match="no __dict__"):
        COMPILED_GAME.copy(object())
