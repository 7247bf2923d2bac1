"""Time control: the game clock and how much of it the next move may spend.

Terms:
- settings: the time system agreed for the game, the same for both colours: none (no limit), absolute (main time
  only), byoyomi (Japanese: main time, then `periods` periods of `period_time`; a move that ends inside a period
  resets it, a move that overruns one loses it), canadian (main time, then `stones` moves to be played within each
  `period_time`), fischer (main time, plus `increment` after every move; capped Fischer never lets main time grow
  beyond `main_time_limit` and never spends more than `max_move_time` on one move).
  TimeSettings.from_time_settings, from_kgs and from_kata read GTP's three time-settings commands.
- clock: one colour's state: main time left, and once main time is over (overtime) the time left in the current
  period, the byo-yomi periods left or the Canadian stones left. GTP time_left is the truth; spend() only keeps an
  estimate between two time_left commands.
- budget: (minimum, recommended, maximum) seconds for the next move. Spending less than the minimum wastes time
  that cannot be saved; the recommended time is the target; going over the maximum risks losing the game or a
  byo-yomi period. Per system: byo-yomi overtime spends the whole period; Canadian overtime shares the period's
  time between its stones left; main time before overtime is spread over the moves left (KataGo's game-length
  model) but gives each move at least MAIN_OVER_PERIOD periods' worth; absolute time is spread over the moves
  left with a floor that keeps a reserve for long games; Fischer adds the reserve above one increment, spread
  the same way, to each increment.
- lag buffer, kept back: seconds kept back from every limit for the delay the clock sees and the engine does not
  (the round trip to the server, the controller's own work). The user who knows their delay gives it as the lag
  buffer, and that much is kept back from every limit (all of a limit shorter than it). Without one, the engine
  keeps back a fifth of the limit, at most 1 s (DEFAULT_LAG_BUFFER): 0.2 s of a 1 s period, 1 s of 5 s or more.
  A fixed second would eat a short period whole (a 1 s byo-yomi would be played on the raw policy), while a fast
  clock is only offered where the delay is small; long limits keep the full second. KataGo keeps back half of a
  limit shorter than twice its buffer; a fifth spends 80% of a 1 s period and still covers a local or LAN delay.
  Canadian overtime keeps it back once for every stone left in the period, from each stone's share: each of those
  moves pays the delay.
- overhead: the engine's own seconds per move outside its search (the answer after the search stops), measured by
  the caller and kept back as well (AnswerOverhead keeps it from move to move). The search itself stops one batch
  before its deadline (search/limits.py).

budget() is a pure function of the settings, one clock and the position's size; nothing here reads a clock or
runs a search. The caller turns a budget into the search's stop condition.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Sequence

KINDS = ("none", "absolute", "byoyomi", "canadian", "fischer")
_CLOCK_RESOLUTION = 1e-6  # seconds; differences below this are rounding, not time
DEFAULT_LAG_BUFFER = 1.0  # seconds: the most kept back for delay when the user gave no lag buffer
AUTO_LAG_SHARE = 0.2  # the share of a limit kept back for delay when the user gave no lag buffer
OVERHEAD_DECAY = 0.8  # per move, of the measured answer overhead kept for the next budgets


@dataclass(frozen=True)
class TimeSettings:
    kind: str = "none"
    main_time: float = 0.0
    period_time: float = 0.0  # byoyomi: one period; canadian: the time for `stones` moves
    periods: int = 0  # byoyomi: number of periods
    stones: int = 0  # canadian: moves per period
    increment: float = 0.0  # fischer: added after each move
    main_time_limit: float | None = None  # capped fischer: main time never grows past this
    max_move_time: float | None = None  # capped fischer: most time one move may take

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown time system {self.kind!r}; expected one of {KINDS}")
        if min(self.main_time, self.period_time, self.increment) < 0 or self.periods < 0 or self.stones < 0:
            raise ValueError("time settings must not be negative")
        if self.kind == "byoyomi" and (self.periods < 1 or self.period_time <= 0):
            raise ValueError("byo-yomi needs at least one period of positive length")
        if self.kind == "canadian" and (self.stones < 1 or self.period_time <= 0):
            raise ValueError("canadian overtime needs at least one stone per period of positive length")

    @classmethod
    def from_gtp(cls, main_time: float, period_time: float, stones: int) -> TimeSettings:
        """GTP time_settings: canadian; no overtime means absolute, overtime without stones means no limit."""
        if stones == 0:
            return cls("none") if period_time > 0 else cls("absolute", main_time)
        return cls("canadian", main_time, period_time, stones=stones)

    @classmethod
    def from_time_settings(cls, args: Sequence[str]) -> TimeSettings:
        """GTP time_settings M B S (see from_gtp); ValueError for a wrong count or bad numbers."""
        if len(args) != 3:
            raise ValueError(f"time_settings takes 3 numbers, not {len(args)}")
        return cls.from_gtp(_seconds(args[0]), _seconds(args[1]), _count(args[2]))

    @classmethod
    def from_kgs(cls, args: Sequence[str]) -> TimeSettings:
        """kgs-time_settings: none | absolute M | byoyomi M B P | canadian M B S; no overtime means absolute.

        Raises ValueError for anything else (unknown kind, wrong count, bad or negative numbers)."""
        kind = args[0].lower() if args else ""
        if kind == "none" and len(args) == 1:
            return cls("none")
        if kind == "absolute" and len(args) == 2:
            return cls("absolute", _seconds(args[1]))
        if kind in ("byoyomi", "canadian") and len(args) == 4:
            main, period, count = _seconds(args[1]), _seconds(args[2]), _count(args[3])
            if count == 0 or period == 0:
                return cls("absolute", main)
            if kind == "byoyomi":
                return cls("byoyomi", main, period, periods=count)
            return cls("canadian", main, period, stones=count)
        raise ValueError(f"not a kgs-time_settings: {' '.join(args)!r}")

    @classmethod
    def from_kata(cls, args: Sequence[str]) -> TimeSettings:
        """kata-time_settings: the kgs kinds, fischer M INC and fischer-capped M INC LIMIT MAXMOVE (-1: no cap)."""
        kind = args[0].lower() if args else ""
        if kind == "fischer" and len(args) == 3:
            return cls("fischer", _seconds(args[1]), increment=_seconds(args[2]))
        if kind == "fischer-capped" and len(args) == 5:
            limit, per_move = _number(args[3]), _number(args[4])
            return cls("fischer", _seconds(args[1]), increment=_seconds(args[2]),
                       main_time_limit=None if limit < 0 else limit, max_move_time=None if per_move < 0 else per_move)
        return cls.from_kgs(args)


def _number(text: str) -> float:
    """A finite decimal number as GTP writes it (6.5, -3, 0); ValueError otherwise."""
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", text):
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def _seconds(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise ValueError(f"negative time: {text!r}")
    return value


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"not a count: {text!r}")
    return int(text)


@dataclass
class ColorClock:
    """One colour's clock; fields for the overtime kinds only matter once in_overtime is True."""

    main_left: float = 0.0
    in_overtime: bool = False
    period_left: float = 0.0  # time left in the current byo-yomi period or Canadian period
    periods_left: int = 0  # byo-yomi periods left, the current one included
    stones_left: int = 0  # canadian moves still to play in the current period


