"""The tree search's inner loop: select an edge, descend to a leaf, list its candidate moves and expand it, back a
result up (mcts.py defines the terms), the same for a whole batch (gather, back_up), and the fields of a tree node.

These steps run a dozen times per playout and were most of the search's own cost in Python, so they have a
compiled twin, gtp_engine/_tree_core.c, built with the package when a C compiler is present. This module is the
reference: the compiled functions do exactly what the Python ones below do, on the same Node objects with the same
arithmetic in the same order, and tests/unit/test_tree_core.py holds them to growing the same tree.

- node fields: what a node holds (mcts.Node adds its methods). NodeFields below is the reference; the compiled
  twin keeps the same fields in a C struct, so that the compiled functions read and write them without attribute
  lookups or boxed numbers. NODE_FIELDS is the one mcts.Node is built on: the chosen core's (below), since the
  compiled functions accept only theirs; the Python ones take either. The edge statistics N, W, W2, V, S, S2 are
  the rows of `stats`, derived from it.

- params (PuctParams): c_puct, c_puct_log, c_puct_base, fpu_reduction and virtual_loss, the TreeConfig numbers
  these need (fpu_reduction below the root; select_root is given the root's), by name: both cores read each field
  by its name (the compiled one once per call), so no order of fields binds them.
- visited prior: the sum of the priors of the edges with N > 0, added in edge order (np.cumsum), as the compiled
  code adds it; numpy's sum and dot add in another order and could round differently. expand's sums likewise.
- batch: gather runs a batch's descents, take_evaluations hands its leaves their evaluations, back_up its
  backups, so that the loops over a batch's selections run in C too, with no Python call per selection but the
  position's copy.
- core: the node fields and the nine functions as one Core. IMPLEMENTATIONS (native.py) holds the reference
  (python) and the compiled twin (compiled; None where the extension was not built, or GTP_ENGINE_PURE_PYTHON=1);
  CORE is the chosen one, what new trees run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from gtp_engine import native
from gtp_engine.board import EMPTY

_VECTOR_EDGES = 12  # select() scores more tried edges than this with numpy, fewer in a Python loop (faster there)


class NodeFields:
    """The fields of a search tree node (see the module docstring and mcts.Node for their meaning)."""

    __slots__ = ("moves", "prior", "tried", "tried_prior", "_stats", "_rows", "nsum", "children", "visits", "net_v",
                 "net_u", "net_s", "terminal", "ownership", "ownership_sum", "ownership_count")

    def __init__(self) -> None:
        self.moves = self.prior = self._stats = self.ownership = self.ownership_sum = None
        self._rows: list | None = None  # stats' rows, made on first use
        self.tried = self.visits = self.ownership_count = 0
        self.tried_prior = self.nsum = self.net_v = self.net_u = self.net_s = 0.0
        self.terminal = False
        self.children: dict = {}

    @property
    def stats(self) -> np.ndarray | None:
        return self._stats

    @stats.setter
    def stats(self, stats: np.ndarray | None) -> None:
        self._stats, self._rows = stats, None

    def _row(self, index: int) -> np.ndarray | None:
        if self._stats is None:
            return None
        if self._rows is None:
            self._rows = list(self._stats)
        return self._rows[index]

    N = property(lambda self: self._row(0), doc="visits per edge (a row of stats)")
    W = property(lambda self: self._row(1), doc="utility sums")
    W2 = property(lambda self: self._row(2), doc="sums of squared utilities")
    V = property(lambda self: self._row(3), doc="value sums")
    S = property(lambda self: self._row(4), doc="score sums")
    S2 = property(lambda self: self._row(5), doc="sums of squared scores")


@dataclass(frozen=True, slots=True, kw_only=True)
class PuctParams:
    """What selection and descent need of a TreeConfig (mcts.py defines each), given and read by name."""

    c_puct: float
    c_puct_log: float
    c_puct_base: float
    fpu_reduction: float  # below the root
    virtual_loss: float


def exploration(nsum: float, params: PuctParams) -> float:
    """c * sqrt(sum N): the factor on P / (1 + N) in PUCT."""
    base = params.c_puct_base
    return (params.c_puct + params.c_puct_log * math.log((nsum + base) / base)) * math.sqrt(nsum)


def puct_scores(node, fpu_reduction: float, prior: np.ndarray, params: PuctParams) -> np.ndarray:
    """PUCT score of every edge of an expanded node over `prior` (the node's, or the root's noisy ones), FPU applied
    to unvisited edges: the reference rule that select and select_root compute faster."""
    n_edges = len(node.moves)
    if node.tried == n_edges:
        N, W = node.N[:n_edges], node.W[:n_edges]
    else:
        N, W = np.zeros(n_edges), np.zeros(n_edges)
        N[: node.tried] = node.N[: node.tried]
        W[: node.tried] = node.W[: node.tried]
    visited = N > 0
    visited_prior = float(np.cumsum(np.where(visited, node.prior, 0.0))[-1])
    fpu = node.net_u - fpu_reduction * math.sqrt(visited_prior)
    scores = np.where(visited, W / np.maximum(N, 1e-9), fpu)
    scores += exploration(node.nsum, params) * prior / (1.0 + N)
    return scores


def select_root(root, prior: np.ndarray | None, excluded: np.ndarray | None, forced_k: float,
                fpu_reduction: float, params: PuctParams) -> int:
    """The root's edge: puct_scores with the root's FPU reduction over `prior` (None: the root's own), never an
    edge marked in `excluded`; with forced_k > 0, among the edges short of their forced playouts (N below
    sqrt(forced_k * P * sum N)) the best of those, if there are any. The root has statistics for every edge."""
    prior = root.prior if prior is None else prior
    scores = puct_scores(root, fpu_reduction, prior, params)
    if excluded is not None:
        scores[excluded] = -np.inf
    if forced_k > 0:
        short = root.N[: len(root.moves)] < np.sqrt(forced_k * prior * root.nsum)
        if excluded is not None:
            short &= ~excluded
        if short.any():
            scores = np.where(short, scores, -np.inf)
    return int(scores.argmax())


def select(node, params: PuctParams) -> int:
    """The edge with the highest PUCT score (puct_scores with the node's FPU reduction and priors), fast.

    Priors fall along the edges and all unvisited edges share one Q (the FPU), so among the unvisited edges the
    first has the highest score. Only the visited prefix needs the formula, plus that one candidate; selecting it
    extends the prefix.
    """
    k = node.tried
    nsum = node.nsum
    base = params.c_puct_base
    coef = (params.c_puct + params.c_puct_log * math.log((nsum + base) / base)) * math.sqrt(nsum)  # exploration()
    best, best_score = -1, -math.inf
    if k > _VECTOR_EDGES:
        N = node.N[:k]
        with np.errstate(invalid="ignore", divide="ignore"):  # 0 / 0: pending without virtual loss, see below
            scores = node.W[:k] / N + coef * node.prior[:k] / (1.0 + N)
        best = int(scores.argmax())
        best_score = scores[best]
    elif k:  # the same arithmetic on Python floats: most nodes have a few tried edges
        for i, (n, w, p) in enumerate(zip(node.N[:k].tolist(), node.W[:k].tolist(), node.prior[:k].tolist())):
            if not n:  # pending without virtual loss: numpy's 0 / 0 is NaN, which its argmax takes first
                best, best_score = i, math.nan
                break
            score = w / n + coef * p / (1.0 + n)
            if score > best_score:
                best, best_score = i, score
    if k < len(node.moves):
        fpu = node.net_u - params.fpu_reduction * math.sqrt(node.tried_prior)
        p = float(node.prior[k])
        if fpu + coef * p > best_score:
            if k == node.stats.shape[1]:
                node._allocate(min(2 * k, len(node.moves)))
            node.tried = k + 1
            node.tried_prior += p
            return k
    return best


def descend(root, state, edge: int, params: PuctParams, node_type: type, make_terminal: Callable,
            drop_edge: Callable, play_line: Callable, illegal_reason: Callable) -> tuple[object, list]:
    """From the root's chosen edge to a leaf (new, pending or terminal), under virtual loss; plays the line on
    `state` with play_line(state, points) and asks illegal_reason(state, point) about first tries (game.PLAY_LINE
    and game.ILLEGAL_REASON). Returns (leaf, path), path the nodes and edges from the root in one flat list, [node,
    edge, node, edge, ...] (a tuple per step cost the search its allocations).

    Selection reads the tree alone, so the moves are played in as few calls as possible: up to the node whose
    selected edge is a first try (the one place a board is needed: lazy legality), and then to the leaf.
    A new leaf is node_type() in its parent's children; make_terminal(leaf, state) scores one after two passes.
    drop_edge(node, edge) removes a first-tried edge that turns out illegal, and the node selects again.
    """
    vl = params.virtual_loss
    node = root
    path = []
    line = []  # moves selected but not played yet
    while True:
        node.N[edge] += vl
        node.W[edge] -= vl
        node.nsum += vl
        path += (node, edge)
        line.append(node.moves[edge])
        child = node.children.get(edge)
        if child is None:
            child = node.children[edge] = node_type()
            play_line(state, line)
            if state.consecutive_passes >= 2:
                make_terminal(child, state)
            return child, path
        if child.moves is None:  # pending in this batch, or terminal
            play_line(state, line)
            return child, path
        node = child
        edge = select(node, params)
        if node.N[edge] == 0:
            play_line(state, line)
            line = []
            while node.N[edge] == 0 and illegal_reason(state, node.moves[edge]) is not None:
                drop_edge(node, edge)
                edge = select(node, params)


class Hooks(NamedTuple):
    """What gather's descents call back into (see descend): a tree's own, fixed for its life; read by name, as
    PuctParams is."""

    node_type: type
    make_terminal: Callable
    drop_edge: Callable
    play_line: Callable
    illegal_reason: Callable
    copy_state: Callable  # copy_state(state) -> a copy for one descent to play its line on


def gather(root, root_state, size: int, root_selection: tuple, params: PuctParams, hooks: Hooks, in_flight: dict,
           selected: list, leaves: list, states: list, plies: list) -> None:
    """Selects `size` leaves for one batch (mcts.Tree.gather): per selection, the root's edge by select_root(root,
    *root_selection, params), root_selection being (prior, excluded, forced_k, fpu_reduction), and a descent by
    descend from a copy of root_state. Appends (leaf, path) to `selected` per selection; a new leaf that is not
    terminal, not already in `leaves` and not in flight (a key id(leaf) of in_flight, pending in an earlier
    batch) to `leaves`, with its position to `states` and its ply below the root to `plies`; counts a selection of
    a leaf in flight in in_flight. The lists grow as it goes, so that a failure leaves what to undo (Tree.abandon)."""
    mine: set[int] = set()  # id() of this batch's new leaves
    for _ in range(size):
        state = hooks.copy_state(root_state)
        leaf, path = descend(root, state, select_root(root, *root_selection, params), params, hooks.node_type,
                             hooks.make_terminal, hooks.drop_edge, hooks.play_line, hooks.illegal_reason)
        key = id(leaf)
        if not leaf.terminal and key not in mine:
            if key in in_flight:
                in_flight[key] += 1
            else:
                mine.add(key)
                leaves.append(leaf)
                states.append(state)
                plies.append(len(path) // 2 + 1)
        selected.append((leaf, path))


def take_evaluations(leaves: list, value: np.ndarray, score: np.ndarray, ownership: np.ndarray,
                     score_utility: float, score_scale: float, in_flight: dict, awaited: dict) -> dict:
    """Gives each expanded leaves[i] its evaluation: net_v = value[i], net_s = score[i] (float64 [B], the side to
    move's view) and net_u = v + score_utility * tanh(s / score_scale), the utility. Returns evaluated for
    back_up: id(leaf) -> ((v, u, s), ownership[i]), ownership float64 [B, area] in Black's view. Each leaf leaves
    in_flight (id(leaf) -> selections of later batches awaiting it); where any await it, it goes into awaited:
    id(leaf) -> [(v, u, s), ownership[i], that count]."""
    evaluated = {}
    for leaf, v, s, owned in zip(leaves, value.tolist(), score.tolist(), ownership):
        u = v + score_utility * math.tanh(s / score_scale)
        leaf.net_v, leaf.net_s, leaf.net_u = v, s, u
        key = id(leaf)
        evaluated[key] = (v, u, s), owned
        waiting = in_flight.pop(key)
        if waiting:
            awaited[key] = [(v, u, s), owned, waiting]
    return evaluated


def back_up(selected: list, evaluated: dict, awaited: dict, virtual_loss: float, ownership_depth: int) -> None:
    """Backs every selection of a batch up (mcts.Tree.finish), the last first, emptying `selected`: a terminal
    leaf's exact result, else the evaluation of the leaf in `evaluated` (id(leaf) -> ((v, u, s), ownership), this
    batch's), else the one an earlier batch brought, from `awaited` (id(leaf) -> [(v, u, s), ownership, selections
    left]), whose entry goes once its last selection took it."""
    while selected:
        leaf, path = selected.pop()
        if leaf.terminal:
            (v, u, s), ownership = (leaf.net_v, leaf.net_u, leaf.net_s), leaf.ownership
        else:
            key = id(leaf)
            entry = evaluated.get(key)
            if entry is None:
                entry = awaited[key]
                entry[2] -= 1
                if not entry[2]:
                    del awaited[key]
            (v, u, s), ownership = entry[0], entry[1]
        backup(leaf, path, virtual_loss, v, u, s, ownership, ownership_depth)


def backup(leaf, path: list, virtual_loss: float, v: float, u: float, s: float, ownership: np.ndarray,
           ownership_depth: int) -> None:
    """Adds one playout's result (v, u, s from the leaf's view) along path, replacing the path's virtual loss, and
    its ownership (float64, Black's view) to the nodes within ownership_depth plies of the root (mcts.py)."""
    vl = virtual_loss
    leaf.visits += 1
    # One column of increments (N, W, W2, V, S, S2) per player: the leaf's parent is its player's opponent.
    theirs = np.array((1.0 - vl, -u + vl, u * u, -v, -s, s * s))
    ours = np.array((1.0 - vl, u + vl, u * u, v, s, s * s))
    flipped = True
    for i in range(len(path) - 2, -1, -2):
        node, edge = path[i], path[i + 1]
        node.stats[:, edge] += theirs if flipped else ours
        flipped = not flipped
        node.nsum += 1.0 - vl
        node.visits += 1
    for node in path[: 2 * (ownership_depth + 1): 2]:
        node.add_ownership(ownership)
    if len(path) // 2 <= ownership_depth:
        leaf.add_ownership(ownership)


def expand(leaves: list, policy: np.ndarray, mask: np.ndarray, point_of_flat: np.ndarray, initial_edges: int) -> None:
    """Gives each new leaves[i] its edges: the flat indices where mask[i] (bool [B, area + 1], pass last) is set, by
    falling policy[i] (float32, the network's; ignored off the mask), ties in flat order, as the board points
    point_of_flat (int64) names, their priors (float64) divided by their sum (added in flat order), and statistics for
    the first initial_edges. Where that sum is not above 1e-12 (or is NaN), uniform priors in flat order."""
    prior = np.where(mask, policy, 0.0).astype(np.float64)
    order = np.argsort(np.where(mask, -prior, 1.0), axis=1, kind="stable")
    counts = mask.sum(axis=1).tolist()
    totals = np.cumsum(prior, axis=1)[:, -1].tolist()
    for i, leaf in enumerate(leaves):
        flats = order[i, : counts[i]]
        total = totals[i]
        if total > 1e-12:
            leaf.prior = prior[i, flats] / total
        else:  # no usable policy mass (or NaN)
            flats = np.flatnonzero(mask[i])
            leaf.prior = np.full(len(flats), 1.0 / len(flats))
        leaf.moves = tuple(point_of_flat[flats].tolist())
        leaf._allocate(min(initial_edges, len(flats)))


def candidates(states: list, point_of_flat: np.ndarray, out: np.ndarray) -> None:
    """Fills out (bool [B, area + 1], pass last) with the moves each position's new leaf gets edges for (lazy
    legality, see mcts.py): its empty points, as point_of_flat (int64, PASS last) names them, and pass."""
    colors = np.frombuffer(b"".join([state.board.colors for state in states]), np.uint8).reshape(len(states), -1)
    np.equal(colors[:, point_of_flat[:-1]], EMPTY, out=out[:, :-1])
    out[:, -1] = True


class Core(NamedTuple):
    """The node fields and the nine functions, in Python or compiled (see the module docstring)."""

    node_fields: type
    select: Callable
    select_root: Callable
    descend: Callable
    backup: Callable
    expand: Callable
    candidates: Callable
    gather: Callable
    take_evaluations: Callable
    back_up: Callable


IMPLEMENTATIONS = native.implementations(
    "_tree_core", Core(NodeFields, select, select_root, descend, backup, expand, candidates, gather, take_evaluations,
                       back_up),
    lambda twin: Core(twin.NodeFields, twin.select, twin.select_root, twin.descend, twin.backup, twin.expand,
                      twin.candidates, twin.gather, twin.take_evaluations, twin.back_up))
CORE = IMPLEMENTATIONS.chosen  # what new trees run, bound once (native.py)
NODE_FIELDS: type = CORE.node_fields  # what mcts.Node is built on: the compiled functions accept only their own
