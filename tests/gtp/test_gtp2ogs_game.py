"""A game driven the way gtp2ogs (the online-go.com bridge) drives a bot: CRLF line endings, lowercase vertices,
colours as black/white, kgs-time_settings and time_left for both colours before every genmove, and a byo-yomi
clock. The opponent plays random legal moves from our own rules code.

The engine runs as a subprocess on the wall clock, so only what load cannot break is asserted here: it spends
its byo-yomi periods (a lower bound: load only lengthens a move). That no move overruns its period is checked
exactly on an injected clock (test_clock_session.py)."""

from __future__ import annotations

import math
import random
import re
import time

from gtp_engine import coords
from gtp_engine.board import WHITE
from gtp_engine.game import GameState

FRAMED = re.compile(r"(?:[=?]\d*(?: [^\n]*)?\n(?:[^\n]+\n)*\n)*")
MAIN_TIME, PERIOD, PERIODS = 3.0, 2.0, 3
LAG_BUFFER = 0.5


class Bot:
    """The engine seen through gtp2ogs: every command ends in CRLF, every answer is lowercased."""

    def __init__(self, gtp):
        self.gtp = gtp

    def __call__(self, command: str) -> str:
        self.gtp.send(command, newline="\r\n")
        reply = self.gtp.response(60)
        assert reply.ok, f"{command}: {reply.text}"
        return reply.text.lower()


class ByoYomiClock:
    """The server's clock for one player: main time, then PERIODS periods of PERIOD seconds."""

    def __init__(self):
        self.main, self.periods = MAIN_TIME, PERIODS

    def time_left(self) -> tuple[int, int]:
        """What gtp2ogs sends: whole seconds (floored), and 0 in main time or the periods left."""
        if self.main > 0:
            return math.floor(self.main), 0
        return math.floor(PERIOD), self.periods

    def spend(self, seconds: float) -> None:
        if seconds <= self.main:
            self.main -= seconds
            return
        seconds -= self.main
        self.main = 0.0
        overrun = max(0, math.ceil(seconds / PERIOD) - 1)  # each period the move ran past is lost
        self.periods = max(1, self.periods - overrun)  # a loaded machine may overrun; the game goes on


def test_byoyomi_game_like_gtp2ogs(engine, net_args):
    gtp = engine(*net_args, "--visits", "1000000", "--lag-buffer", str(LAG_BUFFER))
    bot = Bot(gtp)
    assert "kgs-time_settings" in bot("list_commands").split("\n")
    bot("boardsize 9")
    bot("clear_board")
    bot("komi 7")
    game, rng = GameState(9, komi=7), random.Random(5)
    clock = ByoYomiClock()
    engine_color, times = WHITE, []  # times: of the moves made in byo-yomi
    while len(times) < 5 and not game.is_over:
        if game.to_play != engine_color:
            legal = game.legal_mask()[:-1].nonzero()[0].tolist()
            point = game.grid.from_flat(rng.choice(legal)) if legal else coords.PASS
            game.play(point)
            bot(f"play black {coords.to_gtp(game.grid, point).lower()}")
            continue
        bot(f"kgs-time_settings byoyomi {MAIN_TIME:g} {PERIOD:g} {PERIODS}")
        bot("time_left black 600 0")  # the opponent's clock is sent too
        seconds, periods = clock.time_left()
        bot(f"time_left white {seconds} {periods}")
        started = time.monotonic()
        move = bot("genmove white")
        spent = time.monotonic() - started
        if periods:  # in byo-yomi
            times.append(spent)
        clock.spend(spent)
        assert move == "resign" or re.fullmatch(r"pass|[a-hj][1-9]", move), move
        if move == "resign":
            break
        game.play(coords.from_gtp(game.grid, move), WHITE)
    assert min(times) > 0.5 * (PERIOD - LAG_BUFFER)  # it used its periods (no visit limit was set)
    bot("quit")
    gtp.close()
    assert FRAMED.fullmatch(gtp.raw.decode()), "something other than GTP responses reached stdout"
