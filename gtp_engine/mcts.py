"""Monte Carlo tree search: the tree, PUCT selection, virtual loss, batched leaf evaluation and backup.

Terms (AlphaGo Zero / KataGo notation):
- node: a position reached in the tree. Its edges are its legal moves, stored in order of falling prior P;
  the child node behind an edge is created when the edge is first selected, and expanded (given edges) when
  its evaluation comes back.
- edge statistics, per edge of a node: N visits, W utility sum, W2 sum of squared utilities, V value sum,
  S score sum, S2 sum of squared scores (the spread of the backed-up leads, for analysis). Arrays are kept
  only for the first `tried` edges (a prefix, see select): most edges of most nodes are never visited.
- perspective: every number stored in a node or its edges is from the view of the player to move at that
  node, the player who chooses among its edges. The evaluator also speaks for the side to move; tree_core.backup's
  two columns of increments (the leaf's parent's and the leaf's player's) are the one place where a value changes
  side.
- value v in [-1, 1]: expected result (+1 a win). score s: expected lead in points. utility u: what the search
  maximises, v plus a small bonus for score (score_utility * tanh(s / score_scale)), so that among won
  (or lost) lines the search prefers larger margins; winrates and leads are reported from V and S.
- tree config (TreeConfig): the parameters of selection and of the utility below; every tree is built from one.
- PUCT: an edge's score is Q + c * P * sqrt(sum N) / (1 + N) with Q = W / N, and
  c = c_puct + c_puct_log * ln((sum N + c_puct_base) / c_puct_base), growing slowly with visits (KataGo).
- FPU (first play urgency): an unvisited edge's Q is the node's own network utility minus
  fpu_reduction * sqrt(total prior of the visited edges) (Leela Zero's FPU reduction).
- forced playouts (KataGo, self-play only): with root_forced_k = k > 0, a root edge whose visits N are below
  sqrt(k * P * sum N) (P the root's selection prior, noise included) is chosen before PUCT is consulted, so
  that every move the noise lifts gets a few visits; the policy target then prunes the visits its prior does
  not explain (selfplay.prune_visits). 0 (play, analysis): never.
- virtual loss: while a leaf waits in a batch, every edge on its path counts virtual_loss extra visits that
  were all lost, so the next selections of the batch spread to other leaves. It is always reverted, by the
  backup or, when evaluation fails, by abandon().
- terminal node: the position after two passes in a row. It is scored exactly by the game's rules (GameState.score)
  and never sent to the evaluator. Under area scoring every stone counts alive, as Tromp-Taylor has it (capturing a
  dead stone costs nothing there, so the search captures before it passes). Under territory scoring the rules take
  dead stones off without play, and each stone played to capture one costs a point: the stones the root's mean
  ownership holds for dead with confidence (endgame.dead_stones beyond SURE_DEAD_OWNERSHIP) come off the count as
  prisoners, as a referee removes them; a chain it is unsure of stays, for the search to settle by play.
- pending batch: the two halves of a batch split apart, so that many trees (self-play games) can share one
  evaluator call: gather() selects the leaves under virtual loss and lists the positions to evaluate; finish()
  expands and backs up from their evaluations; abandon() reverts a gathered batch whose evaluation failed.
  run_batch() is gather, one evaluator call, finish.
- duplicate: a pending leaf (selected, not yet evaluated) selected again in the same batch; it is evaluated once
  and its result backed up once per selection.
- batches in flight: a tree may have several gathered batches not yet finished (the Searcher evaluates one
  while it gathers the next). They must be finished in the order they were gathered, and abandoned in the
  reverse order. A leaf pending in an earlier batch and selected again is awaited: the later batch backs up
  the result the earlier one brings, once per selection.
- leaf positions: the positions a descent plays its line on and the evaluator reads, of the tree's position kind
  (position.kind_for its evaluator): compiled search positions for an evaluator that accepts them, else GameStates.
- lazy legality: a leaf gets an edge for every empty point and pass; the rarer illegal ones (suicide, ko,
  superko) are dropped when first selected, which costs one legality check instead of a full legal-move mask
  per leaf. The root's edges are always all legal (checked with GameState.legal_mask).
- move filter: moves the search must leave alone near the root (KataGo's and Leela Zero's avoid / allow). Its
  clauses name a colour, points (PASS allowed) and a depth d: the colour's moves at plies 1..d of the tree
  (the root's moves are ply 1) lose the listed points (avoid), or everything but them, pass included unless
  listed (allow, as KataGo). A filtered move never becomes an edge. Where a filter would leave a node without
  a legal move it is ignored there: a position always has a move.
- ownership: each backup carries an ownership map (Black's view, +1 Black's): the network's for the position it
  evaluated, or the exact area ownership at a terminal node. Every node within OWNERSHIP_DEPTH plies of the
  root sums the maps of the backups through it (its own evaluation included), so a node keeps its mean
  ownership when tree reuse makes it the root; deeper nodes keep none (memory).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from gtp_engine import endgame, position, tree_core
from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS, Grid
from gtp_engine.evaluator import EvaluationBatch, Evaluator
from gtp_engine.game import GameState

_INITIAL_EDGES = 4  # edge statistics arrays start this long and double as more edges get tried
_STATS = 6  # rows of Node.stats: N, W, W2, V, S, S2
OWNERSHIP_DEPTH = 2  # plies below the root whose nodes sum ownership: tree reuse after our move and the reply


@dataclass(frozen=True)
class MoveClause:
    """One avoid or allow clause of a MoveFilter."""

    color: int
    points: frozenset[int]  # board points, PASS allowed
    until_depth: int  # the clause covers plies 1..until_depth below the root
    allow: bool  # True: only these points; False: never these points


@dataclass(frozen=True)
class MoveFilter:
    """Moves the search must not consider near the root; see the module docstring. Empty: no restriction.

    Per colour either avoid clauses (any number) or a single allow clause, as KataGo accepts them.
    """

    clauses: tuple[MoveClause, ...] = ()

    def __post_init__(self) -> None:
        for color in (BLACK, WHITE):
            mine = [c for c in self.clauses if c.color == color]
            if len(mine) > 1 and any(c.allow for c in mine):
                raise ValueError("a colour takes either avoid clauses or one allow clause")
        if any(c.until_depth < 1 for c in self.clauses):
            raise ValueError("the depth of a clause is at least 1")

    def __bool__(self) -> bool:
        return bool(self.clauses)

    @property
    def depth(self) -> int:
        """The deepest ply any clause covers; 0 for no filter."""
        return max((c.until_depth for c in self.clauses), default=0)

    def permits(self, color: int, point: int, ply: int) -> bool:
        return not any(c.color == color and ply <= c.until_depth and (point in c.points) != c.allow
                       for c in self.clauses)

    def banned(self, g: Grid, color: int, ply: int) -> np.ndarray:
        """Bool per flat index, pass last: the moves of `color` this filter takes away at `ply`."""
        banned = np.zeros(g.area + 1, dtype=bool)
        for c in self.clauses:
            if c.color == color and ply <= c.until_depth:
                listed = np.zeros(g.area + 1, dtype=bool)
                listed[[g.flat(p) for p in c.points]] = True
                banned |= ~listed if c.allow else listed
        return banned


@dataclass(frozen=True)
class TreeConfig:
    """How a tree selects and what it maximises (see the module docstring); the defaults are the engine's."""

    c_puct: float = 1.0  # exploration at the start of a search; values are on the [-1, 1] scale (KataGo's 1.0)
    c_puct_log: float = 0.45  # growth of exploration with the log of a node's visits (KataGo)
    c_puct_base: float = 500.0  # visits at which that growth reaches c_puct_log * ln 2
    fpu_reduction: float = 0.25  # unvisited moves count as the parent's value minus this * sqrt(visited prior)
    root_fpu_reduction: float = 0.1  # the same at the root, where wider search pays off
    virtual_loss: float = 1.0  # lost visits a pending leaf adds to its path while its batch is evaluated
    score_utility: float = 0.1  # weight of the score lead in what the search maximises (0: winrate only)
    score_scale: float | None = None  # points for which tanh(lead / scale) saturates; None: sqrt(board area) / 2

    def scale_for(self, area: int) -> float:
        return self.score_scale if self.score_scale is not None else math.sqrt(area) / 2


