"""Searcher: runs the tree search (mcts.py) on a position until a stop condition, reporting on a schedule, and
says what it found; the one entry point for "analyse this position, report every so often, stop on this".

Terms:
- search: Searcher.search(state, stop, on_snapshot, reports): grows the tree until the stop condition
  (limits.StopCondition), hands on_snapshot a snapshot at each report of the schedule (limits.ReportSchedule)
  and a final one, and returns the move chosen (choice.py) with that final snapshot (snapshot.py).
- tree reuse: a new search whose position follows from the last search's root by moves already in the tree
  starts from that subtree, with its visits. Under a move filter (mcts.MoveFilter, counted in plies from the
  root) a tree is kept only for the same position and the same filter.
- early stop (settings.StoppingPolicy): the search ends when the most visited move cannot be overtaken within
  the playouts left, the visits, playouts and time the stop condition leaves.
- background search: pondering and analysis in a thread; stop() interrupts it within the batches in flight and
  joins.
- shared evaluator (evaluator.py; batching.py): the search counts as its client while it runs, keeps no evaluation
  threads, and computes each batch in flight when it waits for its result, where the evaluator gathers it with
  other searches' batches.
- batches in flight: how many gathered batches the search keeps unfinished. Evaluation threads (the cores but
  one by default, SearchConfig.evaluation_threads_for; threads.py) compute their evaluations while the search
  thread gathers the next batch, so the network and the search's own work overlap: onnxruntime releases the GIL
  while it runs, and the evaluation's Python parts (cache, encoding, decoding) stay in the search thread
  (evaluator.prepare). When the search thread would wait for the oldest batch, it computes a later one no
  evaluation thread has started (EvaluationThreads.run_queued), so that every core runs the network while the
  search waits for it. With 1, each batch is gathered, evaluated and finished in turn. Batches finish in the
  order they were gathered, so a search from a seed is the same whatever the timing and whichever thread
  computed what. Every reading of the tree (stop decisions that end the search, snapshots, the result) is made
  with no batch in flight, when no virtual loss is left in the statistics. Batches overlap only once the tree is
  large beside the leaves in flight (IN_FLIGHT_TREE_SHARE), so short searches are as without; until then each
  batch, alone in flight, has its network step split into one call per thread (the evaluation threads' and the
  search thread's, evaluator.compute_steps), so that no core waits idle beside the one that runs it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import threading
import time
import weakref
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from gtp_engine.board import opponent
from gtp_engine.evaluator import Evaluator, search_client, symmetry_averaged
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveFilter, Node, PendingBatch, Tree
from gtp_engine.search.choice import (
    add_noise,
    choose_edge,
    level_edge,
    lower_confidence_bounds,
    pick_edge,
    restrict_root,
)
from gtp_engine.search.limits import ReportSchedule, StopCondition
from gtp_engine.search.settings import ChoiceConfig, SearchConfig
from gtp_engine.search.snapshot import MoveInfo, SearchResult, Snapshot, SnapshotCallback
from gtp_engine.search.strength import StrengthLevel
from gtp_engine.search.threads import EvaluationThreads, InFlight, collector_relaxed, start_evaluation

log = logging.getLogger(__name__)

# Seconds in which the batch time forgets half of a slow batch (a page fault, a core the machine gave away). By the
# clock, not per batch: an estimate longer than the time left stops searches before any batch could lower it.
BATCH_TIME_HALF_LIFE = 1.0
MAX_BATCH_SHARE = 0.5  # of a search's time to a deadline, the most kept for its last batch
# A small tree has few good leaves: batches overlap only once the root has this many times their leaves in visits, so
# that short searches select as one batch at a time would (the leaves in flight all carry virtual loss).
IN_FLIGHT_TREE_SHARE = 8


class Searcher:
    """Searches positions with one evaluator and one config; holds the tree between searches for reuse.

    Not thread-safe: one search at a time (BackgroundSearch keeps to that when it owns the searcher).
    """

    def __init__(self, evaluator: Evaluator, config: SearchConfig = SearchConfig(),
                 clock: Callable[[], float] = time.monotonic):
        self.evaluator = evaluator
        self.config = config
        self.clock = clock
        self._batch = (0.0, 0.0)  # (the longest recent batch's seconds, when): see batch_seconds()
        self.stopped: float | None = None  # when the last search stopped, on the clock (before its result is built)
        self.rng = np.random.default_rng(config.seed)
        self.tree: Tree | None = None
        self._tree_key: tuple | None = None  # _position_key of tree.root_state
        self._tree_filter = MoveFilter()  # the filter the tree grew under
        self._workers: EvaluationThreads | None = None  # evaluate batches in flight; made on first use

    def batch_seconds(self, now: float) -> float:
        """What the next batch will take: the longest recent batch, forgotten by half every BATCH_TIME_HALF_LIFE."""
        seconds, when = self._batch
        return seconds * 0.5 ** (max(0.0, now - when) / BATCH_TIME_HALF_LIFE)

    def reset(self) -> None:
        """Forgets the tree (new game, undo, changed rules or komi)."""
        self.tree = None
        self._tree_key = None

    def search(self, state: GameState, stop: StopCondition, on_snapshot: SnapshotCallback | None = None,
               reports: ReportSchedule | None = None, exclude: Sequence[int] = (),
               ownership_in_snapshots: bool = False, move_filter: MoveFilter = MoveFilter(),
               config: SearchConfig | None = None, strength: StrengthLevel | None = None) -> SearchResult:
        """Searches `state` (for its to_play) until `stop`; never plays a move.

        exclude: root moves not to search or choose unless nothing else is legal (cleanup: PASS).
        move_filter: moves not to search near the root (analysis: avoid / allow).
        on_snapshot gets a snapshot at each report of `reports` (checked between batches; marked during_search)
        and a final one, the result's (its ownership only with ownership_in_snapshots).
        config: this search's settings instead of the searcher's (analysis); the kept tree is reused alike.
        strength: the level whose move is chosen (strength.py, choice.level_edge), its root searched as the level
        searches it (choice.restrict_root); None: full strength. The caller sets the level's playouts in `stop`.
        """
        client = search_client(self.evaluator)
        with collector_relaxed(), client if client is not None else contextlib.nullcontext():
            return self._search(state, stop, on_snapshot, reports, exclude, ownership_in_snapshots,
                                move_filter, config, strength, shared=client is not None)

    def _search(self, state: GameState, stop: StopCondition, on_snapshot: SnapshotCallback | None,
                reports: ReportSchedule | None, exclude: Sequence[int], ownership_in_snapshots: bool,
                move_filter: MoveFilter, config: SearchConfig | None, strength: StrengthLevel | None,
                shared: bool) -> SearchResult:
        clock = self.clock
        start = clock()
        cfg = config or self.config
        tree = self._tree_for(state, move_filter, cfg)
        if not stop.is_bounded and stop.interrupt is None:
            stop = replace(stop, visits=cfg.stop.default_visits)
        playouts = 0 if tree.root.is_expanded else tree.run_batch(1)
        self._prepare_root(tree, exclude, cfg, strength)
        next_report = start + reports.first if on_snapshot and reports is not None else math.inf
        batch_size = max(1, cfg.batch_size)
        depth = max(1, cfg.batches_in_flight)
        workers = 0 if shared else cfg.evaluation_threads_for()
        overlap_from = IN_FLIGHT_TREE_SHARE * batch_size * depth  # root visits
        in_flight: collections.deque[tuple[PendingBatch, InFlight]] = collections.deque()
        selections = 0  # of the batches in flight
        last_finish = clock()
        report_due = False  # set when a batch finishes past next_report
        try:
            while True:
                # Gather while there is room; a stop or a report first drains the batches in flight, and a stop
                # is only final when none is left (the statistics then hold no virtual loss).
                room = depth if tree.root.visits >= overlap_from else 1
                if (not report_due and len(in_flight) < room
                        and not self._should_stop(tree, stop, playouts, start, cfg, selections, len(in_flight))):
                    size = batch_size
                    if stop.playouts is not None:
                        size = min(size, stop.playouts - playouts - selections)
                    if stop.visits is not None:
                        size = min(size, stop.visits - tree.root.visits - selections)
                    pending = tree.gather(max(1, size))
                    selections += len(pending.selected)
                    in_flight.append((pending, self._evaluate(tree.evaluator, pending.states, workers,
                                                              split=room == 1, deferred=shared)))
                    if len(in_flight) < room:
                        continue
                elif not in_flight:
                    if not report_due:
                        break
                    on_snapshot(self._snapshot(tree, playouts, start, ownership_in_snapshots, cfg.choice,
                                               during_search=True))
                    next_report = clock() + reports.every if reports.every is not None else math.inf
                    report_due = False
                    continue
                pending, evaluation = in_flight[0]
                while not evaluation.done() and self._workers is not None and self._workers.run_queued():
                    pass  # the search thread evaluates a later batch while an evaluation thread has the oldest
                batch = evaluation()
                in_flight.popleft()
                selections -= len(pending.selected)
                playouts += tree.finish(pending, batch)
                ended = clock()
                self._batch = (max(ended - last_finish, self.batch_seconds(ended)), ended)
                last_finish = ended
                report_due = report_due or ended >= next_report
        except BaseException:
            for pending, _ in reversed(in_flight):  # the latest first; finish() has abandoned its own batch
                if pending.selected:
                    tree.abandon(pending)
            raise
        self.stopped = clock()
        snapshot = self._snapshot(tree, playouts, start, True, cfg.choice)
        if on_snapshot:
            on_snapshot(snapshot if ownership_in_snapshots else replace(snapshot, ownership=None))
        return SearchResult(self._choose(tree, state, snapshot, cfg.choice, strength), snapshot,
                            list(tree.root.moves))

    def _evaluate(self, evaluator: Evaluator, states: list[GameState], workers: int, split: bool = False,
                  deferred: bool = False) -> InFlight:
        """The evaluation of a gathered batch's positions (its result None for none). With workers, the
        evaluation is prepared here, computed in a worker thread (or by the search thread, see run_queued), and its
        result taken here (evaluator.prepare): the worker then needs no GIL while the search thread gathers the next
        batch. Without, it is done now, or when its result is waited for where deferred (a shared evaluator).
        split: the batch will be alone in flight, so its network step is cut into one call per thread, the search
        thread's included."""
        if workers and states and (self._workers is None or self._workers.count != workers):
            if self._workers is not None:
                self._workers.close()
            self._workers = EvaluationThreads(workers)
            weakref.finalize(self, self._workers.close)
        return start_evaluation(evaluator, states, self._workers if workers else None, workers + 1 if split else 1,
                                deferred)

    # ---- tree reuse -----------------------------------------------------------------------------------

    def _tree_for(self, state: GameState, move_filter: MoveFilter, cfg: SearchConfig) -> Tree:
        key = _position_key(state)
        root = None
        if cfg.reuse_tree and self.tree is not None and move_filter == self._tree_filter:
            if not move_filter or key == self._tree_key:
                root = self._reusable_root(state, key)
        self.tree = Tree(self.evaluator, state.copy(), cfg.tree, root=root, move_filter=move_filter)
        self._tree_key = key
        self._tree_filter = move_filter
        return self.tree

    def _reusable_root(self, state: GameState, key: tuple) -> Node | None:
        """The node of the old tree for `state`: its root or a descendant by the moves played since."""
        old, (old_rules, old_moves), (rules, moves) = self.tree, self._tree_key, key
        if old_rules != rules:
            return None
        if len(moves) < len(old_moves) or moves[: len(old_moves)] != old_moves:
            return None
        node, to_play = old.root, old.root_state.to_play
        for color, point in moves[len(old_moves):]:
            if color != to_play or not node.is_expanded:
                return None
            try:
                edge = node.moves.index(point)
            except ValueError:
                return None
            node = node.children.get(edge)
            if node is None:
                return None
            to_play = opponent(to_play)
        if to_play != state.to_play or not node.is_expanded:
            return None
        return node

    def _prepare_root(self, tree: Tree, exclude: Sequence[int], cfg: SearchConfig,
                      strength: StrengthLevel | None) -> None:
        root = tree.root
        tree.root_excluded = None
        if exclude:
            excluded = np.array([p in exclude for p in root.moves])
            tree.root_excluded = excluded if excluded.any() and not excluded.all() else None
        tree.level_prior = None if strength is None else self._averaged_prior(tree)
        if strength is not None:
            restrict_root(tree, strength)
        add_noise(tree, cfg.noise, self.rng)

    def _averaged_prior(self, tree: Tree) -> np.ndarray | None:
        """The root's priors from the network's policy averaged over the board's symmetries (evaluator.py, averaged
        evaluation), renormalised over the root's moves; None where the evaluator offers none."""
        averaged = symmetry_averaged(self.evaluator, [tree.root_state])
        if averaged is None:
            return None
        grid = tree.root_state.grid
        prior = averaged.policy[0][[grid.flat(point) for point in tree.root.moves]].astype(np.float64)
        total = prior.sum()
        return prior / total if total > 0 else None

    # ---- stopping -------------------------------------------------------------------------------------

    def _should_stop(self, tree: Tree, stop: StopCondition, playouts: int, start: float, cfg: SearchConfig,
                     selections: int = 0, batches: int = 0) -> bool:
        """Whether to gather no more; selections and batches are those in flight, whose playouts count as made and
        whose ends the next batch waits for."""
        if stop.interrupt is not None and stop.interrupt.is_set():
            return True
        playouts += selections
        visits = tree.root.visits + selections
        if visits >= cfg.stop.max_tree_visits or (stop.visits is not None and visits >= stop.visits):
            return True
        if stop.playouts is not None and playouts >= stop.playouts:
            return True
        now = self.clock()
        batch = self.batch_seconds(now)

        def reached(deadline: float) -> bool:  # the next batch would end past it; after a stall, half the time is kept
            return now + min(batch * (1 + batches), MAX_BATCH_SHARE * (deadline - start)) >= deadline

        if stop.deadline is not None and reached(stop.deadline):
            if stop.max_deadline is None or reached(stop.max_deadline) or self._settled(tree, cfg.choice):
                return True
        return cfg.stop.early_stop and self._futile(tree, stop, playouts, start, now)

    @staticmethod
    def _settled(tree: Tree, choice: ChoiceConfig) -> bool:
        """Whether the move the search would choose is also the most visited one."""
        return choose_edge(tree, choice) == int(tree.root.N.argmax())

    def _futile(self, tree: Tree, stop: StopCondition, playouts: int, start: float, now: float) -> bool:
        """Whether no move can catch up with the most visited one in the playouts left."""
        if stop.min_deadline is not None and now < stop.min_deadline:
            return False
        remaining = math.inf
        if stop.playouts is not None:
            remaining = stop.playouts - playouts
        if stop.visits is not None:
            remaining = min(remaining, stop.visits - tree.root.visits)
        end = stop.deadline
        if end is not None and now >= end:  # running past the deadline because the choice is unsettled
            end = stop.max_deadline
        if end is not None and playouts > 0:
            rate = playouts / max(now - start, 1e-6)
            remaining = min(remaining, rate * (end - now))
        if remaining >= tree.root.nsum:  # no lead between two edges exceeds their visits' sum: nothing to read
            return False
        N = tree.root.N
        if len(N) < 2:
            return True
        second, first = np.partition(N, -2)[-2:]
        return first - second > remaining

    # ---- results --------------------------------------------------------------------------------------

    def _snapshot(self, tree: Tree, playouts: int, start: float, with_ownership: bool,
                  choice: ChoiceConfig, during_search: bool = False) -> Snapshot:
        root = tree.root
        value, utility, score = tree.root_value()
        lcb = lower_confidence_bounds(root, choice.lcb_z)
        chosen = choose_edge(tree, choice)
        visited = [i for i in np.flatnonzero(root.N > 0).tolist() if i != chosen]
        visited.sort(key=lambda i: (-root.N[i], -root.prior[i]))
        moves = [self._move_info(tree, i, k, lcb, value) for k, i in enumerate([chosen] + visited)]
        return Snapshot(
            to_play=tree.root_state.to_play, visits=root.visits, playouts=playouts,
            elapsed=self.clock() - start, winrate=_winrate(value), score_lead=score, moves=moves,
            ownership=tree.root_ownership() if with_ownership else None, utility=utility,
            score_stdev=tree.root_score_stdev(), raw_winrate=_winrate(root.net_v), raw_lead=root.net_s,
            during_search=during_search,
        )

    def _move_info(self, tree: Tree, edge: int, order: int, lcb: np.ndarray, root_value: float) -> MoveInfo:
        root = tree.root
        n = root.N[edge]
        line = tree.principal_variation_visits(edge)
        score = float(root.S[edge] / n) if n else 0.0
        return MoveInfo(
            point=root.moves[edge], visits=int(n), winrate=_winrate(root.V[edge] / n if n else root_value),
            score_lead=score, prior=float(root.prior[edge]),
            lcb=_winrate(root.V[edge] / n - (root.W[edge] / n - lcb[edge])) if n else 0.0, order=order,
            pv=[point for point, _ in line], utility=float(root.W[edge] / n) if n else 0.0,
            score_stdev=math.sqrt(max(float(root.S2[edge] / n) - score * score, 0.0)) if n else 0.0,
            pv_visits=[visits for _, visits in line],
        )

    def move_ownership(self, point: int) -> np.ndarray | None:
        """Mean ownership (flat, Black's view) after the last search's root move `point`; None when the search
        did not visit it. Read between searches, or by on_snapshot (no batch is in flight then)."""
        tree = self.tree
        if tree is None or not tree.root.is_expanded or point not in tree.root.moves:
            return None
        return tree.edge_ownership(tree.root.moves.index(point))

    def _choose(self, tree: Tree, state: GameState, snapshot: Snapshot, choice: ChoiceConfig,
                strength: StrengthLevel | None) -> MoveInfo:
        """The snapshot's move for pick_edge's choice, or the level's (moves[0] is choose_edge's)."""
        edge = (pick_edge(tree, choice, state.move_number, self.rng) if strength is None
                else level_edge(tree, choice, strength, self.rng))
        point = tree.root.moves[edge]
        return next((m for m in snapshot.moves if m.point == point), snapshot.moves[0])


