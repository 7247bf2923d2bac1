"""Time budgets: properties over random clocks for every time system, and the GTP time_left semantics."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gtp_engine.timecontrol import (
    AnswerOverhead,
    Clock,
    ColorClock,
    TimeSettings,
    after_move,
    after_time_left,
    budget,
    kept_back,
    start_clock,
)

seconds = st.floats(min_value=0.0, max_value=7200.0, allow_nan=False)
positive = st.floats(min_value=0.5, max_value=600.0, allow_nan=False)
lags = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)
areas = st.sampled_from([9 * 9, 13 * 13, 19 * 19])
stones = st.integers(min_value=0, max_value=361)
overhead_fraction = st.floats(min_value=0.0, max_value=0.99)


@st.composite
def time_settings(draw, kind=None):
    kind = kind or draw(st.sampled_from(["absolute", "byoyomi", "canadian", "fischer"]))
    main = draw(seconds)
    if kind == "absolute":
        return TimeSettings("absolute", main)
    if kind == "byoyomi":
        return TimeSettings("byoyomi", main, draw(positive), periods=draw(st.integers(1, 10)))
    if kind == "canadian":
        return TimeSettings("canadian", main, draw(positive), stones=draw(st.integers(1, 30)))
    capped = draw(st.booleans())
    return TimeSettings(
        "fischer", main, increment=draw(st.floats(0.0, 60.0)),
        main_time_limit=draw(st.floats(1.0, 7200.0)) if capped else None,
        max_move_time=draw(st.floats(1.0, 600.0)) if capped else None,
    )


@st.composite
def clocks(draw, settings: TimeSettings):
    if settings.kind in ("absolute", "fischer"):
        return ColorClock(main_left=draw(seconds))
    if not draw(st.booleans()):
        return ColorClock(main_left=draw(seconds))
    clock = ColorClock(in_overtime=True, period_left=draw(st.floats(0.0, settings.period_time)))
    if settings.kind == "byoyomi":
        clock.periods_left = draw(st.integers(1, settings.periods))
    else:
        clock.stones_left = draw(st.integers(1, settings.stones))
    return clock


@st.composite
def situations(draw, kind=None):
    s = draw(time_settings(kind))
    return s, draw(clocks(s)), draw(areas), draw(stones), draw(lags)


def hard_limit(s: TimeSettings, clock: ColorClock) -> float:
    """What a move may take at most before it loses the game or a byo-yomi period."""
    if s.kind in ("absolute", "fischer"):
        return clock.main_left
    if clock.in_overtime:
        return clock.period_left
    return clock.main_left + (s.period_time if s.kind == "byoyomi" else s.period_time / s.stones)


@settings(max_examples=300, deadline=None)
@given(situations())
def test_budget_is_ordered_and_within_time_left_minus_lag(situation):
    s, clock, area, on_board, lag = situation
    b = budget(s, clock, area, on_board, lag)
    assert 0.0 <= b.minimum <= b.recommended <= b.maximum
    assert b.maximum <= max(0.0, hard_limit(s, clock) - lag) + 1e-9


@settings(max_examples=200, deadline=None)
@given(situations("byoyomi"), overhead_fraction)
def test_byoyomi_periods_are_never_lost(situation, fraction):
    s, clock, area, on_board, lag = situation
    b = budget(s, clock, area, on_board, lag)
    periods_before = clock.periods_left if clock.in_overtime else s.periods
    # The move runs to its maximum and the unseen overhead eats up to (almost) the whole lag buffer, where the
    # clock had that much left at all.
    overhead = fraction * min(lag, hard_limit(s, clock) - b.maximum)
    after = after_move(s, clock, b.maximum + overhead)
    assert not after.in_overtime or after.periods_left == periods_before


@settings(max_examples=200, deadline=None)
@given(situations("canadian"))
def test_canadian_stones_are_spread_over_the_period(situation):
    s, clock, area, on_board, lag = situation
    if not clock.in_overtime:
        clock = ColorClock(in_overtime=True, period_left=s.period_time, stones_left=s.stones)
    b = budget(s, clock, area, on_board, lag)
    usable = max(0.0, clock.period_left - lag)
    n = clock.stones_left
    assert b.recommended <= usable / n + 1e-9
    # Even a move at the maximum leaves each later stone of the period at least 3/4 of an even share.
    assert usable - b.maximum >= 0.75 * (n - 1) / n * usable - 1e-9


@settings(max_examples=100, deadline=None)
@given(situations(), st.floats(0.0, 600.0))
def test_more_time_never_gives_a_smaller_recommendation(situation, extra):
    s, clock, area, on_board, lag = situation
    if clock.in_overtime:
        return
    more = ColorClock(main_left=clock.main_left + extra)
    assert budget(s, more, area, on_board, lag).recommended >= budget(s, clock, area, on_board, lag).recommended - 1e-9


def test_no_time_limit_has_no_budget():
    assert budget(TimeSettings.from_gtp(0, 1, 0), ColorClock(), 361, 0) is None
    assert TimeSettings.from_gtp(1800, 0, 0) == TimeSettings("absolute", 1800)
    assert TimeSettings.from_gtp(600, 300, 25).kind == "canadian"


def test_absolute_budget_plays_faster_as_the_board_fills_less_of_the_clock():
    s = TimeSettings("absolute", 1800)
    clock = start_clock(s)
    opening = budget(s, clock, 361, 0)
    middle = budget(s, clock, 361, 200)
    assert 0 < opening.recommended < middle.recommended < 1800
    assert opening.minimum == 0


def test_kgs_byoyomi_time_left_counts_periods():
    s = TimeSettings("byoyomi", 300, 30, periods=5)
    clock = Clock(s)
    clock.time_left(1, 212, 0)
    assert clock.clocks[1] == ColorClock(main_left=212)
    clock.time_left(2, 27, 3)
    white = clock.clocks[2]
    assert white.in_overtime and white.periods_left == 3 and white.period_left == 27
    b = clock.budget(2, 361, 100, lag_buffer=1.0)
    assert b.minimum == b.recommended == b.maximum == pytest.approx(26.0)


def test_time_left_zero_zero_enters_overtime():
    s = TimeSettings("canadian", 600, 300, stones=25)
    clock = after_time_left(s, start_clock(s), 0, 0)
    assert clock.in_overtime and clock.stones_left == 25 and clock.period_left == 300


def test_canadian_transcript_numbers():
    s = TimeSettings("canadian", 600, 300, stones=25)
    clock = after_time_left(s, start_clock(s), 41, 3)
    b = budget(s, clock, 361, 150, lag_buffer=1.0)
    assert b.recommended == pytest.approx(38 / 3)  # each of the 3 stones keeps 1 s back
    assert b.maximum == pytest.approx(38 / 2.5)


def test_spend_moves_through_main_time_and_periods():
    s = TimeSettings("canadian", 10, 60, stones=2)
    clock = after_move(s, start_clock(s), 25)  # 10 s of main time, then 15 s of the first period
    assert clock.in_overtime and clock.period_left == 45 and clock.stones_left == 1
    clock = after_move(s, clock, 40)  # the period's last stone: a fresh period starts
    assert clock.period_left == 60 and clock.stones_left == 2
    b = TimeSettings("byoyomi", 0, 30, periods=3)
    clock = after_move(b, start_clock(b), 65)  # overruns two periods
    assert clock.periods_left == 1 and clock.period_left == 30


def test_fischer_adds_increment_up_to_the_cap_and_spends_what_the_cap_would_waste():
    s = TimeSettings("fischer", 100, increment=10, main_time_limit=105, max_move_time=30)
    clock = after_move(s, start_clock(s), 2)
    assert clock.main_left == 105
    b = budget(s, clock, 81, 10, lag_buffer=1.0)
    assert b.minimum == pytest.approx(10)  # 105 + 10 would be capped back to 105
    assert b.maximum <= 29


@pytest.mark.parametrize("args, expected", [
    (["0", "1", "1"], TimeSettings("canadian", 0, 1, stones=1)),
    (["1800", "0", "0"], TimeSettings("absolute", 1800)),
    (["0", "1", "0"], TimeSettings("none")),
    (["60.5", "10.5", "1"], TimeSettings("canadian", 60.5, 10.5, stones=1)),
])
def test_time_settings_parsing(args, expected):
    assert TimeSettings.from_time_settings(args) == expected


@pytest.mark.parametrize("args, expected", [
    (["none"], TimeSettings("none")),
    (["absolute", "60"], TimeSettings("absolute", 60)),
    (["byoyomi", "300", "30", "5"], TimeSettings("byoyomi", 300, 30, periods=5)),
    (["BYOYOMI", "300", "0", "5"], TimeSettings("absolute", 300)),
    (["canadian", "600", "300", "25"], TimeSettings("canadian", 600, 300, stones=25)),
    (["fischer", "300", "5"], TimeSettings("fischer", 300, increment=5)),
    (["fischer-capped", "600", "10", "1200", "-1"],
     TimeSettings("fischer", 600, increment=10, main_time_limit=1200, max_move_time=None)),
])
def test_kata_time_settings_parsing_includes_the_kgs_kinds(args, expected):
    assert TimeSettings.from_kata(args) == expected


@pytest.mark.parametrize("args", [[], ["byoyomi", "300"], ["byoyomi", "300", "30", "-1"], ["absolute", "-5"],
                                  ["absolute", "nan"], ["absolute", "1e3"], ["canadian", "1", "2", "3.5"],
                                  ["sudden"], ["none", "1"], ["fischer", "300", "5"]])
def test_bad_kgs_time_settings_are_value_errors(args):
    with pytest.raises(ValueError):
        TimeSettings.from_kgs(args)
    with pytest.raises(ValueError):
        TimeSettings.from_time_settings(args[:2])


# ---- the lag rule: what is kept back never eats a short period ------------------------------------------------

lag_buffers = st.one_of(st.none(), st.floats(min_value=0.0, max_value=5.0, allow_nan=False))
periods = st.floats(min_value=0.5, max_value=60.0, allow_nan=False)
overheads = st.floats(min_value=0.0, max_value=0.05, allow_nan=False)


def test_kept_back_is_a_fifth_up_to_a_second_by_default_and_the_users_delay_when_given():
    assert [kept_back(t) for t in (0.5, 1.0, 2.0, 5.0, 30.0)] == pytest.approx([0.1, 0.2, 0.4, 1.0, 1.0])
    assert [kept_back(t, 0.5) for t in (0.3, 1.0, 30.0)] == pytest.approx([0.3, 0.5, 0.5])


@settings(max_examples=300, deadline=None)
@given(situations(), lag_buffers, overheads)
def test_no_budget_goes_over_the_hard_limit_less_what_is_kept_back(situation, lag, overhead):
    s, clock, area, on_board, _ = situation
    b = budget(s, clock, area, on_board, lag, overhead)
    limit = hard_limit(s, clock)
    assert 0 <= b.minimum <= b.recommended <= b.maximum
    assert b.maximum <= max(0.0, limit - kept_back(limit, lag) - overhead) + 1e-9


@settings(max_examples=200, deadline=None)
@given(periods, st.integers(1, 5), areas, stones, overheads)
def test_default_byoyomi_budget_spends_most_of_any_period(period, count, area, on_board, overhead):
    s = TimeSettings("byoyomi", 0, period, periods=count)
    b = budget(s, start_clock(s), area, on_board, None, overhead)
    spent = max(0.8 * period, period - 1.0) - overhead  # a fifth of the period, at most 1 s, is kept back
    assert b.minimum == b.maximum == pytest.approx(max(0.0, spent))
    assert b.maximum >= 0.7 * period - overhead  # for periods of 0.5 s and more


@settings(max_examples=200, deadline=None)
@given(periods, st.integers(1, 25), areas, stones)
def test_default_canadian_budget_shares_the_period_between_its_stones(period, stones_per_period, area, on_board):
    s = TimeSettings("canadian", 0, period, stones=stones_per_period)
    b = budget(s, start_clock(s), area, on_board)
    usable = period - stones_per_period * kept_back(period / stones_per_period)
    assert b.recommended == pytest.approx(usable / stones_per_period)
    assert b.recommended > 0.5 * period / stones_per_period


@settings(max_examples=100, deadline=None)
@given(st.floats(1.0, 600.0), st.integers(1, 25), st.floats(0.0, 1.0), st.sampled_from(["maximum", "recommended"]))
def test_canadian_period_lasts_its_stones_when_each_move_pays_the_lag_buffer(period, stones, lag_share, spend):
    """A server that sees every move `lag` seconds longer than the engine, as the user's lag buffer says (at most a
    stone's share of the period): each stone spends its budget and the lag, time_left reports the truth before
    every stone, and the period never runs out."""
    s = TimeSettings("canadian", 0, period, stones=stones)
    lag = lag_share * period / stones
    left = period
    for stones_left in range(stones, 0, -1):
        clock = after_time_left(s, start_clock(s), left, stones_left)
        left -= getattr(budget(s, clock, 361, 100, lag), spend) + lag
        assert left >= -1e-9


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["absolute", "fischer"]), st.floats(10.0, 3600.0), st.floats(0.0, 30.0),
       st.sampled_from([9, 13, 19]), lag_buffers)
def test_main_time_lasts_the_expected_game_and_beyond(kind, main, increment, size, lag):
    """Every move spends its maximum (an unsettled search each time) for 1.5 times the expected game length:
    main time is never used up, and moves spending their recommended time leave a reserve."""
    s = TimeSettings(kind, main, increment=increment if kind == "fischer" else 0.0)
    area = size * size
    expected = int((0.7 * area + 20) / 2)  # our moves in a game of average length (KataGo's model: 0.5-0.95 x area)
    for spend in ("maximum", "recommended"):
        clock = start_clock(s)
        for move in range(int(1.5 * expected)):
            if move == expected and spend == "recommended" and kind == "absolute":
                assert clock.main_left >= 0.1 * main  # a reserve for a longer game
            b = budget(s, clock, area, min(2 * move, area), lag)
            clock = after_move(s, clock, getattr(b, spend))
            assert clock.main_left > 0


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1800.0), periods, st.integers(1, 5), st.sampled_from([9, 19]))
def test_main_time_before_byoyomi_is_spread_not_spent_at_once(main, period, count, size):
    s = TimeSettings("byoyomi", main, period, periods=count)
    b = budget(s, start_clock(s), size * size, 0)
    assert b.recommended >= min(main + period - kept_back(main + period), 2.0 * period)  # more than overtime gives
    assert b.maximum <= max(b.recommended, main + period)
    assert b.recommended <= max(main / 5, 2.0 * period) + period  # never most of the main time on one move


def test_the_answer_overhead_keeps_the_longest_recent_one_decaying():
    overhead = AnswerOverhead()
    assert overhead.seconds == 0.0
    overhead.note(0.5)
    assert overhead.seconds == 0.5
    overhead.note(0.1)  # one quick answer does not forget a slow one at once
    assert overhead.seconds == pytest.approx(0.4)
    for _ in range(20):
        overhead.note(0.1)
    assert overhead.seconds == pytest.approx(0.1)  # but it fades to what the answers take now
    overhead.note(0.3)
    assert overhead.seconds == 0.3
