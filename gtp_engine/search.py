"""Searcher: runs the tree search (mcts.py) on a position until a stop condition, and says what it found.

Terms:
- visits: backups through the root, those kept from earlier searches included (tree reuse); playouts: backups
  made by this search alone.
- clock: the function the Searcher reads time from (time.monotonic unless a test injects another); deadlines,
  elapsed times and snapshot intervals are on it.
- stop condition: visits, playouts, a deadline (seconds on the searcher's clock) and an interrupt Event; the
  search stops at the first one reached, and only between batches, so a deadline counts as reached once the
  next batch would end past it (the batch time: the longest recent batch, decaying with time; at most half the
  search's time to that deadline). A budget becomes a stop condition through StopCondition.for_budget; this module
  knows no game clock. Early stop: when the most visited move cannot be overtaken within the playouts left,
  searching on cannot change the answer.
- tree reuse: a new search whose position follows from the last search's root by moves already in the tree
  starts from that subtree, with its visits. Under a move filter (mcts.MoveFilter, counted in plies from the
  root) a tree is kept only for the same position and the same filter.
- snapshot: what the search thinks now, for analysis: per visited root move its visits, winrate, score lead,
  prior, LCB and principal variation (PV), plus root ownership (the mean over the root's backups, kept ones
  included: a search that needs no new playouts still has it). Winrates are probabilities in [0, 1] and leads
  are points, both from the view of the side to move at the root.
- LCB: lower confidence bound of a move's utility, Q - lcb_z * standard error; the move is chosen by LCB among
  moves with at least lcb_min_visits_ratio of the most visited move's visits (Leela Zero 0.17).
- score stdev: the standard deviation of the score leads backed up through a move (or the root): how much the
  leaves the search reached disagree. It is not KataGo's scoreStdev, which adds the network's own predicted
  spread of the final score (our networks have no such output), so it is much smaller early in a search.
- root policy temperature: the root's priors are raised to 1 / T and renormalised before the search (KataGo's
  rootPolicyTemperature; T > 1 widens the search at the root). Noise, if any, mixes into the result.
- noise, temperature: self-play exploration. Dirichlet noise mixes into the root priors; with a temperature T,
  the move is drawn with probability proportional to visits ** (1 / T) for the first temperature_moves moves,
  never a pass.
- config: SearchConfig, by concern: tree (mcts.TreeConfig: PUCT, FPU, virtual loss, utility), stop (StopConfig),
  choice (ChoiceConfig: LCB, temperature), noise (NoiseConfig); ResignConfig is the players' resignation rule.
- move pickers: choose_edge (LCB or visits), draw_edge (by visits with a temperature), pick_edge (the two by
  move number), add_noise, ResignCounter. They are the one place where a move is chosen from a tree: the
  Searcher (genmove, analysis), self-play and gating all use them.
- round: many trees grown at once (self-play games, gate matches): start_round has each gather its leaves and
  sends the positions of the trees that share an evaluator to it together; Round.finish has each finish its
  batch. Between the two, the caller may work while the round's evaluations are in flight.
- games in lanes: play_games keeps many games (RoundGame) in progress for self-play, gate matches and tuning.
  With evaluation threads they are split into two lanes whose rounds alternate: while one lane's positions are
  in the network (its calls computed by the evaluation threads and, when it would wait, by the calling thread),
  the calling thread finishes the other lane's round, lets its games move and gathers its next round. The search
  and the network then keep every core busy (onnxruntime releases the GIL), each call on network_threads
  threads. Without, one round takes every game.
- background search: pondering and analysis in a thread; stop() interrupts it within the batches in flight and
  joins.
- batches in flight: how many gathered batches the search keeps unfinished. Evaluation threads (the cores but
  one by default, SearchConfig.evaluation_threads_for) compute their evaluations while the search thread gathers
  the next batch, so the network and the search's own work overlap: onnxruntime releases the GIL while it runs,
  and the evaluation's Python parts (cache, encoding, decoding) stay in the search thread (evaluator.prepare).
  When the search thread would wait for the oldest batch, it computes a later one no evaluation thread has
  started (EvaluationThreads.run_queued), so that every core runs the network while the search waits for it. With
  1, each batch is gathered, evaluated and finished in turn. Batches finish in the order they were gathered, so a
  search from a seed is the same whatever the timing and whichever thread computed what.
  Every reading of the tree (stop decisions that end the search, snapshots, the result) is made with no batch in
  flight, when no virtual loss is left in the statistics. Batches overlap only once the tree is large beside
  the leaves in flight (IN_FLIGHT_TREE_SHARE), so short searches are as without; until then each batch, alone in
  flight, has its network step split into one call per thread (the evaluation threads' and the search thread's,
  evaluator.compute_steps), so that no core waits idle beside the one that runs it.
- collector relaxed: while any search runs, the garbage collector's young generation is collected every
  SEARCH_COLLECTOR_THRESHOLD allocations instead of Python's 700. A search allocates a dozen container objects a
  visit (positions, paths) that die within a few batches, and the tree has no reference cycles (mcts.py); at
  700 the collector's passes over the objects in flight cost a 9x9 search 1-1.5 us a visit (4% of its own work),
  and cyclic garbage from elsewhere is still collected, a little later.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import logging
import math
import os
import queue
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol, Sequence

import numpy as np

from gtp_engine.board import BLACK, WHITE, opponent
from gtp_engine.coords import PASS
from gtp_engine.evaluator import EvaluationBatch, Evaluator, compute_steps, prepare
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveFilter, Node, PendingBatch, Tree, TreeConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StopConfig:
    """When a search ends beyond its StopCondition."""

    early_stop: bool = True  # stop once the most visited move cannot be overtaken
    default_visits: int = 800  # visits when a stop condition sets no limit at all (no visits, playouts or time)
    max_tree_visits: int = 200_000  # no search grows the tree past this (memory: ~8 kB a 19x19 visit)


@dataclass(frozen=True)
class ChoiceConfig:
    """How the move is chosen from the root's statistics (pick_edge)."""

    lcb: bool = True  # choose the move by lower confidence bound; False: by visits
    lcb_z: float = 3.0  # standard errors below the mean for the LCB (Leela Zero ~4, KataGo 5 with its own errors)
    lcb_min_visits_ratio: float = 0.1  # moves with fewer visits than this share of the most visited are not chosen
    temperature: float = 0.0  # draw by visits ** (1 / temperature) (never a pass); 0 picks the best move
    temperature_moves: int = 0  # moves of the game (by move number) played with the temperature