class Node(tree_core.NODE_FIELDS):
    """A node of the tree: its fields (tree_core.NodeFields, compiled where built) and what Python does with them.

    moves: board points of the edges (PASS included), a tuple, None until expanded; prior: float64, falling; tried:
    edges with statistics, the prefix 0..tried-1; tried_prior: the sum of their priors; stats: float64 (6, capacity),
    rows N, W, W2, V, S, S2 (also read as node.N, ...); nsum: sum of N over the edges, virtual loss included; children:
    edge index -> child; visits: backups through this node (its own evaluation included); net_v, net_u, net_s: its
    evaluation, exact for a terminal node; terminal; ownership: a terminal node's exact area ownership, Black's view;
    ownership_sum, ownership_count: over the backups counted here (see the module docstring).
    """

    __slots__ = ()

    def add_ownership(self, ownership: np.ndarray) -> None:
        if self.ownership_sum is None:
            self.ownership_sum = np.zeros(len(ownership))
        self.ownership_sum += ownership
        self.ownership_count += 1

    def mean_ownership(self) -> np.ndarray | None:
        """The mean of the ownership maps counted here (Black's view), None before any."""
        return self.ownership_sum / self.ownership_count if self.ownership_count else None

    @property
    def is_expanded(self) -> bool:
        return self.moves is not None

    def expand(self, moves: np.ndarray, prior: np.ndarray) -> None:
        """Gives the node its edges: moves (board points) with priors that sum to 1, any order."""
        order = np.argsort(-prior, kind="stable")
        self.moves = tuple(np.asarray(moves)[order].tolist())
        self.prior = np.asarray(prior, dtype=np.float64)[order]
        self._allocate(min(_INITIAL_EDGES, len(moves)))

    def drop_edges(self, drop: np.ndarray) -> None:
        """Removes the edges marked in `drop` (bool per edge), which must all be untried; renormalises priors."""
        keep = ~drop
        if self.tried and drop[: self.tried].any():
            raise ValueError("only untried edges can be dropped")
        new_index = np.cumsum(keep) - 1
        self.moves = tuple([m for m, k in zip(self.moves, keep.tolist()) if k])
        prior = self.prior[keep]
        total = prior.sum()
        self.prior = prior / total if total > 0 else np.full(len(prior), 1.0 / max(1, len(prior)))
        self.tried_prior = float(self.prior[: self.tried].sum())
        self.children = {int(new_index[e]): c for e, c in self.children.items() if keep[e]}

    def _allocate(self, capacity: int) -> None:
        stats = np.zeros((_STATS, capacity))
        if self.stats is not None:
            kept = min(capacity, self.stats.shape[1])
            stats[:, :kept] = self.stats[:, :kept]
        self.stats = stats

    def try_all(self) -> None:
        """Gives every edge statistics, so that any edge can be selected (the root, see select_root)."""
        if self.stats.shape[1] != len(self.moves):
            self._allocate(len(self.moves))
        self.tried = len(self.moves)
        self.tried_prior = float(self.prior.sum())


