"""match_stats: score, Elo and its interval, SPRT (the arithmetic tools/match.py and the loop's gating share)."""

import math

import pytest

from gtp_engine import match_stats


def test_elo_and_its_interval():
    assert match_stats.elo(0.5) == 0
    assert match_stats.elo(0.75) == pytest.approx(190.85, abs=0.01)
    assert match_stats.elo(1.0) == math.inf and match_stats.elo(0.0) == -math.inf
    estimate, low, high = match_stats.elo_interval([1, 1, 0, 1, 0.5, 1, 0, 1])
    assert low < estimate < high and estimate == pytest.approx(match_stats.elo(5.5 / 8))
    wide = match_stats.elo_interval([1, 0] * 5)
    narrow = match_stats.elo_interval([1, 0] * 500)
    assert narrow[2] - narrow[1] < wide[2] - wide[1]


def test_score_interval_is_the_mean_plus_minus_two_standard_errors():
    mean, low, high = match_stats.score_interval([1.0] * 60 + [0.0] * 40)
    assert mean == pytest.approx(0.6)
    assert (low, high) == pytest.approx((0.6 - 1.96 * math.sqrt(0.24 / 100), 0.6 + 1.96 * math.sqrt(0.24 / 100)))
    # One-sided samples get the Wilson interval: ten straight losses still allow a score near 0.28.
    mean, low, high = match_stats.score_interval([0.0] * 10)
    assert (mean, low) == (0.0, 0.0) and high == pytest.approx(0.2775, abs=1e-3)
    mean, low, high = match_stats.score_interval([1.0] * 10)
    assert high == 1.0 and low == pytest.approx(0.7225, abs=1e-3)


def test_sprt_accepts_the_right_hypothesis():
    low, high = match_stats.sprt_bounds()
    assert (low, high) == pytest.approx((math.log(0.05 / 0.95), math.log(0.95 / 0.05)))
    strong = [1.0] * 70 + [0.0] * 30  # score 0.7: about +150 Elo
    weak = [1.0] * 30 + [0.0] * 70
    assert match_stats.sprt_llr(strong, 0, 50) > high
    assert match_stats.sprt_llr(weak, 0, 50) < low
    assert low < match_stats.sprt_llr([1.0, 0.0] * 5, 0, 50) < high
    assert match_stats.sprt_decision(strong, 0, 50) == "H1"
    assert match_stats.sprt_decision(weak, 0, 50) == "H0"
    assert match_stats.sprt_decision([1.0, 0.0] * 5, 0, 50) is None
    # A clean sweep decides, but not after a handful of games.
    assert match_stats.sprt_decision([1.0] * 4, 0, 35) is None
    assert match_stats.sprt_decision([1.0] * 20, 0, 35) == "H1"
    assert match_stats.sprt_decision([0.0] * 20, 0, 35) == "H0"
