"""Searcher: runs the tree search (mcts.py) on a position until a stop condition, and says what it found.

Terms:
- visits: backups through the root, those kept from earlier searches included (tree reuse); playouts: backups
  made by this search alone.
- stop condition: visits, playouts, a deadline (time.monotonic() seconds) and an interrupt Event; the search
  stops at the first one reached, and only between batches. A time budget becomes a stop condition through
  StopCondition.for_budget; this module never sees a clock. Early stop: when the most visited move cannot be
  overtaken within the playouts left, searching on cannot change the answer.
- tree reuse: a new search whose position follows from the last search's root by moves already in the tree
  starts from that subtree, with its visits. Under a move filter (mcts.MoveFilter, counted in plies from the
  root) a tree is kept only for the same position and the same filter.
- snapshot: what the search thinks now, for analysis: per visited root move its visits, winrate, score lead,
  prior, LCB and principal variation (PV), plus root ownership (the mean over the root's backups, kept ones
  included: a search that needs no new playouts still has it). Winrates are probabilities in [0, 1] and leads
  are points, both from the view of the side to move at the root.
- LCB: lower confidence bound of a move's utility, Q - lcb_z * standard error; the move is chosen by LCB among
  moves with at least lcb_min_visits_ratio of the most visited move's visits (Leela Zero 0.17).
- noise, temperature: self-play exploration. Dirichlet noise mixes into the root priors; with a temperature T,
  the move is drawn with probability proportional to visits ** (1 / T) for the first temperature_moves moves.
- background search: pondering and analysis in a thread; stop() interrupts it within one batch and joins.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from gtp_engine.board import opponent
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveFilter, Node, Tree, TreeConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchConfig:
    tree: TreeConfig = TreeConfig()  # selection and utility (mcts.py)
    batch_size: int = 8  # leaves per evaluator call
    lcb: bool = True  # choose the move by lower confidence bound; False: by visits
    lcb_z: float = 3.0  # standard errors below the mean for the LCB (Leela Zero ~4, KataGo 5 with its own errors)
    lcb_min_visits_ratio: float = 0.1  # moves with fewer visits than this share of the most visited are not chosen
    early_stop: bool = True  # stop once the most visited move cannot be overtaken
    reuse_tree: bool = True  # keep the subtree of the moves played since the last search
    noise_fraction: float = 0.0  # weight of Dirichlet noise in the root priors (self-play: 0.25; play: 0)
    noise_alpha_total: float = 10.83  # Dirichlet alpha times the number of legal moves (0.03 on 19x19, KataGo)
    temperature: float = 0.0  # self-play: pick by visits ** (1 / temperature); 0 picks the best move
    temperature_moves: int = 0  # moves of the game played with the temperature
    resign_threshold: float | None = 0.05  # resign when the best move's winrate is below this; None or 0: never
    resign_after_moves: int | None = None  # no resignation before this move number; None: a quarter of the area
    default_visits: int = 800  # visits when a stop condition sets no limit at all (no visits, playouts or time)
    max_tree_visits: int = 200_000  # no search grows the tree past this (memory: a 19x19 node takes ~3 kB)
    ownership_playouts: int = 100  # playouts for an ownership estimate when no search has covered the position
    seed: int | None = None  # random seed for noise and temperature


@dataclass
class StopCondition:
    visits: int | None = None  # root visits, reused ones included
    playouts: int | None = None  # backups of this search
    deadline: float | None = None  # time.monotonic() at which to stop
    interrupt: threading.Event | None = None  # set by another thread: stop after the current batch
    max_deadline: float | None = None  # the search may run past deadline up to this while its choice is unsettled
    min_deadline: float | None = None  # no early stop before this: time not used here is lost (byo-yomi)

    @classmethod
    def for_budget(cls, start: float, minimum: float, recommended: float, maximum: float,
                   interrupt: threading.Event | None = None, visits: int | None = None) -> StopCondition:
        """From a time budget in seconds (timecontrol.budget) counted from `start` (time.monotonic())."""
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

    def __init__(self, evaluator: Evaluator, config: SearchConfig = SearchConfig()):
        self.evaluator = evaluator
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.tree: Tree | None = None
        self._tree_key: tuple | None = None  # _position_key of tree.root_state
        self._tree_filter = MoveFilter()  # the filter the tree grew under

    def reset(self) -> None:
        """Forgets the tree (new game, undo, changed rules or komi)."""
        self.tree = None
        self._tree_key = None

    def search(self, state: GameState, stop: StopCondition, on_snapshot: SnapshotCallback | None = None,
               snapshot_interval: float | None = None, exclude: Sequence[int] = (),
               ownership_in_snapshots: bool = False, move_filter: MoveFilter = MoveFilter()) -> SearchResult:
        """Searches `state` (for its to_play) until `stop`; never plays a move.

        exclude: root moves not to search or choose unless nothing else is legal (cleanup: PASS).
        move_filter: moves not to search near the root (analysis: avoid / allow).
        on_snapshot gets a snapshot every snapshot_interval seconds (checked between batches) and a last one.
        """
        start = time.monotonic()
        cfg = self.config
        tree = self._tree_for(state, move_filter)
        if not stop.is_bounded and stop.interrupt is None:
            stop = replace(stop, visits=cfg.default_visits)
        playouts = 0 if tree.root.is_expanded else tree.run_batch(1)
        self._prepare_root(tree, state, exclude)
        next_snapshot = start + snapshot_interval if on_snapshot and snapshot_interval is not None else math.inf
        batch_size = max(1, cfg.batch_size)
        while not self._should_stop(tree, stop, playouts, start):
            size = batch_size
            if stop.playouts is not None:
                size = min(size, stop.playouts - playouts)
            if stop.visits is not None:
                size = min(size, stop.visits - tree.root.visits)
            playouts += tree.run_batch(max(1, size))
            if time.monotonic() >= next_snapshot:
                on_snapshot(self._snapshot(tree, playouts, start, ownership_in_snapshots))
                next_snapshot = time.monotonic() + snapshot_interval
        snapshot = self._snapshot(tree, playouts, start, True)
        if on_snapshot:
            on_snapshot(snapshot if ownership_in_snapshots else replace(snapshot, ownership=None))
        return SearchResult(self._choose(tree, state, snapshot), snapshot, list(tree.root.moves))

    # ---- tree reuse -----------------------------------------------------------------------------------

    def _tree_for(self, state: GameState, move_filter: MoveFilter) -> Tree:
        key = _position_key(state)
        root = None
        if self.config.reuse_tree and self.tree is not None and move_filter == self._tree_filter:
            if not move_filter or key == self._tree_key:
                root = self._reusable_root(state, key)
        self.tree = Tree(self.evaluator, state.copy(), self.config.tree, root=root, move_filter=move_filter)
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

    def _prepare_root(self, tree: Tree, state: GameState, exclude: Sequence[int]) -> None:
        cfg = self.config
        root = tree.root
        tree.root_excluded = None
        if exclude:
            excluded = np.array([p in exclude for p in root.moves])
            tree.root_excluded = excluded if excluded.any() and not excluded.all() else None
        tree.root_prior = None
        if cfg.noise_fraction > 0 and len(root.moves) > 1:
            alpha = cfg.noise_alpha_total / len(root.moves)
            noise = self.rng.dirichlet(np.full(len(root.moves), alpha))
            tree.root_prior = (1 - cfg.noise_fraction) * root.prior + cfg.noise_fraction * noise

    # ---- stopping -------------------------------------------------------------------------------------

    def _should_stop(self, tree: Tree, stop: StopCondition, playouts: int, start: float) -> bool:
        if stop.interrupt is not None and stop.interrupt.is_set():
            return True
        visits = tree.root.visits
        if visits >= self.config.max_tree_visits or (stop.visits is not None and visits >= stop.visits):
            return True
        if stop.playouts is not None and playouts >= stop.playouts:
            return True
        now = time.monotonic()
        if stop.deadline is not None and now >= stop.deadline:
            if stop.max_deadline is None or now >= stop.max_deadline or self._settled(tree):
                return True
        return self.config.early_stop and self._futile(tree, stop, playouts, start, now)

    def _settled(self, tree: Tree) -> bool:
        """Whether the move the search would choose is also the most visited one."""
        root = tree.root
        return choose_edge(tree, self.config) == int(root.N.argmax())

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
        if remaining == math.inf:
            return False
        N = tree.root.N
        if len(N) < 2:
            return True
        second, first = np.partition(N, -2)[-2:]
        return first - second > remaining

    # ---- results --------------------------------------------------------------------------------------

    def _snapshot(self, tree: Tree, playouts: int, start: float, with_ownership: bool) -> Snapshot:
        root = tree.root
        value, _, score = tree.root_value()
        lcb = _lcb(root, self.config.lcb_z)
        chosen = choose_edge(tree, self.config)
        visited = [i for i in np.flatnonzero(root.N > 0).tolist() if i != chosen]
        visited.sort(key=lambda i: (-root.N[i], -root.prior[i]))
        moves = [self._move_info(tree, i, k, lcb, value) for k, i in enumerate([chosen] + visited)]
        return Snapshot(
            to_play=tree.root_state.to_play, visits=root.visits, playouts=playouts,
            elapsed=time.monotonic() - start, winrate=_winrate(value), score_lead=score, moves=moves,
            ownership=tree.root_ownership() if with_ownership else None,
        )

    def _move_info(self, tree: Tree, edge: int, order: int, lcb: np.ndarray, root_value: float) -> MoveInfo:
        root = tree.root
        n = root.N[edge]
        return MoveInfo(
            point=root.moves[edge], visits=int(n), winrate=_winrate(root.V[edge] / n if n else root_value),
            score_lead=float(root.S[edge] / n) if n else 0.0, prior=float(root.prior[edge]),
            lcb=_winrate(root.V[edge] / n - (root.W[edge] / n - lcb[edge])) if n else 0.0, order=order, pv=tree.principal_variation(edge),
        )

    def _choose(self, tree: Tree, state: GameState, snapshot: Snapshot) -> MoveInfo:
        cfg = self.config
        moves = snapshot.moves
        if cfg.temperature > 0 and state.move_number < cfg.temperature_moves and len(moves) > 1:
            visits = np.array([m.visits for m in moves], dtype=np.float64)
            weights = (visits / visits.max()) ** (1.0 / cfg.temperature)
            return moves[int(self.rng.choice(len(moves), p=weights / weights.sum()))]
        return moves[0]


class BackgroundSearch:
    """A search in a thread (pondering, analysis). stop() interrupts it after the current batch and waits."""

    def __init__(self, searcher: Searcher, state: GameState, stop: StopCondition,
                 on_snapshot: SnapshotCallback | None = None, snapshot_interval: float | None = None,
                 ownership_in_snapshots: bool = False):
        self.interrupt = stop.interrupt or threading.Event()
        self.state = state.copy()  # the position searched
        self.result: SearchResult | None = None
        self.error: BaseException | None = None
        stop = replace(stop, interrupt=self.interrupt)
        self._thread = threading.Thread(
            target=self._run, args=(searcher, self.state, stop, on_snapshot, snapshot_interval,
                                    ownership_in_snapshots),
            name="background-search", daemon=True,
        )
        self._thread.start()

    def _run(self, searcher, state, stop, on_snapshot, interval, with_ownership) -> None:
        try:
            self.result = searcher.search(state, stop, on_snapshot, interval,
                                          ownership_in_snapshots=with_ownership)
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


def choose_edge(tree: Tree, config: SearchConfig) -> int:
    """The root edge to play: the best LCB among well-visited moves, or the most visited; respects exclusions."""
    root = tree.root
    N = root.N.copy()
    if tree.root_excluded is not None:
        N[tree.root_excluded] = 0.0
    most = int(N.argmax())
    if N[most] <= 0:  # nothing visited yet: the first move by prior that may be chosen
        return 0 if tree.root_excluded is None else int(np.argmin(tree.root_excluded))
    if not config.lcb:
        return most
    eligible = N >= max(1.0, config.lcb_min_visits_ratio * N[most])
    lcb = np.where(eligible, _lcb(root, config.lcb_z), -np.inf)
    return int(lcb.argmax())
