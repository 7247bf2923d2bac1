"""Batching evaluator: one evaluator that several searches in several threads call at once, gathering their batches
into shared calls of the evaluator it wraps (KataGo's one NN server per network, batches up to nnMaxBatchSize).

Terms:
- request: one caller's positions (prepare(states)): it joins the forming batch of its board size and waits there.
- client: a search that keeps sending requests until it ends. client() counts the calling thread as one while it
  is inside; a Searcher over a batching evaluator enters it for each search (evaluator.search_client). A client is
  waiting while its thread waits for one of its requests, running otherwise.
- servers: the batcher's `parallel` threads (started with the first request), each running one compute step at a
  time (on the CPU: a core each, each call on its share of them). A free server takes a compute step of a started
  batch, else the oldest due batch, which it starts: the inner's prepare of all its positions (requests in order),
  its compute cut into as many steps as servers are free (evaluator.compute_steps: the network's calls, which
  release the GIL). The server that ends a batch's last step takes its result and hands each request its rows, or
  what the inner raised. A waiting caller only waits: it is woken once, when its request is done.
- due: a forming batch goes at once when no server is busy (the network would idle: a search alone keeps its
  batches in flight as with evaluation threads of its own); else once no other search is about to add to it: when
  one more request would take it past max_batch positions, when no client is running (every one waits, or there
  is none), or when its oldest request has waited gather_window seconds on the clock (a client busy elsewhere:
  writing a report, or gone without leaving). A request larger than max_batch forms a batch alone.
- close: new requests are refused (BatchingClosed); the requests of forming batches fail with it and their callers
  wake; started batches end as usual, then the servers.

Above the cache: a CachedEvaluator goes below the batcher (BatchingEvaluator(cache)), so that the cache sees each
shared call whole. Positions that two searches send at once (neighbouring positions of a game review share most of
their trees) are then evaluated once, where below it each search's miss would reach the network; and the batcher
wraps whatever evaluator a front end has (value-network or rollout mixing included) without rebuilding it. The
price: a request that the cache answers whole still waits for its batch's call. The analysis engine and the game
review search through one; GTP's one search at a time keeps its own evaluation threads (search/threads.py).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable, Iterator, Sequence

from gtp_engine.evaluator import EvaluationBatch, Evaluator, PreparedEvaluation, accepts_positions, compute_steps, \
    prepare, symmetry_averaged
from gtp_engine.search.threads import SWITCH_INTERVAL

GATHER_WINDOW = 0.005  # seconds: see due


class BatchingClosed(RuntimeError):
    """The batching evaluator was closed before the request was evaluated."""


class _Request:
    __slots__ = ("states", "offset", "rows", "error", "pending")

    def __init__(self, states: Sequence):
        self.states = states
        self.offset = 0  # of its rows in its batch
        self.rows: EvaluationBatch | None = None
        self.error: BaseException | None = None
        self.pending = threading.Lock()  # held until the request is done; its caller waits on it
        self.pending.acquire()

    def end(self, rows: EvaluationBatch | None, error: BaseException | None) -> None:
        self.rows, self.error = rows, error
        self.pending.release()


class _Batch:
    __slots__ = ("requests", "positions", "since", "steps", "unfinished", "evaluation", "error")

    def __init__(self, since: float):
        self.requests: list[_Request] = []
        self.positions = 0
        self.since = since  # when its first request came, on the clock
        self.steps: list[Callable[[], None]] = []  # compute steps no thread has taken
        self.unfinished = 0  # compute steps taken or not, not yet ended
        self.evaluation: PreparedEvaluation | None = None
        self.error: BaseException | None = None


class BatchingEvaluator:
    """Gathers the batches of concurrent callers into shared calls of `inner` (see the module docstring). Safe to
    share between threads; evaluate(), prepare() and the compute of what prepare() returns may be called from
    any thread. calls and positions count the inner's calls and their positions."""

    def __init__(self, inner: Evaluator, max_batch: int = 64, parallel: int = 1,
                 gather_window: float | None = GATHER_WINDOW, clock: Callable[[], float] = time.monotonic):
        if max_batch < 1 or parallel < 1:
            raise ValueError("max_batch and parallel must be at least 1")
        self.inner = inner
        self.max_batch = max_batch
        self.parallel = parallel
        self.gather_window = gather_window
        self.clock = clock
        self.calls = 0
        self.positions = 0
        self._lock = threading.Condition()
        self._inner_lock = threading.Lock()  # the inner's prepare and result, one thread at a time
        self._forming: dict[tuple[int, int], _Batch] = {}  # board size -> its forming batch
        self._due: list[_Batch] = []  # formed, not started (oldest first)
        self._started: list[_Batch] = []  # with compute steps no thread has taken
        self._running = 0  # compute steps being run, and batches being started
        self._clients: dict[int, int] = {}  # thread ident -> how many client() it is inside
        self._waiting = 0  # client threads waiting for a request
        self._closed = False
        self._servers: list[threading.Thread] = []  # once started

    @property
    def accepts_positions(self) -> bool:
        """The inner's answer (evaluator.accepts_positions): the positions go to it unchanged."""
        return accepts_positions(self.inner)

    @contextlib.contextmanager
    def client(self) -> Iterator[None]:
        """The calling thread counts as a client while inside (see client)."""
        ident = threading.get_ident()
        with self._lock:
            self._clients[ident] = self._clients.get(ident, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._clients[ident] -= 1
                if not self._clients[ident]:
                    del self._clients[ident]
                self._lock.notify_all()  # a batch may be due now that it is gone

    def evaluate(self, states: Sequence) -> EvaluationBatch:
        evaluation = self.prepare(states)
        evaluation.compute()
        return evaluation.result()

    def evaluate_averaged(self, states: Sequence) -> EvaluationBatch | None:
        """The inner's averaged evaluation (evaluator.py), None where it offers none. Evaluated alone, outside the
        shared calls, holding the inner for its whole call: a root's eight symmetries a move or a query."""
        with self._inner_lock:
            return symmetry_averaged(self.inner, states)

    def prepare(self, states: Sequence) -> PreparedEvaluation:
        """The request joins its forming batch now; its compute() waits for its rows from the shared call."""
        if not states:
            return prepare(self.inner, states)
        request = _Request(states)
        grid = states[0].grid
        key = (grid.width, grid.height)
        with self._lock:
            if self._closed:
                raise BatchingClosed("the batching evaluator is closed")
            batch = self._forming.get(key)
            if batch is not None and batch.positions + len(states) > self.max_batch:
                self._due.append(self._forming.pop(key))
                self._lock.notify_all()
                batch = None
            if batch is None:
                batch = self._forming[key] = _Batch(self.clock())
            request.offset = batch.positions
            batch.requests.append(request)
            batch.positions += len(states)
            if not self._servers:
                self._servers = [threading.Thread(target=self._serve, name=f"batching-{i}", daemon=True)
                                 for i in range(self.parallel)]
                for thread in self._servers:
                    thread.start()
                # as beside evaluation threads (search/threads.py): a server whose call ends while a search thread
                # holds the GIL would wait the whole switch interval (5 ms by default) to hand its rows back
                sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
            self._lock.notify()  # a free server may take it
        return _BatchedEvaluation(self, request)

    def close(self) -> None:
        """Refuses new requests; those still forming fail with BatchingClosed (see close)."""
        with self._lock:
            self._closed = True
            abandoned = list(self._forming.values()) + self._due
            self._forming.clear()
            self._due.clear()
            error = BatchingClosed("the batching evaluator was closed before the request was evaluated")
            for batch in abandoned:
                for request in batch.requests:
                    request.end(None, error)
            self._lock.notify_all()

    # ---- the servers ---------------------------------------------------------------------------------------

    def _serve(self) -> None:
        """A server: takes work until the batcher is closed and nothing is left to do."""
        lock = self._lock
        with lock:
            while True:
                work = self._next_work()
                if work is None:
                    if self._closed and not self._started and not self._running:
                        return
                    lock.wait(self._time_left())
                    continue
                lock.release()
                try:
                    work()
                finally:
                    lock.acquire()

    def _wait(self, request: _Request) -> None:
        """Returns once the request is done; raises what its batch raised."""
        client = threading.get_ident() in self._clients
        if client:
            with self._lock:
                self._waiting += 1
                self._lock.notify()  # the last running client now waits: a batch may be due
        try:
            with request.pending:
                pass
        finally:
            if client:
                with self._lock:
                    self._waiting -= 1
        if request.error is not None:
            raise request.error

    def _next_work(self) -> Callable[[], None] | None:
        """Under the lock: a compute step to run, or a due batch to start."""
        if self._started:
            batch = self._started[0]
            step = batch.steps.pop(0)
            if not batch.steps:
                self._started.pop(0)
            self._running += 1
            return lambda: self._run_step(batch, step)
        self._collect_due()
        if self._due:
            batch = self._due.pop(0)
            parts = self.parallel - self._running  # the servers free, this one included
            self._running += 1
            return lambda: self._start(batch, parts)
        return None

    def _collect_due(self) -> None:
        """Under the lock: the forming batches that are due (see due) join the due ones."""
        if not self._forming:
            return
        idle = not self._running or self._waiting >= len(self._clients)
        now = self.clock()
        window = self.gather_window
        for key, batch in list(self._forming.items()):
            if idle or (window is not None and now - batch.since >= window):
                self._due.append(self._forming.pop(key))
        self._due.sort(key=lambda b: b.since)

    def _time_left(self) -> float | None:
        """Under the lock: how long to wait before the oldest forming batch is due by the window (None: no end)."""
        if self.gather_window is None or not self._forming:
            return None
        oldest = min(batch.since for batch in self._forming.values())
        return max(1e-4, self.gather_window - (self.clock() - oldest))

    def _start(self, batch: _Batch, parts: int) -> None:
        """Prepares the batch with the inner and runs the first of its up to `parts` compute steps."""
        states = [state for request in batch.requests for state in request.states]
        try:
            with self._inner_lock:
                batch.evaluation = prepare(self.inner, states)
            steps = compute_steps(batch.evaluation, parts)
        except BaseException as error:  # noqa: BLE001 - every caller of the batch raises it
            with self._lock:
                self._running -= 1
                self._fail(batch, error)
            return
        with self._lock:
            self.calls += 1
            self.positions += len(states)
            batch.unfinished = len(steps)
            batch.steps = steps[1:]
            if batch.steps:
                self._started.append(batch)
                self._lock.notify(len(batch.steps))
        self._run_step(batch, steps[0])

    def _run_step(self, batch: _Batch, step: Callable[[], None]) -> None:
        """Runs a compute step; the batch's last one hands out its rows."""
        try:
            step()
        except BaseException as error:  # noqa: BLE001 - every caller of the batch raises it
            batch.error = error
        with self._lock:
            self._running -= 1
            batch.unfinished -= 1
            last = not batch.unfinished
        if last:
            self._finish(batch)

    def _finish(self, batch: _Batch) -> None:
        result, error = None, batch.error
        if error is None:
            try:
                with self._inner_lock:
                    result = batch.evaluation.result()
            except BaseException as raised:  # noqa: BLE001 - every caller of the batch raises it
                error = raised
        if error is not None:
            self._fail(batch, error)
            return
        whole = len(batch.requests) == 1
        for request in batch.requests:
            request.end(result if whole else _rows(result, request.offset, request.offset + len(request.states)), None)

    @staticmethod
    def _fail(batch: _Batch, error: BaseException) -> None:
        """Every request of the batch raises `error`."""
        for request in batch.requests:
            request.end(None, error)


class _BatchedEvaluation:
    """BatchingEvaluator.prepare's evaluation: compute() waits for the request's rows (see servers)."""

    def __init__(self, batcher: BatchingEvaluator, request: _Request):
        self._batcher, self._request = batcher, request

    def compute(self) -> None:
        self._batcher._wait(self._request)

    def result(self) -> EvaluationBatch:
        return self._request.rows


def _rows(batch: EvaluationBatch, start: int, stop: int) -> EvaluationBatch:
    return EvaluationBatch(batch.policy[start:stop], batch.value[start:stop], batch.score[start:stop],
                           batch.ownership[start:stop])
