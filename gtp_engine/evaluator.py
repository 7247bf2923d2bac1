"""Evaluators: what the search asks of a network, and two evaluators that need none.

Terms:
- evaluation: for one position, a policy (a probability per flat index, pass last), a value (expected result in
  [-1, 1]: +1 a sure win, -1 a sure loss), a score lead (points) and an ownership map (per point, +1 owned by,
  -1 owned against), all from the view of the side to move. The search converts perspectives; nothing here does.
- batch: the evaluations of a sequence of positions of one board size, as arrays with the batch first.
- Evaluator: anything with evaluate(states) -> EvaluationBatch (a structural Protocol; no base class needed).
- prepared evaluation: an evaluation split in three steps so that its heavy part can run in another thread
  while the caller goes on (the search's batches in flight): evaluator.prepare(states) in the caller's thread
  (cache lookups, encoding), compute() in any thread (the network: onnxruntime runs without the GIL, so nothing
  else there should need it), result() back in the caller's thread (decoding, cache stores). An evaluator may
  offer prepare(); prepare(evaluator, states) below gives every other one the same shape, its whole evaluate()
  as the compute step. A prepared evaluation may also offer compute_parts(n): its compute step as up to n steps
  that may run at once in different threads, all before result() (compute_steps below; the network evaluator
  splits its batch, so that a search with one batch in flight runs it on every core).
- position key: features.position_key(state), everything the network input depends on; two positions with the
  same key get the same evaluation, so CachedEvaluator stores evaluations under it.
- legal policy: a network policy over the moves legal in its position, renormalised (legal_policy); what every
  report of the raw policy shows (kata-raw-nn, gogui-policy, the JSON analysis engine's policy, minmoves).
- accepting evaluator: one that declares accepts_positions = True, so a search may hand it compiled search positions
  (position.py) in place of GameStates; accepts_positions(evaluator) below reads that for any evaluator, False
  where it is not declared, and a wrapper passes on its inner evaluator's answer.
- averaged evaluation: the network's evaluation averaged over the board's symmetries, whatever symmetry its
  evaluations take otherwise: the policy of the network itself rather than of one symmetry (a strength level's
  candidates, search/strength.py). A network evaluator offers evaluate_averaged(states); a wrapper passes the call
  to the network it holds, uncached; symmetry_averaged(evaluator, states) below gives it for any evaluator, None
  where none is offered (no network, or a shared evaluator, which other searches use at the same time).
- shared evaluator: one that gathers the batches of several searches into shared calls (batching.py). It offers
  client(), a context in which the calling thread counts as one of the searches it waits for; search_client below
  gives it, None for any other evaluator. Its prepared evaluations are computed by the thread that waits for them
  (that is where it gathers), so a search over it keeps no evaluation threads and computes each batch when it
  needs its result.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ContextManager, Protocol, Sequence

import numpy as np

from gtp_engine.features import position_key

if TYPE_CHECKING:
    from gtp_engine.game import GameState


@dataclass
class EvaluationBatch:
    """Evaluations of B positions with board area A; every field is from the side to move's view.

    policy float32 [B, A + 1] probabilities (pass last; illegal moves near 0 but not guaranteed: search masks);
    value float32 [B] in [-1, 1]; score float32 [B] lead in points; ownership float32 [B, A] in [-1, 1].
    """

    policy: np.ndarray
    value: np.ndarray
    score: np.ndarray
    ownership: np.ndarray

    def __len__(self) -> int:
        return len(self.value)

    @classmethod
    def empty(cls, area: int = 0) -> EvaluationBatch:
        return cls(
            policy=np.zeros((0, area + 1), np.float32),
            value=np.zeros(0, np.float32),
            score=np.zeros(0, np.float32),
            ownership=np.zeros((0, area), np.float32),
        )

    def freeze(self) -> EvaluationBatch:
        """Makes the arrays read-only (a cache shares them) and returns the batch."""
        for array in (self.policy, self.value, self.score, self.ownership):
            array.flags.writeable = False
        return self

    @classmethod
    def gather(cls, entries: Sequence[tuple[EvaluationBatch, int]]) -> EvaluationBatch:
        """A batch of the positions named by (batch, index) entries, in order (copied)."""
        return cls(
            policy=np.stack([batch.policy[i] for batch, i in entries]),
            value=np.array([batch.value[i] for batch, i in entries], np.float32),
            score=np.array([batch.score[i] for batch, i in entries], np.float32),
            ownership=np.stack([batch.ownership[i] for batch, i in entries]),
        )


class Evaluator(Protocol):
    def evaluate(self, states: Sequence[GameState]) -> EvaluationBatch:
        """Evaluates positions that all have one board size; an empty sequence gives an empty batch."""
        ...


class PreparedEvaluation(Protocol):
    def compute(self) -> None:
        """The heavy part; may run in another thread, once."""
        ...

    def result(self) -> EvaluationBatch:
        """The batch, in the thread that prepared it, after compute()."""
        ...


class _WholeEvaluation:
    """An evaluator without prepare(): its evaluate() is the compute step."""

    def __init__(self, evaluator: Evaluator, states: Sequence[GameState]):
        self._evaluator, self._states = evaluator, states
        self._batch: EvaluationBatch | None = None

    def compute(self) -> None:
        self._batch = self._evaluator.evaluate(self._states)

    def result(self) -> EvaluationBatch:
        return self._batch


def legal_policy(policy: np.ndarray, state: GameState, illegal: float = 0.0) -> np.ndarray:
    """A network policy for `state` (flat, pass last) over its legal moves: renormalised to sum to 1 there, as the
    search's priors are (uniform over them where the network gives them nothing), float64, `illegal` elsewhere."""
    legal = state.legal_mask()
    kept = np.where(legal, np.asarray(policy, dtype=np.float64), 0.0)
    total = kept.sum()
    kept = kept / total if total > 0 else legal / legal.sum()
    return np.where(legal, kept, illegal)


