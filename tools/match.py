"""Engine-against-engine matches over GTP, as gogui-twogtp plays them: the command line of gtp_engine/match.py.

Terms:
- the two engines: any GTP commands; A is the first (--a), B the second (--b). Colours alternate: A has Black in
  games 1, 3, 5, ...
- rules (--rules): the rule set of the match; engines that know kata-set-rules are told it, the referee is GNU Go
  with the rules it counts by (Chinese for area rule sets, Japanese for territory ones) unless --referee names
  one, and the result counts the final position as gtp_engine/match.py says.
- referee: a third GTP program that sees every move, refuses illegal ones (the mover then loses) and scores
  the finished game (GNU Go by default, as twogtp's -referee).
- after each game ended by two passes, each engine's own final_score, and whether it agrees with the result;
  own-territory moves (gtp_engine/match.py): moves right after the opponent passed inside the mover's own
  territory, which cost a point each under territory scoring.
- result, score, Elo with its 95% interval, SPRT: as gtp_engine/match_stats.py defines them (the training
  loop's gating uses the same arithmetic); with --sprt the match stops when the SPRT decides.
- openings (--openings): each pair of games starts from the first --opening-moves moves of the next game record,
  so that deterministic engines do not replay the same two games (gtp_engine/match.py).

Usage (from the repository root):
  python -m tools.match --a "gtp-engine --weights a.onnx" --b "gnugo --mode gtp --level 1" \\
      --size 9 --komi 7 --games 20 --sgf-dir games/ [--sprt 0,50] [--referee "gnugo --mode gtp --chinese-rules"]
      [--rules japanese]
      [--openings ../shared/data/go9_curated.tar.xz --opening-moves 4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gtp_engine import match_stats
from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import RULE_SETS, Rules
from gtp_engine.match import (GameResult, GtpError, Opening, Program, Sprt, load_openings, play_match,
                               referee_for, summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="command of engine A")
    parser.add_argument("--b", required=True, help="command of engine B")
    parser.add_argument("--referee", help="GTP program that checks and scores (default: GNU Go with Chinese rules, "
                                          "with Japanese rules under territory scoring)")
    parser.add_argument("--rules", default="chinese", help=f"rule set of the games: {', '.join(RULE_SETS)} "
                                                           f"(default: chinese)")
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, help="(default: the rules' komi, 7.5 under area and 6.5 under "
                                                    "territory scoring)")
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
    try:
        rules = Rules.named(args.rules)
    except ValueError as error:
        parser.error(f"--rules: {error}")
    komi = rules.default_komi() if args.komi is None else args.komi
    referee = args.referee or referee_for(rules)
    openings = openings_of(parser, args.openings, args.size, args.opening_moves)
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
        a_color = BLACK if result.a_is_black else WHITE
        a_program, b_program = (black, white) if a_color == BLACK else (white, black)
        notes = [f"{program.name}'s final_score {score}" + ("" if score == result.result else " (differs)")
                 for program, score in zip((a_program, b_program), result.engine_scores) if score is not None]
        notes += [f"{program.name} played {moves} own-territory move{'s' * (moves != 1)}"
                  for program, moves in zip((a_program, b_program), result.own_territory_moves) if moves]
        print(f"game {number}: {black.name} (B) vs {white.name} (W): {result.result} in {result.moves} moves"
              + "".join(f"; {note}" for note in notes), flush=True)
        decision = sprt.decision(played) if sprt else None
        if decision is not None:
            results = [g.score_for_a for g in played]
            llr, (low, high) = match_stats.sprt_llr(results, sprt.elo0, sprt.elo1), match_stats.sprt_bounds()
            print(f"SPRT: LLR {llr:.2f} outside ({low:.2f}, {high:.2f}): "
                  f"{decision} (Elo {sprt.elo1 if decision == 'H1' else sprt.elo0:+g}) accepted")

    try:
        a, b, games = play_match(args.a, args.b, args.games, args.size, komi, referee=referee,
                                 max_moves=args.max_moves, time_settings=args.time_settings, sgf_dir=args.sgf_dir,
                                 sprt=sprt, deadline=deadline, verbose=args.verbose,
                                 on_game=report, openings=openings, rules=rules)
        print(endgame_summary(a, b, games, rules))
        print(summary(a, b, games))
    except GtpError as error:
        print(f"match stopped: {error}", file=sys.stderr)
        return 1
    return 0


def openings_of(parser: argparse.ArgumentParser, path: Path | None, size: int, moves: int) -> list[Opening]:
    """The --openings of a match command line (none without a path); a bad path or --opening-moves is a usage
    error."""
    if path is None:
        return []
    if moves < 1:
        parser.error("--opening-moves must be positive")
    try:
        return load_openings(path, size, moves)
    except (OSError, ValueError) as error:
        parser.error(f"--openings: {error}")


def endgame_summary(a: str, b: str, games: list[GameResult], rules: Rules) -> str:
    """One line: the rules, the longest game, how often each engine's final_score agreed with the result of the
    games two passes ended, and each engine's own-territory moves."""
    if not games:
        return f"rules {rules.name}"
    parts = [f"rules {rules.name}", f"longest game {max(g.moves for g in games)} moves"]
    for side, name in enumerate((a, b)):
        scored = [g for g in games if g.engine_scores[side] is not None]
        if scored:
            agreed = sum(g.engine_scores[side] == g.result for g in scored)
            parts.append(f"{name}'s final_score agreed in {agreed} of {len(scored)} games")
    parts += [f"{name}: {sum(g.own_territory_moves[side] for g in games)} own-territory moves"
              for side, name in enumerate((a, b))]
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
