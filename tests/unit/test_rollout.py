"""The rollout policy: its features on hand-built positions, its probabilities, rollouts that end legal and scored,
and its weights files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from search_support import position

from gtp_engine import rollout
from gtp_engine.board import BLACK, EMPTY, WHITE, opponent
from gtp_engine.coords import PASS, grid
from gtp_engine.game import GameState, Rules
from gtp_engine.rollout import (
    GROUPS,
    RolloutPolicy,
    RolloutWeightsError,
    canonical_patterns,
    feature_count,
    game_features,
    result_for,
)

GROUP = {name: i for i, (name, _) in enumerate(GROUPS)}
PYTHON, COMPILED = rollout.IMPLEMENTATIONS.python, rollout.IMPLEMENTATIONS.compiled
WEIGHTS = Path(__file__).resolve().parents[2] / "weights"

# Black to move: the white stone at C3 is in atari, its last liberty C2.
ATARI = """
    . . . . .
    . . X . .
    . X O X .
    . . . . .
    . . . . .
"""
# Black has two eyes at B5 and B3 (top left); White to move has no sensible move there, Black none at all there.
EYES = """
    X . X O .
    X X X O .
    X . X O .
    X X X O .
    . . . O .
"""
# Every empty point is one of Black's eyes, and suicide for White.
ALL_EYES = """
    X . X
    X X X
    X . X