def accepts_positions(evaluator: object) -> bool:
    """Whether evaluator takes compiled search positions as it takes GameStates (an accepting evaluator)."""
    return getattr(evaluator, "accepts_positions", False)


def symmetry_averaged(evaluator: object, states: Sequence[GameState]) -> EvaluationBatch | None:
    """The averaged evaluation of `states` (see averaged evaluation), None where the evaluator offers none."""
    averaged = getattr(evaluator, "evaluate_averaged", None)
    return averaged(states) if averaged is not None else None


def search_client(evaluator: object) -> ContextManager | None:
    """For a shared evaluator, the context in which a search counts as its client (see shared evaluator); None for
    any other."""
    client = getattr(evaluator, "client", None)
    return client() if client is not None else None


def prepare(evaluator: Evaluator, states: Sequence[GameState]) -> PreparedEvaluation:
    """A prepared evaluation of `states` (see the module docstring), from evaluator.prepare where it has one."""
    split = getattr(evaluator, "prepare", None)
    return split(states) if split is not None else _WholeEvaluation(evaluator, states)


def compute_steps(evaluation: PreparedEvaluation, parts: int) -> list[Callable[[], None]]:
    """The compute step of a prepared evaluation as up to `parts` steps that may run at once (its compute_parts where
    it has one), every one to run before result()."""
    split = getattr(evaluation, "compute_parts", None)
    return split(parts) if split is not None and parts > 1 else [evaluation.compute]


class UniformEvaluator:
    """No knowledge: the policy is uniform over the legal moves (pass included), value, score, ownership 0.

    Used by tests, by the engine when no network is given, and as a baseline in matches.
    """

    def evaluate(self, states: Sequence[GameState]) -> EvaluationBatch:
        if not states:
            return EvaluationBatch.empty()
        area = states[0].grid.area
        legal = np.stack([s.legal_mask() for s in states]).astype(np.float32)
        policy = legal / legal.sum(axis=1, keepdims=True)
        count = len(states)
        return EvaluationBatch(
            policy=policy,
            value=np.zeros(count, np.float32),
            score=np.zeros(count, np.float32),
            ownership=np.zeros((count, area), np.float32),
        )


