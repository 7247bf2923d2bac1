"""Mixed evaluator: AlphaGo's (2016) leaf evaluation, a value mixed with rollout results, from separate networks.

Terms:
- policy evaluator: gives every position its policy. value evaluator: gives its value, score and ownership; when
  there is none, the policy evaluator gives them too (a dual-head network). A value network's policy is ignored.
- λ (mix): the weight of rollouts in a leaf's value: (1 - λ)·v + λ·z, where v is the value evaluator's value and z
  the mean result of `rollouts` rollouts (rollout.RolloutPolicy.play_out) from the position, each +1 / 0 / -1 by
  area counting from the side to move. Score and ownership are mixed with the same weight, from the area count
  of the rollouts' final positions, so λ = 1 keeps nothing of the value evaluator. λ = 0 plays no rollout: the
  evaluations are exactly the evaluators' own (AlphaGo Zero).
Like every evaluator it speaks from the side to move (evaluator.py); the search does not know rollouts exist.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Sequence

import numpy as np

from gtp_engine.board import BLACK
from gtp_engine.evaluator import EvaluationBatch, Evaluator
from gtp_engine.rollout import RolloutPolicy, result_for

if TYPE_CHECKING:
    from gtp_engine.game import GameState


class MixedEvaluator:
    def __init__(self, policy: Evaluator, value: Evaluator | None = None, rollout_policy: RolloutPolicy | None = None,
                 mix: float = 0.0, rollouts: int = 1, seed: int | None = None, max_moves: int | None = None):
        if not 0.0 <= mix <= 1.0:
            raise ValueError(f"lambda must be in [0, 1], got {mix}")
        if mix > 0 and rollout_policy is None:
            raise ValueError("lambda > 0 needs a rollout policy")
        if rollouts < 1:
            raise ValueError("rollouts must be at least 1")
        self.policy = policy
        self.value = value
        self.rollout_policy = rollout_policy
        self.mix = mix
        self.rollouts = rollouts
        self.max_moves = max_moves  # per rollout; None: the rollout policy's default
        self.rng = np.random.default_rng(seed)
        self._lock = threading.Lock()  # the generator is not thread-safe

    def evaluate(self, states: Sequence[GameState]) -> EvaluationBatch:
        batch = self.policy.evaluate(states)
        if self.value is not None:
            judged = self.value.evaluate(states)
            batch = EvaluationBatch(policy=batch.policy, value=judged.value, score=judged.score,
                                    ownership=judged.ownership)
        if self.mix == 0 or not states:
            return batch
        rollout_value, rollout_score, rollout_ownership = self._rollouts(states)
        keep = 1.0 - self.mix
        return EvaluationBatch(
            policy=batch.policy,
            value=(keep * batch.value + self.mix * rollout_value).astype(np.float32),
            score=(keep * batch.score + self.mix * rollout_score).astype(np.float32),
            ownership=(keep * batch.ownership + self.mix * rollout_ownership).astype(np.float32),
        )

    def _rollouts(self, states: Sequence[GameState]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean result, score and ownership of the rollouts of each state, from its side to move."""
        count = len(states)
        value, score = np.zeros(count), np.zeros(count)
        ownership = np.zeros((count, states[0].grid.area))
        with self._lock:
            for i, state in enumerate(states):
                sign = 1.0 if state.to_play == BLACK else -1.0
                for _ in range(self.rollouts):
                    final = self.rollout_policy.play_out(state, self.rng, self.max_moves)
                    black_score = final.area_score()
                    value[i] += result_for(state.to_play, black_score)
                    score[i] += sign * black_score
                    ownership[i] += sign * final.area_ownership()
        return value / self.rollouts, score / self.rollouts, ownership / self.rollouts