@dataclass(frozen=True)
class NoiseConfig:
    """Exploration at the root (add_noise): a policy temperature (analysis) and Dirichlet noise (self-play)."""

    fraction: float = 0.0  # weight of the noise (self-play: 0.25; play: 0)
    alpha_total: float = 10.83  # Dirichlet alpha times the number of legal moves (0.03 on 19x19, KataGo)
    root_policy_temperature: float = 1.0  # the root's priors ** (1 / T), renormalised; > 1 searches wider


@dataclass(frozen=True)
class ResignConfig:
    """When a player gives up (a ResignCounter keeps the count)."""

    winrate: float | None = 0.05  # resign when the search's winrate is below this; None or 0: never
    consecutive: int = 1  # searches in a row of the same player below it
    after_moves: int | None = None  # no resignation before this move number; None: a quarter of the area

    def __post_init__(self) -> None:
        if self.consecutive < 1:
            raise ValueError("consecutive must be at least 1")


@dataclass(frozen=True)
class SearchConfig:
    """Everything a Searcher needs, by concern."""

    tree: TreeConfig = TreeConfig()  # selection and utility (mcts.py)
    stop: StopConfig = StopConfig()
    choice: ChoiceConfig = ChoiceConfig()
    noise: NoiseConfig = NoiseConfig()
    batch_size: int = 8  # leaves per evaluator call
    batches_in_flight: int = 4  # gathered batches not yet finished (1: no overlap)
    evaluation_threads: int | None = None  # beside the search thread; None: evaluation_threads_for(the cores)
    reuse_tree: bool = True  # keep the subtree of the moves played since the last search
    seed: int | None = None  # random seed for noise and temperature

    def evaluation_threads_for(self, cores: int | None = None) -> int:
        """Evaluation threads (0: none, each batch evaluated as it is gathered): as configured, else the cores but
        one, the search thread's, which evaluates too while it waits; never more than the batches that can wait
        for one (batches in flight but one). On 2 cores, one evaluation thread and the search thread helping gave
        9,100-9,900 visits/s on 9x9 (int8) against 7,600-8,100 for two evaluation threads, which left the search
        thread too little of a core, and 7,200-7,300 for one thread without help."""
        limit = max(0, self.batches_in_flight - 1)
        if self.evaluation_threads is not None:
            return min(self.evaluation_threads, limit)
        return min(max(1, (cores or os.cpu_count() or 1) - 1), limit)


