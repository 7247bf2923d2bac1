"""Engine-against-engine matches over GTP, as gogui-twogtp plays them.

Terms:
- the two engines: any GTP commands; A is the first (--a), B the second (--b). Colours alternate: A has Black in
  games 1, 3, 5, ...
- referee: a third GTP program that sees every move, refuses illegal ones (the mover then loses) and scores
  the finished game with final_score (GNU Go by default, as twogtp's -referee).
- result, score, Elo with its 95% interval, SPRT: as gtp_engine/match_stats.py defines them (the training
  loop's gating uses the same arithmetic); with --sprt the match stops when the SPRT decides.

Usage (from the repository root):
  python -m tools.match --a "gtp-engine --weights a.onnx" --b "gnugo --mode gtp --level 1" \\
      --size 9 --komi 7 --games 20 --sgf-dir games/ [--sprt 0,50] [--referee "gnugo --mode gtp --chinese-rules"]
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gtp_engine import coords, match_stats, sgf_io
from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import GameState, format_result


class GtpError(Exception):
    pass


EXTRA_PATH = "/usr/games"  # where Debian installs GNU Go, often not on PATH


class Program:
    """A GTP program in a subprocess; stderr goes to this process's stderr only when verbose."""

    def __init__(self, command: str, verbose: bool = False):
        self.command = command
        argv = shlex.split(command)
        if argv and shutil.which(argv[0]) is None and shutil.which(argv[0], path=EXTRA_PATH):
            argv[0] = shutil.which(argv[0], path=EXTRA_PATH)
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=None if verbose else subprocess.DEVNULL, text=True)
        except OSError as error:
            raise GtpError(f"cannot start {command!r}: {error.strerror or error}") from None
        self.name = self.send("name")
        self.version = self.send("version", check=False)

    def send(self, command: str, check: bool = True) -> str:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        lines = []
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise GtpError(f"{self.command!r} ended while answering {command!r}")
            line = line.rstrip("\r\n")
            if not line and lines:
                break
            if line:
                lines.append(line)
        head, _, rest = lines[0].partition(" ")
        text = "\n".join([rest] + lines[1:]).strip()
        if head.startswith("?"):
            if check:
                raise GtpError(f"{self.command!r}: {command!r} failed: {text}")
            return ""
        return text

    def close(self) -> None:
        try:
            self.send("quit", check=False)
        except (GtpError, OSError):
            pass
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class GameResult:
    a_is_black: bool
    result: str  # SGF RE: B+3.5, W+R, B+F (forfeit by an illegal move), 0
    moves: int

    @property
    def score_for_a(self) -> float:
        if self.result == "0":
            return 0.5
        black_won = self.result.startswith("B+")
        return 1.0 if black_won == self.a_is_black else 0.0


def play_game(black: Program, white: Program, referee: Program, size: int, komi: float,
              max_moves: int, time_settings: str | None = None) -> tuple[str, GameState]:
    """Plays one game; returns the SGF result and the game record.

    time_settings ("main byoyomi stones", GTP's time_settings arguments) goes to both players before the game, as
    twogtp's -time does; each player keeps its own clock (the match does not forfeit on time)."""
    for program in (black, white, referee):
        program.send(f"boardsize {size}")
        program.send("clear_board")
        program.send(f"komi {komi:g}", check=program is referee)
        if time_settings is not None and program is not referee:
            program.send(f"time_settings {time_settings}", check=False)
    game = GameState(size, komi=komi)
    players = {BLACK: black, WHITE: white}
    letters = {BLACK: "B", WHITE: "W"}
    while not game.is_over and game.move_number < max_moves:
        color = game.to_play
        answer = players[color].send(f"genmove {letters[color].lower()}").lower()
        if answer == "resign":
            return f"{letters[3 - color]}+R", game
        try:
            point = coords.from_gtp(game.grid, answer)
            referee.send(f"play {letters[color]} {answer}")
            game.play(point, color)
        except (ValueError, GtpError) as error:
            print(f"  {players[color].name} played {answer!r}, which is illegal: {error}", file=sys.stderr)
            return f"{letters[3 - color]}+F", game
        players[3 - color].send(f"play {letters[color]} {answer}")
    return normalized_result(referee.send("final_score")), game


