"""Helpers for the search tests: a scripted evaluator, a check of the tree's bookkeeping, positions, and the board
diagrams the endgame and Player tests share."""

from __future__ import annotations

import math
import threading

import numpy as np
from charged_evaluation import ChargedEvaluation

from gtp_engine.board import BLACK, Board
from gtp_engine.evaluator import EvaluationBatch, UniformEvaluator
from gtp_engine.game import GameState, Rules
from gtp_engine.mcts import Node, Tree


# A ko (White may take at B4 now, Black may not retake at once) and suicide points for both sides (A5 for White,
# E1 for Black).
KO_AND_SUICIDES = """
    . X O . .
    X . X O .
    . X O . .
    . . . X O
    . . . O .
"""


# Black has the left three columns (15 points), White the right two (10).
SPLIT = """
    . . X O .
    . . X O .
    . . X O .
    . . X O .
    . . X O .
"""

# The same with a dead white stone inside Black's area.
SPLIT_WITH_DEAD_STONE = """
    . . X O .
    . O X O .
    . . X O .
    . . X O .
    . . X O .
"""

# The same with a dead black stone inside White's area: Black leads by 3.5 at komi 7.5 with every stone alive,
# White by 2.5 by the count.
SPLIT_WITH_DEAD_BLACK_STONE = """
    . . X O .
    . . X O X
    . . X O .
    . . X O .
    . . X O .
"""

# The same with a black stone in the corner of White's side, in atari: a living chain in atari where the ownership
# counts it Black's.
SPLIT_WITH_A_BLACK_STONE_IN_ATARI = """
    . . X O .
    . . X O .
    . . X O .
    . . X O .
    . . X O X
"""

# Black has the left three columns, White the right column; the column between is dame.
DAME = """
    . . X . O
    . . X . O
    . . X . O
    . . X . O
    . . X . O
"""

# Black's two stones on the lower edge are in atari, and their own liberty at (6, 2) is suicide; the white stone
# beside them at (6, 5) is in atari too, and taking it at (6, 6) gives them a second liberty.
CHAIN_SAVED_BY_A_CAPTURE = """
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . O O O O X X
    . O . X X O .
"""


def position(text: str, to_play: int = BLACK, komi: float = 0.5, rules: Rules = Rules()) -> GameState:
    """A game whose board is the ASCII diagram (setup stones), with `to_play` to move."""
    board = Board.from_ascii(text)
    game = GameState(board.width, board.height, komi=komi, rules=rules)
    for color in (BLACK, 3 - BLACK):
        game.place_setup(color, board.stones(color))
    game.set_to_play(to_play)
    return game


class ScriptedEvaluator:
    """A stand-in network with rules a test can see.

    policy: uniform over the legal moves, or `favour` (a list of points) getting most of the mass.
    value: `value(state)` from the side to move's view; by default the balance of prisoners, squashed.
    ownership: `ownership(state)` flat, Black's view; by default area counting.
    fail_on_call: raise RuntimeError on that call number (1-based), to test recovery.
    """

    def __init__(self, favour=(), value=None, ownership=None, fail_on_call=None):
        self.favour = list(favour)
        self.value = value or _prisoners
        self.ownership = ownership or (lambda s: s.area_ownership().astype(np.float32))
        self.fail_on_call = fail_on_call
        self.calls = 0
        self.positions = 0

    def evaluate(self, states):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("scripted failure")
        self.positions += len(states)
        rows = []
        for s in states:
            mask = s.legal_mask().astype(np.float32)
            policy = mask / mask.sum()
            favoured = [s.grid.flat(p) for p in self.favour if mask[s.grid.flat(p)]]
            if favoured:
                policy = 0.1 * policy
                policy[favoured] += 0.9 / len(favoured)
            sign = 1.0 if s.to_play == BLACK else -1.0
            rows.append((policy, self.value(s), _lead(s), sign * np.asarray(self.ownership(s), np.float32)))
        policy, value, score, ownership = zip(*rows)
        return EvaluationBatch(np.stack(policy).astype(np.float32), np.array(value, np.float32),
                               np.array(score, np.float32), np.stack(ownership).astype(np.float32))


