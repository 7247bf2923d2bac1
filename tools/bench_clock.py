"""How the engine spends a game clock: games against GNU Go under a clock kept the way a Go server keeps it.

Terms:
- clock: one of CLOCKS, a board size and a time system. The benchmark is the server: it sends the settings the way
  gtp2ogs does (kgs-time_settings for byo-yomi and Canadian, kata-time_settings fischer-capped for Fischer,
  time_settings otherwise), sends time_left for the engine before every genmove (floored seconds, as gtp2ogs), and
  charges the engine the wall time from writing genmove to reading the answer. Only the engine is on the clock; GNU
  Go plays at its level without one and also scores the game (final_score, Chinese rules unless told otherwise).
- time loss: the answer came after the engine's time ran out (main time in absolute or Fischer; the last byo-yomi
  period; a Canadian period before its stones were played). The game ends there, lost.
- share of the period: in byo-yomi overtime, a move's seconds over the period; under Canadian overtime, the
  seconds of a whole period's stones over the period. 1 s per move is Canadian with one stone.
- reference: GNU Go's mean seconds per move in the same run, printed beside the engine's, says how loaded the
  machine was (the engine's time per move is set by the clock, not by the load).

Usage (from the repository root):
  python -m tools.bench_clock --clock move1 --clock byo3x2 --games 10 [--engine "gtp-engine --ponder on"]
      [--opponent "gnugo --mode gtp --level 10 --chinese-rules"] [--komi 7] [--log moves.jsonl]
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field, replace

from gtp_engine import coords, match_stats
from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import GameState
from gtp_engine.match import GtpError, Program, normalized_result


@dataclass(frozen=True)
class ClockSpec:
    size: int
    kind: str  # byoyomi, canadian, absolute, fischer
    main: float = 0.0
    period: float = 0.0  # byo-yomi period, Canadian period, or Fischer increment
    count: int = 0  # byo-yomi periods or Canadian stones
    cap: float = 0.0  # Fischer: most main time


CLOCKS = {
    "move1": ClockSpec(9, "canadian", 0, 1, 1),  # time_settings 0 1 1: one second per move
    "byo3x2": ClockSpec(9, "byoyomi", 10, 2, 3),  # 10 s main time, then 3 periods of 2 s
    "byo1x5-19": ClockSpec(19, "byoyomi", 0, 5, 1),  # one period of 5 s on 19x19
    "canadian5/10": ClockSpec(9, "canadian", 0, 10, 5),  # 5 stones in 10 s
    "sd30": ClockSpec(9, "absolute", 30),  # 30 s sudden death
    "fischer10+1": ClockSpec(9, "fischer", 10, 1, cap=30),  # 10 s, 1 s a move, at most 30 s
}


class ServerClock:
    """The engine's clock as the server keeps it; play() charges one move and says whether time ran out."""

    def __init__(self, spec: ClockSpec):
        self.spec = spec
        self.main_left = spec.main
        self.overtime = spec.kind in ("byoyomi", "canadian") and spec.main <= 0
        self.period_left = spec.period
        self.periods_left = spec.count if spec.kind == "byoyomi" else 0
        self.stones_left = spec.count if spec.kind == "canadian" else 0

    def setup_commands(self) -> list[str]:
        s = self.spec
        if s.kind == "absolute":
            return [f"time_settings {s.main:g} 0 0"]
        if s.kind == "fischer":
            return [f"kata-time_settings fischer-capped {s.main:g} {s.period:g} {s.cap:g} -1"]
        if s.kind == "canadian" and s.count == 1 and s.main == 0:
            return [f"time_settings 0 {s.period:g} 1"]  # OGS's "simple" clock
        return [f"kgs-time_settings {s.kind} {s.main:g} {s.period:g} {s.count}"]

    def time_left(self) -> tuple[int, int]:
        """(seconds, count) for time_left, as gtp2ogs sends them: floored seconds; count 0 in main time, else the
        periods (byo-yomi) or stones (Canadian) left."""
        if not self.overtime:
            return math.floor(self.main_left), 0
        count = self.periods_left if self.spec.kind == "byoyomi" else self.stones_left
        return math.floor(self.period_left), count

    def play(self, seconds: float) -> tuple[bool, float | None]:
        """Charges one move; returns (time ran out, the share of the period this move closed or None)."""
        s = self.spec
        if s.kind == "absolute":
            self.main_left -= seconds
            return self.main_left < 0, None
        if s.kind == "fischer":
            self.main_left -= seconds
            lost = self.main_left < 0
            self.main_left = min(self.main_left + s.period, s.cap)
            return lost, None
        if not self.overtime:
            if seconds <= self.main_left:
                self.main_left -= seconds
                return False, None
            seconds -= self.main_left
            self.main_left, self.overtime = 0.0, True
        if s.kind == "byoyomi":
            while seconds > self.period_left:
                seconds -= self.period_left
                self.periods_left -= 1
                self.period_left = s.period
                if self.periods_left <= 0:
                    return True, None
            share = seconds / s.period
            self.period_left = s.period
            return False, share
        self.period_left -= seconds
        if self.period_left < 0:
            return True, None
        self.stones_left -= 1
        if self.stones_left == 0:
            share = (s.period - self.period_left) / s.period
            self.period_left, self.stones_left = s.period, s.count
            return False, share
        return False, None