def play_match(a: Program, b: Program, referee: Program, games: int, size: int, komi: float, max_moves: int,
               time_settings: str | None = None, sgf_dir: Path | None = None,
               sprt: tuple[float, float] | None = None, deadline: float | None = None) -> list[GameResult]:
    """Plays up to `games` games, colours alternating (A Black in odd games), printing a line per game; stops
    early when the SPRT decides or when the monotonic clock passes deadline (no new game starts after it)."""
    played: list[GameResult] = []
    for number in range(1, games + 1):
        if deadline is not None and time.monotonic() >= deadline:
            print(f"deadline: {len(played)} of {games} games played")
            break
        a_is_black = number % 2 == 1
        black, white = (a, b) if a_is_black else (b, a)
        result, game = play_game(black, white, referee, size, komi, max_moves, time_settings)
        played.append(GameResult(a_is_black, result, game.move_number))
        print(f"game {number}: {black.name} (B) vs {white.name} (W): {result} in {game.move_number} moves",
              flush=True)
        if sgf_dir:
            sgf = sgf_io.save_sgf(game, black=black.name, white=white.name, result=result)
            (sgf_dir / f"game-{number}.sgf").write_bytes(sgf)
        if sprt is not None and len(played) >= 2:
            results = [g.score_for_a for g in played]
            decision = match_stats.sprt_decision(results, *sprt)
            if decision is not None:
                llr, (low, high) = match_stats.sprt_llr(results, *sprt), match_stats.sprt_bounds()
                print(f"SPRT: LLR {llr:.2f} outside ({low:.2f}, {high:.2f}): "
                      f"{decision} (Elo {sprt[1] if decision == 'H1' else sprt[0]:+g}) accepted")
                break
    return played


def normalized_result(text: str) -> str:
    """A final_score answer as SGF RE (B+3.5, W+12, 0)."""
    text = text.strip().upper()
    if text in ("0", "DRAW", "JIGO"):
        return "0"
    if not (len(text) > 2 and text[0] in "BW" and text[1] == "+"):
        raise GtpError(f"the referee's final_score is not a result: {text!r}")
    return format_result(float(text[2:]) * (1 if text[0] == "B" else -1))


def summary(a: Program, b: Program, games: list[GameResult]) -> str:
    if not games:
        return f"{a.name} vs {b.name}: no game played"
    results = [g.score_for_a for g in games]
    wins, draws = results.count(1.0), results.count(0.5)
    estimate, low, high = match_stats.elo_interval(results)
    return (f"{a.name} vs {b.name}: {wins} wins, {len(results) - wins - draws} losses, {draws} draws in "
            f"{len(results)} games; score {sum(results) / len(results):.3f}; "
            f"Elo {estimate:+.0f} (95%: {low:+.0f} .. {high:+.0f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="command of engine A")
    parser.add_argument("--b", required=True, help="command of engine B")
    parser.add_argument("--referee", default="gnugo --mode gtp --chinese-rules",
                        help="GTP program that checks and scores (area scoring by default)")
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=7.0)
    parser.add_argument("--max-moves", type=int, help="score the game after this many moves (default: 3 x area)")
    parser.add_argument("--time-settings", metavar="'MAIN BYOYOMI STONES'",
                        help="send time_settings with these arguments to both engines before each game, "
                             "e.g. '0 2 1' for byo-yomi 2 s a move")
    parser.add_argument("--sgf-dir", type=Path, help="write game-N.sgf here")
    parser.add_argument("--sprt", metavar="ELO0,ELO1", help="stop when an SPRT (alpha = beta = 0.05) decides")
    parser.add_argument("--max-minutes", type=float, help="start no new game after this many minutes")
    parser.add_argument("--verbose", action="store_true", help="show the programs' stderr")
    args = parser.parse_args(argv)
    sprt = None
    if args.sprt:
        try:
            sprt = tuple(float(x) for x in args.sprt.split(","))
            assert len(sprt) == 2 and sprt[0] < sprt[1]
        except (ValueError, AssertionError):
            parser.error("--sprt takes ELO0,ELO1 with ELO0 < ELO1")
    if args.time_settings is not None:
        fields = args.time_settings.split()
        if len(fields) != 3 or not all(f.isdigit() for f in fields):
            parser.error("--time-settings takes three whole numbers: main time, byo-yomi seconds, stones")
        args.time_settings = " ".join(fields)
    max_moves = args.max_moves or 3 * args.size * args.size
    if args.sgf_dir:
        args.sgf_dir.mkdir(parents=True, exist_ok=True)

    programs: list[Program] = []
    try:
        for command in (args.a, args.b, args.referee):
            programs.append(Program(command, args.verbose))
        a, b, referee = programs
        deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None
        games = play_match(a, b, referee, args.games, args.size, args.komi, max_moves, args.time_settings,
                           args.sgf_dir, sprt, deadline)
        print(summary(a, b, games))
    except GtpError as error:
        print(f"match stopped: {error}", file=sys.stderr)
        return 1
    finally:
        for program in programs:
            program.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
