"""The searcher: finding a winning capture, stop conditions, tree reuse, LCB choice, snapshots, background search."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from search_support import FakeClock, InterruptWatcher, ScriptedEvaluator, TimedEvaluator, check_tree, position

from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS, grid
from gtp_engine.evaluator import EvaluationBatch, UniformEvaluator
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveClause, MoveFilter, Tree
from gtp_engine.search import (
    BackgroundSearch,
    ChoiceConfig,
    NoiseConfig,
    ReportSchedule,
    ResignConfig,
    ResignCounter,
    SearchConfig,
    Searcher,
    StopCondition,
    StoppingPolicy,
    choose_edge,
    draw_edge,
    pick_edge,
    play_games,
)
from gtp_engine.search.rounds import start_round
from gtp_engine.search.threads import EvaluationThreads

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
    searcher = Searcher(UniformEvaluator(), SearchConfig(batch_size=8, stop=StoppingPolicy(early_stop=False)))
    result = searcher.search(GameState(5), StopCondition(playouts=37))
    assert result.snapshot.playouts == 37 and searcher.tree.root.visits == 37
    result = searcher.search(GameState(5), StopCondition(visits=50))  # reuses the 37 visits
    assert searcher.tree.root.visits == 50 and result.snapshot.playouts == 13


def timed_searcher(config: SearchConfig, inner=None, seconds=0.01) -> tuple[Searcher, FakeClock]:
    """A searcher on a fake clock whose every network call takes `seconds`."""
    clock = FakeClock()
    return Searcher(TimedEvaluator(inner or UniformEvaluator(), clock, seconds), config, clock=clock), clock


@pytest.mark.parametrize("in_flight", [1, 2, 3])
def test_deadline_and_interrupt(in_flight):
    searcher, clock = timed_searcher(SearchConfig(stop=StoppingPolicy(early_stop=False), batches_in_flight=in_flight))
    start = clock()
    result = searcher.search(GameState(9), StopCondition(deadline=start + 0.3))
    # Stopped before the deadline, by at most the batch that would have run past it.
    assert 0.3 - 0.01 - 1e-9 <= clock() - start <= 0.3 + 1e-9
    assert result.snapshot.elapsed == pytest.approx(clock() - start)
    interrupt = threading.Event()
    interrupt.set()
    result = Searcher(UniformEvaluator()).search(GameState(9), StopCondition(interrupt=interrupt))
    assert result.snapshot.visits == 1  # the root's own evaluation only
    assert result.choice.point != PASS or len(result.root_moves) == 1


@pytest.mark.parametrize("in_flight", [1, 2])
def test_a_deadline_leaves_room_for_the_last_batch(in_flight):
    # Batches take 0.07 s after a first quick one: the search stops when the next batch would end past the
    # deadline, never after it.
    durations = iter([0.001] + [0.07] * 1000)
    config = SearchConfig(stop=StoppingPolicy(early_stop=False), batches_in_flight=in_flight)
    searcher, clock = timed_searcher(config, seconds=lambda n: next(durations))
    start = clock()
    searcher.search(GameState(9), StopCondition(deadline=start + 1.0))
    assert 1.0 - 0.07 - 1e-9 <= clock() - start <= 1.0 + 1e-9
    # A slow batch is remembered for the next search, and forgotten by half each second on the clock, so that a
    # stall longer than a budget cannot stop every later search before its first batch.
    assert searcher.batch_seconds(clock()) == pytest.approx(0.07)
    durations = iter([0.6] + [0.01] * 1000)
    searcher.search(GameState(9), StopCondition(deadline=clock() + 1.0))  # a stall of 0.6 s
    assert searcher.batch_seconds(clock()) == pytest.approx(0.6, abs=0.05)
    clock.advance(2.0)  # the opponent's turn
    start = clock()
    result = searcher.search(GameState(9), StopCondition(deadline=start + 0.3))
    assert result.snapshot.playouts > 1 and 0.3 - 0.16 <= clock() - start <= 0.3 + 1e-9


@pytest.mark.parametrize("settled", [True, False])
def test_a_time_budget_runs_to_the_recommended_time_and_on_to_the_maximum_while_unsettled(settled, monkeypatch):
    searcher, clock = timed_searcher(SearchConfig(stop=StoppingPolicy(early_stop=False)))
    monkeypatch.setattr(searcher, "_settled", lambda tree, choice: settled)
    start = clock()
    searcher.search(GameState(9), StopCondition.for_budget(start, 0.0, 0.2, 0.5))
    end = 0.2 if settled else 0.5
    assert end - 0.01 - 1e-9 <= clock() - start <= end + 1e-9


def test_no_early_stop_before_the_minimum_time():
    favour = [grid(5).point(2, 2)]
    times = []
    for minimum in (0.0, 0.45):
        searcher, clock = timed_searcher(SearchConfig(seed=0), ScriptedEvaluator(favour=favour))
        start = clock()
        searcher.search(GameState(5), StopCondition.for_budget(start, minimum, 0.6, 0.6))
        times.append(clock() - start)
    assert times[0] < 0.45 - 1e-9 and 0.45 <= times[1] <= 0.6 + 1e-9


def test_early_stop_once_the_best_move_cannot_be_caught():
    favour = [grid(5).point(2, 2)]
    stop = StopCondition(playouts=400)
    eager = Searcher(ScriptedEvaluator(favour=favour), SearchConfig(seed=0)).search(GameState(5), stop)
    full = Searcher(ScriptedEvaluator(favour=favour), SearchConfig(seed=0, stop=StoppingPolicy(early_stop=False))).search(GameState(5), stop)
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
    assert choose_edge(tree, ChoiceConfig()) == 1  # better bound than the most visited; edge 2 is under 10%
    assert choose_edge(tree, ChoiceConfig(lcb_min_visits_ratio=0.01)) == 2
    assert choose_edge(tree, ChoiceConfig(lcb=False)) == 0
    noisy = lcb_tree([(100, 0.10, 0.2), (60, 0.30, 2.0)])  # a high mean, but too uncertain
    assert choose_edge(noisy, ChoiceConfig()) == 0


def test_snapshot_lists_the_chosen_move_first_with_consistent_numbers():
    state = position(ATARI, BLACK)
    snapshots = []
    searcher = Searcher(ScriptedEvaluator(), SearchConfig(seed=0, batch_size=4))
    result = searcher.search(state, StopCondition(visits=200), snapshots.append, ReportSchedule.periodic(0.0),
                             ownership_in_snapshots=True)
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


@pytest.mark.parametrize("in_flight", [1, 3])
def test_reports_follow_their_schedule_on_the_searchers_clock(in_flight):
    # Every network call takes 0.01 s on the fake clock; a report is made once a batch ends past its time and the
    # batches still in flight have ended (up to in_flight calls late).
    config = SearchConfig(batch_size=4, batches_in_flight=in_flight, stop=StoppingPolicy(early_stop=False))
    searcher, _ = timed_searcher(config)
    snapshots = []
    result = searcher.search(GameState(5), StopCondition(visits=300), snapshots.append,
                             ReportSchedule(first=0.05, every=0.1), ownership_in_snapshots=True)
    during, final = snapshots[:-1], snapshots[-1]
    assert all(s.during_search for s in during) and not final.during_search
    assert final.visits == result.snapshot.visits == 300 and not result.snapshot.during_search
    assert len(during) >= 3 and [s.visits for s in during] == sorted(s.visits for s in during)
    late = in_flight * 0.01 + 1e-9
    assert 0.05 - 1e-9 <= during[0].elapsed <= 0.05 + late
    for before, after in zip(during, during[1:]):
        assert 0.1 - 1e-9 <= after.elapsed - before.elapsed <= 0.1 + late
    assert all(s.ownership is not None for s in snapshots)


def test_a_first_report_alone_is_the_only_one_and_no_schedule_reports_only_at_the_end():
    searcher, _ = timed_searcher(SearchConfig(batch_size=4, stop=StoppingPolicy(early_stop=False)))
    once = []
    searcher.search(GameState(5), StopCondition(visits=200), once.append, ReportSchedule(first=0.0))
    assert [s.during_search for s in once] == [True, False] and once[0].visits < 200 and once[1].ownership is None
    searcher.reset()
    at_the_end = []
    searcher.search(GameState(5), StopCondition(visits=200), at_the_end.append)
    assert [s.during_search for s in at_the_end] == [False]


def test_stop_conditions_from_limits_count_seconds_from_the_start():
    interrupt = threading.Event()
    stop = StopCondition.for_limits(100.0, visits=5, playouts=3, seconds=2.5, interrupt=interrupt)
    assert stop == StopCondition(visits=5, playouts=3, deadline=102.5, interrupt=interrupt)
    assert StopCondition.for_limits(100.0) == StopCondition() and not StopCondition.for_limits(100.0).is_bounded


def test_moves_drawn_by_visits_follow_the_visits_and_are_never_a_pass():
    tree = lcb_tree([(30, 0.1, 0.2), (10, 0.1, 0.2)])
    pass_edge = tree.root.moves.index(PASS)
    tree.root.N[pass_edge] = 60  # the most visited move of all
    rng = np.random.default_rng(0)
    drawn = [draw_edge(tree, 1.0, rng) for _ in range(400)]
    assert pass_edge not in drawn and set(drawn) == {0, 1}
    assert 0.65 < drawn.count(0) / len(drawn) < 0.85  # 30 : 10
    cold = [draw_edge(tree, 0.25, rng) for _ in range(200)]  # (1/3) ** 4: edge 1 about once in 80
    assert cold.count(0) > 180
    # The temperature holds for temperature_moves moves; then the choice is choose_edge's.
    choice = ChoiceConfig(temperature=1.0, temperature_moves=10)
    assert {pick_edge(tree, choice, 10, rng) for _ in range(20)} == {choose_edge(tree, choice)}
    only_pass = lcb_tree([])
    only_pass.root.N[only_pass.root.moves.index(PASS)] = 5
    assert draw_edge(only_pass, 1.0, rng) is None
    assert pick_edge(only_pass, choice, 0, rng) == only_pass.root.moves.index(PASS)


def test_resignation_counts_searches_in_a_row_per_colour_from_its_first_move():
    counter = ResignCounter(ResignConfig(winrate=0.1, consecutive=2, after_moves=4))
    assert not counter.update(BLACK, 0.05, 3, 25)  # before move 4: not counted
    assert not counter.update(BLACK, 0.05, 4, 25)
    assert not counter.update(WHITE, 0.05, 5, 25)  # the other colour counts apart
    assert counter.update(BLACK, 0.05, 6, 25)
    assert not counter.update(BLACK, 0.5, 8, 25) and not counter.update(BLACK, 0.05, 10, 25)  # a good search resets
    never = ResignCounter(ResignConfig(winrate=0.0))
    assert not any(never.update(BLACK, 0.0, 100, 25) for _ in range(3))
    default = ResignCounter(ResignConfig())  # one search below 5%, from a quarter of the area on
    assert not default.update(BLACK, 0.01, 5, 25) and default.update(BLACK, 0.01, 6, 25)


def test_a_search_behind_by_a_quarter_of_the_board_late_in_the_game_resigns_below_five_times_the_threshold():
    """A value head that never gets sure of a loss (0.07-0.24 at 100-200 points behind on 19x19) still resigns."""
    area = 361
    counter = ResignCounter(ResignConfig(winrate=0.05, after_moves=0))
    assert counter.update(BLACK, 0.24, 200, area, lead=-0.25 * area - 1)
    assert not counter.update(BLACK, 0.10, 200, area, lead=-0.25 * area + 1)  # not that far behind
    assert not counter.update(BLACK, 0.26, 200, area, lead=-200.0)  # the winrate above 5 x 5%
    assert not counter.update(BLACK, 0.10, 200, area)  # no lead known: the winrate alone
    assert not counter.update(BLACK, 0.10, 179, area, lead=-200.0)  # before half the game: a handicap's lead
    assert not ResignCounter(ResignConfig(winrate=0.05, after_moves=0, hopeless_lead_share=0)).update(
        BLACK, 0.10, 200, area, lead=-200.0)
    assert not ResignCounter(ResignConfig(winrate=None)).update(BLACK, 0.10, 200, area, lead=-200.0)


def test_right_after_the_opponents_pass_a_tenth_of_the_board_behind_is_hopeless():
    """The opponent's pass leaves the count nearly final: a lost game resigns there rather than being played on
    while the opponent passes again and again (a 19x19 level played 40 moves so, 45 points behind at 0.12)."""
    area = 361
    counter = ResignCounter(ResignConfig(winrate=0.05, after_moves=0))
    assert not counter.update(BLACK, 0.12, 293, area, lead=-45.0)
    assert counter.update(BLACK, 0.12, 293, area, lead=-45.0, opponent_passed=True)
    assert not counter.update(BLACK, 0.12, 293, area, lead=-0.1 * area + 1, opponent_passed=True)
    assert not counter.update(BLACK, 0.26, 293, area, lead=-45.0, opponent_passed=True)  # above 5 x 5%
    assert not counter.update(BLACK, 0.12, 179, area, lead=-45.0, opponent_passed=True)  # before half the game
    assert not ResignCounter(ResignConfig(winrate=0.05, after_moves=0, hopeless_lead_share=0)).update(
        BLACK, 0.12, 293, area, lead=-45.0, opponent_passed=True)


class CountingEvaluator(UniformEvaluator):
    def __init__(self):
        self.sizes = []

    def evaluate(self, states):
        self.sizes.append(len(states))
        return super().evaluate(states)


def test_a_round_evaluates_the_leaves_of_many_trees_in_one_call_per_evaluator():
    first, second = CountingEvaluator(), CountingEvaluator()
    trees = [Tree(first, GameState(5)), Tree(second, GameState(5)), Tree(first, GameState(5))]
    assert start_round(trees, [4, 4, 4]).finish() == (3, 2)  # the unexpanded roots: one position each
    assert first.sizes == [2] and second.sizes == [1]
    evaluations, calls = start_round(trees, [4, 2, 3]).finish()
    assert calls == 2 and first.sizes[-1] + second.sizes[-1] == evaluations == 9
    assert [tree.root.visits for tree in trees] == [5, 3, 4]
    for tree in trees:
        check_tree(tree)


def test_a_failed_round_leaves_the_trees_it_did_not_finish_as_they_were():
    class Failing(UniformEvaluator):
        def evaluate(self, states):
            if len(states) > 1:
                raise RuntimeError("network gone")
            return super().evaluate(states)

    trees = [Tree(UniformEvaluator(), GameState(5)), Tree(Failing(), GameState(5))]
    start_round(trees, [1, 1]).finish()
    with pytest.raises(RuntimeError):
        start_round(trees, [4, 4]).finish()
    # The first evaluator's trees finished their batch; the failing one's are as before the round.
    assert trees[0].root.visits == 5 and trees[1].root.visits == 1 and trees[1].root.nsum == 0
    for tree in trees:
        check_tree(tree)


FAVOURED = [grid(5).point(2, 2), grid(5).point(1, 3)]


def tree_statistics(tree: Tree) -> list:
    rows, stack = [], [tree.root]
    while stack:
        node = stack.pop()
        rows.append((node.visits, node.N.tolist(), np.round(node.W, 9).tolist()))
        stack.extend(node.children[edge] for edge in sorted(node.children))
    return rows


def test_rounds_in_flight_grow_the_trees_that_rounds_one_at_a_time_grow():
    def trees(evaluator):
        return [Tree(evaluator, position(".....\n..X..\n.O...\n.....\n.....")) for _ in range(4)]

    plain = trees(ScriptedEvaluator(favour=FAVOURED))
    for _ in range(6):
        start_round(plain, [5, 3, 4, 6]).finish()
    threads = EvaluationThreads(1)
    try:
        scripted = ScriptedEvaluator(favour=FAVOURED)
        jittery = JitteryEvaluator(scripted, seed=1)
        lanes = [trees(jittery)[:2], trees(jittery)[:2]]
        flights = [None, None]
        for _ in range(6):  # two lanes alternate: one finishes while the other's round is in flight
            for lane, sizes in enumerate(([5, 3], [4, 6])):
                if flights[lane] is not None:
                    flights[lane].finish()
                flights[lane] = start_round(lanes[lane], sizes, threads, chunks=2)
        for flight in flights:
            flight.finish()
    finally:
        threads.close()
    assert [tree_statistics(tree) for tree in plain] == [tree_statistics(tree) for tree in lanes[0] + lanes[1]]
    assert scripted.calls > 2 * 6  # the lanes' rounds went out in more than one call each
    for tree in lanes[0] + lanes[1]:
        check_tree(tree)


class FailingForOneTree:
    """ScriptedEvaluator that fails, once armed, on any batch with a position of the tree whose game began with
    `point`: whichever thread computes which chunk, the same chunk fails."""

    def __init__(self, point):
        self.inner, self.point, self.armed = ScriptedEvaluator(), point, False

    def evaluate(self, states):
        if self.armed and any(s.moves[0][1] == self.point for s in states):
            raise RuntimeError("scripted failure")
        return self.inner.evaluate(states)


def test_a_failed_round_in_flight_leaves_every_tree_as_it_was():
    threads = EvaluationThreads(1)
    try:
        g = grid(5)
        roots = [GameState(5) for _ in range(3)]
        for root, (x, y) in zip(roots, [(0, 0), (2, 2), (4, 4)]):  # one distinct stone per tree
            root.play(g.point(x, y))
        evaluator = FailingForOneTree(g.point(2, 2))
        trees = [Tree(evaluator, root) for root in roots]
        start_round(trees, [1, 1, 1]).finish()
        evaluator.armed = True  # the round's second chunk: the second tree's
        flight = start_round(trees, [4, 4, 4], threads, chunks=3)
        with pytest.raises(RuntimeError, match="scripted failure"):
            flight.finish()
    finally:
        threads.close()
    # the tree before the failed chunk finished its batch; the others are as before the round
    assert [tree.root.visits for tree in trees] == [5, 1, 1]
    for tree in trees:
        check_tree(tree)


class ShortGame:
    """A RoundGame of `moves` searches of 6 visits each on 5x5."""

    def __init__(self, evaluator, number: int, moves: int = 3):
        self.number, self.moves_left = number, moves
        self.state = GameState(5)
        self.tree = Tree(evaluator, self.state.copy())

    def wants(self) -> int:
        return min(4, 6 - self.tree.root.visits)

    def advance(self) -> None:
        if self.tree.root.visits >= 6:
            self.state.play(self.tree.root.moves[choose_edge(self.tree, ChoiceConfig())])
            self.moves_left -= 1
            self.tree = Tree(self.tree.evaluator, self.state.copy())

    @property
    def over(self) -> bool:
        return self.moves_left == 0


@pytest.mark.parametrize("threads", [0, 1, 2])
def test_play_games_plays_every_game_to_its_end_with_at_most_parallel_in_progress(threads):
    evaluator = JitteryEvaluator(ScriptedEvaluator(), seed=threads)
    numbers, ended, in_progress = iter(range(11)), [], []

    def start(seats):
        games = [ShortGame(evaluator, n) for _, n in zip(range(seats), numbers)]
        in_progress.extend(game.number for game in games)
        assert len(in_progress) <= 4
        return games

    def after_round(done, evaluations, calls):
        assert calls >= 1 and evaluations >= 1
        for game in done:
            in_progress.remove(game.number)
            ended.append((game.number, [move for _, move in game.state.moves]))
        return False

    play_games(start, after_round, parallel=4, evaluation_threads=threads)
    assert sorted(number for number, _ in ended) == list(range(11)) and not in_progress
    assert all(len(moves) == 3 for _, moves in ended)
    # The games are the same whatever the lanes and threads: each one's searches are its own.
    alone = []
    for number in range(11):
        game = ShortGame(ScriptedEvaluator(), number)
        while not game.over:
            start_round([game.tree], [game.wants()]).finish()
            game.advance()
        alone.append((number, [move for _, move in game.state.moves]))
    assert sorted(ended) == alone


def test_play_games_stops_when_told():
    rounds = []

    def after_round(done, evaluations, calls):
        rounds.append(len(done))
        return len(rounds) == 3

    play_games(lambda seats: [ShortGame(UniformEvaluator(), 0, moves=100) for _ in range(seats)], after_round,
               parallel=4, evaluation_threads=1)
    assert rounds == [0, 0, 0]


def test_dirichlet_noise_and_temperature_explore():
    config = SearchConfig(noise=NoiseConfig(fraction=0.25), choice=ChoiceConfig(temperature=1.0, temperature_moves=10))
    choices = {Searcher(UniformEvaluator(), replace(config, seed=seed))
               .search(GameState(5), StopCondition(visits=64)).choice.point for seed in range(12)}
    assert len(choices) > 3
    searcher = Searcher(UniformEvaluator(), SearchConfig(noise=NoiseConfig(fraction=0.25), seed=1))
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


def avoid(color, points, depth):
    return MoveFilter((MoveClause(color, frozenset(points), depth, allow=False),))


def allow(color, points, depth):
    return MoveFilter((MoveClause(color, frozenset(points), depth, allow=True),))


def test_an_avoided_move_is_never_searched_at_the_root_however_good():
    state = position(ATARI, BLACK)
    searcher = Searcher(ScriptedEvaluator(favour=[CAPTURE]), SearchConfig(seed=0))
    result = searcher.search(state, StopCondition(visits=150), move_filter=avoid(BLACK, [CAPTURE, PASS], 1))
    assert CAPTURE not in searcher.tree.root.moves and PASS not in searcher.tree.root.moves
    assert all(m.point not in (CAPTURE, PASS) for m in result.snapshot.moves) and result.choice.point != CAPTURE
    assert len(result.root_moves) == len(state.legal_mask().nonzero()[0]) - 2
    check_tree(searcher.tree)
    # A clause for the other colour leaves Black's root moves alone.
    searcher = Searcher(ScriptedEvaluator(favour=[CAPTURE]), SearchConfig(seed=0))
    result = searcher.search(state, StopCondition(visits=100), move_filter=avoid(WHITE, [CAPTURE], 1))
    assert result.choice.point == CAPTURE


def test_allow_leaves_only_the_listed_moves_and_not_pass_unless_listed():
    g = grid(5)
    listed = [g.point(0, 0), g.point(4, 4), g.point(2, 2)]
    searcher = Searcher(UniformEvaluator(), SearchConfig(seed=0))
    result = searcher.search(GameState(5), StopCondition(visits=60), move_filter=allow(BLACK, listed, 1))
    assert sorted(searcher.tree.root.moves) == sorted(listed)
    assert {m.point for m in result.snapshot.moves} <= set(listed)
    assert sum(m.visits for m in result.snapshot.moves) == result.snapshot.visits - 1
    result = searcher.search(GameState(5), StopCondition(visits=60), move_filter=allow(BLACK, listed + [PASS], 1))
    assert sorted(searcher.tree.root.moves) == sorted(listed + [PASS])
    # Only occupied points allowed: the filter would leave no legal move, so it is ignored.
    state = position(ATARI, BLACK)
    result = Searcher(UniformEvaluator(), SearchConfig(seed=0)).search(
        state, StopCondition(visits=20), move_filter=allow(BLACK, [g.point(1, 2)], 1))
    assert len(result.root_moves) == int(state.legal_mask().sum())


def test_the_filter_holds_to_its_depth_and_colour_and_no_further():
    # The network wants the centre at every ply; Black may not take it in plies 1-3, White in plies 1-4.
    centre = grid(5).point(2, 2)
    limits = {BLACK: 3, WHITE: 4}
    move_filter = MoveFilter(tuple(MoveClause(c, frozenset([centre]), d, allow=False) for c, d in limits.items()))
    searcher = Searcher(ScriptedEvaluator(favour=[centre], value=lambda s: 0.0), SearchConfig(seed=0))
    searcher.search(GameState(5), StopCondition(visits=600), move_filter=move_filter)
    seen = set()

    def walk(node, ply, to_play):  # node's edges are moves of to_play at `ply`
        if not node.is_expanded:
            return
        has = centre in node.moves
        assert not (has and ply <= limits[to_play]), f"ply {ply}"
        seen.add((ply, has))
        for child in node.children.values():
            walk(child, ply + 1, 3 - to_play)

    walk(searcher.tree.root, 1, BLACK)
    assert (5, True) in seen  # past both limits the centre is a move again
    check_tree(searcher.tree)


def test_a_tree_is_kept_only_under_the_same_filter():
    g = grid(5)
    corner = avoid(BLACK, [g.point(0, 0)], 2)
    searcher = Searcher(UniformEvaluator(), SearchConfig(seed=0))
    searcher.search(GameState(5), StopCondition(visits=50))
    assert searcher.search(GameState(5), StopCondition(playouts=5), move_filter=corner).snapshot.visits == 5
    assert searcher.search(GameState(5), StopCondition(playouts=5), move_filter=corner).snapshot.visits == 10
    assert searcher.search(GameState(5), StopCondition(playouts=5)).snapshot.visits == 5
    # One move on, the filter's plies count from another root: a fresh tree.
    searcher.search(GameState(5), StopCondition(visits=50), move_filter=corner)
    state = GameState(5)
    state.play(searcher.tree.root.moves[int(searcher.tree.root.N.argmax())])
    assert searcher.search(state, StopCondition(playouts=5), move_filter=corner).snapshot.visits == 5


def test_a_colour_takes_avoid_clauses_or_one_allow_clause():
    a1, b2 = grid(5).point(4, 0), grid(5).point(3, 1)
    MoveFilter((MoveClause(BLACK, frozenset([a1]), 2, False), MoveClause(BLACK, frozenset([b2]), 4, False),
                MoveClause(WHITE, frozenset([a1]), 1, True)))
    for clauses in ([(BLACK, True), (BLACK, False)], [(WHITE, True), (WHITE, True)]):
        with pytest.raises(ValueError):
            MoveFilter(tuple(MoveClause(c, frozenset([a1]), 1, allow) for c, allow in clauses))
    with pytest.raises(ValueError):
        avoid(BLACK, [a1], 0)


def test_background_search_stops_within_a_batch_and_leaves_a_consistent_tree():
    interrupt = threading.Event()
    evaluator = InterruptWatcher(interrupt)
    clock = FakeClock()
    searcher = Searcher(TimedEvaluator(evaluator, clock, 0.01), SearchConfig(batch_size=8), clock=clock)
    snapshots = []
    background = BackgroundSearch(searcher, GameState(9), StopCondition(interrupt=interrupt), snapshots.append,
                                  ReportSchedule.periodic(0.02))
    waited = time.monotonic() + 60  # the thread's progress, however slow the machine: no bound is asserted
    while evaluator.calls < 20 and time.monotonic() < waited:
        time.sleep(0.01)
    assert background.running
    result = background.stop()
    # The batches the interrupt may have caught in flight (gathered, their evaluation not yet begun), no other.
    assert evaluator.late_calls <= searcher.config.batches_in_flight
    assert not background.running and result is not None and background.error is None
    assert len(snapshots) >= 3  # every 0.02 s on the search's clock: every other batch
    check_tree(searcher.tree)


def _backed_up_scores(node, sign):
    """(score, count) of every evaluation backed up through `node`, scores from the root player's view (sign)."""
    k = node.tried if node.is_expanded else 0
    own = node.visits - (float(node.N[:k].sum()) if k else 0.0)
    rows = [(sign * node.net_s, own)] if own > 0 else []
    for edge, child in node.children.items():
        if edge < k and child.visits:
            rows += _backed_up_scores(child, -sign)
    return rows


