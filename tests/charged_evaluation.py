"""ChargedEvaluation: a prepared evaluation (gtp_engine.evaluator.prepare) for fake-clock tests, which charges the
evaluation's time in result(), in the search's own thread: where a search with batches in flight stops then never
depends on how its threads interleave."""


class ChargedEvaluation:
    """Computes `evaluate()` (in any thread) and calls `charge(count)` when the result is taken."""

    def __init__(self, evaluate, charge, count: int):
        self._evaluate, self._charge, self._count = evaluate, charge, count
        self._batch = None

    def compute(self) -> None:
        self._batch = self._evaluate()

    def result(self):
        self._charge(self._count)
        return self._batch