@dataclass
class ClockStats:
    name: str
    games: int = 0
    wins: list[float] = field(default_factory=list)
    engine_seconds: list[float] = field(default_factory=list)
    opponent_seconds: list[float] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)  # per closed overtime period
    time_losses: int = 0
    periods_lost: int = 0

    def report(self) -> str:
        moves = self.engine_seconds
        line = (f"{self.name:13s} games {self.games:3d}  moves {len(moves):5d}  "
                f"s/move mean {statistics.fmean(moves) if moves else 0:.2f} max {max(moves, default=0):.2f}  ")
        if self.shares:
            line += f"period used mean {statistics.fmean(self.shares):.0%} min {min(self.shares):.0%}  "
        else:
            line += "period used   -            "
        score, low, high = match_stats.score_interval(self.wins) if self.wins else (0.0, 0.0, 1.0)
        reference = statistics.fmean(self.opponent_seconds) if self.opponent_seconds else 0
        return (line + f"periods lost {self.periods_lost}  time losses {self.time_losses}  "
                f"score {score:.2f} (95%: {low:.2f}..{high:.2f})  GNU Go s/move {reference:.2f}")


def play_game(engine: Program, opponent: Program, spec: ClockSpec, komi: float, engine_black: bool,
              stats: ClockStats, log) -> None:
    for program in (engine, opponent):
        program.send(f"boardsize {spec.size}")
        program.send("clear_board")
        program.send(f"komi {komi:g}")
    clock = ServerClock(spec)
    game = GameState(spec.size, komi=komi)
    engine_color = BLACK if engine_black else WHITE
    letter = {BLACK: "b", WHITE: "w"}
    result, on_time = None, False
    while not game.is_over and game.move_number < 3 * spec.size ** 2:
        color = game.to_play
        mover = engine if color == engine_color else opponent
        if mover is engine:
            for command in clock.setup_commands():  # gtp2ogs sends the settings and time_left before every move
                engine.send(command)
            seconds, count = clock.time_left()
            engine.send(f"time_left {letter[color]} {seconds} {count}")
        sent = time.monotonic()
        answer = mover.send(f"genmove {letter[color]}").lower()
        spent = time.monotonic() - sent
        if mover is engine:
            periods = clock.periods_left
            lost, share = clock.play(spent)
            stats.engine_seconds.append(spent)
            if share is not None:
                stats.shares.append(share)
            if clock.spec.kind == "byoyomi" and clock.periods_left < periods:
                stats.periods_lost += periods - max(clock.periods_left, 0)
            if log:
                log.write(json.dumps({"clock": stats.name, "move": game.move_number, "seconds": round(spent, 4),
                                      "share": share, "lost": lost}) + "\n")
                log.flush()  # a run stopped early keeps its moves
            if lost:
                stats.time_losses += 1
                result, on_time = 0.0, True
                break
        else:
            stats.opponent_seconds.append(spent)
        if answer == "resign":
            result = 0.0 if mover is engine else 1.0
            break
        point = coords.from_gtp(game.grid, answer)
        game.play(point, color)
        other = opponent if mover is engine else engine
        other.send(f"play {letter[color]} {answer}")
    if result is None:
        text = normalized_result(opponent.send("final_score"))
        result = 0.5 if text == "0" else float(text.startswith("B+") == engine_black)
    stats.games += 1
    stats.wins.append(result)
    if log:
        log.write(json.dumps({"clock": stats.name, "game": stats.games, "score": result,
                              "on_time": on_time}) + "\n")
        log.flush()


def warm_up(engine: Program, size: int) -> None:
    """Lets the engine load its network for this size before any clock runs, as a server's game setup does
    (gtp2ogs starts the engine before the game; a network load is no move's time)."""
    for command in (f"boardsize {size}", "clear_board", "time_settings 0 1 1", "time_left b 1 1", "reg_genmove b"):
        engine.send(command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clock", action="append", choices=sorted(CLOCKS), help="a clock to play (repeatable)")
    parser.add_argument("--games", type=int, default=2, help="games per clock; the engine alternates colours")
    parser.add_argument("--engine", default=f"{shlex.quote(sys.executable)} -m gtp_engine")
    parser.add_argument("--opponent", default="gnugo --mode gtp --level 10 --chinese-rules")
    parser.add_argument("--komi", type=float, default=7.0)
    parser.add_argument("--size", type=int, help="play every clock on this board size instead of its own")
    parser.add_argument("--log", help="append one JSON line per engine move to this file")
    parser.add_argument("--verbose", action="store_true", help="show the programs' stderr")
    args = parser.parse_args(argv)
    names = args.clock or sorted(CLOCKS)
    log = open(args.log, "a") if args.log else None
    programs: list[Program] = []
    everything = []
    try:
        engine = Program(args.engine, args.verbose)
        opponent = Program(args.opponent, args.verbose)
        programs = [engine, opponent]
        for name in names:
            spec = CLOCKS[name] if args.size is None else replace(CLOCKS[name], size=args.size)
            warm_up(engine, spec.size)
            stats = ClockStats(name)
            for number in range(args.games):
                play_game(engine, opponent, spec, args.komi, number % 2 == 0, stats, log)
                print(f"{name} game {number + 1}: score {stats.wins[-1]:g}, {len(stats.engine_seconds)} engine "
                      f"moves so far, time losses {stats.time_losses}", file=sys.stderr, flush=True)
            everything.append(stats)
            print(stats.report(), flush=True)
    except GtpError as error:
        print(f"benchmark stopped: {error}", file=sys.stderr)
        return 1
    finally:
        for program in programs:
            program.close()
        if log:
            log.close()
    if len(everything) > 1:
        games = sum(s.games for s in everything)
        print(f"all clocks: {games} games, time losses {sum(s.time_losses for s in everything)}, "
              f"periods lost {sum(s.periods_lost for s in everything)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
