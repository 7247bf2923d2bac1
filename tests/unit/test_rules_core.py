"""The compiled rules (_rules_core.c) against their Python reference (board.py, game.py): the same boards.

Random games are played twice in lockstep, once through the *_python methods and once through the compiled
functions, and after every move the two boards must agree in every array (colours, chain heads, chain links, sizes,
pseudo-liberties) and every count (hash, ko, captures, stones); before every move both must give the same reason
for every point and colour, and the same hash after every legal move. Small boards make captures, kos, suicides and
superko repetitions frequent; the tests check that each of them happened. Without a built extension they skip.
"""

from __future__ import annotations

import random
from array import array

import pytest

from gtp_engine import board as board_module
from gtp_engine import native
from gtp_engine.board import BLACK, WHITE, Board
from gtp_engine.coords import PASS
from gtp_engine.game import GameState, Rules

compiled = native.built("_rules_core")
pytestmark = pytest.mark.skipif(compiled is None, reason="the compiled rules are not built")


@pytest.fixture
def python_board_steps(monkeypatch):
    """The reference GameState methods call Board's methods, which hand their work to the compiled twin where it is
    built: these tests point them at the Python reference instead."""
    monkeypatch.setattr(board_module, "_play_unchecked", Board._play_unchecked_python)
    monkeypatch.setattr(board_module, "_illegal_reason", Board._illegal_reason_python)
    monkeypatch.setattr(board_module, "_hash_after", Board._hash_after_python)


def board_state(board: Board) -> tuple:
    return (bytes(board.colors), board.chain_head.tobytes(), board.chain_next.tobytes(), board.chain_size.tobytes(),
            board.chain_libs.tobytes(), board.hash, board.ko_point, board.ko_color, list(board.captures),
            list(board.stone_count))


def game_state(state: GameState) -> tuple:
    return (board_state(state.board), state.to_play, state.moves, state.consecutive_passes, state._history,
            state._max_stones)


@pytest.mark.parametrize("width, height, allow_suicide, seed", [
    (9, 9, False, 11), (5, 5, False, 2), (4, 4, True, 3), (7, 5, True, 4), (19, 19, False, 5), (1, 3, True, 6),
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
                reason = Board._illegal_reason_python(reference, point, c, allow_suicide)
                assert compiled.board_illegal_reason(twin, point, c, allow_suicide) == reason
                if reason is None and c == color:
                    legal.append(point)
                    assert compiled.board_hash_after(twin, point, c) == Board._hash_after_python(reference, point, c)
                seen["ko"] += reason == "ko"
        point = rng.choice(legal) if legal and rng.random() > 0.03 else PASS
        stones = sum(reference.stone_count)
        Board._play_unchecked_python(reference, point, color)
        compiled.board_play(twin, point, color)
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
                reason = GameState._illegal_reason_python(reference, point, color)
                assert compiled.game_illegal_reason(twin, point, color) == reason
                superko += reason == "superko"
                if reason is None and color is None:
                    legal.append(point)
        point = rng.choice(legal) if legal and rng.random() > 0.05 else PASS
        GameState._play_unchecked_python(reference, point)
        compiled.game_play(twin, point)
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
            legal = [p for p in reference.grid.points if GameState._illegal_reason_python(reference, p) is None]
            point = rng.choice(legal) if legal and rng.random() > 0.05 else PASS
            GameState._play_unchecked_python(reference, point)
            line.append(point)
        compiled.game_play_line(twin, line)
        assert game_state(twin) == game_state(reference)
        played += len(line)
        if reference.consecutive_passes >= 2:
            reference, twin = GameState(size, rules=rules), GameState(size, rules=rules)
    compiled.game_play_line(twin, [])
    assert game_state(twin) == game_state(reference)


def test_compiled_game_play_with_an_explicit_colour_and_the_methods_that_use_it():
    state = GameState(9)
    twin = state.copy()
    GameState._play_unchecked_python(state, state.grid.point(2, 2), WHITE)
    compiled.game_play(twin, twin.grid.point(2, 2), WHITE)
    assert state.moves == twin.moves == [(WHITE, state.grid.point(2, 2))]
    assert state.to_play == twin.to_play == BLACK
    assert state._history == twin._history
    twin.play(twin.grid.point(3, 3))  # the public methods reach the twin where it is built
    assert twin.illegal_reason(twin.grid.point(3, 3)) == "occupied"


def test_bad_input_gets_an_error_not_a_crash():
    board = Board(9)
    with pytest.raises(ValueError, match="not on a 9x9 board"):
        compiled.board_illegal_reason(board, 0, BLACK, False)
    with pytest.raises(ValueError, match="not on a 9x9 board"):
        compiled.board_play(board, 10_000, BLACK)
    with pytest.raises(ValueError, match="neither black"):
        compiled.board_play(board, board.grid.point(0, 0), 5)
    compiled.board_play(board, board.grid.point(0, 0), BLACK)
    with pytest.raises(ValueError, match="occupied"):
        compiled.board_play(board, board.grid.point(0, 0), WHITE)
    board.chain_libs = array("I", bytes(4 * board.grid.array_size))
    with pytest.raises(TypeError, match="chain_libs"):
        compiled.board_play(board, board.grid.point(1, 1), WHITE)
    with pytest.raises(TypeError):
        compiled.game_play(GameState(9))
    state = GameState(9)
    with pytest.raises(ValueError, match="occupied"):  # what was played before the refused point stays played
        compiled.game_play_line(state, [state.grid.point(0, 0), state.grid.point(1, 1), state.grid.point(0, 0)])
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
    twin, reference = compiled.game_copy(state), state.copy()
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
        compiled.game_copy(object())
