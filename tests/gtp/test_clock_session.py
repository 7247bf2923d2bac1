"""GTP sessions under a game clock, kept the way gtp2ogs keeps it (time settings and time_left before every
genmove), on an injected clock: every network call takes a fixed time on it, so the move times checked here are
exact and no load on the machine can change them."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from charged_evaluation import ChargedEvaluation

from gtp_engine import coords
from gtp_engine.board import WHITE
from gtp_engine.coords import PASS
from gtp_engine.config import PlayOptions
from gtp_engine.evaluator import UniformEvaluator
from gtp_engine.game import Rules
from gtp_engine.gtp.commands import Session
from gtp_engine.gtp.protocol import GtpError, Stream, parse
from gtp_engine.player import MoveLimits, Player, PlayerConfig
from gtp_engine.search import ResignConfig, SearchConfig

BATCH_SECONDS = 0.05  # what one network call takes on the fake clock
STALL_SECONDS = 0.3
EXPECTED_REPLY = "e5"  # the network's favourite move wherever it is legal


class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


class TimedEvaluator(UniformEvaluator):
    """Every call takes BATCH_SECONDS on the fake clock, except pondering's: its time is the opponent's. The time
    is charged in the searching thread (the main thread for a command's search, not pondering's), when the search
    takes the result (prepare, with batches in flight): the answers' times never depend on thread timing."""

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.calls = 0
        self.stall_after: float | None = None  # the first call from this time on takes STALL_SECONDS

    def evaluate(self, states):
        self._charge(len(states))
        return self._evaluate(states)

    def prepare(self, states):
        return ChargedEvaluation(lambda: self._evaluate(states), self._charge, len(states))

    def _charge(self, count: int) -> None:
        self.calls += 1
        if threading.current_thread() is threading.main_thread():
            stall = self.stall_after is not None and self.clock() >= self.stall_after
            if stall:
                self.stall_after = None
            self.clock.advance(STALL_SECONDS if stall else BATCH_SECONDS)

    def _evaluate(self, states):
        batch = super().evaluate(states)
        for row, state in enumerate(states):  # White likes one reply: pondering can guess it
            if state.to_play != WHITE:
                continue
            expected = state.grid.flat(coords.from_gtp(state.grid, EXPECTED_REPLY))
            if batch.policy[row, expected] > 0:
                batch.policy[row] *= 0.2
                batch.policy[row, expected] += 0.8
        return batch


class RecordingPlayer(Player):
    """Keeps what each genmove returned (its root visits)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.choices = []

    def genmove(self, *args, **kwargs):
        self.choices.append(super().genmove(*args, **kwargs))
        return self.choices[-1]


class Players:
    """A PlayerSource with one Player on the fake clock."""

    def __init__(self, clock: FakeClock):
        self.evaluator = TimedEvaluator(clock)
        self.player = RecordingPlayer(self.evaluator, PlayerConfig(SearchConfig(seed=1), resign=ResignConfig(None)),
                                      clock=clock)

    def prepare(self, width, height):
        pass

    def get(self, width, height):
        return self.player

    def clear_cache(self):
        pass


class Writer:
    def write(self, text):
        pass


class Controller:
    """Sends lines to an in-process Session; `delay` is how long the server and the wire take per command."""

    def __init__(self, ponder: bool = False, lag_buffer: float | None = None):
        self.clock = FakeClock()
        self.players = Players(self.clock)
        self.session = Session(self.players, MoveLimits(), PlayOptions(ponder=ponder, lag_buffer=lag_buffer),
                               Rules.named("chinese"), board_size=9, komi=7, now=self.clock)
        self.input = threading.Event()

    def __call__(self, line: str) -> str:
        self.input.set()  # any input stops pondering, as the protocol's reader does
        self.input = threading.Event()  # set by the next line
        command = replace(parse(line), received=self.clock())
        stream = Stream(command, Writer(), self.input, threading.Event())
        return self.session.handler(command.name)(command, stream)

    def timed(self, line: str) -> tuple[str, float]:
        start = self.clock()
        answer = self(line)
        return answer, self.clock() - start


def opponent_move(gtp: Controller, rng: np.random.Generator) -> None:
    """White plays a random legal point (pass when none), as `play`: the opponent's time is not ours."""
    game = gtp.session.game
    legal = np.flatnonzero(game.legal_mask()[:-1])
    point = game.grid.point_of[rng.choice(legal)] if len(legal) else PASS
    gtp(f"play w {coords.to_gtp(game.grid, point)}")


def play_out(gtp: Controller, settings: str, moves: int, time_left: str) -> list[float]:
    """Our genmoves as black against a random white, with the settings and time_left before each, as gtp2ogs
    sends them; the fake seconds of each answer."""
    rng = np.random.default_rng(0)
    times = []
    for _ in range(moves):
        gtp(settings)
        gtp(f"time_left b {time_left}")
        _, seconds = gtp.timed("genmove b")
        times.append(seconds)
        opponent_move(gtp, rng)
    return times