# Seconds in which the batch time forgets half of a slow batch (a page fault, a core the machine gave away). By the
# clock, not per batch: an estimate longer than the time left stops searches before any batch could lower it.
BATCH_TIME_HALF_LIFE = 1.0
MAX_BATCH_SHARE = 0.5  # of a search's time to a deadline, the most kept for its last batch
# A small tree has few good leaves: batches overlap only once the root has this many times their leaves in visits, so
# that short searches select as one batch at a time would (the leaves in flight all carry virtual loss).
IN_FLIGHT_TREE_SHARE = 8
SWITCH_INTERVAL = 5e-5  # seconds a thread may hold the GIL while another waits, once batches are evaluated in a worker
SEARCH_COLLECTOR_THRESHOLD = 50_000  # see collector relaxed

_relaxed_lock = threading.Lock()
_relaxed_searches = 0  # searches running under collector_relaxed
_saved_threshold: tuple[int, ...] = ()  # the collector's thresholds before the first of them


@contextlib.contextmanager
def collector_relaxed():
    """While in it, the garbage collector's young generation waits for SEARCH_COLLECTOR_THRESHOLD allocations (see
    collector relaxed); the thresholds return when the last search in it leaves (searches in several threads)."""
    global _relaxed_searches, _saved_threshold
    with _relaxed_lock:
        if not _relaxed_searches:
            _saved_threshold = gc.get_threshold()
            gc.set_threshold(max(SEARCH_COLLECTOR_THRESHOLD, _saved_threshold[0]), *_saved_threshold[1:])
        _relaxed_searches += 1
    try:
        yield
    finally:
        with _relaxed_lock:
            _relaxed_searches -= 1
            if not _relaxed_searches:
                gc.set_threshold(*_saved_threshold)


@dataclass
class StopCondition:
    visits: int | None = None  # root visits, reused ones included
    playouts: int | None = None  # backups of this search
    deadline: float | None = None  # when to stop, on the searcher's clock
    interrupt: threading.Event | None = None  # set by another thread: stop after the current batch
    max_deadline: float | None = None  # the search may run past deadline up to this while its choice is unsettled
    min_deadline: float | None = None  # no early stop before this: time not used here is lost (byo-yomi)

    @classmethod
    def for_budget(cls, start: float, minimum: float, recommended: float, maximum: float,
                   interrupt: threading.Event | None = None, visits: int | None = None) -> StopCondition:
        """From a time budget in seconds (timecontrol.budget) counted from `start` (on the searcher's clock)."""
        return cls(visits=visits, deadline=start + recommended, interrupt=interrupt,
                   max_deadline=start + maximum, min_deadline=start + minimum)

    @property
    def is_bounded(self) -> bool:
        """Whether anything but an interrupt ends the search."""
        return self.visits is not None or self.playouts is not None or self.deadline is not None


@dataclass(frozen=True)
class MoveInfo:
    point: int  # board point or PASS
    visits: int
    winrate: float  # probability of winning for the side to move at the root
    score_lead: float  # points, side to move's view
    prior: float  # network policy (before noise)
    lcb: float  # lower confidence bound of the winrate (the utility's margin below the mean, applied to the value)
    order: int  # 0 for the move the search chooses, then by visits
    pv: list[int]  # principal variation starting with this move
    utility: float = 0.0  # mean utility (the search's objective: value plus score bonus), side to move's view
    score_stdev: float = 0.0  # of the score leads backed up through this move (see the module docstring)
    pv_visits: list[int] = field(default_factory=list)  # visits of each edge of pv


@dataclass(frozen=True)
class Snapshot:
    to_play: int
    visits: int  # root visits
    playouts: int  # of this search
    elapsed: float  # seconds of this search
    winrate: float  # root, side to move's view
    score_lead: float
    moves: list[MoveInfo]  # the chosen move first (visited or not), then the other visited moves by visits
    ownership: np.ndarray | None  # flat, Black's view: +1 Black's; None when not asked for
    utility: float = 0.0  # root, side to move's view
    score_stdev: float = 0.0  # of the score leads backed up through the root
    raw_winrate: float = 0.5  # the network's, for the root position, side to move's view
    raw_lead: float = 0.0


