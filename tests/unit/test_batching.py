"""The batching evaluator: concurrent searches through it grow the trees they grow alone, batches form as its rules
say (counted through a recording inner evaluator), and no caller hangs on a failure, a close or a client gone."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from search_support import FakeClock, ScriptedEvaluator
from test_tree_identity import StoneEvaluator, fingerprint, opening

from gtp_engine.batching import BatchingClosed, BatchingEvaluator
from gtp_engine.board import BLACK, WHITE
from gtp_engine.evaluator import CachedEvaluator, search_client
from gtp_engine.game import GameState
from gtp_engine.search import SearchConfig, Searcher, StopCondition

JOIN = 30.0  # seconds a test waits for a thread before calling it hung (a guard, not a measurement)


class Recording:
    """Passes evaluations to `inner`, keeping each call's number of positions. A call of 7x7 positions (see occupy)
    waits until `opened` is set; the other calls raise `fail` where it is set."""

    def __init__(self, inner=None, fail: BaseException | None = None):
        self.inner = inner or ScriptedEvaluator()
        self.fail = fail
        self.sizes: list[int] = []
        self.entered, self.opened = threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def evaluate(self, states):
        with self._lock:
            self.sizes.append(len(states))
        if states[0].grid.width == 7:
            self.entered.set()
            self.opened.wait(JOIN)
        elif self.fail is not None:
            raise self.fail
        return self.inner.evaluate(states)


def occupy(batcher: BatchingEvaluator, inner: Recording) -> threading.Thread:
    """A call that holds the batcher's only slot until inner.opened is set: while the network is busy, batches form
    by the rules of due (with no slot busy, a batch goes at once)."""
    thread = threading.Thread(target=batcher.evaluate, args=(positions(1, 7),))
    thread.start()
    inner.entered.wait(JOIN)
    return thread


def until(condition) -> None:
    """Waits for a condition another thread makes true (a guard against hanging, not a measurement)."""
    deadline = threading.Event()
    for _ in range(int(JOIN / 0.001)):
        if condition():
            return
        deadline.wait(0.001)
    raise AssertionError("timed out")


def positions(count: int, size: int = 5) -> list[GameState]:
    """`count` different positions: one stone each, on consecutive points."""
    states = []
    for i in range(count):
        state = GameState(size, size)
        state.play(state.grid.from_flat(i))
        states.append(state)
    return states


def run_clients(batcher: BatchingEvaluator, requests: list[list[GameState]], inner: Recording | None = None) -> list:
    """Each request from its own client thread, every client registered before any sends; returns what each got
    (its EvaluationBatch, or the exception it raised). With inner, the slot is held (occupy) until all wait."""
    holder = occupy(batcher, inner) if inner is not None else None
    results: list = [None] * len(requests)
    registered = threading.Barrier(len(requests))

    def client(i: int) -> None:
        with batcher.client():
            registered.wait()
            try:
                results[i] = batcher.evaluate(requests[i])
            except Exception as error:  # noqa: BLE001 - returned to the test
                results[i] = error

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    if holder is not None:
        until(lambda: batcher._waiting == len(requests))
        inner.opened.set()
        threads.append(holder)
    for thread in threads:
        thread.join(JOIN)
    assert not any(thread.is_alive() for thread in threads), "a caller hangs"
    return results


def search_config() -> SearchConfig:
    return SearchConfig(seed=5, evaluation_threads=0).for_analysis()


def game(moves: int) -> GameState:
    state = opening()
    for point in [(4, 4), (3, 5), (5, 3), (2, 4)][:moves]:
        state.play(state.grid.point(*point), state.to_play)
    return state


def test_concurrent_searches_grow_the_trees_they_grow_alone():
    roots = [game(i) for i in range(4)]
    alone = []
    for root in roots:
        searcher = Searcher(StoneEvaluator(), search_config())
        searcher.search(root, StopCondition(visits=300))
        alone.append(fingerprint(searcher.tree))

    inner = Recording(StoneEvaluator())
    batcher = BatchingEvaluator(inner, max_batch=64, gather_window=None)
    searchers = [Searcher(batcher, search_config()) for _ in roots]
    threads = [threading.Thread(target=s.search, args=(root, StopCondition(visits=300)))
               for s, root in zip(searchers, roots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN)
    assert [fingerprint(s.tree) for s in searchers] == alone
    assert [s._workers for s in searchers] == [None] * 4  # no evaluation threads beside a shared evaluator
    assert max(inner.sizes) > search_config().batch_size  # batches of several searches went together
    assert batcher.calls == len(inner.sizes) and batcher.positions == sum(inner.sizes)


def test_the_batches_of_several_clients_go_in_one_call():
    inner = Recording()
    batcher = BatchingEvaluator(inner, max_batch=64, gather_window=None)
    states = positions(12)
    results = run_clients(batcher, [states[0:4], states[4:8], states[8:12]], inner)
    assert inner.sizes == [1, 12]
    alone = ScriptedEvaluator().evaluate(states)
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result.policy, alone.policy[4 * i:4 * i + 4])
        np.testing.assert_array_equal(result.value, alone.value[4 * i:4 * i + 4])


def test_a_batch_never_exceeds_the_max_batch():
    inner = Recording()
    batcher = BatchingEvaluator(inner, max_batch=8, gather_window=None)
    states = positions(20)
    run_clients(batcher, [states[i:i + 4] for i in range(0, 20, 4)], inner)
    assert sorted(inner.sizes[1:]) == [4, 8, 8]


def test_board_sizes_go_in_separate_calls():
    inner = Recording()
    batcher = BatchingEvaluator(inner, gather_window=None)
    results = run_clients(batcher, [positions(3, 5), positions(2, 9)], inner)
    assert sorted(inner.sizes[1:]) == [2, 3]
    assert [r.policy.shape for r in results] == [(3, 26), (2, 82)]


def test_a_caller_that_is_no_client_is_served_at_once():
    inner = Recording()
    batcher = BatchingEvaluator(inner, gather_window=None)
    assert len(batcher.evaluate(positions(3))) == 3
    assert inner.sizes == [3]


def test_an_error_in_the_network_call_reaches_every_caller_of_the_batch():
    inner = Recording(fail=RuntimeError("network down"))
    batcher = BatchingEvaluator(inner, gather_window=None)
    states = positions(9)
    results = run_clients(batcher, [states[0:3], states[3:6], states[6:9]], inner)
    assert inner.sizes == [1, 9]
    assert all(isinstance(r, RuntimeError) and str(r) == "network down" for r in results)
    inner.fail = None
    assert len(batcher.evaluate(states[:2])) == 2  # the next batch goes on


def test_close_wakes_the_waiters_and_refuses_new_requests():
    inner = Recording()
    batcher = BatchingEvaluator(inner, gather_window=None)
    errors = []
    waiting = threading.Event()

    def waiter(states) -> None:
        evaluation = batcher.prepare(states)
        waiting.set()
        try:
            evaluation.compute()
        except BatchingClosed as error:
            errors.append(error)

    holder = occupy(batcher, inner)
    with batcher.client():  # a running client that never sends: the batch waits for it
        threads = [threading.Thread(target=waiter, args=(s,)) for s in (positions(2), positions(3))]
        for thread in threads:
            thread.start()
        waiting.wait(JOIN)
        batcher.close()
        for thread in threads:
            thread.join(JOIN)
    inner.opened.set()
    holder.join(JOIN)
    assert not any(thread.is_alive() for thread in threads + [holder])
    assert len(errors) == 2 and inner.sizes == [1]
    with pytest.raises(BatchingClosed):
        batcher.prepare(positions(1))


def test_a_client_that_leaves_does_not_stall_the_others():
    inner = Recording()
    batcher = BatchingEvaluator(inner, gather_window=None)
    entered, leave = threading.Event(), threading.Event()
    result = []

    def idle_client() -> None:  # a search that ends without sending anything more
        with batcher.client():
            entered.set()
            leave.wait(JOIN)

    def sender() -> None:
        with batcher.client():
            evaluation = batcher.prepare(positions(4))
            leave.set()
            evaluation.compute()
            result.append(evaluation.result())

    holder = occupy(batcher, inner)
    idle = threading.Thread(target=idle_client)
    idle.start()
    entered.wait(JOIN)
    sending = threading.Thread(target=sender)
    sending.start()
    inner.opened.set()
    for thread in (idle, sending, holder):
        thread.join(JOIN)
    assert not sending.is_alive() and len(result[0]) == 4 and inner.sizes == [1, 4]


def test_a_batch_waits_no_longer_than_the_gather_window_on_its_clock():
    clock = FakeClock()
    inner = Recording()
    batcher = BatchingEvaluator(inner, parallel=2, gather_window=0.5, clock=clock)
    done = threading.Event()

    def waiter() -> None:
        batcher.evaluate(positions(2))
        done.set()

    holder = occupy(batcher, inner)  # one slot busy, one free: the batch waits for the client, or the window
    with batcher.client():  # running: without the window the batch would wait for it
        thread = threading.Thread(target=waiter)
        thread.start()
        assert not done.wait(0.05)
        assert inner.sizes == [1]
        clock.advance(0.5)
        thread.join(JOIN)
    inner.opened.set()
    holder.join(JOIN)
    assert done.is_set() and inner.sizes == [1, 2]


def test_batching_sits_above_a_cache_that_evaluates_a_shared_position_once():
    network = Recording()
    batcher = BatchingEvaluator(CachedEvaluator(network), gather_window=None)
    states = positions(4)
    results = run_clients(batcher, [states[0:3], states[1:4]], network)
    assert network.sizes == [1, 4]  # positions 1 and 2, sent by both clients, evaluated once
    np.testing.assert_array_equal(results[0].policy[1:], results[1].policy[:2])


def test_compute_steps_run_on_up_to_parallel_servers():
    class Split:
        """An inner evaluator whose compute comes in one step per position, counting those running at once."""

        def __init__(self):
            self.running = self.most = 0
            self.lock = threading.Lock()

        def evaluate(self, states):
            return ScriptedEvaluator().evaluate(states)

        def prepare(self, states):
            outer = self

            class Evaluation:
                def compute_parts(self, parts):
                    return [self.step] * min(parts, len(states))

                def step(self):
                    with outer.lock:
                        outer.running += 1
                        outer.most = max(outer.most, outer.running)
                    threading.Event().wait(0.01)
                    with outer.lock:
                        outer.running -= 1

                def compute(self):
                    self.step()

                def result(self):
                    return outer.evaluate(states)

            return Evaluation()

    inner = Split()
    batcher = BatchingEvaluator(inner, parallel=2, gather_window=None)
    states = positions(8)
    results = run_clients(batcher, [states[i:i + 2] for i in range(0, 8, 2)])
    assert [len(r) for r in results] == [2, 2, 2, 2]
    assert 1 <= inner.most <= 2


def test_only_a_shared_evaluator_has_a_search_client():
    assert search_client(ScriptedEvaluator()) is None
    assert search_client(CachedEvaluator(ScriptedEvaluator())) is None
    with search_client(BatchingEvaluator(ScriptedEvaluator())):
        pass


def test_positions_keep_their_sides():
    """Rows are handed back in the order of each caller's positions, whoever is to play."""
    black, white = GameState(5, 5), GameState(5, 5)
    white.play(white.grid.from_flat(12), BLACK)
    assert white.to_play == WHITE
    inner = Recording()
    batcher = BatchingEvaluator(inner, gather_window=None)
    results = run_clients(batcher, [[black], [white]], inner)
    alone = ScriptedEvaluator().evaluate([black, white])
    np.testing.assert_array_equal(np.concatenate([r.ownership for r in results]), alone.ownership)


def test_the_averaged_evaluation_goes_to_the_inner_alone():
    """The inner's averaged evaluation, called holding the inner (no shared call prepares meanwhile); None where
    the inner offers none."""
    state = GameState(9)
    held = []

    class Averaging(ScriptedEvaluator):
        def evaluate_averaged(self, states):
            held.append(batcher._inner_lock.locked())
            return ScriptedEvaluator(favour=[state.grid.point(4, 4)]).evaluate(states)

    batcher = BatchingEvaluator(Averaging(), gather_window=None)
    averaged = batcher.evaluate_averaged([state])
    assert held == [True] and averaged.policy[0].argmax() == state.grid.flat(state.grid.point(4, 4))
    assert BatchingEvaluator(ScriptedEvaluator(), gather_window=None).evaluate_averaged([state]) is None
