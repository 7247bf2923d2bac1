"""Calibrates strength levels: each level plays an anchor of known strength over GTP, and the table says how it did.

Terms:
- pair LEVEL:ANCHOR: the engine at --strength LEVEL (gtp_engine/search/strength.py) against an anchor: a number N
  is GNU Go 3.8 at --level N, a rank is the engine itself at that level (the levels' order: each beats the one
  below it). Levels play by playouts, not time, so the machine's load does not change their strength.
- games, colours, openings, referee, score and its 95% interval: as in tools/match.py (gtp_engine/match.py,
  gtp_engine/match_stats.py); the score is the level's.

Usage (from the repository root):
  python -m tools.calibrate_strength --pairs 12k:1,8k:10,8k:10k --games 40 --size 9 --komi 7 \\
      [--openings ../shared/data/go9_curated.tar.xz] [--sgf-dir runs/strength] [--max-minutes 30]
Prints a line per game, then one row per pair: level, anchor, wins/games, score, interval, games.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from gtp_engine import match_stats
from gtp_engine.game import KOMI
from gtp_engine.match import GameResult, GtpError, Program, load_openings, play_match
from gtp_engine.search import strength

ENGINE = f"{shlex.quote(sys.executable)} -m gtp_engine --log-level error"
GNUGO = "gnugo --mode gtp --chinese-rules --level {}"


def engine_command(level: str) -> str:
    return f"{ENGINE} --strength {level}"


def anchor_command(anchor: str) -> tuple[str, str]:
    """(its name in the table, its command) for an anchor (see pair); ValueError for neither."""
    if anchor.isdigit() and 1 <= int(anchor) <= 10:
        return f"GNU Go 3.8 level {anchor}", GNUGO.format(anchor)
    strength.parse_level(anchor)
    return f"level {anchor}", engine_command(anchor)


def parse_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(","):
        level, _, anchor = item.strip().partition(":")
        if strength.parse_level(level) is None:
            raise ValueError(f"{item!r}: the level must be a rank, not max")
        anchor_command(anchor)
        pairs.append((level, anchor))
    return pairs


def row(level: str, anchor: str, results: list[GameResult]) -> str:
    """A table row: level, anchor, wins/games, score, 95% interval, games."""
    scores = [g.score_for_a for g in results]
    if not scores:
        return f"| {level} | {anchor_command(anchor)[0]} | - | - | - | 0 |"
    mean, low, high = match_stats.score_interval(scores)
    wins = scores.count(1.0)
    return (f"| {level} | {anchor_command(anchor)[0]} | {wins}/{len(scores)} | {mean:.2f} | "
            f"{low:.2f} .. {high:.2f} | {len(scores)} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", required=True, help="LEVEL:ANCHOR,... (ANCHOR: a GNU Go level 1-10, or a rank)")
    parser.add_argument("--games", type=int, default=40, help="games per pair (default: 40)")
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=KOMI, help=f"(default: {KOMI:g})")
    parser.add_argument("--openings", type=Path,
                        help="SGF file, folder or archive: each pair of games starts from the next record's first "
                             "moves (colours swapped within the pair)")
    parser.add_argument("--opening-moves", type=int, default=4, help="moves of each opening (default: 4)")
    parser.add_argument("--sgf-dir", type=Path, help="write LEVEL-vs-ANCHOR/game-N.sgf here")
    parser.add_argument("--max-minutes", type=float, help="start no new game after this many minutes, in all")
    args = parser.parse_args(argv)
    try:
        pairs = parse_pairs(args.pairs)
        openings = load_openings(args.openings, args.size, args.opening_moves) if args.openings else []
    except (OSError, ValueError) as error:
        parser.error(str(error))
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None

    rows = []
    for level, anchor in pairs:
        def report(number: int, black: Program, white: Program, result: GameResult) -> None:
            print(f"{level} vs {anchor}, game {number}: {black.name} (B) vs {white.name} (W): {result.result} in "
                  f"{result.moves} moves", flush=True)

        sgf_dir = args.sgf_dir / f"{level}-vs-{anchor}" if args.sgf_dir else None
        try:
            _, _, results = play_match(engine_command(level), anchor_command(anchor)[1], args.games, args.size,
                                       args.komi, sgf_dir=sgf_dir, deadline=deadline, on_game=report,
                                       openings=openings)
        except GtpError as error:
            print(f"{level} vs {anchor}: match stopped: {error}", file=sys.stderr)
            return 1
        rows.append(row(level, anchor, results))
        print(rows[-1], flush=True)
    print("| level | anchor | wins/games | score | 95% interval | games |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