def test_score_stdev_is_the_spread_of_the_backed_up_leads():
    state = position(ATARI, BLACK)
    searcher = Searcher(ScriptedEvaluator(), SearchConfig(batch_size=4, seed=0))
    snapshot = searcher.search(state, StopCondition(visits=120)).snapshot
    root = searcher.tree.root
    for info in snapshot.moves[:3]:
        edge = root.moves.index(info.point)
        rows = _backed_up_scores(root.children[edge], -1.0)
        scores = np.array([s for s, _ in rows])
        counts = np.array([c for _, c in rows])
        assert counts.sum() == info.visits
        mean = np.average(scores, weights=counts)
        assert info.score_lead == pytest.approx(mean)
        assert info.score_stdev == pytest.approx(np.sqrt(np.average((scores - mean) ** 2, weights=counts)), abs=1e-6)
        assert info.utility == pytest.approx(root.W[edge] / root.N[edge])
        assert info.pv_visits[0] == info.visits and len(info.pv_visits) == len(info.pv)
        assert all(a >= b for a, b in zip(info.pv_visits, info.pv_visits[1:]))
    rows = _backed_up_scores(root, 1.0)
    scores, counts = np.array([s for s, _ in rows]), np.array([c for _, c in rows])
    mean = np.average(scores, weights=counts)
    assert snapshot.score_stdev == pytest.approx(np.sqrt(np.average((scores - mean) ** 2, weights=counts)), abs=1e-6)
    assert snapshot.score_stdev > 0