@dataclass(frozen=True)
class SearchResult:
    choice: MoveInfo  # the move to play: by LCB or visits, or drawn with the temperature
    snapshot: Snapshot  # with ownership
    root_moves: list[int] = field(default_factory=list)  # every legal root move, by falling prior


SnapshotCallback = Callable[[Snapshot], None]


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
               snapshot_interval: float | None = None, exclude: Sequence[int] = (),
               ownership_in_snapshots: bool = False, move_filter: MoveFilter = MoveFilter(),
               config: SearchConfig | None = None) -> SearchResult:
        """Searches `state` (for its to_play) until `stop`; never plays a move.

        exclude: root moves not to search or choose unless nothing else is legal (cleanup: PASS).
        move_filter: moves not to search near the root (analysis: avoid / allow).
        on_snapshot gets a snapshot every snapshot_interval seconds (checked between batches) and a last one.
        config: this search's settings instead of the searcher's (analysis); the kept tree is reused alike.
        """
        with collector_relaxed():
            return self._search(state, stop, on_snapshot, snapshot_interval, exclude, ownership_in_snapshots,
                                move_filter, config)

    def _search(self, state: GameState, stop: StopCondition, on_snapshot: SnapshotCallback | None,
                snapshot_interval: float | None, exclude: Sequence[int], ownership_in_snapshots: bool,
                move_filter: MoveFilter, config: SearchConfig | None) -> SearchResult:
        clock = self.clock
        start = clock()
        cfg = config or self.config
        tree = self._tree_for(state, move_filter, cfg)
        if not stop.is_bounded and stop.interrupt is None:
            stop = replace(stop, visits=cfg.stop.default_visits)
        playouts = 0 if tree.root.is_expanded else tree.run_batch(1)
        self._prepare_root(tree, exclude, cfg)
        next_snapshot = start + snapshot_interval if on_snapshot and snapshot_interval is not None else math.inf
        batch_size = max(1, cfg.batch_size)
        depth = max(1, cfg.batches_in_flight)
        workers = cfg.evaluation_threads_for()
        overlap_from = IN_FLIGHT_TREE_SHARE * batch_size * depth  # root visits
        in_flight: collections.deque[tuple[PendingBatch, InFlight]] = collections.deque()
        selections = 0  # of the batches in flight
        last_finish = clock()
        snapshot_due = False  # set when a batch finishes past next_snapshot
        try:
            while True:
                # Gather while there is room; a stop or a snapshot first drains the batches in flight, and a stop
                # is only final when none is left (the statistics then hold no virtual loss).
                room = depth if tree.root.visits >= overlap_from else 1
                if (not snapshot_due and len(in_flight) < room
                        and not self._should_stop(tree, stop, playouts, start, cfg, selections, len(in_flight))):
                    size = batch_size
                    if stop.playouts is not None:
                        size = min(size, stop.playouts - playouts - selections)
                    if stop.visits is not None:
                        size = min(size, stop.visits - tree.root.visits - selections)
                    pending = tree.gather(max(1, size))
                    selections += len(pending.selected)
                    in_flight.append((pending, self._evaluate(tree.evaluator, pending.states, workers,
                                                              split=room == 1)))
                    if len(in_flight) < room:
                        continue
                elif not in_flight:
                    if not snapshot_due:
                        break
                    on_snapshot(self._snapshot(tree, playouts, start, ownership_in_snapshots, cfg.choice))
                    next_snapshot = clock() + snapshot_interval
                    snapshot_due = False
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
                snapshot_due = snapshot_due or ended >= next_snapshot
        except BaseException:
            for pending, _ in reversed(in_flight):  # the latest first; finish() has abandoned its own batch
                if pending.selected:
                    tree.abandon(pending)
            raise
        self.stopped = clock()
        snapshot = self._snapshot(tree, playouts, start, True, cfg.choice)
        if on_snapshot:
            on_snapshot(snapshot if ownership_in_snapshots else replace(snapshot, ownership=None))
        return SearchResult(self._choose(tree, state, snapshot, cfg.choice), snapshot, list(tree.root.moves))

    def _evaluate(self, evaluator: Evaluator, states: list[GameState], workers: int, split: bool = False) -> InFlight:
        """The evaluation of a gathered batch's positions (its result None for none). With workers, the
        evaluation is prepared here, computed in a worker thread (or by the search thread, see run_queued), and its
        result taken here (evaluator.prepare): the worker then needs no GIL while the search thread gathers the next
        batch. Without, it is done now. split: the batch will be alone in flight, so its network step is cut into
        one call per thread, the search thread's included."""
        if workers and states and (self._workers is None or self._workers.count != workers):
            if self._workers is not None:
                self._workers.close()
            self._workers = EvaluationThreads(workers)
            weakref.finalize(self, self._workers.close)
        return _evaluation(evaluator, states, self._workers if workers else None, workers + 1 if split else 1)

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

    def _prepare_root(self, tree: Tree, exclude: Sequence[int], cfg: SearchConfig) -> None:
        root = tree.root
        tree.root_excluded = None
        if exclude:
            excluded = np.array([p in exclude for p in root.moves])
            tree.root_excluded = excluded if excluded.any() and not excluded.all() else None
        add_noise(tree, cfg.noise, self.rng)

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
                  choice: ChoiceConfig) -> Snapshot:
        root = tree.root
        value, utility, score = tree.root_value()
        lcb = _lcb(root, choice.lcb_z)
        chosen = choose_edge(tree, choice)
        visited = [i for i in np.flatnonzero(root.N > 0).tolist() if i != chosen]
        visited.sort(key=lambda i: (-root.N[i], -root.prior[i]))
        moves = [self._move_info(tree, i, k, lcb, value) for k, i in enumerate([chosen] + visited)]
        return Snapshot(
            to_play=tree.root_state.to_play, visits=root.visits, playouts=playouts,
            elapsed=self.clock() - start, winrate=_winrate(value), score_lead=score, moves=moves,
            ownership=tree.root_ownership() if with_ownership else None, utility=utility,
            score_stdev=tree.root_score_stdev(), raw_winrate=_winrate(root.net_v), raw_lead=root.net_s,
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
        did not visit it. Read between searches only."""
        tree = self.tree
        if tree is None or not tree.root.is_expanded or point not in tree.root.moves:
            return None
        return tree.edge_ownership(tree.root.moves.index(point))

    def _choose(self, tree: Tree, state: GameState, snapshot: Snapshot, choice: ChoiceConfig) -> MoveInfo:
        """The snapshot's move for pick_edge's choice (moves[0] is choose_edge's)."""
        point = tree.root.moves[pick_edge(tree, choice, state.move_number, self.rng)]
        return next((m for m in snapshot.moves if m.point == point), snapshot.moves[0])


class Job:
    """A computation that one thread runs and another waits for: a Future without cancellation or callbacks, which
    cost a 9x9 search about a microsecond a visit (a Future makes a Condition and notifies through it)."""

    __slots__ = ("_work", "_value", "_error", "_pending")

    def __init__(self, work: Callable[[], object] | None):
        self._work = work
        self._value = self._error = None
        self._pending = threading.Lock()  # held until run() ends; a waiter blocks on it
        self._pending.acquire()

    @classmethod
    def finished(cls, value: object = None, error: BaseException | None = None) -> Job:
        """A job already done, with this value or this error."""
        job = cls(None)
        job._value, job._error = value, error
        job._pending.release()
        return job

    def run(self) -> None:
        """Runs the work once, in any thread, keeping its value or what it raised."""
        try:
            self._value = self._work()
        except BaseException as error:  # noqa: BLE001 - raised where its result is taken
            self._error = error
        self._work = None
        self._pending.release()

    def done(self) -> bool:
        return not self._pending.locked()

    def result(self) -> object:
        """Waits for run() and returns the work's value, or raises what it raised."""
        if self._pending.locked():
            with self._pending:
                pass
        if self._error is not None:
            raise self._error
        return self._value


class InFlight:
    """A batch's evaluation in flight: done() says whether it is computed (every part of it); calling it waits for
    that and returns the evaluation (raising what computing it raised)."""

    def __init__(self, computed: Sequence[Job], result: Callable[[], EvaluationBatch | None]):
        self._computed, self._result = computed, result

    def done(self) -> bool:
        return all(part.done() for part in self._computed)

    def __call__(self) -> EvaluationBatch | None:
        for part in self._computed:
            part.result()
        return self._result()


class EvaluationThreads:
    """Daemon threads that compute the evaluations of batches in flight, oldest first; they never hold up the
    interpreter's exit. A job no thread has started yet may be run by the search thread instead (run_queued)."""

    def __init__(self, count: int):
        self.count = count
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        for i in range(count):
            threading.Thread(target=self._work, name=f"evaluation-{i}", daemon=True).start()
        # A thread whose evaluation ends while the search thread holds the GIL would wait the whole switch
        # interval (5 ms by default, longer than a batch) before it could hand its result back.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))

    def run_queued(self) -> bool:
        """Runs the oldest job no thread has started, in the calling thread; False when there is none."""
        try:
            job = self._jobs.get_nowait()
        except queue.Empty:
            return False
        if job is None:  # closing: leave the sentinel to a worker
            self._jobs.put(None)
            return False
        job.run()
        return True

    def submit(self, work: Callable[[], object]) -> Job:
        job = Job(work)
        self._jobs.put(job)
        return job

    def close(self) -> None:
        for _ in range(self.count):
            self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job.run()


class BackgroundSearch:
    """A search in a thread (pondering, analysis). stop() interrupts it after the batches in flight and waits."""

    def __init__(self, searcher: Searcher, state: GameState, stop: StopCondition,
                 on_snapshot: SnapshotCallback | None = None, snapshot_interval: float | None = None,
                 ownership_in_snapshots: bool = False, config: SearchConfig | None = None):
        self.interrupt = stop.interrupt or threading.Event()
        self.state = state.copy()  # the position searched
        self.result: SearchResult | None = None
        self.error: BaseException | None = None
        stop = replace(stop, interrupt=self.interrupt)
        self._thread = threading.Thread(
            target=self._run, args=(searcher, self.state, stop, on_snapshot, snapshot_interval,
                                    ownership_in_snapshots, config),
            name="background-search", daemon=True,
        )
        self._thread.start()

    def _run(self, searcher, state, stop, on_snapshot, interval, with_ownership, config) -> None:
        try:
            self.result = searcher.search(state, stop, on_snapshot, interval,
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


_PRIOR_VARIANCE = 0.25  # of utilities, as if one extra visit had seen it: keeps one-visit moves uncertain


def _lcb(node: Node, z: float) -> np.ndarray:
    """Lower confidence bound of the utility of each edge (-inf where unvisited)."""
    N, W, W2 = node.N, node.W, node.W2
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = W / N
        variance = np.maximum(W2 / N - mean * mean, 0.0)
        variance = (variance * N + _PRIOR_VARIANCE) / (N + 1.0)
        bound = mean - z * np.sqrt(variance / N)
    return np.where(N > 0, bound, -np.inf)


# ---- move pickers: the one place where a move is chosen from a tree (genmove, analysis, self-play, gating) --


def choose_edge(tree: Tree, choice: ChoiceConfig) -> int:
    """The root edge to play: the best LCB among well-visited moves, or the most visited; respects exclusions."""
    root = tree.root
    N = root.N.copy()
    if tree.root_excluded is not None:
        N[tree.root_excluded] = 0.0
    most = int(N.argmax())
    if N[most] <= 0:  # nothing visited yet: the first move by prior that may be chosen
        return 0 if tree.root_excluded is None else int(np.argmin(tree.root_excluded))
    if not choice.lcb:
        return most
    eligible = N >= max(1.0, choice.lcb_min_visits_ratio * N[most])
    lcb = np.where(eligible, _lcb(root, choice.lcb_z), -np.inf)
    return int(lcb.argmax())


def draw_edge(tree: Tree, temperature: float, rng: np.random.Generator,
              visits: np.ndarray | None = None) -> int | None:
    """A root edge drawn with probability proportional to visits ** (1 / temperature), never a pass (a drawn pass
    gives the game away for nothing) nor an excluded edge; None when no other edge has visits. visits: per root
    edge, the root's own when None (self-play with forced playouts gives its pruned visits)."""
    root = tree.root
    visits = (root.N[: len(root.moves)] if visits is None else np.asarray(visits)).astype(np.float64)
    drawable = np.where(np.array(root.moves) == PASS, 0.0, visits)
    if tree.root_excluded is not None:
        drawable[tree.root_excluded] = 0.0
    if not drawable.sum() > 0:
        return None
    weights = drawable if temperature == 1.0 else (drawable / drawable.max()) ** (1.0 / temperature)
    return int(rng.choice(len(weights), p=weights / weights.sum()))


def pick_edge(tree: Tree, choice: ChoiceConfig, move_number: int, rng: np.random.Generator,
              visits: np.ndarray | None = None) -> int:
    """The root edge to play at `move_number`: drawn with the temperature in the first temperature_moves moves
    (draw_edge, from `visits` when given), otherwise choose_edge's."""
    if choice.temperature > 0 and move_number < choice.temperature_moves:
        edge = draw_edge(tree, choice.temperature, rng, visits)
        if edge is not None:
            return edge
    return choose_edge(tree, choice)


def add_noise(tree: Tree, noise: NoiseConfig, rng: np.random.Generator) -> None:
    """The expanded root's priors for selection (tree.root_prior): the policy temperature applied, then Dirichlet
    noise mixed in; None (the priors themselves) without either."""
    root = tree.root
    tree.root_prior = None
    prior = root.prior
    if noise.root_policy_temperature != 1.0 and len(root.moves) > 1:
        prior = prior ** (1.0 / noise.root_policy_temperature)
        tree.root_prior = prior = prior / prior.sum()
    if noise.fraction > 0 and len(root.moves) > 1:
        dirichlet = rng.dirichlet(np.full(len(root.moves), noise.alpha_total / len(root.moves)))
        tree.root_prior = (1 - noise.fraction) * prior + noise.fraction * dirichlet


class ResignCounter:
    """Per colour, the searches in a row whose winrate was below ResignConfig.winrate; says when to resign."""

    def __init__(self, config: ResignConfig):
        self.config = config
        self.below = {BLACK: 0, WHITE: 0}

    def update(self, color: int, winrate: float, move_number: int, area: int, count: bool = True) -> bool:
        """Counts one search of `color` (winrate: its own) at `move_number`; True when it should resign now.
        count=False: the answer counting it would give, with nothing counted (a move asked for and not played)."""
        cfg = self.config
        after = cfg.after_moves if cfg.after_moves is not None else area // 4
        low = bool(cfg.winrate) and winrate < cfg.winrate and move_number >= after
        below = self.below[color] + 1 if low else 0
        if count:
            self.below[color] = below
        return below >= cfg.consecutive


# ---- rounds over many trees, and games in lanes (self-play, gating, tuning) ------------------------------------


def start_round(trees: Sequence[Tree], leaves: Sequence[int], threads: EvaluationThreads | None = None,
                chunks: int = 1) -> Round:
    """The first half of a round: each tree gathers up to leaves[i] leaves (mcts.Tree.gather), and the positions of
    the trees that share an evaluator are evaluated in up to `chunks` calls (one by default), whole trees to a call.
    With threads, the calls are computed there (or by the caller while it waits, EvaluationThreads.run_queued), so
    the caller may work on other trees until Round.finish; without, they are computed now."""
    pending: list[PendingBatch] = []
    try:
        for tree, size in zip(trees, leaves):
            pending.append(tree.gather(max(1, size)))
        groups: dict[int, list[int]] = {}  # id(evaluator) -> indices of its trees, in order
        for i, tree in enumerate(trees):
            groups.setdefault(id(tree.evaluator), []).append(i)
        calls: list[tuple[list[int], InFlight]] = []
        for members in groups.values():
            evaluator = trees[members[0]].evaluator
            for part in _split(members, [len(pending[i].states) for i in members], chunks):
                states = [state for i in part for state in pending[i].states]
                calls.append((part, _evaluation(evaluator, states, threads)))
    except BaseException:
        for tree, batch in zip(trees, pending):
            tree.abandon(batch)
        raise
    return Round(trees, pending, calls, threads)


class Round:
    """A round whose evaluations are in flight (start_round); finish() completes it."""

    def __init__(self, trees: Sequence[Tree], pending: list[PendingBatch], calls: list[tuple[list[int], InFlight]],
                 threads: EvaluationThreads | None):
        self._trees, self._pending, self._calls, self._threads = trees, pending, calls, threads

    def finish(self) -> tuple[int, int]:
        """Waits for the evaluations, computing queued ones meanwhile, and finishes every tree's batch. Returns
        (positions evaluated, evaluator calls). If anything fails, the trees not yet finished abandon their batches."""
        trees, pending = self._trees, self._pending
        unfinished = set(range(len(trees)))
        evaluations = calls = 0
        try:
            for members, evaluation in self._calls:
                while not evaluation.done() and self._threads is not None and self._threads.run_queued():
                    pass
                count = sum(len(pending[i].states) for i in members)
                batch = evaluation() if count else None
                evaluations += count
                calls += 1 if count else 0
                start = 0
                for i in members:
                    size = len(pending[i].states)
                    unfinished.discard(i)  # finish() abandons its own batch when it fails
                    trees[i].finish(pending[i], _rows(batch, start, start + size) if size else None)
                    start += size
        except BaseException:
            for i in unfinished:
                trees[i].abandon(pending[i])
            raise
        return evaluations, calls


class RoundGame(Protocol):
    """A game that play_games drives: the search tree of its move in progress, the leaves it wants this round,
    what it does once a round is finished (plays the move when its search is done, which may end the game)."""

    tree: Tree

    def wants(self) -> int: ...

    def advance(self) -> None: ...

    @property
    def over(self) -> bool: ...


def play_games(start: Callable[[int], Sequence[RoundGame]],
               after_round: Callable[[list[RoundGame], int, int], bool],
               parallel: int, evaluation_threads: int = 0) -> None:
    """Plays games in rounds (see games in lanes) until none is left. start(n) gives up to n new games (a few more
    is fine; none once no more are due); after each round and every game's advance(), after_round(ended,
    evaluations, calls) gets the games that ended in it and the round's positions and evaluator calls, and may
    return True to stop at once (the games in progress are dropped). The collector is relaxed throughout."""
    with collector_relaxed():
        _play_games(start, after_round, parallel, evaluation_threads)


def _play_games(start: Callable[[int], Sequence[RoundGame]],
                after_round: Callable[[list[RoundGame], int, int], bool],
                parallel: int, evaluation_threads: int) -> None:
    lanes: list[list[RoundGame]] = [[], []] if evaluation_threads else [[]]
    rounds: list[Round | None] = [None] * len(lanes)
    threads = EvaluationThreads(evaluation_threads) if evaluation_threads else None
    try:
        while True:
            for lane, games in enumerate(lanes):
                if rounds[lane] is not None:
                    evaluations, calls = rounds[lane].finish()
                    for game in games:
                        game.advance()
                    ended = [game for game in games if game.over]
                    games[:] = [game for game in games if not game.over]
                    if after_round(ended, evaluations, calls):
                        return
                seats = (parallel + len(lanes) - 1 - lane) // len(lanes) - len(games)
                if seats > 0:
                    games.extend(start(seats))
                rounds[lane] = start_round([game.tree for game in games], [game.wants() for game in games],
                                           threads, evaluation_threads + 1) if games else None
            if not any(rounds):
                return
    finally:
        if threads is not None:
            threads.close()


def network_threads(evaluation_threads: int, cores: int | None = None) -> int:
    """onnxruntime's CPU threads per call when evaluation threads and the calling thread compute at once: the cores
    shared among them (0, onnxruntime's own choice, without evaluation threads)."""
    if not evaluation_threads:
        return 0
    return max(1, (cores or os.cpu_count() or 1) // (evaluation_threads + 1))


def _split(members: list[int], sizes: list[int], chunks: int) -> list[list[int]]:
    """members in order, cut into up to `chunks` runs of about equal total size (no run empty)."""
    total = sum(sizes)
    if chunks <= 1 or total == 0:
        return [members]
    parts: list[list[int]] = [[]]
    done = 0
    for member, size in zip(members, sizes):
        if parts[-1] and done >= total * len(parts) / chunks:
            parts.append([])
        parts[-1].append(member)
        done += size
    return parts


def _evaluation(evaluator: Evaluator, states: list[GameState], threads: EvaluationThreads | None,
                parts: int = 1) -> InFlight:
    """The evaluation of `states` (None for none): prepared here and computed by `threads`, in up to `parts` calls
    where the evaluator can split its compute step (evaluator.compute_steps), or computed now."""
    try:
        if threads is not None and states:
            evaluation = prepare(evaluator, states)
            return InFlight([threads.submit(step) for step in compute_steps(evaluation, parts)], evaluation.result)
        done = Job.finished(evaluator.evaluate(states) if states else None)
    except Exception as error:  # raised where the round is finished, which abandons its trees' batches
        done = Job.finished(error=error)
    return InFlight([done], done.result)


def _rows(batch: EvaluationBatch, start: int, stop: int) -> EvaluationBatch:
    return EvaluationBatch(batch.policy[start:stop], batch.value[start:stop], batch.score[start:stop],
                           batch.ownership[start:stop])
