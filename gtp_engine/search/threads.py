"""Evaluations in flight: the threads that compute them beside a search, and the garbage collector searches run under.

Terms:
- evaluation in flight: a gathered batch's evaluation (InFlight) that is prepared in the search thread, computed
  elsewhere and taken back in the search thread (evaluator.prepare); a Job is one computation of it that one
  thread runs and another waits for.
- evaluation threads: daemon threads that compute the evaluations in flight, oldest first (onnxruntime releases
  the GIL while it runs, so the network and the search's own work overlap). A job no thread has started yet may
  be run by the waiting thread instead (EvaluationThreads.run_queued), so that every core runs the network while
  the search waits for it.
- collector relaxed: while any search runs, the garbage collector's young generation is collected every
  SEARCH_COLLECTOR_THRESHOLD allocations instead of Python's 700. A search allocates a dozen container objects a
  visit (positions, paths) that die within a few batches, and the tree has no reference cycles (mcts.py); at
  700 the collector's passes over the objects in flight cost a 9x9 search 1-1.5 us a visit (4% of its own work),
  and cyclic garbage from elsewhere is still collected, a little later.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import queue
import sys
import threading
from typing import Callable, Sequence

from gtp_engine.evaluator import EvaluationBatch, Evaluator, PreparedEvaluation, compute_steps, prepare
from gtp_engine.game import GameState

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


def start_evaluation(evaluator: Evaluator, states: list[GameState], threads: EvaluationThreads | None,
                     parts: int = 1, deferred: bool = False) -> InFlight:
    """The evaluation of `states` (None for none): prepared here and computed by `threads`, in up to `parts` calls
    where the evaluator can split its compute step (evaluator.compute_steps); without threads, computed now, or
    with `deferred` when it is waited for (a shared evaluator, evaluator.py, gathers the batches of several
    searches there)."""
    try:
        if threads is not None and states:
            evaluation = prepare(evaluator, states)
            return InFlight([threads.submit(step) for step in compute_steps(evaluation, parts)], evaluation.result)
        if deferred and states:
            evaluation = prepare(evaluator, states)
            return InFlight([], functools.partial(_computed, evaluation))
        done = Job.finished(evaluator.evaluate(states) if states else None)
    except Exception as error:  # raised where the batch is finished, which abandons its tree's batch
        done = Job.finished(error=error)
    return InFlight([done], done.result)


def _computed(evaluation: PreparedEvaluation) -> EvaluationBatch:
    evaluation.compute()
    return evaluation.result()