class CachedEvaluator:
    """Wraps an evaluator with a least-recently-used cache of up to `capacity` positions, keyed by position key.

    Misses of one call (duplicates within the call counted once) go to the inner evaluator as one batch.
    A cached position returns exactly the numbers of its first evaluation, even where the inner evaluator
    is random (a random symmetry), and even where two threads evaluated it at once. Safe to share between threads.
    An entry is (batch, index): the batch the position was evaluated in, made read-only and kept while any of its
    positions is cached (no copy per position).
    """

    def __init__(self, inner: Evaluator, capacity: int = 100_000):
        if capacity < 1:
            raise ValueError("cache capacity must be at least 1")
        self.inner = inner
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def accepts_positions(self) -> bool:
        """Whether compiled search positions may be evaluated (position.py): the keys read them, so the inner's say."""
        return accepts_positions(self.inner)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def evaluate_averaged(self, states: Sequence[GameState]) -> EvaluationBatch | None:
        """The inner evaluator's averaged evaluation, uncached (see averaged evaluation)."""
        return symmetry_averaged(self.inner, states)

    def evaluate(self, states: Sequence[GameState]) -> EvaluationBatch:
        evaluation = self.prepare(states)
        evaluation.compute()
        return evaluation.result()

    def prepare(self, states: Sequence[GameState]) -> PreparedEvaluation:
        """Looks the positions up now; the misses are prepared with the inner evaluator, stored by result()."""
        if not states:
            return prepare(self.inner, states)
        keys = [position_key(s) for s in states]
        found: list = [None] * len(states)  # per state: its cache entry, (batch, index in it), or None
        missing: dict = {}  # key -> index of its first state among the misses
        entries = self._entries
        with self._lock:
            for i, key in enumerate(keys):
                entry = entries.get(key)
                if entry is None:
                    missing.setdefault(key, i)
                else:
                    entries.move_to_end(key)
                    found[i] = entry
            self.misses += len(missing)
            self.hits += len(states) - len(missing)
        inner = prepare(self.inner, [states[i] for i in missing.values()]) if missing else None
        return _CachedEvaluation(self, keys, found, missing, inner)

    def _store(self, new_entries: dict) -> None:
        entries = self._entries
        with self._lock:
            for key, entry in new_entries.items():
                entries.setdefault(key, entry)  # a key new here goes last; one another thread added keeps its own
            while len(entries) > self.capacity:
                entries.popitem(last=False)


class _CachedEvaluation:
    """CachedEvaluator.prepare's evaluation: the cached rows, and the misses' evaluation by the inner evaluator."""

    def __init__(self, cache: CachedEvaluator, keys: list, entries: list, missing: dict,
                 inner: PreparedEvaluation | None):
        self._cache, self._keys, self._entries, self._missing, self._inner = cache, keys, entries, missing, inner

    def compute(self) -> None:
        if self._inner is not None:
            self._inner.compute()

    def compute_parts(self, parts: int) -> list[Callable[[], None]]:
        return compute_steps(self._inner, parts) if self._inner is not None else [self.compute]

    def result(self) -> EvaluationBatch:
        entries, keys, missing = self._entries, self._keys, self._missing
        if missing:
            fresh = self._inner.result().freeze()
            new_entries = {key: (fresh, j) for j, key in enumerate(missing)}
            self._cache._store(new_entries)
            if len(missing) == len(keys):  # all new and distinct (the usual case in a search): as evaluated
                return fresh
            for i, key in enumerate(keys):
                if entries[i] is None:
                    entries[i] = new_entries[key]
        return EvaluationBatch.gather(entries)