def _prisoners(state: GameState) -> float:
    captures = state.board.captures
    return math.tanh(2.0 * (captures[state.to_play] - captures[3 - state.to_play]))


def _lead(state: GameState) -> float:
    score = state.area_score()
    return score if state.to_play == BLACK else -score


def check_tree(tree: Tree, legality: bool = False) -> int:
    """Asserts the bookkeeping of every node: visits add up, no virtual loss or pending leaf is left.

    With legality, also replays every visited edge and asserts the move is legal there, and that the root has
    exactly the legal moves as edges. Returns the number of nodes.
    """
    root = tree.root
    assert root.is_expanded
    state = tree.root_state.copy() if legality else None
    if legality:
        legal = state.legal_mask()
        assert sorted(state.grid.flat(p) for p in root.moves) == np.flatnonzero(legal).tolist()
    return _check_node(root, is_root=True, state=state)


def _check_node(node: Node, is_root: bool, state: GameState | None = None) -> int:
    k = node.tried
    N = node.N[:k]
    assert node.nsum == N.sum(), "virtual loss left in nsum"
    assert math.isclose(node.tried_prior, node.prior[:k].sum(), abs_tol=1e-9)
    # Visits beyond the edges' are the node's own evaluation, once, plus any duplicate selections of it as a leaf.
    assert node.visits >= 1 + N.sum(), "visits do not add up"
    if not is_root:
        assert (N >= 1).all(), "a tried edge without visits inside the prefix"
    count = 1
    for edge, child in node.children.items():
        if edge >= k:
            assert child.terminal and child.visits == 0
            continue
        assert child.visits == N[edge], f"edge {edge}: N {N[edge]} but child has {child.visits} visits"
        child_state = None
        if state is not None:
            assert state.is_legal(node.moves[edge]), f"illegal edge {node.moves[edge]}"
            child_state = state.copy()
            child_state.play(node.moves[edge])
        if child.terminal:
            continue
        assert child.is_expanded, "a leaf was left pending"
        q = node.W[edge] / N[edge]
        assert -1.5 <= q <= 1.5
        count += _check_node(child, is_root=False, state=child_state)
    for edge in range(k):
        if N[edge] > 0:
            assert edge in node.children
    return count


class FakeClock:
    """A clock for Searcher(clock=...) that moves only when told: timing tests that load cannot break."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class TimedEvaluator:
    """Wraps an evaluator so that every call takes `seconds` (per call, or per call with n positions) on `clock`."""

    def __init__(self, inner, clock: FakeClock, seconds=0.01):
        self.inner = inner
        self.clock = clock
        self.seconds = seconds if callable(seconds) else (lambda n: seconds)
        self.calls = 0

    def evaluate(self, states):
        self.calls += 1
        self.clock.advance(self.seconds(len(states)))
        return self.inner.evaluate(states)

    def prepare(self, states):
        """With batches in flight the call's time is charged when the search takes the result, in the search's
        own thread: where the search stops then never depends on how the threads interleave."""
        return ChargedEvaluation(lambda: self.inner.evaluate(states), self._charge, len(states))

    def _charge(self, count: int) -> None:
        self.calls += 1
        self.clock.advance(self.seconds(count))


class InterruptWatcher:
    """An evaluator that counts its calls, and those begun after `interrupt` was set."""

    def __init__(self, interrupt: threading.Event):
        self.inner = UniformEvaluator()
        self.interrupt = interrupt
        self.calls = self.late_calls = 0

    def evaluate(self, states):
        self.calls += 1
        self.late_calls += self.interrupt.is_set()
        return self.inner.evaluate(states)
