"""Matches against Pachi at equal time and equal threads: our engine (A) against Pachi (B), played, checked and
scored by gtp_engine/match.py (GNU Go the referee, Chinese rules), Pachi built by tools/build_pachi.sh when its
binary is missing.

Terms:
- threads (--threads N): the CPU threads each program computes with at once. Pachi: threads=N. Our engine: its
  search thread and N - 1 evaluation threads, each network run on one thread (--threads 1 --evaluation-threads
  N-1, what its defaults pick on an N-core machine of up to four cores). Neither ponders: Pachi's pondering=0,
  our --ponder off.
- time (--seconds S): S seconds a move, byo-yomi with no main time (time_settings 0 S 1), given to both programs
  before each game; 1 s on 9x9 and 2 s on larger boards unless set. Both keep 0.1 s of it back for lag (Pachi
  by tools/build_pachi.sh's patch, our engine by --lag-buffer 0.1), so both think for about S - 0.1 s.
- time odds (--pachi-seconds P): Pachi gets P seconds a move instead of S (P = 4 S: Pachi with four times our
  time).
- match folder (--out): game-N.sgf for each game played, N from 1, our engine Black in the odd games, and
  match.json, the match's conditions (board, komi, threads, each program's seconds a move). Run again with the same
  folder and the same arguments, the match goes on from the first game missing there, with the colours and
  openings it would have had, and the summary counts the results (RE) of the games already there; other
  conditions are refused, so that no match mixes games played under two.
- summary: match.summary's line (wins, losses, draws, score, Elo with its 95% interval), then our score with its
  95% interval (match_stats.score_interval) over all games, as Black and as White.

Usage (from the repository root):
  python -m tools.pachi_match --size 9 --games 100 --out runs/pachi9 --openings data/go9_curated.tar.xz
  python -m tools.pachi_match --size 19 --komi 7.5 --games 20 --pachi-seconds 8 --out runs/pachi19x4
  python -m tools.loss_analysis runs/pachi9        # where the lost games' points went
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from gtp_engine import match_stats, sgf_io
from gtp_engine.match import GameResult, GtpError, Program, a_plays_black, play_match, summary
from tools.match import openings_of

BUILD_SCRIPT = Path(__file__).with_name("build_pachi.sh")
DEFAULT_PACHI = Path("build/pachi")
LAG_RESERVE = 0.1  # seconds each program keeps back from every move (build_pachi.sh's Pachi patch)
_GAME_FILE = re.compile(r"game-(\d+)\.sgf")
CONDITIONS = "match.json"


def engine_command(engine: str, threads: int) -> str:
    """Our engine's command with `threads` threads, no pondering and Pachi's lag reserve (module docstring)."""
    flags = f" --threads 1 --evaluation-threads {threads - 1} --ponder off --lag-buffer {LAG_RESERVE:g}"
    if threads > 4:  # evaluation threads are at most the batches in flight but one, 4 of them by default
        flags += f" --batches-in-flight {threads}"
    return engine + flags


def pachi_command(pachi: Path, threads: int) -> str:
    return f"{pachi} threads={threads},pondering=0"


def ensure_pachi(pachi: Path) -> None:
    """Builds Pachi at `pachi` with tools/build_pachi.sh unless a file is there; RuntimeError if the build fails."""
    if pachi.is_file():
        return
    print(f"{pachi} is missing: building Pachi with {BUILD_SCRIPT.name}", file=sys.stderr, flush=True)
    if subprocess.run(["bash", str(BUILD_SCRIPT), str(pachi)]).returncode != 0 or not pachi.is_file():
        raise RuntimeError(f"{BUILD_SCRIPT.name} could not build {pachi} (its lines above say why)")


def earlier_games(folder: Path, size: int) -> tuple[list[GameResult], tuple[str, str]]:
    """The results of the games in the match folder, game 1 first, and the names of our engine and Pachi in them
    (as GTP's name answered; placeholders without games); ValueError for a gap in the numbers, another board size,
    a game without a result or one in which our engine is not the one of game 1."""
    numbers = sorted(int(m.group(1)) for path in folder.glob("game-*.sgf")
                     if (m := _GAME_FILE.fullmatch(path.name)))
    results, names = [], None
    for expected, number in enumerate(numbers, 1):
        if number != expected:
            raise ValueError(f"{folder}: game-{number}.sgf but no game-{expected}.sgf")
        path = folder / f"game-{number}.sgf"
        try:
            record = sgf_io.load_sgf_file(path)
        except (OSError, sgf_io.SgfError) as error:
            raise ValueError(f"{path}: {error}") from None
        if (record.width, record.height) != (size, size):
            raise ValueError(f"{path}: a {record.width}x{record.height} game, not {size}x{size}")
        if not record.result:
            raise ValueError(f"{path}: no result (RE)")
        a_is_black = a_plays_black(number)
        ours, theirs = (record.black, record.white) if a_is_black else (record.white, record.black)
        names = names or (ours, theirs)
        if ours != names[0]:
            raise ValueError(f"{path}: our engine should be {'Black' if a_is_black else 'White'}, {names[0]!r} as "
                             f"in game-1.sgf, but is {ours!r}")
        results.append(GameResult(a_is_black, record.result, len(record.moves)))
    return results, names or ("our engine", "Pachi")


def score_line(games: list[GameResult]) -> str:
    """Our score and its 95% interval over the games, and as Black and as White."""
    parts = []
    for label, subset in (("score", games), ("as Black", [g for g in games if g.a_is_black]),
                          ("as White", [g for g in games if not g.a_is_black])):
        if subset:
            mean, low, high = match_stats.score_interval([g.score_for_a for g in subset])
            parts.append(f"{label} {mean:.3f} (95%: {low:.3f} .. {high:.3f}, {len(subset)} games)")
    return "; ".join(parts)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="match folder: game-N.sgf; an earlier match there goes on")
    p.add_argument("--size", type=int, default=9)
    p.add_argument("--games", type=int, default=100, help="games of the whole match, earlier ones included "
                                                          "(default: 100)")
    p.add_argument("--komi", type=float, default=7.0, help="(default: 7)")
    p.add_argument("--seconds", type=int, help="seconds a move for each program (default: 1 on 9x9, else 2)")
    p.add_argument("--pachi-seconds", type=int, help="Pachi's seconds a move, where it has other time than our "
                                                       "engine (default: --seconds)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads of each program (default: 2)")
    p.add_argument("--pachi", type=Path, default=DEFAULT_PACHI,
                   help=f"Pachi's binary, built there when missing (default: {DEFAULT_PACHI})")
    p.add_argument("--engine", default=f"{sys.executable} -m gtp_engine --log-level error",
                   help="our engine's command, before the flags this tool adds (default: python -m gtp_engine "
                        "--log-level error)")
    p.add_argument("--referee", help="GTP program that checks and scores (default: GNU Go, Chinese rules)")
    p.add_argument("--openings", type=Path, help="SGF file, folder or archive: each pair of games starts from the "
                                                 "next record's first moves (colours swapped within the pair)")
    p.add_argument("--opening-moves", type=int, default=4, help="moves of each opening (default: 4)")
    p.add_argument("--max-minutes", type=float, help="start no new game after this many minutes")
    p.add_argument("--verbose", action="store_true", help="show the programs' stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.size < 2 or args.games < 1 or args.threads < 1 or any(
            value is not None and value < 1 for value in (args.seconds, args.pachi_seconds)):
        p.error("--size takes 2 or more; --games, --threads, --seconds and --pachi-seconds take positive numbers")
    if args.out.exists() and not args.out.is_dir():
        p.error(f"--out {args.out} is a file, not a folder")
    seconds = args.seconds or (1 if args.size == 9 else 2)
    pachi_seconds = args.pachi_seconds or seconds
    openings = openings_of(p, args.openings, args.size, args.opening_moves)
    try:
        earlier, _ = earlier_games(args.out, args.size) if args.out.is_dir() else ([], None)
    except ValueError as error:
        p.error(f"--out: {error}")
    conditions = {"size": args.size, "komi": args.komi, "threads": args.threads, "seconds": seconds,
                  "pachi_seconds": pachi_seconds}
    recorded = args.out / CONDITIONS
    if recorded.is_file() and json.loads(recorded.read_text()) != conditions:
        p.error(f"--out: its games were played with {recorded.read_text().strip()}, not {json.dumps(conditions)}: "
                "give the match its own folder")
    if earlier:
        print(f"{len(earlier)} games already in {args.out}: going on from game {len(earlier) + 1}",
              file=sys.stderr)
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None

    def report(number: int, black: Program, white: Program, result: GameResult) -> None:
        print(f"game {number}: {black.name} (B) vs {white.name} (W): {result.result} in {result.moves} moves",
              flush=True)

    status = 0
    if len(earlier) < args.games:
        kwargs = {"referee": args.referee} if args.referee else {}
        args.out.mkdir(parents=True, exist_ok=True)
        recorded.write_text(json.dumps(conditions) + "\n")
        try:
            ensure_pachi(args.pachi)
            play_match(engine_command(args.engine, args.threads), pachi_command(args.pachi, args.threads),
                       args.games, args.size, args.komi, time_settings=f"0 {seconds} 1",
                       b_time_settings=f"0 {pachi_seconds} 1", sgf_dir=args.out,
                       deadline=deadline, verbose=args.verbose, on_game=report, openings=openings,
                       first_game=len(earlier) + 1, **kwargs)
        except (GtpError, RuntimeError) as error:
            print(f"match stopped: {error}", file=sys.stderr)
            status = 1
    try:
        games, names = earlier_games(args.out, args.size) if args.out.is_dir() else ([], ("our engine", "Pachi"))
    except ValueError as error:  # this sitting's games differ from the earlier ones (another --engine --name)
        print(f"--out: {error}", file=sys.stderr)
        return 1
    print(summary(*names, games))
    if games:
        print(score_line(games))
    return status


if __name__ == "__main__":
    sys.exit(main())