def test_move_ownership_is_the_mean_over_the_moves_backups():
    state = position(ATARI, BLACK)
    searcher = Searcher(ScriptedEvaluator(), SearchConfig(seed=0))
    snapshot = searcher.search(state, StopCondition(visits=60)).snapshot
    best = snapshot.moves[0]
    ownership = searcher.move_ownership(best.point)
    assert ownership.shape == (state.grid.area,)
    after = state.copy()
    after.play(best.point)
    # The scripted ownership is area counting: after the capture, the captured point counts for Black.
    assert ownership[state.grid.flat(CAPTURE)] == pytest.approx(1.0)
    snapshot = searcher.search(GameState(5), StopCondition(visits=3)).snapshot
    unvisited = [p for p in searcher.tree.root.moves if p not in {m.point for m in snapshot.moves}]
    assert unvisited and searcher.move_ownership(unvisited[0]) is None


def test_a_root_policy_temperature_spreads_the_visits():
    state = GameState(5)
    favour = [grid(5).point(2, 2)]
    narrow = Searcher(ScriptedEvaluator(favour=favour), SearchConfig(seed=0, stop=StoppingPolicy(early_stop=False)))
    wide = Searcher(ScriptedEvaluator(favour=favour), SearchConfig(seed=0, stop=StoppingPolicy(early_stop=False),
                                                                    noise=NoiseConfig(root_policy_temperature=4.0)))
    narrow_moves = narrow.search(state, StopCondition(visits=100)).snapshot.moves
    wide_moves = wide.search(state, StopCondition(visits=100)).snapshot.moves
    assert len(wide_moves) > len(narrow_moves)
    assert wide_moves[0].prior == narrow_moves[0].prior  # reported priors stay the network's