class BackgroundSearch:
    """A search in a thread (pondering, analysis). stop() interrupts it after the batches in flight and waits."""

    def __init__(self, searcher: Searcher, state: GameState, stop: StopCondition,
                 on_snapshot: SnapshotCallback | None = None, reports: ReportSchedule | None = None,
                 ownership_in_snapshots: bool = False, config: SearchConfig | None = None):
        self.interrupt = stop.interrupt or threading.Event()
        self.state = state.copy()  # the position searched
        self.result: SearchResult | None = None
        self.error: BaseException | None = None
        stop = replace(stop, interrupt=self.interrupt)
        self._thread = threading.Thread(
            target=self._run, args=(searcher, self.state, stop, on_snapshot, reports,
                                    ownership_in_snapshots, config),
            name="background-search", daemon=True,
        )
        self._thread.start()

    def _run(self, searcher, state, stop, on_snapshot, reports, with_ownership, config) -> None:
        try:
            self.result = searcher.search(state, stop, on_snapshot, reports,
                                          ownership_in_snapshots=with_ownership, config=config)
        except BaseException as error:  # reported by stop(); a thread has nobody else to tell
            log.exception("background search failed")
            self.error = error

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> SearchResult | None:
        self.interrupt.set()
        self._thread.join()
        return self.result

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the search to end by itself; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


# ---- helpers ------------------------------------------------------------------------------------------


def _position_key(state: GameState) -> tuple:
    """(what a tree depends on besides the moves, the moves); a tree is reusable for a later position when the
    first parts are equal and its moves start with the tree's moves."""
    return (state.grid, state.komi, state.rules, state.handicap_stones, tuple(state.setup)), tuple(state.moves)


def _winrate(value: float) -> float:
    return min(1.0, max(0.0, (float(value) + 1.0) / 2.0))
