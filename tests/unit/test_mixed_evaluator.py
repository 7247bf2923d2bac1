"""The mixed evaluator: λ = 0 is the inner evaluator itself, separate policy and value evaluators, the mix, and a
search that finds a winning capture from rollouts alone."""

from __future__ import annotations

import numpy as np
import pytest
from search_support import position

from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import grid
from gtp_engine.evaluator import EvaluationBatch, UniformEvaluator
from gtp_engine.mixed_evaluator import MixedEvaluator
from gtp_engine.rollout import RolloutPolicy
from gtp_engine.search import SearchConfig, Searcher, StopCondition

# Every empty point is one of Black's eyes, and suicide for White: every rollout passes twice at once.
ALL_EYES = """
    X . X
    X X X
    X . X
"""
# Black to move, komi 5.5: capturing at the bottom centre wins (every White move is then suicide).
SMALL_ATARI = """
    . X .
    X O X
    . . .
"""


class Constant:
    """An evaluator with fixed numbers, counting its calls."""

    def __init__(self, value: float, policy_weight: float = 1.0):
        self.value = value
        self.policy_weight = policy_weight
        self.calls = 0
        self.last: EvaluationBatch | None = None

    def evaluate(self, states):
        self.calls += 1
        count, area = len(states), states[0].grid.area
        policy = np.full((count, area + 1), self.policy_weight, np.float32)
        self.last = EvaluationBatch(policy=policy / policy.sum(axis=1, keepdims=True),
                                    value=np.full(count, self.value, np.float32),
                                    score=np.full(count, 10 * self.value, np.float32),
                                    ownership=np.full((count, area), self.value, np.float32))
        return self.last


class NoRollouts(RolloutPolicy):
    def __init__(self):
        base = RolloutPolicy.uniform()
        super().__init__(base.vocabulary, base.weights)

    def play_out(self, state, rng, max_moves=None):
        raise AssertionError("λ = 0 must play no rollout")


def test_lambda_zero_returns_exactly_the_inner_batch_and_plays_no_rollout():
    inner = Constant(0.3)
    mixed = MixedEvaluator(inner, rollout_policy=NoRollouts(), mix=0.0)
    states = [position(SMALL_ATARI, BLACK), position(SMALL_ATARI, WHITE)]
    batch = mixed.evaluate(states)
    assert batch is inner.last


def test_policy_from_one_evaluator_and_the_rest_from_the_other():
    policy, value = Constant(0.9, policy_weight=1.0), Constant(-0.4)
    states = [position(SMALL_ATARI, BLACK)]
    batch = MixedEvaluator(policy, value).evaluate(states)
    assert np.array_equal(batch.policy, policy.last.policy)
    assert batch.value.tolist() == pytest.approx([-0.4])
    assert batch.score.tolist() == pytest.approx([-4.0])
    assert np.array_equal(batch.ownership, value.last.ownership)


@pytest.mark.parametrize("to_play, z", [(BLACK, 1.0), (WHITE, -1.0)])
def test_the_value_is_mixed_with_the_rollout_result_from_the_side_to_move(to_play, z):
    # Black owns all 9 points whoever moves: B+8.5 after the two passes of every rollout.
    states = [position(ALL_EYES, to_play, komi=0.5)]
    inner = Constant(-0.5)
    batch = MixedEvaluator(inner, rollout_policy=RolloutPolicy.uniform(), mix=0.25, seed=0).evaluate(states)
    assert batch.value[0] == pytest.approx(0.75 * -0.5 + 0.25 * z)
    assert batch.score[0] == pytest.approx(0.75 * -5.0 + 0.25 * 8.5 * z)
    assert np.allclose(batch.ownership[0], 0.75 * -0.5 + 0.25 * z)  # every point Black's
    assert np.array_equal(batch.policy, inner.last.policy)
    pure = MixedEvaluator(inner, rollout_policy=RolloutPolicy.uniform(), mix=1.0, rollouts=3).evaluate(states)
    assert pure.value[0] == z


def test_rollout_results_average_over_the_rollouts_of_a_leaf():
    state = position(SMALL_ATARI, WHITE, komi=5.5)
    mixed = MixedEvaluator(Constant(0.0), rollout_policy=RolloutPolicy.uniform(), mix=1.0, rollouts=40, seed=1)
    value = float(mixed.evaluate([state]).value[0])
    assert -1.0 < value < 1.0 and value * 40 == pytest.approx(round(value * 40))


def test_lambda_one_with_a_uniform_prior_finds_the_winning_capture():
    capture = grid(3).point(2, 1)
    for seed in range(3):
        state = position(SMALL_ATARI, BLACK, komi=5.5)
        mixed = MixedEvaluator(UniformEvaluator(), rollout_policy=RolloutPolicy.uniform(), mix=1.0, seed=seed)
        result = Searcher(mixed, SearchConfig(seed=seed)).search(state, StopCondition(visits=40))
        assert result.choice.point == capture
        assert result.choice.winrate > 0.9
    # The rollouts do the work: with the same budget, values of 0 everywhere do not single the capture out.
    blind = Searcher(UniformEvaluator(), SearchConfig(seed=0)).search(position(SMALL_ATARI, BLACK, komi=5.5),
                                                                        StopCondition(visits=40))
    assert blind.choice.point != capture


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="lambda must be in"):
        MixedEvaluator(UniformEvaluator(), rollout_policy=RolloutPolicy.uniform(), mix=1.5)
    with pytest.raises(ValueError, match="needs a rollout policy"):
        MixedEvaluator(UniformEvaluator(), mix=0.5)
    with pytest.raises(ValueError, match="rollouts"):
        MixedEvaluator(UniformEvaluator(), rollout_policy=RolloutPolicy.uniform(), mix=0.5, rollouts=0)