"""


def features_by_point(state):
    features = game_features(state)
    return {state.grid.points[f]: row for f, row in zip(features.flat.tolist(), features.groups)}


def weighted(**weights: float) -> RolloutPolicy:
    """A policy with an empty pattern vocabulary and the given weight on bucket 1+ of each named group."""
    policy = RolloutPolicy.uniform()
    values = policy.weights.copy()
    for name, weight in weights.items():
        group = GROUP[name]
        size = GROUPS[group][1]
        values[policy.offsets[group] + 1:policy.offsets[group] + size] = weight
    return RolloutPolicy(policy.vocabulary, values)


def test_a_capturing_move_has_the_capture_feature_and_no_other_move_has_it():
    state = position(ATARI, BLACK)
    g = state.grid
    rows = features_by_point(state)
    capture = g.point(3, 2)
    assert rows[capture][GROUP["capture"]] == 1  # one stone
    assert rows[capture][GROUP["atari"]] == 0
    assert all(row[GROUP["capture"]] == 0 for p, row in rows.items() if p != capture)


def test_larger_captures_fall_into_larger_buckets():
    state = position("""
        . O O O X
        . X X X .
        . . . . .
    """, BLACK)  # the three white stones have one liberty left, at A3
    rows = features_by_point(state)
    assert rows[state.grid.point(0, 0)][GROUP["capture"]] == 3  # bucket 3-6


def test_an_atari_escape_is_recognised_and_a_self_atari_is_not_an_escape():
    state = position(ATARI, WHITE)
    g = state.grid
    rows = features_by_point(state)
    escape = g.point(3, 2)
    assert rows[escape][GROUP["escape"]] == 1  # one stone saved: the chain gets 3 liberties
    assert rows[escape][GROUP["self_atari"]] == 0
    assert all(row[GROUP["escape"]] == 0 for p, row in rows.items() if p != escape)

    # Here extending gives the chain a single liberty: no escape, and a self-atari of a larger chain.
    trapped = position("""
        . X O X .
        . X . X .
        . . . . .
    """, WHITE)
    rows = features_by_point(trapped)
    extend = trapped.grid.point(1, 2)
    assert rows[extend][GROUP["escape"]] == 0
    assert rows[extend][GROUP["self_atari"]] == 2


def test_atari_self_atari_distances_and_responses():
    state = position("""
        . . . . . . .
        . . . . . . .
        . . X O . . .
        . . . X . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
    """, BLACK)  # White D5 has two liberties, D6 and E5
    g = state.grid
    state.play(g.point(6, 6), BLACK)
    state.play(g.point(0, 6), WHITE)  # the last move: G7, the one before: G1
    rows = features_by_point(state)
    assert rows[g.point(1, 3)][GROUP["atari"]] == 1
    assert rows[g.point(2, 4)][GROUP["atari"]] == 1
    assert rows[g.point(0, 0)][GROUP["atari"]] == 0
    assert rows[g.point(0, 5)][GROUP["last_distance"]] == 1
    assert rows[g.point(0, 5)][GROUP["pattern"]] == 1  # touches the last move: a response pattern
    assert rows[g.point(1, 5)][GROUP["pattern"]] == 1  # diagonally too
    assert rows[g.point(2, 6)][GROUP["pattern"]] == 0
    assert rows[g.point(6, 0)][GROUP["last_distance"]] == 12
    assert rows[g.point(6, 0)][GROUP["previous_distance"]] == 6
    assert rows[g.point(3, 3 - 1)][GROUP["line"]] == 2  # C4: third line
    assert rows[g.point(0, 0)][GROUP["self_atari"]] == 0


def test_patterns_are_the_same_under_the_eight_symmetries():
    rng = np.random.default_rng(0)
    cells = rng.integers(0, 8, size=(50, 8))
    codes = canonical_patterns(cells)
    grid3 = np.full((50, 3, 3), -1)
    grid3[:, [0, 0, 0, 1, 1, 2, 2, 2], [0, 1, 2, 0, 2, 0, 1, 2]] = cells
    for transform in (lambda a: np.rot90(a, axes=(1, 2)), lambda a: a[:, ::-1, :], lambda a: a.transpose(0, 2, 1)):
        moved = transform(grid3)
        assert np.array_equal(canonical_patterns(moved[:, [0, 0, 0, 1, 1, 2, 2, 2], [0, 1, 2, 0, 2, 0, 1, 2]]), codes)
    assert len(set(codes.tolist())) > 40  # and different patterns stay apart


def test_probabilities_are_a_distribution_over_the_sensible_moves():
    state = position(EYES, WHITE)
    g = state.grid
    p = weighted(capture=2.0).probabilities(state)
    assert p.shape == (g.area + 1,)
    assert p.sum() == pytest.approx(1.0)
    colors = state.board.colors
    occupied = [g.flat(q) for q in g.points if colors[q] != EMPTY]
    assert np.all(p[occupied] == 0)
    assert p[g.flat(g.point(0, 1))] == 0 and p[g.flat(g.point(2, 1))] == 0  # suicide for White
    assert p[-1] == 0  # pass only when nothing else is left
    black = position(EYES, BLACK)
    p = RolloutPolicy.uniform().probabilities(black)
    assert p[g.flat(g.point(0, 1))] == 0 and p[g.flat(g.point(2, 1))] == 0  # own eyes
    assert p[g.flat(g.point(4, 0))] > 0


def test_weights_move_probability_towards_their_features():
    state = position(ATARI, BLACK)
    capture = state.grid.flat(state.grid.point(3, 2))
    plain = RolloutPolicy.uniform().probabilities(state)
    keen = weighted(capture=3.0).probabilities(state)
    assert plain[capture] == pytest.approx(1 / np.count_nonzero(plain))
    assert keen[capture] > 0.5 and keen.argmax() == capture


def test_with_only_own_eyes_left_both_sides_pass_and_the_rollout_is_counted():
    for to_play in (BLACK, WHITE):
        state = position(ALL_EYES, to_play, komi=0.5)
        p = RolloutPolicy.uniform().probabilities(state)
        assert p[-1] == 1.0
        final = RolloutPolicy.uniform().play_out(state, np.random.default_rng(0))
        assert final.moves[-2:] == [(to_play, PASS), (opponent(to_play), PASS)]
        assert RolloutPolicy.uniform().rollout(state, np.random.default_rng(0)) == (1.0 if to_play == BLACK else -1.0)


def own_eye(board, point: int, color: int) -> bool:
    """An independent reading of the eye rule in rollout.py's docstring."""
    g = board.grid
    row, col = g.row_col(point)
    if board.colors[point] != EMPTY:
        return False
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        r, c = row + dr, col + dc
        if 0 <= r < g.height and 0 <= c < g.width and board.colors[g.point(r, c)] != color:
            return False
    diagonal = [(row + dr, col + dc) for dr in (-1, 1) for dc in (-1, 1)]
    on_board = [(r, c) for r, c in diagonal if 0 <= r < g.height and 0 <= c < g.width]
    enemies = sum(board.colors[g.point(r, c)] == opponent(color) for r, c in on_board)
    return enemies <= (0 if len(on_board) < 4 else 1)


