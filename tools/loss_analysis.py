"""Where the points of lost games went: each game our engine lost, searched position by position as
`gtp-engine review` searches it (gtp_engine/review.py's analyse, a fixed number of visits), and its score lead
followed from our side, so that the next change to the engine is chosen from data.

Terms:
- our engine: the player named --name (GTP's name answer, in PB or PW; gtp_engine by default); a lost game is one
  whose RE gives the win to the other colour. Games our engine did not play, and draws and wins, are left out.
- our lead after move t: our score lead in points in the position after move t (the root of its search; at 0
  the start), from our side.
- drop at our move t: our lead after move t - 2 (our previous move, or the start) minus our lead after move t:
  what the opponent's move and ours cost together, positive when the lead fell. Over a game the drops add up to
  the lead at the start minus the lead at the end.
- points lost by our move: review.py's, the lead after the search's best move minus the lead after the move
  played, both as the search of the position before saw them: the part of a drop that was our own choice. A
  move that did better than the best by that measure (negative points lost) counts 0 in the sums.
- phase of move t on a board of A points: opening up to 20% of A (moves 1-16 on 9x9), endgame after 60% of A
  (from move 49 on 9x9), middle game in between. Moves of an opening played from a game record
  (--opening-moves, as tools/pachi_match.py's) are no choice of the engine's and are left out of the counts.
- swings: a game's three largest drops, with move number and vertex.

Usage (from the repository root):
  python -m tools.loss_analysis runs/pachi9 --visits 200 [--opening-moves 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from gtp_engine import config as config_lib
from gtp_engine import coords, review, sgf_io
from gtp_engine.board import BLACK, WHITE
from gtp_engine.network_loader import NetworkLoader

PHASES = ("opening", "middle game", "endgame")
OPENING_SHARE, ENDGAME_SHARE = 0.2, 0.6  # of the board's points, in moves: where the opening and the endgame end
SWINGS = 3


@dataclass(frozen=True)
class MoveLoss:
    number: int  # 1 for the game's first move
    vertex: str
    phase: str
    lead: float  # ours, after the move
    drop: float  # see the module docstring
    points_lost: float  # by the move, review.py's


@dataclass(frozen=True)
class GameLoss:
    source: str
    color: str  # ours: "Black" or "White"
    result: str
    area: int  # the board's points
    moves: list[MoveLoss]  # our moves, the opening's left out

    def by_phase(self) -> dict[str, dict[str, float]]:
        """Each phase's drops and points lost by our moves, summed (module docstring)."""
        return {phase: {"drop": round(sum(m.drop for m in self.moves if m.phase == phase), 1),
                        "points_lost": round(sum(max(0.0, m.points_lost) for m in self.moves if m.phase == phase), 1)}
                for phase in PHASES}

    def swings(self) -> list[MoveLoss]:
        return sorted((m for m in self.moves if m.drop > 0), key=lambda m: -m.drop)[:SWINGS]


def phase(number: int, area: int) -> str:
    if number <= OPENING_SHARE * area:
        return PHASES[0]
    return PHASES[2] if number > ENDGAME_SHARE * area else PHASES[1]


def our_color(record: sgf_io.GameRecord, name: str) -> int | None:
    """Our engine's colour in the game, None where it did not play it (or played both sides)."""
    colors = [color for color, player in ((BLACK, record.black), (WHITE, record.white)) if player == name]
    return colors[0] if len(colors) == 1 else None


def lost(record: sgf_io.GameRecord, color: int) -> bool:
    return (record.result or "").upper().startswith("W+" if color == BLACK else "B+")


def game_loss(result: review.Review, color: int, opening_moves: int = 0) -> GameLoss:
    """Our moves' leads, drops and points lost in a reviewed game (module docstring)."""
    record = result.record
    sign = 1.0 if color == BLACK else -1.0
    leads = [sign * result.start_lead] + [sign * m.score_lead for m in result.moves]  # ours, after move t
    area = record.width * record.height
    moves = [MoveLoss(m.number, coords.to_gtp(record.grid, m.point), phase(m.number, area),
                      _tenths(leads[m.number]), _tenths(leads[max(0, m.number - 2)] - leads[m.number]), m.points_lost)
             for m in result.moves if m.color == color and m.number > opening_moves]
    return GameLoss(record.source, "Black" if color == BLACK else "White", record.result or "", area, moves)


def _tenths(value: float) -> float:
    return round(value, 1) + 0.0  # + 0.0: no -0.0


def _signed(value: float) -> str:
    return f"{value:+.1f}"


