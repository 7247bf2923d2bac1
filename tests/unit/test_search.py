"""The searcher: finding a winning capture, stop conditions, tree reuse, LCB choice, snapshots, background search."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from search_support import ScriptedEvaluator, check_tree, position

from gtp_engine.board import BLACK
from gtp_engine.coords import PASS, grid
from gtp_engine.evaluator import UniformEvaluator
from gtp_engine.game import GameState
from gtp_engine.search import BackgroundSearch, SearchConfig, Searcher, StopCondition, choose_edge

# Black to move: the white stone is in atari; if Black does not capture it now, it runs away.
ATARI = """
    . . . . .
    . . X . .
    . X O X .
    . . . . .
    . . . . .
"""
CAPTURE = grid(5).point(3, 2)

# Black to move, komi 5.5: capturing at the bottom centre wins (every White move is then suicide), anything else
# leaves Black short by area counting.
SMALL_ATARI = """
    . X .
    X O X
    . . .
"""


@pytest.mark.parametrize("batch_size", [1, 8])
def test_finds_the_capture_that_wins_within_a_few_visits(batch_size):
    # The scripted evaluator values prisoners and has a uniform policy: only search can find the capture.
    state = position(ATARI, BLACK)
    searcher = Searcher(ScriptedEvaluator(), SearchConfig(batch_size=batch_size, seed=0))
    result = searcher.search(state, StopCondition(visits=64))
    assert result.choice.point == CAPTURE
    assert result.choice.winrate > 0.9
    check_tree(searcher.tree)


def test_a_uniform_evaluator_finds_the_capture_from_exact_end_scores():
    # The network knows nothing; only the positions after two passes, scored by area counting, tell the moves apart.
    state = position(SMALL_ATARI, BLACK, komi=5.5)
    assert state.area_score() < 0
    searcher = Searcher(UniformEvaluator(), SearchConfig(seed=0))
    result = searcher.search(state, StopCondition(visits=200))
    assert result.choice.point == grid(3).point(2, 1)
    assert result.choice.winrate > 0.8
    check_tree(searcher.tree)


def test_stops_at_the_playouts_and_visits_asked_for():
    searcher = Searcher(UniformEvaluator(), SearchConfig(batch_size=8, early_stop=False))
    result = searcher.search(GameState(5), StopCondition(playouts=37))
    assert result.snapshot.playouts == 37 and searcher.tree.root.visits == 37
    result = searcher.search(GameState(5), StopCondition(visits=50))  # reuses the 37 visits
    assert searcher.tree.root.visits == 50 and result.snapshot.playouts == 13


def test_deadline_and_interrupt():
    searcher = Searcher(UniformEvaluator(), SearchConfig(early_stop=False))
    start = time.monotonic()
    searcher.search(GameState(9), StopCondition(deadline=start + 0.3))
    assert 0.3 <= time.monotonic() - start < 1.0
    interrupt = threading.Event()
    interrupt.set()
    result = Searcher(UniformEvaluator()).search(GameState(9), StopCondition(interrupt=interrupt))
    assert result.snapshot.visits == 1  # the root's own evaluation only
    assert result.choice.point != PASS or len(result.root_moves) == 1


@pytest.mark.parametrize("settled", [True, False])
def test_a_time_budget_runs_to_the_recommended_time_and_on_to_the_maximum_while_unsettled(settled, monkeypatch):
    searcher = Searcher(UniformEvaluator(), SearchConfig(early_stop=False))
    monkeypatch.setattr(searcher, "_settled", lambda tree: settled)
    start = time.monotonic()
    searcher.search(GameState(9), StopCondition.for_budget(start, 0.0, 0.2, 0.5))
    elapsed = time.monotonic() - start
    assert (0.2 <= elapsed < 0.45) if settled else (0.5 <= elapsed < 0.9)


def test_no_early_stop_before_the_minimum_time():
    favour = [grid(5).point(2, 2)]
    times = []
    for minimum in (0.0, 0.45):
        searcher = Searcher(ScriptedEvaluator(favour=favour), SearchConfig(seed=0))
        start = time.monotonic()
        searcher.search(GameState(5), StopCondition.for_budget(start, minimum, 0.6, 0.6))
        times.append(time.monotonic() - start)
    assert times[0] < 0.45 <= times[1]


def test_early_stop_once_the_best_move_cannot_be_caught():
    favour = [grid(5).point(2, 2)]
    stop = StopCondition(playouts=400)
    eager = Searcher(ScriptedEvaluator(favour=favour), SearchConfig(seed=0)).search(GameState(5), stop)
    full = Searcher(ScriptedEvaluator(favour=favour), SearchConfig(seed=0, early_stop=False)).search(GameState(5), stop)
    assert full.snapshot.playouts == 400
    assert eager.snapshot.playouts < 400
    assert eager.choice.point == full.choice.point == favour[0]
    best, second = sorted([m.visits for m in eager.snapshot.moves] + [0], reverse=True)[:2]
    assert best - second > 400 - eager.snapshot.playouts


def test_tree_reuse_keeps_the_chosen_childs_visits():
    searcher = Searcher(UniformEvaluator(), SearchConfig(seed=0))
    state = GameState(5)
    first = searcher.search(state, StopCondition(visits=300))
    move = first.choice
    child = searcher.tree.root.children[searcher.tree.root.moves.index(move.point)]
    reply_edge = int(child.N[: child.tried].argmax())
    reply = child.moves[reply_edge]
    grandchild_visits = child.children[reply_edge].visits
    state.play(move.point)
    second = searcher.search(state, StopCondition(playouts=8))
    assert second.snapshot.visits == move.visits + 8
    state.play(reply)  # two moves on, the subtree two levels down
    third = searcher.search(state, StopCondition(playouts=8))
    assert third.snapshot.visits == grandchild_visits + 8
    check_tree(searcher.tree)
    state.undo()  # not a descendant: a fresh tree
    assert searcher.search(state, StopCondition(playouts=8)).snapshot.visits == 8


def test_a_search_with_nothing_left_to_do_still_reports_the_roots_ownership():
    # Regression: the second search reuses the first one's visits, makes no playout, and used to report zero
    # ownership.
    evaluator = ScriptedEvaluator(ownership=lambda s: np.where(np.arange(s.grid.area) % 2, 0.5, -0.75))
    searcher = Searcher(evaluator, SearchConfig(seed=0))
    state = GameState(5)
    first = searcher.search(state, StopCondition(visits=60))
    again = searcher.search(state, StopCondition(visits=60))
    assert again.snapshot.playouts == 0 and again.snapshot.visits == first.snapshot.visits
    assert np.allclose(again.snapshot.ownership, first.snapshot.ownership)
    assert np.allclose(again.snapshot.ownership, np.where(np.arange(25) % 2, 0.5, -0.75))
    # Two moves on, the kept subtree has its own mean ownership, also without a new playout.
    root = searcher.tree.root
    edge = int(root.N.argmax())
    child = root.children[edge]
    reply = int(child.N[: child.tried].argmax())
    state.play(root.moves[edge])
    state.play(child.moves[reply])
    kept = child.children[reply].visits
    later = searcher.search(state, StopCondition(visits=kept))
    assert later.snapshot.playouts == 0 and later.snapshot.visits == kept
    assert np.allclose(later.snapshot.ownership, np.where(np.arange(25) % 2, 0.5, -0.75))


def test_no_reuse_across_a_komi_change_or_when_turned_off():
    searcher = Searcher(UniformEvaluator(), SearchConfig(seed=0))
    searcher.search(GameState(5), StopCondition(visits=100))
    assert searcher.search(GameState(5, komi=0.5), StopCondition(playouts=4)).snapshot.visits == 4
    searcher = Searcher(UniformEvaluator(), SearchConfig(seed=0, reuse_tree=False))
    searcher.search(GameState(5), StopCondition(visits=100))
    assert searcher.search(GameState(5), StopCondition(playouts=4)).snapshot.visits == 4


def lcb_tree(stats):
    """A searched 5x5 root whose first edges get hand-made statistics: (visits, mean, standard deviation)."""
    searcher = Searcher(UniformEvaluator())
    searcher.search(GameState(5), StopCondition(visits=1))
    tree = searcher.tree
    root = tree.root
    for edge, (n, mean, std) in enumerate(stats):
        root.N[edge], root.W[edge], root.W2[edge] = n, n * mean, n * (mean * mean + std * std)
    return tree


def test_lcb_prefers_a_surer_move_and_ignores_moves_with_too_few_visits():
    tree = lcb_tree([(100, 0.10, 0.2), (60, 0.30, 0.2), (5, 0.90, 0.05)])
    assert choose_edge(tree, SearchConfig()) == 1  # better bound than the most visited; edge 2 is under 10%
    assert choose_edge(tree, SearchConfig(lcb_min_visits_ratio=0.01)) == 2
    assert choose_edge(tree, SearchConfig(lcb=False)) == 0
    noisy = lcb_tree([(100, 0.10, 0.2), (60, 0.30, 2.0)])  # a high mean, but too uncertain
    assert choose_edge(noisy, SearchConfig()) == 0


def test_snapshot_lists_the_chosen_move_first_with_consistent_numbers():
    state = position(ATARI, BLACK)
    snapshots = []
    searcher = Searcher(ScriptedEvaluator(), SearchConfig(seed=0, batch_size=4))
    result = searcher.search(state, StopCondition(visits=200), snapshots.append, 0.0, ownership_in_snapshots=True)
    assert len(snapshots) > 10
    assert [s.visits for s in snapshots] == sorted(s.visits for s in snapshots)
    snap = result.snapshot
    assert snap.moves[0] == result.choice and snap.moves[0].order == 0
    assert [m.order for m in snap.moves] == list(range(len(snap.moves)))
    assert [m.visits for m in snap.moves[1:]] == sorted((m.visits for m in snap.moves[1:]), reverse=True)
    assert sum(m.visits for m in snap.moves) == snap.visits - 1
    for m in snap.moves:
        assert 0.0 <= m.lcb <= m.winrate <= 1.0 and m.pv[0] == m.point
    assert snap.moves[0].pv[:1] == [CAPTURE] and len(snap.moves[0].pv) > 1
    assert snap.ownership.shape == (25,) and snapshots[-1].ownership is not None
    # Black's stones stay Black's (area counting in the scripted evaluator); the capturing stone mostly too.
    g = state.grid
    assert snap.ownership[[g.flat(p) for p in state.board.stones(BLACK)]] == pytest.approx(1.0)
    assert snap.ownership[g.flat(CAPTURE)] > 0.5


def test_dirichlet_noise_and_temperature_explore():
    config = SearchConfig(noise_fraction=0.25, temperature=1.0, temperature_moves=10)
    choices = {Searcher(UniformEvaluator(), SearchConfig(**{**config.__dict__, "seed": seed}))
               .search(GameState(5), StopCondition(visits=64)).choice.point for seed in range(12)}
    assert len(choices) > 3
    searcher = Searcher(UniformEvaluator(), SearchConfig(noise_fraction=0.25, seed=1))
    searcher.search(GameState(5), StopCondition(visits=8))
    prior = searcher.tree.root_prior
    assert prior.sum() == pytest.approx(1.0) and not np.allclose(prior, searcher.tree.root.prior)
    greedy = {Searcher(UniformEvaluator(), SearchConfig(seed=seed)).search(
        GameState(5), StopCondition(visits=64)).choice.point for seed in range(4)}
    assert len(greedy) == 1


def test_excluded_root_moves_are_neither_searched_nor_chosen():
    state = position(ATARI, BLACK)
    searcher = Searcher(ScriptedEvaluator(favour=[PASS, CAPTURE]), SearchConfig(seed=0))
    result = searcher.search(state, StopCondition(visits=100), exclude=(CAPTURE,))
    assert all(m.point != CAPTURE for m in result.snapshot.moves)
    assert result.choice.point != CAPTURE


def test_background_search_stops_promptly_and_leaves_a_consistent_tree():
    searcher = Searcher(UniformEvaluator(), SearchConfig(batch_size=8))
    snapshots = []
    background = BackgroundSearch(searcher, GameState(9), StopCondition(interrupt=threading.Event()),
                                  snapshots.append, 0.02)
    time.sleep(0.3)
    assert background.running
    start = time.monotonic()
    result = background.stop()
    assert time.monotonic() - start < 0.2
    assert not background.running and result is not None and background.error is None
    assert len(snapshots) >= 3
    check_tree(searcher.tree)
