"""Subtree value bias correction: the buckets' keys, the observed bias they learn, and a tree that uses them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from search_support import ScriptedEvaluator

from gtp_engine.board import BLACK, EMPTY, WHITE
from gtp_engine.coords import PASS, from_gtp, grid
from gtp_engine.game import GameState
from gtp_engine.mcts import Tree, TreeConfig
from gtp_engine.subtree_bias import WEIGHT_EXPONENT, SubtreeBias, bucket_key


def played(*vertices: str) -> GameState:
    state = GameState(9, komi=7)
    for vertex in vertices:
        state.play(from_gtp(grid(9, 9), vertex))
    return state


def test_a_bucket_is_the_mover_its_point_the_move_before_and_the_pattern_around_it():
    g = grid(9, 9)
    mover, point, before, pattern, ko = bucket_key(played("E5", "E6"))
    assert (mover, point, before, ko) == (WHITE, from_gtp(g, "E6"), from_gtp(g, "E5"), PASS)
    assert len(pattern) == 25
    assert pattern[12] == WHITE  # the move itself, at the centre
    assert pattern[17] == BLACK  # E5, a row below it (rows run from the top)
    assert pattern.count(EMPTY) == 23


def test_the_pattern_marks_the_edge_and_stones_in_atari():
    _, _, _, corner, _ = bucket_key(played("A1"))
    assert corner.count(3) == 25 - 9  # only a 3x3 of the 5x5 around the corner lies on the board
    # White's A1 has a single liberty (A2) once Black's B1 stands beside it; Black's C3 is the last move
    _, _, _, pattern, _ = bucket_key(played("B1", "A1", "C3"))
    assert pattern[20] == WHITE + 4  # A1, two rows below and two columns left of C3: in atari
    assert pattern[21] == BLACK  # B1, with liberties to spare


def test_no_bucket_before_the_first_move_and_no_pattern_after_a_pass():
    assert bucket_key(GameState(9)) is None
    mover, point, before, pattern, _ = bucket_key(played("E5", "pass"))
    assert (mover, point, pattern) == (WHITE, PASS, ())


def node(net_u: float, children: dict[int, tuple[float, float, int]]) -> SimpleNamespace:
    """A node with edges: edge -> (N, W from its view, the child's visits)."""
    stats = np.zeros((6, max(children, default=0) + 1))
    kids = {}
    for edge, (n, w, visits) in children.items():
        stats[0, edge], stats[1, edge] = n, w
        kids[edge] = SimpleNamespace(visits=visits)
    return SimpleNamespace(net_u=net_u, stats=stats, children=kids, visits=1 + sum(v for *_, v in children.values()))


def test_a_bucket_learns_the_weighted_error_of_its_nodes_and_corrects_new_leaves():
    bias = SubtreeBias(0.5)
    state = played("E5", "E6")
    first = node(0.5, {})
    assert bias.correct(first, state) == 0.0  # nothing learnt yet
    # two children visits averaging -0.1 from its view: the network said 0.5, an error of 0.6
    first.stats, first.children = node(0.5, {0: (2.0, -0.2, 2)}).stats, node(0.5, {0: (2.0, -0.2, 2)}).children
    bias.update([[object(), 0, first, 0]])
    assert bias.correct(node(0.0, {}), played("E5", "E6")) == pytest.approx(-0.5 * 0.6)
    assert bias.correct(node(0.0, {}), played("E4", "E6")) == 0.0  # another move before: another bucket


def test_virtual_loss_in_flight_does_not_count_as_an_error():
    bias = SubtreeBias(1.0)
    tracked = node(0.5, {})
    bias.correct(tracked, played("E5", "E6"))
    # one selection in flight through edge 0: N one more and W one less than its two visits brought
    pending = node(0.5, {0: (3.0, -1.2, 2)})
    tracked.stats, tracked.children = pending.stats, pending.children
    bias.update([[object(), 0, tracked, 0]])
    assert bias.correct(node(0.0, {}), played("E5", "E6")) == pytest.approx(-0.6)


def test_a_node_updated_again_replaces_its_contribution():
    bias = SubtreeBias(1.0)
    a, b = node(0.5, {}), node(0.0, {})
    bias.correct(a, played("E5", "E6"))
    bias.correct(b, played("E5", "E6"))
    for stats in ({0: (1.0, 0.1, 1)}, {0: (3.0, -0.3, 3)}):  # a's error 0.4, then 0.6 with more visits
        grown = node(0.5, stats)
        a.stats, a.children = grown.stats, grown.children
        bias.update([[object(), 0, a, 0]])
    grown = node(0.0, {0: (1.0, 0.2, 1)})  # b's error -0.2
    b.stats, b.children = grown.stats, grown.children
    bias.update([[object(), 0, b, 0]])
    weight_a, weight_b = 3 ** WEIGHT_EXPONENT, 1.0
    expected = (0.6 * weight_a - 0.2 * weight_b) / (weight_a + weight_b)
    assert bias.correct(node(0.0, {}), played("E5", "E6")) == pytest.approx(-expected)


def test_a_tree_without_the_factor_grows_as_before_and_with_it_keeps_its_bookkeeping():
    state = GameState(9, komi=7)
    def value(position: GameState) -> float:  # a network that disagrees with itself from node to node
        return (position.board.hash % 1000) / 500 - 1.0

    plain, off, on = (Tree(ScriptedEvaluator(value=value), state.copy(), TreeConfig() if factor is None else TreeConfig(subtree_bias=factor))
                      for factor in (None, 0.0, 0.35))
    for tree in (plain, off, on):
        while tree.root.visits < 300:
            tree.run_batch(8)
    assert np.array_equal(plain.root.stats, off.root.stats)
    k = on.root.tried
    assert on.root.visits == 1 + on.root.N[:k].sum()  # no virtual loss left, every backup counted
    assert not np.array_equal(plain.root.stats[1], on.root.stats[1])  # the corrections moved the utilities