def phase_ranges(area: int) -> dict[str, str]:
    """Each phase's move numbers, as text."""
    first_middle = int(OPENING_SHARE * area) + 1
    first_end = int(ENDGAME_SHARE * area) + 1
    return {PHASES[0]: f"moves 1-{first_middle - 1}", PHASES[1]: f"moves {first_middle}-{first_end - 1}",
            PHASES[2]: f"moves {first_end} on"}


def game_text(loss: GameLoss) -> str:
    lines = [f"{loss.source}: our engine {loss.color}, lost {loss.result} ({len(loss.moves)} of our moves counted)",
             "  our lead after each of our moves: " + " ".join(f"{m.number}:{_signed(m.lead)}" for m in loss.moves)]
    ranges = phase_ranges(loss.area)
    for name, sums in loss.by_phase().items():
        lines.append(f"  {name} ({ranges[name]}): lead dropped {sums['drop']:.1f}, "
                     f"our moves lost {sums['points_lost']:.1f} points")
    swings = ", ".join(f"move {m.number} {m.vertex} {_signed(-m.drop)} (the move "
                       + (f"lost {m.points_lost:.1f})" if m.points_lost >= 0 else f"gained {-m.points_lost:.1f})")
                       for m in loss.swings())
    lines.append(f"  biggest swings: {swings or 'none'}")
    return "\n".join(lines)


def totals(losses: list[GameLoss]) -> dict[str, dict[str, float]]:
    """by_phase summed over the games."""
    return {phase: {key: round(sum(g.by_phase()[phase][key] for g in losses), 1) for key in ("drop", "points_lost")}
            for phase in PHASES}


def game_files(paths: list[Path]) -> list[Path]:
    """The SGF files named, and those in the folders named in number order (game-2 before game-10)."""
    def numbered(path: Path) -> list:
        return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]
    files = []
    for path in paths:
        files += sorted(path.glob("*.sgf"), key=numbered) if path.is_dir() else [path]
    return files


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("games", nargs="+", type=Path, metavar="GAME.sgf|FOLDER", help="games, or folders of them")
    p.add_argument("--name", default="gtp_engine", help="our engine's name in PB/PW (default: gtp_engine)")
    p.add_argument("--visits", type=int, default=200, help="visits per position (default: 200)")
    p.add_argument("--opening-moves", type=int, default=0,
                   help="moves of each game played from an opening, left out (default: 0)")
    p.add_argument("--weights", help="ONNX network (default: the shipped one for the board size)")
    p.add_argument("--threads", type=int, help="positions searched at once (default: the CPU count)")
    p.add_argument("--seed", type=int, help="random seed: with --threads 1, the same numbers each time")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.visits < 1 or args.opening_moves < 0 or (args.threads is not None and args.threads < 1):
        p.error("--visits and --threads take positive numbers, --opening-moves one >= 0")
    records = []
    for path in game_files(args.games):
        try:
            records.append(sgf_io.load_sgf_file(path))
        except (OSError, sgf_io.SgfError) as error:
            p.error(f"{path}: {error}")
    played = [(r, c) for r in records if (c := our_color(r, args.name)) is not None]
    if not played:
        p.error(f"no game of {args.name!r} (PB or PW) among {len(records)} games; is --name right?")
    losing = [(r, c) for r, c in played if lost(r, c)]
    print(f"{len(losing)} of {len(played)} games of {args.name} lost; reviewing them at {args.visits} visits",
          file=sys.stderr)
    engine_config = config_lib.build({key: value for key, value in (("weights", args.weights), ("seed", args.seed))
                                      if value is not None})
    loader = NetworkLoader(engine_config)
    losses = []
    for record, color in losing:
        try:
            result = review.analyse(record, lambda w, h: loader.get(w, h).evaluator,
                                    engine_config.player.analysis_search, args.visits,
                                    args.threads or os.cpu_count() or 1)
        except review.ReviewError as error:
            print(f"{record.source}: cannot be reviewed: {error}", file=sys.stderr)
            return 1
        losses.append(game_loss(result, color, args.opening_moves))
    if args.json:
        print(json.dumps({"games": len(played), "lost": len(losses), "visits": args.visits,
                          "losses": [{**asdict(g), "by_phase": g.by_phase(), "swings": [m.number for m in g.swings()]}
                                     for g in losses],
                          "totals": totals(losses)}, indent=1))
        return 0
    for loss in losses:
        print(game_text(loss))
    print(f"all {len(losses)} lost games of {len(played)}, {args.visits} visits a position:")
    for name, sums in totals(losses).items():
        print(f"  {name}: lead dropped {sums['drop']:.1f}, our moves lost {sums['points_lost']:.1f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