@dataclass
class PendingBatch:
    """A gathered batch (see the module docstring): what Tree.gather selected and Tree.finish needs."""

    states: list = field(default_factory=list)  # leaf positions to evaluate (position.py), one per new leaf; may be
    # empty; the root's GameState when the batch expands the root
    root: bool = False  # the batch is the expansion of an unexpanded root (states holds its position)
    leaves: list[Node] = field(default_factory=list)  # the new leaves, in the order of states
    root_mask: np.ndarray | None = None  # the root's moves, when the batch expands the root
    plies: list[int] = field(default_factory=list)  # per state: its depth below the root (the root's moves are ply 1)
    selected: list[tuple[Node, list]] = field(default_factory=list)  # (leaf, path) per selection, any kind of leaf;
    # path: [node, edge, node, edge, ...] from the root (tree_core.descend)


class Tree:
    """One search tree over a root position, with the parameters of selection; see the module docstring.

    run_batch() grows the tree by up to one batch of playouts, or gather() and finish() do, with the evaluation
    in between left to the caller. Everything else reads it.
    """

    def __init__(self, evaluator: Evaluator, root_state: GameState, config: TreeConfig = TreeConfig(), *,
                 root: Node | None = None, move_filter: MoveFilter = MoveFilter()):
        """root_state: the tree's own copy (never changed); root: a kept subtree of an earlier tree for it."""
        self.evaluator = evaluator
        self.root_state = root_state
        self.root = root if root is not None else Node()
        self.config = config
        self.virtual_loss = config.virtual_loss
        self.score_utility = config.score_utility
        self.score_scale = config.scale_for(root_state.grid.area)
        self._core = tree_core.CORE  # the inner loop (tree_core.py): compiled where built
        self._params = tree_core.PuctParams(
            c_puct=float(config.c_puct), c_puct_log=float(config.c_puct_log), c_puct_base=float(config.c_puct_base),
            fpu_reduction=float(config.fpu_reduction), virtual_loss=float(config.virtual_loss))
        g = root_state.grid
        self.area = g.area
        self._point_of_flat = np.append(g.point_of, PASS)
        kind = self._kind = position.kind_for(evaluator)  # what the leaves' positions are (position.py)
        self._root_position = kind.root(root_state)  # what each descent copies and plays its line on
        # What descents call back into; no bound method, so that the tree holds no reference cycle.
        judge = self.root.mean_ownership if root_state.rules.scoring == "territory" else None
        self._hooks = tree_core.Hooks(
            Node, functools.partial(_make_terminal, self.score_utility, self.score_scale, kind.game_state, judge),
            self._drop_illegal, kind.play_line, kind.illegal_reason, kind.copy)
        self.root_prior: np.ndarray | None = None  # replaces the root's priors in selection (noise)
        # the root's priors a strength level takes its candidates and draw from (the network's own, averaged over
        # the board's symmetries; search/choice.py); None: the root's priors
        self.level_prior: np.ndarray | None = None
        self.root_excluded: np.ndarray | None = None  # bool per root edge: never select (e.g. pass in cleanup)
        self.root_forced_k = 0.0  # forced playouts at the root (self-play): k of sqrt(k * P * sum N), 0 none
        self.move_filter = move_filter  # a kept root must have been grown under the same filter
        self._filter_depth = move_filter.depth  # read for every new leaf
        self._banned: dict[tuple[int, int], np.ndarray] = {}  # (colour, ply) -> move_filter.banned(...)
        self._in_flight: dict[int, int] = {}  # id(leaf) -> selections awaiting it, per leaf of an unfinished batch
        self._awaited: dict[int, list] = {}  # id(leaf) -> [result, ownership, selections left], once it is evaluated
        if self.root.is_expanded:  # a subtree kept from an earlier search: its untried edges were never checked
            legal = root_state.legal_mask()
            flats = np.array([g.flat(p) for p in self.root.moves])
            drop = ~legal[flats]
            if drop.any():
                self.root.drop_edges(drop)
            self.root.try_all()

    # ---- selection ------------------------------------------------------------------------------------

    def exploration(self, nsum: float) -> float:
        """c * sqrt(sum N): the factor on P / (1 + N) in PUCT."""
        return tree_core.exploration(nsum, self._params)

    def select(self, node: Node) -> int:
        """The edge of a node below the root with the highest PUCT score: tree_core.select."""
        return self._core.select(node, self._params)

    def select_root(self) -> int:
        """The root's edge, over noisy priors, skipping excluded edges, forced playouts first: tree_core.select_root.

        Every root edge has statistics (try_all), so any edge can be chosen, not only the next by prior.
        """
        return self._core.select_root(self.root, *self._root_selection(), self._params)

    def _root_selection(self) -> tuple:
        """select_root's arguments between the root and the params: (prior, excluded, forced_k, fpu_reduction)."""
        return self.root_prior, self.root_excluded, float(self.root_forced_k), float(self.config.root_fpu_reduction)

    # ---- one batch ------------------------------------------------------------------------------------

    def run_batch(self, size: int) -> int:
        """Selects up to `size` leaves, evaluates the new ones in one evaluator call, backs every one up.

        Returns the number of playouts (backups). If the evaluator raises, every virtual loss is reverted and
        the leaves created by this batch are removed before the exception propagates.
        """
        pending = self.gather(size)
        try:
            batch = self.evaluator.evaluate(pending.states) if pending.states else None
        except BaseException:
            self.abandon(pending)
            raise
        return self.finish(pending, batch)

    def gather(self, size: int) -> PendingBatch:
        """The first half of a batch: selects up to `size` leaves under virtual loss (the unexpanded root alone
        when the tree is new). Its .states go to an evaluator, possibly one call shared with other trees; then
        finish() or, if that evaluation fails, abandon(). In between, only more batches may be gathered (batches
        in flight, see the module docstring); nothing else may touch the tree."""
        pending = PendingBatch()
        if not self.root.is_expanded:
            pending.root = True
            pending.states.append(self.root_state)
            pending.root_mask = self._filter(self._root_position, self.root_state.legal_mask(), 1)
            return pending
        in_flight = self._in_flight
        try:
            self._core.gather(self.root, self._root_position, size, self._root_selection(), self._params, self._hooks,
                              in_flight, pending.selected, pending.leaves, pending.states, pending.plies)
        except BaseException:
            self.abandon(pending)
            raise
        for leaf in pending.leaves:
            in_flight[id(leaf)] = 0
        return pending

    def finish(self, pending: PendingBatch, batch: EvaluationBatch | None) -> int:
        """The second half of a batch: expands the leaves of `pending` from `batch` (the evaluations of
        pending.states, in order; None when there were none) and backs every selection up. Returns the number of
        playouts. A batch that does not fit is an error, after abandon(pending)."""
        if pending.root:
            self._expand_root(pending.root_mask, batch)
            return 1
        selected, leaves, states = pending.selected, pending.leaves, pending.states
        evaluated = {}  # id(leaf) -> ((v, u, s), ownership) for this batch's leaves
        if states:
            try:
                self._expand_leaves(leaves, self._candidates(states, pending.plies), batch)
            except BaseException:
                self.abandon(pending)
                raise
            evaluated = self._take_evaluations(leaves, states, batch, self._in_flight)
        count = len(selected)
        self._core.back_up(selected, evaluated, self._awaited, self.virtual_loss, OWNERSHIP_DEPTH)
        return count

    def abandon(self, pending: PendingBatch) -> None:
        """Undoes a gathered batch whose evaluation failed: reverts its virtual loss and drops its new leaves.
        With several batches in flight, the later ones are abandoned first."""
        mine = {id(leaf) for leaf in pending.leaves}
        for leaf in pending.leaves:
            self._in_flight.pop(id(leaf), None)
        for leaf, _path in pending.selected:
            key = id(leaf)
            if key not in mine and key in self._in_flight:
                self._in_flight[key] -= 1
        self._revert(pending.selected, mine)
        pending.selected = []

    def _expand_root(self, mask: np.ndarray, batch: EvaluationBatch) -> None:
        root = self.root
        self._expand_leaves([root], mask[None], batch)
        (_, ownership), = self._take_evaluations([root], [self.root_state], batch, {id(root): 0}).values()
        root.try_all()
        root.visits = 1
        root.add_ownership(ownership)

    @staticmethod
    def _drop_illegal(node: Node, edge: int) -> None:
        """Removes a first-tried edge found illegal (lazy legality): it ends the tried prefix."""
        node.tried -= 1
        node.tried_prior -= float(node.prior[edge])
        drop = np.zeros(len(node.moves), dtype=bool)
        drop[edge] = True
        node.drop_edges(drop)

    def _candidates(self, states: list, plies: list[int]) -> np.ndarray:
        """Bool [B, area + 1], pass last: the moves each new leaf gets edges for (lazy legality: the empty points
        and pass), less those the move filter takes away at its ply."""
        mask = np.empty((len(states), self.area + 1), dtype=bool)
        (self._kind.candidates or self._core.candidates)(states, self._point_of_flat, mask)
        if self._filter_depth:
            for i, (state, ply) in enumerate(zip(states, plies)):
                mask[i] = self._filter(state, mask[i], ply)
        return mask

    def _filter(self, state, mask: np.ndarray, ply: int) -> np.ndarray:
        """mask less the moves the filter takes away at `ply`, unless that leaves no legal move; state: a leaf
        position of the tree's kind."""
        if ply > self._filter_depth:
            return mask
        key = (state.to_play, ply)
        banned = self._banned.get(key)
        if banned is None:
            banned = self._banned[key] = self.move_filter.banned(state.grid, *key)
        kept = mask & ~banned
        if kept[-1]:  # pass is always legal
            return kept
        point_of_flat, illegal_reason = self._point_of_flat, self._kind.illegal_reason
        if any(illegal_reason(state, int(point_of_flat[i])) is None for i in np.flatnonzero(kept)):
            return kept
        return mask

    def utility(self, v: float, s: float) -> float:
        return _utility(v, s, self.score_utility, self.score_scale)

    def _expand_leaves(self, leaves: list[Node], mask: np.ndarray, batch: EvaluationBatch) -> None:
        """Gives each leaf its edges from its evaluation (a batch that does not fit is a ValueError)."""
        policy, n = batch.policy, len(leaves)
        if (policy.shape != (n, self.area + 1) or batch.value.shape != (n,) or batch.score.shape != (n,)
                or batch.ownership.shape != (n, self.area)):
            raise ValueError(f"evaluator returned policy {policy.shape}, value {batch.value.shape}, score "
                             f"{batch.score.shape}, ownership {batch.ownership.shape} for {n} positions of area "
                             f"{self.area}")
        self._core.expand(leaves, np.ascontiguousarray(policy, np.float32), mask, self._point_of_flat, _INITIAL_EDGES)

    def _take_evaluations(self, leaves: list[Node], states: list, batch: EvaluationBatch,
                          in_flight: dict) -> dict:
        """tree_core.take_evaluations for expanded leaves: ownership turned to Black's view, float64 as the sums."""
        signs = np.array([1.0 if state.to_play == BLACK else -1.0 for state in states])
        return self._core.take_evaluations(leaves, np.asarray(batch.value, np.float64),
                                           np.asarray(batch.score, np.float64), signs[:, None] * batch.ownership,
                                           self.score_utility, self.score_scale, in_flight, self._awaited)

    def _revert(self, selected: Sequence[tuple[Node, list]], dropped: set[int]) -> None:
        """Undoes the virtual loss of every path, drops the leaves in `dropped` (ids: the batch's own, which nobody
        evaluated), restores the tried prefixes."""
        vl = self.virtual_loss
        for leaf, path in selected:
            for node, edge in zip(path[::2], path[1::2]):
                node.N[edge] -= vl
                node.W[edge] += vl
                node.nsum -= vl
            parent, edge = path[-2], path[-1]
            if id(leaf) in dropped and parent.children.get(edge) is leaf:
                del parent.children[edge]
        # Edges first tried in this batch had no visits before it; they end the prefix and now have none again.
        for _, path in selected:
            for node in path[::2]:
                while node.tried and node.N[node.tried - 1] <= 0 and node is not self.root:
                    node.tried -= 1
                    node.tried_prior -= float(node.prior[node.tried])

    # ---- reading the tree -----------------------------------------------------------------------------

    def root_value(self) -> tuple[float, float, float]:
        """(value, utility, score) of the root from the view of its player: the mean over its backups."""
        root = self.root
        k = root.tried
        n = root.visits
        own = n - float(root.N[:k].sum())  # backups that ended at the root itself: its own evaluation
        return (
            (own * root.net_v + float(root.V[:k].sum())) / n,
            (own * root.net_u + float(root.W[:k].sum())) / n,
            (own * root.net_s + float(root.S[:k].sum())) / n,
        )

    def root_score_stdev(self) -> float:
        """Standard deviation of the score leads backed up through the root (its own evaluation included)."""
        root = self.root
        k, n = root.tried, root.visits
        own = n - float(root.N[:k].sum())
        mean = (own * root.net_s + float(root.S[:k].sum())) / n
        square = (own * root.net_s ** 2 + float(root.S2[:k].sum())) / n
        return math.sqrt(max(square - mean * mean, 0.0))

    def root_ownership(self) -> np.ndarray:
        """Mean ownership over the root's counted backups, Black's view (+1 Black), flat order.

        A root kept from deeper than OWNERSHIP_DEPTH has counted none: then its position is evaluated once more
        (a cached evaluator answers at once) and that evaluation starts the count.
        """
        root = self.root
        if not root.ownership_count:
            batch = self.evaluator.evaluate([self.root_state])
            sign = 1.0 if self.root_state.to_play == BLACK else -1.0
            root.add_ownership(sign * batch.ownership[0].astype(np.float64))
        return root.mean_ownership()

    def principal_variation(self, edge: int, limit: int = 30) -> list[int]:
        """Points of the line that starts with the root's edge and then follows the most visited edges."""
        return [point for point, _ in self.principal_variation_visits(edge, limit)]

    def principal_variation_visits(self, edge: int, limit: int = 30) -> list[tuple[int, int]]:
        """(point, visits of its edge) along principal_variation(edge, limit)."""
        node, line = self.root, []
        while len(line) < limit:
            line.append((node.moves[edge], int(node.N[edge])))
            node = node.children.get(edge)
            if node is None or not node.is_expanded or node.tried == 0 or node.N[: node.tried].max() <= 0:
                return line
            edge = int(node.N[: node.tried].argmax())
        return line

    def edge_ownership(self, edge: int) -> np.ndarray | None:
        """Mean ownership (Black's view) over the backups through the root's edge, None when it has none."""
        child = self.root.children.get(edge)
        return None if child is None else child.mean_ownership()


def _utility(v: float, s: float, score_utility: float, score_scale: float) -> float:
    return v + score_utility * math.tanh(s / score_scale)


def _make_terminal(score_utility: float, score_scale: float, game_state, judge, node: Node, position) -> None:
    """Makes `node`, reached after two passes in `position` (a leaf position, whose GameState game_state gives),
    terminal: scored exactly by the game's rules, without the stones surely dead by the ownership judge() gives
    where judge is not None (territory scoring)."""
    state = game_state(position)
    ownership = judge() if judge is not None else None
    dead = endgame.dead_stones(state, ownership, endgame.SURE_DEAD_OWNERSHIP) if ownership is not None else []
    score = state.score(dead)  # Black's view
    s = score if state.to_play == BLACK else -score
    v = 1.0 if s > 0 else -1.0 if s < 0 else 0.0
    node.terminal = True
    node.net_v, node.net_s, node.net_u = v, s, _utility(v, s, score_utility, score_scale)
    node.ownership = state.area_ownership(dead).astype(np.float64)
