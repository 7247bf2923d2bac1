"""The analysis engine's work: a priority queue of analysed turns and the worker threads that search them.

Terms:
- task: one turn of one query. Tasks wait in a priority queue: highest priority first, then the order they came
  in (KataGo's rule); each worker takes the next task when it is free.
- worker: a thread with its own Searcher (searches are not thread-safe). Each task searches a fresh tree, as
  KataGo's analysis engine does: a tree kept from an earlier query would answer with more visits than maxVisits,
  and a query asked again would repeat the same numbers. Workers share the network evaluator and its cache (so a
  position asked again is cheap) through one batching evaluator per network (batching.py), which gathers the
  batches of the searches running at once into shared network calls, on as many threads at once as a search
  alone would run the network on.
- report: during a search with reportDuringSearchEvery, a snapshot every that many seconds, sent with
  isDuringSearch true (the search's search.ReportSchedule). The first report comes after
  firstReportDuringSearchAfter seconds when given; given alone, it asks for that one report (as KataGo).
- terminate: a waiting task answers noResults at once; a running one stops after its current batch and sends
  its final result. Terminating a query that has finished does nothing.
- size warning: where the network of a query's board size was not trained on that size (SizeWarning), the query
  gets one {"warning": ..., "field": "boardXSize"} before its first result, as KataGo warns in its responses.
- close: the end of input. Waiting: every queued task is still analysed. Not waiting (-quit-without-waiting):
  queued tasks are dropped and running searches interrupted.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
import threading
from typing import Any, Callable

import numpy as np

from gtp_engine.analysis import responses
from gtp_engine.analysis.query import Query, Turn
from gtp_engine.batching import BatchingEvaluator
from gtp_engine.evaluator import Evaluator, legal_policy, symmetry_averaged
from gtp_engine.game import GameState
from gtp_engine.search import ReportSchedule, SearchConfig, Searcher, Snapshot, StopCondition

log = logging.getLogger(__name__)

Emit = Callable[[dict[str, Any]], None]
EvaluatorFor = Callable[[int, int], Evaluator]  # (width, height) -> evaluator; raises with a message if none
SizeWarning = Callable[[int, int], "str | None"]  # (width, height) -> why its network may play it badly, or None


class _Task:
    def __init__(self, query: Query, turn: Turn):
        self.query = query
        self.turn = turn
        self.interrupt = threading.Event()
        self.cancelled = False  # terminated while waiting: answered noResults already


class Scheduler:
    def __init__(self, evaluator_for: EvaluatorFor, search_config: SearchConfig, emit: Emit, workers: int,
                 size_warning: SizeWarning | None = None):
        self._evaluator_for = evaluator_for
        self._size_warning = size_warning
        self._search_config = search_config
        self._emit = emit
        self._queue: list[tuple[int, int, _Task]] = []
        self._order = itertools.count()
        self._running: set[_Task] = set()
        self._failed: set[str] = set()  # ids of queries that got an error from a worker (one error per query)
        self._warned: set[str] = set()  # ids of queries that got their size warning
        self._shared: dict[int, tuple[Evaluator, BatchingEvaluator]] = {}  # id(network evaluator) -> its batcher
        self._lock = threading.Condition()
        self._closing = False
        self._threads = [threading.Thread(target=self._work, name=f"analysis-{i}", daemon=True)
                         for i in range(max(1, workers))]
        for thread in self._threads:
            thread.start()

    # ---- the reader's side -------------------------------------------------------------------------------

    def submit(self, query: Query) -> None:
        with self._lock:
            self._failed.discard(query.id)
            self._warned.discard(query.id)
            for turn in query.turns:
                heapq.heappush(self._queue, (-turn.priority, next(self._order), _Task(query, turn)))
            self._lock.notify_all()

    def terminate(self, query_id: str | None, turn_numbers: list[int] | None = None) -> None:
        """Terminates the tasks of query_id (every query's when None), only those turns when turn_numbers."""
        def matches(task: _Task) -> bool:
            return (query_id is None or task.query.id == query_id) and \
                (turn_numbers is None or task.turn.number in turn_numbers)

        with self._lock:
            dropped = [task for _, _, task in self._queue if matches(task) and not task.cancelled]
            for task in dropped:
                task.cancelled = True
            for task in self._running:
                if matches(task):
                    task.interrupt.set()
        for task in dropped:
            self._emit(responses.no_results(task.query.id, task.turn.number))

    def close(self, wait: bool) -> None:
        """No more tasks will come; returns when the workers have finished (see the module docstring)."""
        with self._lock:
            self._closing = True
            if not wait:
                self._queue.clear()
                for task in self._running:
                    task.interrupt.set()
            self._lock.notify_all()
        for thread in self._threads:
            thread.join()

    # ---- workers ---------------------------------------------------------------------------------------------

    def _next(self) -> _Task | None:
        with self._lock:
            while True:
                while self._queue:
                    _, _, task = heapq.heappop(self._queue)
                    if not task.cancelled:
                        self._running.add(task)
                        return task
                if self._closing:
                    return None
                self._lock.wait()

    def _work(self) -> None:
        searcher: Searcher | None = None
        while (task := self._next()) is not None:
            try:
                searcher = self._run(task, searcher)
            except Exception as error:  # noqa: BLE001 - one query's failure must not end the engine
                log.exception("analysis of %r turn %d failed", task.query.id, task.turn.number)
                self._fail(task, f"analysis failed: {error}")
            finally:
                with self._lock:
                    self._running.discard(task)

    def _fail(self, task: _Task, message: str, field: str | None = None) -> None:
        with self._lock:
            first = task.query.id not in self._failed
            self._failed.add(task.query.id)
            for _, _, other in self._queue:  # the query's other turns would fail alike
                if other.query is task.query:
                    other.cancelled = True
        if first:
            self._emit(responses.error(message, field, task.query.id))

    def _run(self, task: _Task, searcher: Searcher | None) -> Searcher | None:
        query, turn = task.query, task.turn
        state = turn.state
        try:
            evaluator = self._evaluator_for(state.width, state.height)
        except Exception as error:  # noqa: BLE001 - no network for this size: the message says why
            self._fail(task, f"no network for a {state.width}x{state.height} board: {error}", "boardXSize")
            return searcher
        self._warn_size(task)
        config = self._config_for(query)
        shared = self._batching(evaluator)
        if searcher is None or searcher.evaluator is not shared or searcher.config != config:
            searcher = Searcher(shared, config)
        searcher.reset()  # a fresh tree for the task
        policy, level_policy = self._root_policies(query, state, shared)

        def report(snapshot: Snapshot) -> None:
            self._emit(responses.result(query, turn, snapshot, searcher.move_ownership, policy, level_policy))

        settings = query.settings
        stop = StopCondition.for_limits(searcher.clock(), visits=settings.max_visits, seconds=settings.max_time,
                                        interrupt=task.interrupt)
        searcher.search(state, stop, report, _reports(query), ownership_in_snapshots=True,
                        move_filter=query.move_filter)
        return searcher

    @staticmethod
    def _root_policies(query: Query, state: GameState,
                       shared: BatchingEvaluator) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The root's policy the response reports (one symmetry, as the search's root sees it) and the one its
        humanPolicy draws from (averaged over the board's symmetries, as a strength level chooses in GTP: the
        Searcher's level prior), each over the legal moves and -1 elsewhere, None where not asked. Through the
        shared evaluator, which hands the network to one thread at a time."""
        def plain() -> np.ndarray:
            return legal_policy(shared.evaluate([state]).policy[0], state, illegal=-1.0)

        policy = plain() if query.include_policy else None
        level_policy = None
        if query.include_human_policy:
            averaged = symmetry_averaged(shared, [state])
            if averaged is not None:
                level_policy = legal_policy(averaged.policy[0], state, illegal=-1.0)
            else:  # an evaluator without an averaged evaluation: the root's own policy, evaluated once
                level_policy = policy if policy is not None else plain()
        return policy, level_policy

    def _batching(self, evaluator: Evaluator) -> BatchingEvaluator:
        """The batching evaluator every worker searches `evaluator` through."""
        with self._lock:
            entry = self._shared.get(id(evaluator))
            if entry is None:
                # as many network calls at once as one search makes: its evaluation threads and itself
                parallel = self._search_config.evaluation_threads_for() + 1
                entry = self._shared[id(evaluator)] = (evaluator, BatchingEvaluator(evaluator, parallel=parallel))
            return entry[1]

    def _warn_size(self, task: _Task) -> None:
        """The query's size warning, the first time one of its turns runs."""
        state = task.turn.state
        warning = self._size_warning(state.width, state.height) if self._size_warning is not None else None
        if warning is None:
            return
        with self._lock:
            first = task.query.id not in self._warned
            self._warned.add(task.query.id)
        if first:
            self._emit(responses.warning(warning, "boardXSize", task.query.id))

    def _config_for(self, query: Query) -> SearchConfig:
        """The search settings of a query: the engine's as analysis searches with them (SearchConfig.for_analysis),
        with what its settings change."""
        s, base = query.settings, self._search_config
        tree = {name: value for name, value in (
            ("c_puct", s.c_puct), ("c_puct_log", s.c_puct_log), ("c_puct_base", s.c_puct_base),
            ("fpu_reduction", s.fpu_reduction), ("root_fpu_reduction", s.root_fpu_reduction)) if value is not None}
        return dataclasses.replace(
            base.for_analysis(s.policy_temperature),
            tree=dataclasses.replace(base.tree, **tree),
            batch_size=s.search_threads or base.batch_size,
        )


def _reports(query: Query) -> ReportSchedule | None:
    """When the search of a query reports during itself (see report); None: only its final result."""
    if query.report_every is None and query.first_report_after is None:
        return None
    first = query.first_report_after if query.first_report_after is not None else query.report_every
    return ReportSchedule(first, query.report_every)