@dataclass(frozen=True)
class Budget:
    minimum: float
    recommended: float
    maximum: float


@dataclass
class AnswerOverhead:
    """The overhead kept back from the next budgets: the longest recent one, decaying by OVERHEAD_DECAY a move, so
    that one slow answer does not cut many moves short. (A last batch slower than the search expected is the
    search's batch time, not this.)"""

    seconds: float = 0.0

    def note(self, seconds: float) -> None:
        """Takes in one move's measured overhead."""
        self.seconds = max(seconds, OVERHEAD_DECAY * self.seconds)


class Clock:
    """Both colours' clocks under one TimeSettings, keyed by colour (any hashable, e.g. board.BLACK)."""

    def __init__(self, settings: TimeSettings = TimeSettings(), colors: tuple = (1, 2)):
        self.settings = settings
        self.clocks = {color: start_clock(settings) for color in colors}

    def time_left(self, color, seconds: float, count: int) -> None:
        self.clocks[color] = after_time_left(self.settings, self.clocks[color], seconds, count)

    def spend(self, color, seconds: float) -> None:
        self.clocks[color] = after_move(self.settings, self.clocks[color], seconds)

    def budget(self, color, area: int, stones_on_board: int, lag_buffer: float | None = None,
               overhead: float = 0.0) -> Budget | None:
        return budget(self.settings, self.clocks[color], area, stones_on_board, lag_buffer, overhead)