class JitteryEvaluator:
    """Takes a random few milliseconds (real time) per call: batches in flight finish in any interleaving."""

    def __init__(self, inner, seed):
        self.inner = inner
        self.rng = np.random.default_rng(seed)

    def evaluate(self, states):
        time.sleep(float(self.rng.uniform(0, 0.002)))
        return self.inner.evaluate(states)


def _visit_counts(node, depth=0):
    """The visit counts of the tree down to depth 3, for comparing searches."""
    if not node.is_expanded or depth > 3:
        return node.visits
    return [node.visits, node.N[: node.tried].tolist(),
            sorted((edge, _visit_counts(child, depth + 1)) for edge, child in node.children.items())]


def test_a_search_with_batches_in_flight_is_the_same_whatever_the_timing():
    state = position(ATARI, BLACK)
    results = []
    for seed in range(3):
        config = SearchConfig(seed=0, batches_in_flight=2, stop=StoppingPolicy(early_stop=False))
        searcher = Searcher(JitteryEvaluator(ScriptedEvaluator(), seed), config)
        result = searcher.search(state, StopCondition(playouts=301))
        check_tree(searcher.tree)
        results.append((result.choice.point, result.snapshot.playouts, _visit_counts(searcher.tree.root)))
    assert results[0][:2] == (CAPTURE, 301)
    assert results[1] == results[0] and results[2] == results[0]