@pytest.mark.parametrize("size, rules", [(5, "chinese"), (7, "tromp-taylor"), (9, "japanese")])
def test_rollouts_end_in_a_legal_fully_scored_position_and_never_fill_own_eyes(size, rules, random_states):
    policy = weighted(capture=2.0, escape=1.0, self_atari=-1.0)
    rng = np.random.default_rng(size)
    starts = [s for s in random_states(size, 6, seed=size, max_fill=0.5, rules=Rules.named(rules)) if not s.is_over]
    assert len(starts) >= 3
    for start in starts:
        final = policy.play_out(start, rng)
        assert final.is_over
        replay = start.copy()
        for color, point in final.moves[len(start.moves):]:
            if point != PASS:
                assert not own_eye(replay.board, point, color)
            replay.play(point, color)  # checked: raises on a move the rules forbid, superko included
        assert replay.board == final.board
        for color in (BLACK, WHITE):  # nothing sensible is left for either side, but what superko forbids
            state = final.copy()
            state.set_to_play(color)
            for flat in game_features(state).flat:
                assert state.illegal_reason(state.grid.points[flat]) == "superko"
        z = policy.rollout(start, np.random.default_rng(1))
        assert z in (-1.0, 0.0, 1.0)
        assert result_for(start.to_play, final.area_score()) in (-1.0, 0.0, 1.0)


def test_a_rollout_stops_at_max_moves():
    final = RolloutPolicy.uniform().play_out(GameState(9), np.random.default_rng(0), max_moves=10)
    assert len(final.moves) == 10 and not final.is_over


def test_result_is_from_the_view_of_the_given_colour():
    assert result_for(BLACK, 2.5) == 1.0 and result_for(WHITE, 2.5) == -1.0 and result_for(WHITE, 0.0) == 0.0


def test_weights_files_round_trip_and_bad_ones_are_refused_with_the_file_named(tmp_path):
    rng = np.random.default_rng(0)
    vocabulary = np.array([3, 17, 99])
    policy = RolloutPolicy(vocabulary, rng.normal(size=feature_count(3)))
    path = tmp_path / "r.npz"
    policy.save(path, board_size=9, val_accuracy=0.4)
    loaded = RolloutPolicy.load(path)
    assert np.array_equal(loaded.vocabulary, vocabulary)
    assert np.allclose(loaded.weights, policy.weights, atol=1e-6)
    assert loaded.info == {"board_size": 9, "val_accuracy": pytest.approx(0.4)}
    state = position(ATARI, BLACK)
    assert np.allclose(loaded.probabilities(state), policy.probabilities(state), atol=1e-5)

    with pytest.raises(RolloutWeightsError, match=f"{tmp_path / 'missing.npz'}: no such file"):
        RolloutPolicy.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(RolloutWeightsError, match="junk.npz: not a readable .npz"):
        RolloutPolicy.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "short.npz", format=1, vocabulary=vocabulary, weights=np.zeros(5))
    with pytest.raises(RolloutWeightsError, match="short.npz: expected .* weights"):
        RolloutPolicy.load(tmp_path / "short.npz")
    np.savez(tmp_path / "old.npz", format=0, vocabulary=vocabulary, weights=np.zeros(5))
    with pytest.raises(RolloutWeightsError, match="old.npz: format 0"):
        RolloutPolicy.load(tmp_path / "old.npz")
    np.savez(tmp_path / "partial.npz", format=1)
    with pytest.raises(RolloutWeightsError, match="partial.npz: missing vocabulary, weights"):
        RolloutPolicy.load(tmp_path / "partial.npz")


