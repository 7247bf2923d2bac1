"""Property: GameState.undo after any sequence of legal moves (passes, captures, ko) restores the exact state.

Hypothesis drives random interleavings of legal moves and undos on small boards, where captures, ko and superko come
up often, under rule sets with and without suicide and with each ko rule. Along the way, the legal mask the moves
are drawn from is checked against GameState.is_legal at every point.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.game import GameState, Rules

RULE_NAMES = ["chinese", "tromp-taylor", "japanese", "aga", "new-zealand"]


def snapshot(game: GameState) -> dict:
    board = game.board
    return {
        "colors": bytes(board.colors),
        "hash": board.hash,
        "ko_point": board.ko_point,
        "to_play": game.to_play,
        "captures": tuple(board.captures),
        "legal_mask": game.legal_mask().tobytes(),
        "moves": tuple(game.moves),
        "consecutive_passes": game.consecutive_passes,
        "liberties": board.liberties().tobytes(),
    }


def urgent_moves(game: GameState, mask: np.ndarray) -> list[int]:
    """Legal moves on the liberties of chains in atari (captures, escapes, ko), to make sequences tactical."""
    g, colors = game.grid, game.board.colors
    points = {
        n
        for flat in np.flatnonzero(game.board.liberties() == 1).tolist()
        for n in g.neighbors[g.points[flat]]
        if g.is_on_board(n) and colors[n] == 0
    }
    return sorted(g.flat(p) for p in points if mask[g.flat(p)])


# An action is ("play", choice, prefer_urgent) or ("undo",).
actions = st.lists(
    st.one_of(
        st.tuples(st.just("play"), st.integers(0, 10**6), st.booleans()),
        st.tuples(st.just("play"), st.integers(0, 10**6), st.booleans()),
        st.tuples(st.just("play"), st.integers(0, 10**6), st.booleans()),
        st.tuples(st.just("undo")),
    ),
    min_size=40,
    max_size=150,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    width=st.integers(3, 7),
    height=st.integers(3, 7),
    rules=st.sampled_from(RULE_NAMES),
    handicap=st.booleans(),
    script=actions,
)
def test_undo_restores_everything(width, height, rules, handicap, script):
    game = GameState(width, height, komi=0.5, rules=Rules.named(rules))
    if handicap:
        g = game.grid
        game.place_handicap([g.point(0, 0), g.point(height - 1, width - 1)])
    start = snapshot(game)
    stack = []
    for action in script:
        if action[0] == "undo":
            if not stack:
                with pytest.raises(IndexError):
                    game.undo()
                continue
            game.undo()
            assert snapshot(game) == stack.pop()
            continue
        _, choice, prefer_urgent = action
        mask = game.legal_mask()
        # The vectorised mask and the scalar check are separate code paths: they must agree everywhere.
        assert mask.tolist() == [game.is_legal(game.grid.from_flat(i)) for i in range(game.grid.area + 1)]
        urgent = urgent_moves(game, mask) if prefer_urgent else []
        candidates = urgent or np.flatnonzero(mask).tolist()
        flat = candidates[choice % len(candidates)]
        stack.append(snapshot(game))
        captures = sum(game.board.captures)
        game.play(game.grid.from_flat(flat))
        if sum(game.board.captures) > captures:
            event("capture")
        if game.board.ko_point != PASS:
            event("ko")
        if flat == game.grid.pass_index:
            event("pass")
    while stack:
        game.undo()
        assert snapshot(game) == stack.pop()
    assert snapshot(game) == start
    with pytest.raises(IndexError):
        game.undo()


def test_undo_restores_a_ko_capture():
    """A fixed ko: black captures, white may not retake at once; undoing the capture restores the white stone."""
    game = GameState(4, 3)
    g = game.grid
    # . X O .
    # X O . O
    # . X O .
    for point, color in [((0, 1), BLACK), ((0, 2), WHITE), ((1, 0), BLACK), ((1, 3), WHITE),
                         ((2, 1), BLACK), ((2, 2), WHITE), ((1, 1), WHITE)]:
        game.play(g.point(*point), color)
    before = snapshot(game)
    game.play(g.point(1, 2), BLACK)  # captures the white stone at (1, 1)
    assert game.board.ko_point == g.point(1, 1)
    assert not game.is_legal(g.point(1, 1), WHITE)
    game.undo()
    assert snapshot(game) == before
    game.play(PASS, BLACK)
    game.undo()
    assert snapshot(game) == before