class ThreadRecordingEvaluator(JitteryEvaluator):
    """JitteryEvaluator that notes which thread computed each call."""

    def __init__(self, inner, seed):
        super().__init__(inner, seed)
        self.threads = []

    def evaluate(self, states):
        self.threads.append(threading.current_thread().name)
        return super().evaluate(states)


def test_the_search_thread_evaluates_queued_batches_while_it_waits_and_the_tree_is_the_same():
    """With one evaluation thread and 4 batches in flight, the search thread computes the later batches no thread
    has started while it waits for the oldest; which thread computed what does not change the search."""
    state = position(ATARI, BLACK)
    results = []
    for threads in (1, 3, 1):
        evaluator = ThreadRecordingEvaluator(ScriptedEvaluator(), threads)
        config = SearchConfig(seed=0, batches_in_flight=4, evaluation_threads=threads,
                              stop=StoppingPolicy(early_stop=False))
        searcher = Searcher(evaluator, config)
        result = searcher.search(state, StopCondition(playouts=601))
        check_tree(searcher.tree)
        results.append((result.choice.point, result.snapshot.playouts, _visit_counts(searcher.tree.root)))
        if threads == 1:
            assert threading.current_thread().name in evaluator.threads
            assert "evaluation-0" in evaluator.threads
    assert results[0][:2] == (CAPTURE, 601)
    assert results[1] == results[0] and results[2] == results[0]


