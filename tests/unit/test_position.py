"""Compiled search positions (position.py, _rules_core.Position) against the GameState they stand for.

Random games are played from a root GameState twice in lockstep: on a GameState (the reference) and on a search
position made from the root. After every move both must give the same reason for every point, the same candidate
moves, the same network inputs under every symmetry and the same position key; the position's GameState (game_state)
must be the reference's. Small boards and every rule set make captures, kos, suicides and superko refusals frequent;
the test checks that each happened. Without the compiled twins the module skips.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from gtp_engine import features, position
from gtp_engine.board import BLACK, EMPTY, WHITE
from gtp_engine.coords import PASS
from gtp_engine.evaluator import CachedEvaluator, accepts_positions
from gtp_engine.game import RULE_SETS, GameState

SEARCH_POSITIONS = position.IMPLEMENTATIONS.compiled
pytestmark = pytest.mark.skipif(SEARCH_POSITIONS is None, reason="the compiled twins are not built")


def random_root(size: int, rules, rng: random.Random, moves: int, handicap: int = 0) -> GameState:
    state = GameState(size, komi=6.5, rules=rules)
    if handicap:
        state.place_handicap([state.grid.points[i] for i in rng.sample(range(state.grid.area), handicap)])
    for _ in range(moves):
        legal = [state.grid.points[flat] for flat, ok in enumerate(state.legal_mask()[:-1].tolist()) if ok]
        state.play(rng.choice(legal) if legal and rng.random() > 0.05 else PASS)
    return state


def reasons(state, kind, points) -> list:
    return [kind.illegal_reason(state, point) for point in points]


def inputs(states: list) -> list:
    kinds = len(features.symmetry.symmetries_for(states[0].grid.width, states[0].grid.height))
    out = []
    for sym in range(kinds):
        spatial, global_ = features.encode(states, [sym] * len(states))
        out.append((spatial.tobytes(), global_.tobytes()))
    return out


@pytest.mark.parametrize("rules_name", sorted(RULE_SETS))
def test_positions_play_judge_and_encode_as_game_states_do(rules_name):
    rules = RULE_SETS[rules_name]
    rng = random.Random(rules_name)
    seen = {"capture": 0, "ko": 0, "superko": 0, "suicide": 0, "pass": 0}
    for game in range(16):
        size = rng.choice([4, 4, 5, 7])
        root = random_root(size, rules, rng, rng.randrange(0, 60), handicap=2 if game % 4 == 3 else 0)
        kind = SEARCH_POSITIONS
        reference, leaf = root.copy(), kind.root(root)
        assert features.position_key(leaf) == features.position_key(reference)
        points = list(root.grid.points) + [PASS]
        line = []
        for _ in range(120):
            expected = reasons(reference, position.GAME_STATES, points)
            assert reasons(leaf, kind, points) == expected
            for reason in expected:
                if reason in seen:
                    seen[reason] += 1
            legal = [p for p, r in zip(points[:-1], expected) if r is None]
            point = rng.choice(legal) if legal and rng.random() > 0.03 else PASS
            seen["pass"] += point == PASS
            captures = sum(reference.board.captures)
            position.GAME_STATES.play_line(reference, [point])
            kind.play_line(leaf, [point])
            seen["capture"] += sum(reference.board.captures) > captures
            line.append(point)
            assert (leaf.to_play, leaf.consecutive_passes, leaf.hash, leaf.move_number, leaf.captures) == (
                reference.to_play, reference.consecutive_passes, reference.board.hash, reference.move_number,
                reference.board.captures)
            assert leaf.line == tuple(line)
            assert features.position_key(leaf) == features.position_key(reference)
            if reference.is_over:
                break
        copy = kind.copy(leaf)
        assert features.position_key(copy) == features.position_key(leaf) and copy.line == leaf.line
        g = root.grid
        point_of_flat = np.append(g.point_of, PASS)
        mask, expected_mask = (np.zeros((2, g.area + 1), bool) for _ in range(2))
        kind.candidates([leaf, copy], point_of_flat, mask)
        expected_mask[:] = [reference.board.colors[p] == EMPTY for p in g.point_of] + [True]
        assert (mask == expected_mask).all()
        assert inputs([leaf, copy]) == inputs([reference, reference])
        again = kind.game_state(leaf)
        assert again.moves == reference.moves and bytes(again.board.colors) == bytes(reference.board.colors)
        assert again.board.hash == reference.board.hash and again.area_score() == reference.area_score()
    assert seen["capture"] and seen["pass"] and seen["ko"]
    if rules.ko != "simple":
        assert seen["superko"]
    if not rules.suicide_allowed:
        assert seen["suicide"]


def test_a_copy_plays_on_without_changing_the_original():
    root = GameState(5)
    kind = SEARCH_POSITIONS
    first = kind.root(root)
    kind.play_line(first, [root.grid.point(1, 1)])
    second = kind.copy(first)
    kind.play_line(second, [root.grid.point(2, 2), PASS])
    assert first.line == (root.grid.point(1, 1),) and first.to_play == WHITE
    assert second.line == (root.grid.point(1, 1), root.grid.point(2, 2), PASS) and second.to_play == WHITE
    assert root.move_number == 0 and root.to_play == BLACK


def test_bad_moves_are_errors_as_on_a_game_state():
    root = GameState(5)
    leaf = SEARCH_POSITIONS.root(root)
    point = root.grid.point(1, 1)
    SEARCH_POSITIONS.play_line(leaf, [point])
    with pytest.raises(ValueError, match="occupied"):
        SEARCH_POSITIONS.play_line(leaf, [point])
    with pytest.raises(ValueError, match="not on a 5x5 board"):
        SEARCH_POSITIONS.illegal_reason(leaf, 0)
    with pytest.raises(TypeError, match="search position"):
        SEARCH_POSITIONS.copy(root)


def test_only_accepting_evaluators_get_compiled_positions():
    class Plain:
        def evaluate(self, states):
            raise AssertionError

    class Accepting(Plain):
        accepts_positions = True

    assert position.kind_for(Plain()) is position.GAME_STATES
    assert position.kind_for(Accepting()) is SEARCH_POSITIONS
    # A cache in front passes on its inner evaluator's answer, both ways.
    assert position.kind_for(CachedEvaluator(Plain())) is position.GAME_STATES
    assert position.kind_for(CachedEvaluator(Accepting())) is SEARCH_POSITIONS
    assert accepts_positions(Accepting()) and not accepts_positions(Plain())


def test_superko_reads_the_root_history_and_the_line():
    # Under Tromp-Taylor Black's two-stone suicide at the corner takes A2 off again: the board White's B1 left, a
    # repetition of the root's own history at the root, and of the line's after the line played A2.
    start = GameState(5, rules=RULE_SETS["tromp-taylor"])
    g = start.grid
    a1, a2, a3, b1, b2 = g.point(0, 0), g.point(1, 0), g.point(2, 0), g.point(0, 1), g.point(1, 1)
    for point in (g.point(2, 2), b2, PASS, a3, PASS, b1):
        start.play(point)
    root = start.copy()
    for point in (a2, PASS):
        root.play(point)
    assert root.to_play == BLACK and root.illegal_reason(a1) == "superko"
    assert SEARCH_POSITIONS.illegal_reason(SEARCH_POSITIONS.root(root), a1) == "superko"
    leaf = SEARCH_POSITIONS.root(start)
    assert SEARCH_POSITIONS.illegal_reason(leaf, a1) is None  # A2 still empty: no suicide
    SEARCH_POSITIONS.play_line(leaf, [a2, PASS])
    assert SEARCH_POSITIONS.illegal_reason(leaf, a1) == "superko"


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny.onnx"


class GameStatesOnly:
    """The same evaluator without accepts_positions: its trees play on GameStates (the reference)."""

    def __init__(self, inner):
        self.inner = inner

    def evaluate(self, states):
        return self.inner.evaluate(states)


def tree_signature(node) -> list:
    """Every node's moves, priors, statistics and evaluation, depth first; a terminal node's exact score."""
    if node.terminal:
        return [("terminal", node.net_v, node.net_s, node.visits, node.ownership.tobytes())]
    if not node.is_expanded:
        return []
    rows = [(node.moves, node.prior.tobytes(), node.stats[:, :node.tried].tobytes(), node.visits, node.net_u)]
    for edge in sorted(node.children):
        rows += tree_signature(node.children[edge])
    return rows


@pytest.mark.parametrize("rules_name,size,moves,symmetry_mode", [
    ("chinese", 7, 30, "random"), ("japanese", 7, 26, "random"), ("tromp-taylor", 5, 18, "average"),
    ("aga", 5, 20, "none")])
def test_a_search_on_positions_grows_the_tree_it_grows_on_game_states(rules_name, size, moves, symmetry_mode):
    from gtp_engine.evaluator import CachedEvaluator
    from gtp_engine.mcts import MoveClause, MoveFilter
    from gtp_engine.onnx_evaluator import OnnxEvaluator
    from gtp_engine.search import SearchConfig, Searcher, StopCondition, StoppingPolicy

    rng = random.Random(rules_name)
    root = random_root(size, RULE_SETS[rules_name], rng, moves, handicap=2 if rules_name == "aga" else 0)
    root.play(PASS)  # a pass back ends the game: terminal nodes in every tree
    avoid = MoveFilter((MoveClause(root.to_play, frozenset(root.grid.points[:size]), 3, allow=False),))
    results = []
    for wrap in (lambda e: e, GameStatesOnly):
        network = OnnxEvaluator(FIXTURE, device="cpu", threads=1, symmetry_mode=symmetry_mode, seed=5)
        evaluator = wrap(CachedEvaluator(network, 1000))
        searcher = Searcher(evaluator, SearchConfig(stop=StoppingPolicy(early_stop=False), batches_in_flight=2,
                                                    evaluation_threads=0, seed=3))
        result = searcher.search(root, StopCondition(playouts=600), move_filter=avoid)
        tree = searcher.tree
        assert tree._kind is (position.GAME_STATES if wrap is GameStatesOnly else SEARCH_POSITIONS)
        results.append((result.choice.point, tree_signature(tree.root)))
    assert results[0] == results[1]
    assert any(row[0] == "terminal" for row in results[0][1])