def start_clock(settings: TimeSettings) -> ColorClock:
    clock = ColorClock(main_left=settings.main_time)
    if settings.kind in ("byoyomi", "canadian") and settings.main_time <= 0:
        return _enter_overtime(settings, clock)
    return clock


def _enter_overtime(settings: TimeSettings, clock: ColorClock) -> ColorClock:
    return dataclasses.replace(
        clock, main_left=0.0, in_overtime=True, period_left=settings.period_time,
        periods_left=settings.periods, stones_left=settings.stones,
    )


def after_time_left(settings: TimeSettings, clock: ColorClock, seconds: float, count: int) -> ColorClock:
    """The clock after GTP `time_left color seconds count`.

    count is 0 in main time; in overtime it is the stones left in the Canadian period, or after
    kgs-time_settings byoyomi the periods left. `time_left c 0 0` means main time just ran out.
    """
    seconds = max(0.0, float(seconds))
    kind = settings.kind
    if kind in ("absolute", "fischer"):
        return dataclasses.replace(clock, main_left=seconds)
    if kind not in ("byoyomi", "canadian"):
        return clock
    if count <= 0:
        if seconds == 0:
            return _enter_overtime(settings, clock)
        return dataclasses.replace(clock, main_left=seconds, in_overtime=False)
    clock = dataclasses.replace(clock, main_left=0.0, in_overtime=True, period_left=seconds)
    if kind == "byoyomi":
        return dataclasses.replace(clock, periods_left=count)
    return dataclasses.replace(clock, stones_left=count)


def after_move(settings: TimeSettings, clock: ColorClock, seconds: float) -> ColorClock:
    """The clock after one of this colour's moves took `seconds`: an estimate until the next time_left."""
    kind, spent = settings.kind, max(0.0, float(seconds))
    if kind == "absolute":
        return dataclasses.replace(clock, main_left=max(0.0, clock.main_left - spent))
    if kind == "fischer":
        left = max(0.0, clock.main_left - spent) + settings.increment
        if settings.main_time_limit is not None:
            left = min(left, settings.main_time_limit)
        return dataclasses.replace(clock, main_left=left)
    if kind not in ("byoyomi", "canadian"):
        return clock
    if not clock.in_overtime:
        if spent < clock.main_left:
            return dataclasses.replace(clock, main_left=clock.main_left - spent)
        spent -= clock.main_left
        clock = _enter_overtime(settings, clock)
    if kind == "byoyomi":
        overrun = spent - clock.period_left - _CLOCK_RESOLUTION
        lost = math.ceil(overrun / settings.period_time) if overrun > 0 else 0  # each period overrun is gone
        return dataclasses.replace(clock, periods_left=max(0, clock.periods_left - lost),
                                   period_left=settings.period_time)
    period_left, stones_left = clock.period_left - spent, clock.stones_left - 1
    if stones_left <= 0:
        period_left, stones_left = settings.period_time, settings.stones
    return dataclasses.replace(clock, period_left=max(0.0, period_left), stones_left=stones_left)


# Moves this colour still has to play, from KataGo's game-length model (timecontrols.cpp): the stones on the board
# say how far the game has gone; the floor keeps some time back for long games. Halved: only our moves count.
def _turns_absolute(area: int, stones: int) -> float:
    return max(0.95 * area + 20 - stones, 0.15 * area + 30) / 2


