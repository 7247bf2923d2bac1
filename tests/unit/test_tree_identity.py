"""Trees are identical at equal visits across reshapings of the search code: fingerprints of trees grown from fixed
seeds, recorded once and held here.

Terms:
- fingerprint: a SHA-256 over every expanded node in depth-first order (children by edge): its tried moves, their
  visits, and their utility sums rounded to 1e-9. Visit counts change with any change to selection, backup, noise,
  move choice, batching or tree reuse, so an equal fingerprint means an equal search.
- evaluator: a deterministic stand-in network (no onnxruntime: its kernels may round differently on another CPU),
  whose policy, value and lead depend on the stones, so that the searches have something to tell apart.

A change that is meant to change the search (a new PUCT term, another default) updates the fingerprints in its own
commit and says why; a reshaping must leave them as they are. The compiled twins and GTP_ENGINE_PURE_PYTHON=1 give
the same fingerprints.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.evaluator import EvaluationBatch
from gtp_engine.game import GameState
from gtp_engine.player import Player, PlayerConfig
from gtp_engine.search import ChoiceConfig, NoiseConfig, SearchConfig, Searcher, StopCondition


class StoneEvaluator:
    """Policy weights from each point's coordinates and its neighbouring stones, value and lead from the area score
    against the komi: the same numbers on every machine (small integers and float32 arithmetic only)."""

    def evaluate(self, states):
        rows = []
        for state in states:
            g = state.grid
            colors = np.frombuffer(state.board.colors, dtype=np.uint8)[g.point_of].astype(np.int64)
            flat = np.arange(g.area)
            weights = 1 + (flat * 7 + len(state.moves) * 3 + colors.sum()) % 11
            policy = np.append(weights, 2).astype(np.float32) * state.legal_mask()
            policy /= policy.sum()
            lead = state.area_score() * (1.0 if state.to_play == BLACK else -1.0)
            value = math.tanh(lead / 10.0)
            ownership = state.area_ownership().astype(np.float32)
            rows.append((policy, value, lead, ownership))
        policy, value, lead, ownership = zip(*rows)
        return EvaluationBatch(np.stack(policy).astype(np.float32), np.array(value, np.float32),
                               np.array(lead, np.float32), np.stack(ownership).astype(np.float32))


def fingerprint(tree) -> str:
    digest = hashlib.sha256()
    stack = [tree.root]
    while stack:
        node = stack.pop()
        if node.moves is None:
            continue
        k = node.tried
        digest.update(repr((node.moves[:k], node.N[:k].astype(int).tolist(),
                            [round(float(w), 9) for w in node.W[:k]])).encode())
        stack.extend(node.children[edge] for edge in sorted(node.children, reverse=True))
    return digest.hexdigest()[:16]


def opening(size: int = 9) -> GameState:
    game = GameState(size, size, komi=7.0)
    for color, vertex in [(BLACK, (2, 2)), (WHITE, (6, 6)), (BLACK, (2, 6)), (WHITE, (6, 2))]:
        game.play(game.grid.point(*vertex), color)
    return game


def config(**changes) -> SearchConfig:
    return SearchConfig(seed=5, evaluation_threads=0, **changes)


def test_a_search_grows_the_recorded_tree():
    searcher = Searcher(StoneEvaluator(), config())
    result = searcher.search(opening(), StopCondition(visits=400))
    assert (fingerprint(searcher.tree), result.choice.point, result.snapshot.visits) == \
        ("64ee06765d91eb52", 28, 400)


def test_batches_in_flight_with_evaluation_threads_grow_the_recorded_tree():
    searcher = Searcher(StoneEvaluator(), SearchConfig(seed=5, evaluation_threads=1, batch_size=4,
                                                      batches_in_flight=3))
    searcher.search(opening(), StopCondition(visits=600))
    assert fingerprint(searcher.tree) == "5eed78c8964fdb93"


def test_a_reused_tree_grows_as_recorded():
    searcher = Searcher(StoneEvaluator(), config())
    game = opening()
    first = searcher.search(game, StopCondition(visits=300))
    game.play(first.choice.point)
    game.play(first.choice.pv[1] if len(first.choice.pv) > 1 else PASS)
    searcher.search(game, StopCondition(visits=300))
    assert (fingerprint(searcher.tree), searcher.tree.root.visits) == ("2f5e19297bd3f923", 252)


def test_noise_and_temperature_draw_as_recorded():
    searcher = Searcher(StoneEvaluator(), config(
        noise=NoiseConfig(fraction=0.25, root_policy_temperature=1.3),
        choice=ChoiceConfig(temperature=1.0, temperature_moves=30)))
    points = [searcher.search(opening(), StopCondition(visits=200)).choice.point for _ in range(3)]
    assert (fingerprint(searcher.tree), points) == ("86efcb7ffb960c93", [52, 40, 62])


@pytest.mark.parametrize("visits, expected", [(100, ("e31b169d40958cf8", 12)), (300, ("c4d6e70a757fcec3", 28))])
def test_a_genmove_grows_the_recorded_tree(visits, expected):
    player = Player(StoneEvaluator(), PlayerConfig(search=config()))
    choice = player.genmove(opening(), BLACK, StopCondition(visits=visits))
    assert (fingerprint(player.searcher.tree), choice.point) == expected


def test_rounds_over_several_trees_grow_the_recorded_trees():
    """Self-play and gating grow many trees at once (start_round); the trees that share an evaluator go to it in
    one call."""
    from gtp_engine.mcts import Tree, TreeConfig
    from gtp_engine.search.rounds import start_round

    evaluator = StoneEvaluator()
    games = [opening(), opening(), opening()]
    games[1].play(games[1].grid.point(4, 4))
    games[2].play(games[2].grid.point(3, 5))
    games[2].play(games[2].grid.point(5, 3))
    trees = [Tree(evaluator, game, TreeConfig()) for game in games]
    for _ in range(25):
        start_round(trees, [8, 4, 6]).finish()
    assert [fingerprint(tree) for tree in trees] == ["9f3ed301cf364fd7", "891e6ce221fa0195", "4d89103a5ea60c1b"]
