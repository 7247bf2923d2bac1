"""UniformEvaluator and CachedEvaluator (no network needed)."""

import threading

import numpy as np
import pytest

from gtp_engine.coords import PASS
from gtp_engine.evaluator import CachedEvaluator, EvaluationBatch, UniformEvaluator, prepare
from gtp_engine.features import position_key
from gtp_engine.game import GameState


class CountingEvaluator:
    """Uniform policy, but a fresh random value per call, so a cache answer can be told from a recomputed one."""

    def __init__(self):
        self.seen = 0
        self.calls = 0
        self._rng = np.random.default_rng(0)
        self._uniform = UniformEvaluator()

    def evaluate(self, states):
        self.calls += 1
        self.seen += len(states)
        batch = self._uniform.evaluate(states)
        batch.value = self._rng.uniform(-1, 1, len(states)).astype(np.float32)
        batch.ownership = self._rng.uniform(-1, 1, batch.ownership.shape).astype(np.float32)
        return batch


def test_uniform_policy_covers_exactly_the_legal_moves(random_states):
    states = random_states(9, 4, seed=2)
    batch = UniformEvaluator().evaluate(states)
    assert isinstance(batch, EvaluationBatch) and len(batch) == 4
    assert batch.policy.shape == (4, 82) and batch.ownership.shape == (4, 81)
    for state, policy in zip(states, batch.policy):
        legal = state.legal_mask()
        assert np.allclose(policy.sum(), 1.0)
        assert np.all(policy[~legal] == 0) and np.allclose(policy[legal], 1 / legal.sum())
        assert policy[-1] > 0  # pass
    assert not batch.value.any() and not batch.score.any() and not batch.ownership.any()
    assert batch.policy.dtype == batch.value.dtype == np.float32


def test_cache_returns_identical_results_and_counts_hits(random_states):
    states = random_states(9, 5, seed=3)
    inner = CountingEvaluator()
    cache = CachedEvaluator(inner, capacity=100)
    first = cache.evaluate(states)
    assert (cache.hits, cache.misses, inner.seen) == (0, 5, 5)
    again = cache.evaluate([s.copy() for s in reversed(states)])
    assert (cache.hits, cache.misses, inner.seen) == (5, 5, 5)
    for field in ("policy", "value", "score", "ownership"):
        assert np.array_equal(getattr(again, field), getattr(first, field)[::-1])
    # The inner evaluator is random: without the cache the same positions would get other values.
    assert not np.array_equal(inner.evaluate(states).value, first.value)


def test_cache_evaluates_only_the_misses_in_one_batch_and_duplicates_once(random_states):
    states = random_states(7, 4, seed=4)
    inner = CountingEvaluator()
    cache = CachedEvaluator(inner)
    cache.evaluate(states[:2])
    batch = cache.evaluate([states[0], states[2], states[2], states[3], states[1]])
    assert inner.calls == 2 and inner.seen == 4
    assert (cache.hits, cache.misses) == (3, 4)
    assert batch.value[1] == batch.value[2]
    assert len(cache) == 4


def test_cache_keeps_the_most_recently_used_positions(random_states):
    a, b, c = random_states(9, 3, seed=5, max_fill=0.2)
    assert len({position_key(x) for x in (a, b, c)}) == 3
    inner = CountingEvaluator()
    cache = CachedEvaluator(inner, capacity=2)
    cache.evaluate([a])
    cache.evaluate([b])
    cache.evaluate([a])  # a is now the most recent
    cache.evaluate([c])  # evicts b
    seen = inner.seen
    cache.evaluate([a])
    assert inner.seen == seen
    cache.evaluate([b])
    assert inner.seen == seen + 1
    assert len(cache) == 2


def test_cache_tells_positions_apart_by_history_and_komi():
    cache = CachedEvaluator(CountingEvaluator())
    base = GameState(9)
    moved = base.copy()
    moved.play(PASS)
    other_komi = GameState(9, komi=0.5)
    cache.evaluate([base, moved, other_komi])
    assert cache.misses == 3


def test_cache_is_safe_to_share_between_threads(random_states):
    states = random_states(9, 12, seed=6)
    cache = CachedEvaluator(CountingEvaluator(), capacity=8)
    errors = []

    def work(offset):
        try:
            for i in range(30):
                batch = cache.evaluate([states[(offset + i + k) % 12] for k in range(3)])
                assert len(batch) == 3
        except Exception as e:  # reported below: an assertion in a thread would otherwise vanish
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.hits + cache.misses == 4 * 30 * 3
    assert len(cache) <= 8


def test_a_position_evaluated_twice_at_once_keeps_its_first_stored_evaluation(random_states):
    state, = random_states(7, 1, seed=8)

    class Racing(CountingEvaluator):
        """Its first call lets another caller evaluate and store the same position first, as a thread could."""

        def evaluate(self, states):
            if self.calls == 0:
                self.calls += 1
                self.stored_first = cache.evaluate(states).value[0]
            return super().evaluate(states)

    inner = Racing()
    cache = CachedEvaluator(inner)
    late = cache.evaluate([state]).value[0]
    assert late != inner.stored_first
    assert cache.evaluate([state]).value[0] == inner.stored_first and len(cache) == 1


def test_a_batch_gathered_from_entries_holds_their_rows_and_a_frozen_batch_is_read_only(random_states):
    batch = CountingEvaluator().evaluate(random_states(5, 3, seed=9)).freeze()
    gathered = EvaluationBatch.gather([(batch, 2), (batch, 0)])
    for array in ("policy", "value", "score", "ownership"):
        assert np.array_equal(getattr(gathered, array), getattr(batch, array)[[2, 0]])
        assert getattr(gathered, array).dtype == np.float32
        with pytest.raises(ValueError):  # a cache shares the frozen batch's arrays
            getattr(batch, array)[0] = 1.0
    gathered.policy[0, 0] = 1.0  # a gathered batch is the caller's own
    assert batch.policy[2, 0] != 1.0


def test_cache_rejects_a_useless_capacity():
    with pytest.raises(ValueError):
        CachedEvaluator(UniformEvaluator(), capacity=0)


def test_an_evaluator_without_prepare_computes_its_whole_evaluation_in_the_compute_step():
    inner = CountingEvaluator()
    cache = CachedEvaluator(inner)
    states = [GameState(5), GameState(5)]
    states[1].play(states[1].grid.point(2, 2))
    evaluation = prepare(cache, states)
    assert inner.calls == 0  # nothing evaluated before compute
    evaluation.compute()
    assert inner.calls == 1 and len(cache) == 0  # stored with the result, in the caller's thread
    batch = evaluation.result()
    assert len(cache) == 2 and len(batch) == 2
    cached = cache.evaluate(states)
    assert np.array_equal(cached.value, batch.value) and inner.calls == 1
