"""Engine-against-engine matches over GTP, as gogui-twogtp plays them: the command line of gtp_engine/match.py.

Terms:
- the two engines: any GTP commands; A is the first (--a), B the second (--b). Colours alternate: A has Black in
  games 1, 3, 5, ...
- referee: a third GTP program that sees every move, refuses illegal ones (the mover then loses) and scores
  the finished game with final_score (GNU Go by default, as twogtp's -referee).
- result, score, Elo with its 95% interval, SPRT: as gtp_engine/match_stats.py defines them (the training
  loop's gating uses the same arithmetic); with --sprt the match stops when the SPRT decides.
- openings (--openings): each pair of games starts from the first --opening-moves moves of the next game record,
  so that deterministic engines do not replay the same two games (gtp_engine/match.py).

Usage (from the repository root):
  python -m tools.match --a "gtp-engine --weights a.onnx" --b "gnugo --mode gtp --level 1" \\
      --size 9 --komi 7 --games 20 --sgf-dir games/ [--sprt 0,50] [--referee "gnugo --mode gtp --chinese-rules"]
      [--openings ../shared/data/go9_curated.tar.xz --opening-moves 4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gtp_engine import match_stats
from gtp_engine.game import KOMI
from gtp_engine.match import REFEREE, GameResult, GtpError, Program, Sprt, load_openings, play_match, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="command of engine A")
    parser.add_argument("--b", required=True, help="command of engine B")
    parser.add_argument("--referee", default=REFEREE,
                        help="GTP program that checks and scores (area scoring by default)")
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=KOMI, help=f"(default: {KOMI:g})")
    parser.add_argument("--max-moves", type=int, default=0,
                        help="score the game after this many moves (default: 3 x area)")
    parser.add_argument("--time-settings", metavar="'MAIN BYOYOMI STONES'",
                        help="send time_settings with these arguments to both engines before each game, "
                             "e.g. '0 2 1' for byo-yomi 2 s a move")
    parser.add_argument("--sgf-dir", type=Path, help="write game-N.sgf here")
    parser.add_argument("--sprt", metavar="ELO0,ELO1", help="stop when an SPRT (alpha = beta = 0.05) decides")
    parser.add_argument("--max-minutes", type=float, help="start no new game after this many minutes")
    parser.add_argument("--openings", type=Path,
                        help="SGF file, folder or archive: each pair of games starts from the next record's first "
                             "moves (colours swapped within the pair)")
    parser.add_argument("--opening-moves", type=int, default=4, help="moves of each opening (default: 4)")
    parser.add_argument("--verbose", action="store_true", help="show the programs' stderr")
    args = parser.parse_args(argv)
    openings = []
    if args.openings is not None:
        if args.opening_moves < 1:
            parser.error("--opening-moves must be positive")
        try:
            openings = load_openings(args.openings, args.size, args.opening_moves)
        except (OSError, ValueError) as error:
            parser.error(f"--openings: {error}")
    sprt = None
    if args.sprt:
        try:
            sprt = Sprt(*(float(x) for x in args.sprt.split(",")))
            assert sprt.elo0 < sprt.elo1
        except (TypeError, ValueError, AssertionError):
            parser.error("--sprt takes ELO0,ELO1 with ELO0 < ELO1")
    if args.time_settings is not None:
        fields = args.time_settings.split()
        if len(fields) != 3 or not all(f.isdigit() for f in fields):
            parser.error("--time-settings takes three whole numbers: main time, byo-yomi seconds, stones")
        args.time_settings = " ".join(fields)
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None

    played: list[GameResult] = []

    def report(number: int, black: Program, white: Program, result: GameResult) -> None:
        played.append(result)
        print(f"game {number}: {black.name} (B) vs {white.name} (W): {result.result} in {result.moves} moves",
              flush=True)
        decision = sprt.decision(played) if sprt else None
        if decision is not None:
            results = [g.score_for_a for g in played]
            llr, (low, high) = match_stats.sprt_llr(results, sprt.elo0, sprt.elo1), match_stats.sprt_bounds()
            print(f"SPRT: LLR {llr:.2f} outside ({low:.2f}, {high:.2f}): "
                  f"{decision} (Elo {sprt.elo1 if decision == 'H1' else sprt.elo0:+g}) accepted")

    try:
        a, b, games = play_match(args.a, args.b, args.games, args.size, args.komi, referee=args.referee,
                                 max_moves=args.max_moves, time_settings=args.time_settings, sgf_dir=args.sgf_dir,
                                 sprt=sprt, deadline=deadline, verbose=args.verbose,
                                 on_game=report, openings=openings)
        print(summary(a, b, games))
    except GtpError as error:
        print(f"match stopped: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