@pytest.mark.parametrize("period", [0.5, 1.0, 2.0, 5.0])
def test_byoyomi_moves_use_most_of_each_period_and_never_overrun_it(period):
    gtp = Controller()
    settings = f"kgs-time_settings byoyomi 0 {period:g} 3"
    times = play_out(gtp, settings, 6, f"{period:g} 3")
    kept = min(1.0, 0.2 * period)
    for seconds in times:
        assert seconds <= period - kept + 1e-9  # the lag buffer is left for the wire
        assert seconds >= period - kept - 2 * BATCH_SECONDS - 1e-9  # the rest of the period is used


def test_one_second_per_move_as_ogs_simple_time():
    gtp = Controller()
    times = play_out(gtp, "time_settings 0 1 1", 5, "1 1")
    assert all(0.75 <= s <= 0.8 + 1e-9 for s in times)


def test_a_stalled_batch_shortens_the_next_moves_but_never_to_nothing():
    gtp = Controller()
    rng = np.random.default_rng(0)
    times = []
    for move in range(4):
        gtp("time_settings 0 1 1")
        gtp("time_left b 1 1")
        if move == 1:  # the machine stalls the search's last batch, after its last look at the clock
            gtp.players.evaluator.stall_after = gtp.clock() + 0.8 - 2 * BATCH_SECONDS
        _, seconds = gtp.timed("genmove b")
        times.append(seconds)
        opponent_move(gtp, rng)
    assert times[1] > 0.8 + 0.2  # this move is late: nothing could tell the search the stall would come
    # The next move keeps the stalled batch's time back, but at most half its time; then the stall is forgotten.
    assert 0.4 - 1e-9 <= times[2] <= 0.7 + 1e-9
    assert times[2] < times[3] <= 0.8 + 1e-9


def test_a_given_lag_buffer_is_kept_back_in_full():
    gtp = Controller(lag_buffer=0.5)
    times = play_out(gtp, "kgs-time_settings byoyomi 0 2 3", 3, "2 3")
    assert all(1.5 - 2 * BATCH_SECONDS - 1e-9 <= s <= 1.5 + 1e-9 for s in times)


def test_canadian_stones_share_the_period_and_finish_inside_it():
    gtp = Controller()
    rng = np.random.default_rng(0)
    times = []
    for k in range(10):
        stones = 5 - k % 5
        left = 10.0 - sum(times[k - k % 5:])
        gtp("kgs-time_settings canadian 0 10 5")
        gtp(f"time_left b {left:.3f} {stones}")
        _, seconds = gtp.timed("genmove b")
        times.append(seconds)
        opponent_move(gtp, rng)
    for period in (times[:5], times[5:]):
        # The period's stones all played inside it, each keeping back its lag, and most of it used.
        assert 0.8 * 10 <= sum(period) <= 10 - 0.2 * (10 - sum(period[:-1])) + 1e-9
        assert max(period) < 4.0  # spread over the stones, not spent on one


def test_sudden_death_keeps_time_for_a_long_game():
    gtp = Controller()
    rng = np.random.default_rng(0)
    left = 30.0
    for _ in range(60):
        gtp("time_settings 30 0 0")
        gtp(f"time_left b {left:.3f} 0")
        _, seconds = gtp.timed("genmove b")
        left -= seconds
        assert left > 0
        opponent_move(gtp, rng)
    assert left > 3.0  # 60 of our moves on 9x9 (a long game) and a tenth of the clock still left


def test_pondering_deepens_the_next_search_and_does_not_delay_the_answer():
    def visits_after_reply(ponder: bool) -> tuple[int, float]:
        gtp = Controller(ponder=ponder)
        gtp("kgs-time_settings byoyomi 0 1 3")
        gtp("time_left b 1 3")
        gtp("genmove b")
        evaluator = gtp.players.evaluator
        if ponder:
            calls = evaluator.calls
            waited = time.monotonic() + 60  # pondering runs in a thread: wait for its work, however slow
            while evaluator.calls < calls + 100 and time.monotonic() < waited:
                time.sleep(0.01)
            assert evaluator.calls >= calls + 100
        gtp("play w e5")  # stops pondering, if any
        gtp("time_left b 1 3")
        _, seconds = gtp.timed("genmove b")
        return gtp.players.player.choices[-1].visits, seconds

    plain, plain_seconds = visits_after_reply(False)
    pondered, pondered_seconds = visits_after_reply(True)
    assert pondered > plain + 100
    assert pondered_seconds <= 0.8 + 1e-9 and plain_seconds <= 0.8 + 1e-9


def test_time_left_and_genmove_answer_at_once_while_pondering():
    gtp = Controller(ponder=True)
    gtp("kgs-time_settings byoyomi 0 1 3")
    gtp("genmove b")
    evaluator = gtp.players.evaluator
    calls = evaluator.calls
    waited = time.monotonic() + 60
    while evaluator.calls < calls + 10 and time.monotonic() < waited:
        time.sleep(0.01)
    assert gtp.session._pondering is not None
    gtp("time_left w 1 3")  # stops pondering: it does not come back before the next genmove
    assert gtp.session._pondering is None
    calls = evaluator.calls
    time.sleep(0.05)
    assert evaluator.calls == calls
    gtp("genmove w")
    assert gtp.session._pondering is not None
    _, seconds = gtp.timed("genmove b")
    assert 0.8 - 2 * BATCH_SECONDS - 1e-9 <= seconds <= 0.8 + 1e-9
    with pytest.raises(GtpError):
        gtp("time_left w x 3")
