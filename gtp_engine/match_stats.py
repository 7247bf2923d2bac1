"""Match statistics: what a series of games between A and B says about their strength difference.

Terms:
- result of a game for A: 1 (win), 0.5 (draw), 0 (loss). Score: the mean over the games.
- Elo: the rating difference that predicts the score, 400 * log10(score / (1 - score)); the 95% interval maps
  score +- 1.96 standard errors the same way. Where every game had the same result the standard error is zero,
  and the Wilson score interval (which stays wide after 10 straight losses, say) is used instead.
- SPRT: the sequential probability ratio test of "A is elo0 stronger" against "A is elo1 stronger" (normal
  approximation of the score, as fishtest uses, with the sample variance); a match stops when the
  log-likelihood ratio (LLR) leaves its bounds: above the upper one H1 (elo1) is accepted, below the lower H0.
  A sample without variance (all wins, say) is given the variance it would have with one win and one loss more.

Used by tools/match.py (engines over GTP) and by the training loop's gating (networks in process).
"""

from __future__ import annotations

import math
from typing import Sequence

Z95 = 1.96  # standard errors of a two-sided 95% interval


def score(results: Sequence[float]) -> float:
    return sum(results) / len(results)


def score_interval(results: Sequence[float]) -> tuple[float, float, float]:
    """(score, low, high): the mean result and its 95% interval, clipped to [0, 1]."""
    n = len(results)
    mean = score(results)
    variance = sum((r - mean) ** 2 for r in results) / n
    if variance == 0:
        return (mean, *_wilson(mean, n))
    margin = Z95 * math.sqrt(variance / n)
    return mean, max(0.0, mean - margin), min(1.0, mean + margin)


def _wilson(p: float, n: int) -> tuple[float, float]:
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def elo(score: float) -> float:
    """The Elo difference that predicts this score (infinite at 0 and 1)."""
    if score <= 0:
        return -math.inf
    if score >= 1:
        return math.inf
    return -400 * math.log10(1 / score - 1)


def elo_interval(results: Sequence[float]) -> tuple[float, float, float]:
    """(Elo, low, high): the estimate and its 95% interval from the per-game results for A."""
    mean, low, high = score_interval(results)
    return elo(mean), elo(low), elo(high)


def sprt_llr(results: Sequence[float], elo0: float, elo1: float) -> float:
    """Log-likelihood ratio of elo1 against elo0 (normal approximation of the score).

    A one-sided run (all wins, or all losses) has no sample variance; it is then estimated with one win and one
    loss added, so that a clean sweep still decides after enough games instead of never.
    """
    n = len(results)
    if n == 0:
        return 0.0
    mean = score(results)
    variance = sum((r - mean) ** 2 for r in results) / n
    if variance == 0:
        padded = [*results, 0.0, 1.0]
        padded_mean = score(padded)
        variance = sum((r - padded_mean) ** 2 for r in padded) / len(padded)
    p0, p1 = (1 / (1 + 10 ** (-e / 400)) for e in (elo0, elo1))
    return n * (p1 - p0) * (2 * mean - p0 - p1) / (2 * variance)


def sprt_bounds(alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """(lower, upper) LLR bounds for false-positive rate alpha and false-negative rate beta."""
    return math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha)


def sprt_decision(results: Sequence[float], elo0: float, elo1: float, alpha: float = 0.05,
                  beta: float = 0.05) -> str | None:
    """"H1" (A is elo1 stronger), "H0" (A is elo0 stronger) or None while the test goes on."""
    llr, (low, high) = sprt_llr(results, elo0, elo1), sprt_bounds(alpha, beta)
    if llr >= high:
        return "H1"
    if llr <= low:
        return "H0"
    return None