class SplittingEvaluator:
    """An evaluator whose prepared evaluations compute in parts (as the network's on CPU cores): the parts of one
    batch wait for each other at a barrier, so a split batch is computed by two threads at once or not at all.
    fail_on_part: raise RuntimeError in that part (1-based, counted over all evaluations)."""

    def __init__(self, inner, fail_on_part=None):
        self.inner, self.fail_on_part = inner, fail_on_part
        self.split_threads: list[set[str]] = []  # per split batch, the threads that computed its parts
        self._parts = 0
        self._lock = threading.Lock()

    def evaluate(self, states):
        return self.inner.evaluate(states)

    def prepare(self, states):
        return _SplitEvaluation(self, list(states))


class _SplitEvaluation:
    def __init__(self, owner, states):
        self.owner, self.states, self.batches = owner, states, None

    def compute(self):
        self.batches = [self.owner.inner.evaluate(self.states)]

    def compute_parts(self, parts):
        step = -(-len(self.states) // parts)
        slices = [self.states[i:i + step] for i in range(0, len(self.states), step)]
        self.batches = [None] * len(slices)
        barrier, threads = threading.Barrier(len(slices), timeout=120), set()  # a guard against a hang, not a bound
        self.owner.split_threads.append(threads)

        def part(k):
            owner = self.owner
            with owner._lock:
                owner._parts += 1
                failing = owner._parts == owner.fail_on_part
                threads.add(threading.current_thread().name)
            barrier.wait()
            if failing:
                raise RuntimeError("part failure")
            with owner._lock:  # ScriptedEvaluator counts its calls
                self.batches[k] = owner.inner.evaluate(slices[k])

        return [lambda k=k: part(k) for k in range(len(slices))]

    def result(self):
        return EvaluationBatch(*(np.concatenate(column) for column in zip(
            *((b.policy, b.value, b.score, b.ownership) for b in self.batches))))


def test_a_batch_alone_in_flight_is_computed_in_parts_on_two_threads_and_the_tree_is_the_same():
    state = position(ATARI, BLACK)
    results = []
    for splitting in (False, True):
        evaluator = SplittingEvaluator(ScriptedEvaluator()) if splitting else ScriptedEvaluator()
        config = SearchConfig(seed=0, batches_in_flight=4, evaluation_threads=1, stop=StoppingPolicy(early_stop=False))
        searcher = Searcher(evaluator, config)
        result = searcher.search(state, StopCondition(playouts=601))
        check_tree(searcher.tree)
        results.append((result.choice.point, result.snapshot.playouts, _visit_counts(searcher.tree.root)))
    assert results[0][:2] == (CAPTURE, 601) and results[1] == results[0]
    # Batches are split while they are alone in flight (the tree's first IN_FLIGHT_TREE_SHARE * 8 * 4 visits).
    assert 8 <= len(evaluator.split_threads) <= 8 * 4
    assert all(threads == {"MainThread", "evaluation-0"} for threads in evaluator.split_threads)
    # Without evaluation threads nothing is split.
    evaluator = SplittingEvaluator(ScriptedEvaluator())
    Searcher(evaluator, replace(config, evaluation_threads=0)).search(state, StopCondition(playouts=101))
    assert not evaluator.split_threads


def test_a_failed_part_abandons_its_batch_and_the_tree_searches_on():
    evaluator = SplittingEvaluator(ScriptedEvaluator(), fail_on_part=7)
    searcher = Searcher(evaluator, SearchConfig(seed=0, batches_in_flight=4, evaluation_threads=1,
                                                stop=StoppingPolicy(early_stop=False)))
    with pytest.raises(RuntimeError, match="part failure"):
        searcher.search(GameState(7), StopCondition(playouts=500))
    check_tree(searcher.tree)
    visits = searcher.tree.root.visits
    evaluator.fail_on_part = None
    result = searcher.search(GameState(7), StopCondition(playouts=100))
    assert result.snapshot.visits == visits + 100
    check_tree(searcher.tree)


@pytest.mark.parametrize("in_flight", [2, 3])
def test_batches_overlap_once_the_tree_is_large_and_counts_stay_exact(in_flight):
    evaluator = ScriptedEvaluator()
    searcher = Searcher(evaluator, SearchConfig(seed=0, batch_size=8, batches_in_flight=in_flight))
    result = searcher.search(GameState(7), StopCondition(visits=700))
    assert result.snapshot.visits == 700 and result.snapshot.playouts == 700
    check_tree(searcher.tree)
    # The same search one batch at a time agrees until the tree is large enough for overlap, then differs.
    alone = Searcher(ScriptedEvaluator(), SearchConfig(seed=0, batch_size=8, batches_in_flight=1))
    alone.search(GameState(7), StopCondition(visits=700))
    assert _visit_counts(alone.tree.root) != _visit_counts(searcher.tree.root)
    short = [Searcher(ScriptedEvaluator(), SearchConfig(seed=0, batches_in_flight=n)) for n in (1, in_flight)]
    for s in short:
        s.search(GameState(7), StopCondition(visits=8 * 8 * in_flight))
    assert _visit_counts(short[0].tree.root) == _visit_counts(short[1].tree.root)


def test_a_failed_evaluation_in_flight_leaves_a_consistent_tree_that_searches_on():
    evaluator = ScriptedEvaluator(fail_on_call=40)
    searcher = Searcher(evaluator, SearchConfig(seed=0, batches_in_flight=2))
    with pytest.raises(RuntimeError, match="scripted failure"):
        searcher.search(GameState(7), StopCondition(playouts=1000))
    check_tree(searcher.tree)
    visits = searcher.tree.root.visits
    assert 8 * 16 < visits < 8 * 40
    result = searcher.search(GameState(7), StopCondition(playouts=200))
    assert result.snapshot.visits == visits + 200
    check_tree(searcher.tree)


def test_a_job_hands_its_value_or_its_error_from_the_thread_that_ran_it():
    import threading

    from gtp_engine.search.threads import Job

    release = threading.Event()
    job = Job(lambda: release.wait(120) and 42)
    runner = threading.Thread(target=job.run)
    runner.start()
    assert not job.done()
    release.set()
    assert job.result() == 42 and job.done()  # result() waits for the other thread
    runner.join()
    failing = Job(lambda: 1 / 0)
    failing.run()
    with pytest.raises(ZeroDivisionError):
        failing.result()
    assert Job.finished(7).result() == 7
    with pytest.raises(KeyError):
        Job.finished(error=KeyError("x")).result()


def test_a_search_relaxes_the_garbage_collector_and_restores_it_even_when_it_fails():
    import gc

    from gtp_engine.search.threads import SEARCH_COLLECTOR_THRESHOLD, collector_relaxed

    class Recording(ScriptedEvaluator):
        thresholds: list = []

        def evaluate(self, states):
            Recording.thresholds.append(gc.get_threshold())
            return super().evaluate(states)

    before = gc.get_threshold()
    Searcher(Recording(), SearchConfig(seed=0)).search(GameState(5), StopCondition(visits=40))
    assert Recording.thresholds and all(t == (SEARCH_COLLECTOR_THRESHOLD, *before[1:]) for t in Recording.thresholds)
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError, match="scripted"):
        Searcher(ScriptedEvaluator(fail_on_call=3), SearchConfig(seed=0)).search(GameState(5), StopCondition(visits=40))
    assert gc.get_threshold() == before
    # Nested (searches in two threads): the thresholds return when the last one ends.
    with collector_relaxed():
        with collector_relaxed():
            pass
        assert gc.get_threshold()[0] == SEARCH_COLLECTOR_THRESHOLD
    assert gc.get_threshold() == before