def _turns_increment(area: int, stones: int) -> float:
    return max(0.75 * area + 15 - stones, 0.10 * area + 20) / 2


def _turns_overtime(area: int, stones: int) -> float:
    return max(0.50 * area + 10 - stones, 0.02 * area + 4) / 2


# How far past the recommended time a move may go when the search asks for more (e.g. the best move is unsettled).
MAX_OVER_RECOMMENDED = 3.0
# A move in main time before byo-yomi or Canadian overtime is worth at least this many overtime moves' time:
# strength grows with the log of the time, so the best trade of main time against overtime spends e (2.7) times a
# period's share per move (KataGo's rule); the moves of the opening, spent so, matter less than later ones, so less.
MAIN_OVER_PERIOD = 2.0


def kept_back(limit: float, lag_buffer: float | None = None) -> float:
    """Seconds kept back from a time limit for the delay the clock sees and the engine does not (see lag buffer)."""
    if lag_buffer is None:
        return min(DEFAULT_LAG_BUFFER, AUTO_LAG_SHARE * limit)
    return min(lag_buffer, limit)


def budget(settings: TimeSettings, clock: ColorClock, area: int, stones_on_board: int,
           lag_buffer: float | None = None, overhead: float = 0.0) -> Budget | None:
    """(minimum, recommended, maximum) seconds of search for this colour's next move; None without a time limit.

    lag_buffer: None keeps back the default share (see kept_back); a number is the user's own delay.
    overhead: seconds the engine needs per move besides its search (answering after the search stops).
    """
    kind = settings.kind
    if kind == "none":
        return None

    def usable(limit: float, moves: int = 1) -> float:  # every move pays the lag and the overhead
        return max(0.0, limit - moves * (kept_back(limit / moves, lag_buffer) + overhead))

    if kind == "absolute":
        hard = usable(clock.main_left)
        recommended = hard / _turns_absolute(area, stones_on_board)
        return _bounded(0.0, recommended, MAX_OVER_RECOMMENDED * recommended, hard)

    if kind == "fischer":
        hard = usable(clock.main_left)
        if settings.max_move_time is not None:
            hard = min(hard, usable(settings.max_move_time))
        inc = settings.increment
        excess = max(0.0, hard - inc)  # the reserve above one increment: spread over the game, never spent at once
        recommended = inc + excess / _turns_increment(area, stones_on_board)
        minimum = 0.0
        if settings.main_time_limit is not None:  # what the cap would take away is free to spend
            minimum = clock.main_left + inc - settings.main_time_limit
        return _bounded(minimum, recommended, max(recommended, inc + excess / 5), hard)

    per_period = settings.period_time if kind == "byoyomi" else settings.period_time / settings.stones
    if not clock.in_overtime:
        # A move may run from main time into overtime, but no further than one period's share, so that no
        # byo-yomi period is lost and the other Canadian stones of the first period keep their time.
        main = clock.main_left
        hard = usable(main + per_period)
        recommended = max(main / _turns_overtime(area, stones_on_board) + per_period,
                          min(MAIN_OVER_PERIOD * per_period, main + per_period))
        return _bounded(0.0, recommended, recommended + max(per_period, main / 5), hard)

    if kind == "byoyomi" or clock.stones_left <= 1:
        hard = usable(clock.period_left)
        return Budget(hard, hard, hard)  # what this move leaves of the period is lost anyway
    stones = clock.stones_left
    hard = usable(clock.period_left, stones)
    return _bounded(0.0, hard / stones, hard / (0.75 * stones + 0.25), hard)


def _bounded(minimum: float, recommended: float, maximum: float, hard: float) -> Budget:
    """Clamps into 0 <= minimum <= recommended <= maximum <= hard."""
    maximum = min(max(maximum, recommended), hard)
    recommended = min(recommended, maximum)
    return Budget(min(max(minimum, 0.0), recommended), recommended, maximum)
