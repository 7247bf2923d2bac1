"""Many trees grown at once: rounds over them, and games played in lanes (self-play, gating, tuning).

Terms:
- round: many trees grown at once (self-play games, gate matches): start_round has each gather its leaves and
  sends the positions of the trees that share an evaluator to it together; Round.finish has each finish its
  batch. Between the two, the caller may work while the round's evaluations are in flight.
- games in lanes: play_games keeps many games (RoundGame) in progress for self-play, gate matches and tuning.
  With evaluation threads they are split into two lanes whose rounds alternate: while one lane's positions are
  in the network (its calls computed by the evaluation threads and, when it would wait, by the calling thread),
  the calling thread finishes the other lane's round, lets its games move and gathers its next round. The search
  and the network then keep every core busy (onnxruntime releases the GIL), each call on network_threads
  threads. Without, one round takes every game.
"""

from __future__ import annotations

import os
from typing import Callable, Protocol, Sequence

from gtp_engine.evaluator import EvaluationBatch
from gtp_engine.mcts import PendingBatch, Tree
from gtp_engine.search.threads import EvaluationThreads, InFlight, collector_relaxed, start_evaluation


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
                calls.append((part, start_evaluation(evaluator, states, threads)))
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


def _rows(batch: EvaluationBatch, start: int, stop: int) -> EvaluationBatch:
    return EvaluationBatch(batch.policy[start:stop], batch.value[start:stop], batch.score[start:stop],
                           batch.ownership[start:stop])