def test_candidates_are_legal_and_only_own_eyes_are_left_out(random_states):
    for state in random_states(7, 12, seed=3, max_fill=0.9):
        features = game_features(state)
        legal = state.board.legal_mask(state.to_play)
        candidates = np.zeros(state.grid.area, dtype=bool)
        candidates[features.flat] = True
        assert not np.any(candidates & ~legal)
        for flat in np.flatnonzero(legal & ~candidates):
            assert own_eye(state.board, state.grid.points[flat], state.to_play)


def test_shipped_rollout_policies_load_and_prefer_the_capture():
    for size in (9, 19):
        policy = RolloutPolicy.load(WEIGHTS / f"rollout-{size}x{size}.npz")
        assert policy.info["board_size"] == size
        state = position(ATARI, BLACK)
        assert policy.probabilities(state).argmax() == grid(5).flat(grid(5).point(3, 2))


@pytest.mark.skipif(COMPILED is None, reason="the compiled rollout candidates are not built")
@pytest.mark.parametrize("size, policy_file", [(5, None), ((7, 5), None), (9, "rollout-9x9.npz"),
                                               (13, "rollout-19x19.npz"), (19, "rollout-19x19.npz")])
def test_compiled_candidates_are_the_references_along_rollouts(size, policy_file, random_states):
    """Every position of rollouts from random starts (ataris, captures, ko, filled boards): the same candidates and
    feature indices, value for value, for both colours."""
    policy = RolloutPolicy.load(WEIGHTS / policy_file) if policy_file else weighted(capture=2.0, self_atari=-1.0)
    rng = np.random.default_rng(7)
    compared = 0
    for start in random_states(size, 4, seed=11, max_fill=0.6):
        final = policy.play_out(start, rng)
        replay = start.copy()
        for _, point in final.moves[len(start.moves):] + [(None, PASS)]:
            last, previous = rollout._last_two(replay)
            for color in (BLACK, WHITE):
                expected = PYTHON.candidates(replay.board, color, last, previous, policy.vocabulary, policy.offsets)
                got = COMPILED.candidates(replay.board, color, last, previous, policy.vocabulary, policy.offsets)
                assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
                compared += len(expected[0])
            if point == PASS and replay.is_over:
                break
            replay.play_unchecked(point)
    assert compared > 200


@pytest.mark.skipif(COMPILED is None, reason="the compiled rollout candidates are not built")
def test_compiled_candidates_refuse_bad_arguments():
    policy, board = RolloutPolicy.uniform(), GameState(5).board
    flat, indices = np.empty(25, np.int64), np.empty((25, len(GROUPS)), np.int64)
    twin = rollout.native.load("_rollout_core")
    with pytest.raises(ValueError, match="color"):
        twin.candidates(board, EMPTY, PASS, PASS, policy.vocabulary, policy.offsets, flat, indices)
    with pytest.raises(ValueError, match="off the board"):
        twin.candidates(board, BLACK, 10_000, PASS, policy.vocabulary, policy.offsets, flat, indices)
    with pytest.raises(TypeError, match="indices"):
        twin.candidates(board, BLACK, PASS, PASS, policy.vocabulary, policy.offsets, flat, indices[:3])
    with pytest.raises(TypeError, match="vocabulary"):
        twin.candidates(board, BLACK, PASS, PASS, policy.vocabulary.astype(np.float64), policy.offsets, flat,
                        indices)
