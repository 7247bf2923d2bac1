"""How resignation rules would have fared on finished games: the network alone (no search) evaluates every position
from the first move a hopeless lead may count (half the board's points) on, and each rule is replayed on those
evaluations as ResignCounter counts them.

Terms:
- rule SHARE:FACTOR: a search counts as below the threshold where its winrate is below --threshold, or where its
  lead is behind by SHARE of the board's points (right after the opponent's pass by at most a tenth) and its
  winrate below FACTOR times the threshold (ResignConfig's hopeless_lead_share and hopeless_winrate_factor, counted
  by the engine's own ResignCounter); SHARE 0 is the winrate alone.
- resigns: --consecutive positions in a row of one colour below (both colours are counted, as either could be
  the engine); a false resignation is the eventual winner's, a saved move one of the loser's moves after it.
- beyond the winrate alone: the false resignations a rule adds to the winrate rule's, and the loser's moves it
  saves beyond it.
- games: the finished records (a B+ or W+ result) of the folders given, and up to --records of the archives given
  with at least half the board's points in moves, of the board size.

    python -m tools.resign_scan weights/default.int8.onnx runs/strength ../shared/data/go19_curated.tar.xz
    python -m tools.resign_scan weights/9x9.int8.onnx runs/pachi9 ../shared/data/go9_curated.tar.xz --size 9
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from gtp_engine import sgf_io
from gtp_engine.board import BLACK, WHITE
from gtp_engine.endgame import opponent_passed
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.search import ResignConfig, ResignCounter
from gtp_engine.search.settings import HOPELESS_MOVES_SHARE

BATCH = 32


def finished_games(sources: list[Path], size: int, records: int) -> list[tuple[str, sgf_io.GameRecord]]:
    games = []
    for source in sources:
        if source.is_dir():
            items = [(str(path), path.read_bytes()) for path in sorted(source.rglob("*.sgf"))]
            limit = None
        else:
            items = list(sgf_io.read_sgf_files(source))
            random.Random(1).shuffle(items)
            limit = records
        taken = 0
        for name, data in items:
            try:
                record = sgf_io.load_sgf(data, source=name)
            except sgf_io.SgfError:
                continue
            if ((record.width, record.height) == (size, size) and (record.result or "")[:2] in ("B+", "W+")
                    and (source.is_dir() or len(record.moves) >= size * size // 2)):
                games.append((name, record))
                taken += 1
            if limit is not None and taken >= limit:
                break
    return games


def evaluations(network: OnnxEvaluator, record: sgf_io.GameRecord) -> list[tuple[int, int, float, float, bool]] | None:
    """(colour to play, move number, winrate, lead, right after the opponent's pass) of each position from
    HOPELESS_MOVES_SHARE of the board's points in moves on; None for a record with an illegal move."""
    try:
        game = record.to_game(max_moves=0)
        states = []
        for color, point in record.moves:
            game.play(point, color)
            if game.move_number + 1 >= HOPELESS_MOVES_SHARE * game.grid.area and not game.is_over:
                states.append(game.copy())
    except (sgf_io.SgfError, ValueError):
        return None
    rows = []
    for start in range(0, len(states), BATCH):
        chunk = states[start:start + BATCH]
        batch = network.evaluate(chunk)
        rows += [(state.to_play, state.move_number + 1, float((value + 1) / 2), float(lead), opponent_passed(state))
                 for state, value, lead in zip(chunk, batch.value, batch.score)]
    return rows


def first_resignation(rows, area: int, threshold: float, share: float, factor: float, consecutive: int):
    """(colour, move number) of the first resignation under the rule, or None."""
    counter = ResignCounter(ResignConfig(winrate=threshold, consecutive=consecutive, after_moves=0,
                                         hopeless_lead_share=share, hopeless_winrate_factor=factor))
    for color, number, winrate, lead, after_pass in rows:
        if counter.update(color, winrate, number, area, lead=lead, opponent_passed=after_pass):
            return color, number
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("network", type=Path)
    parser.add_argument("sources", type=Path, nargs="+", help="folders of SGF files, or archives of records")
    parser.add_argument("--size", type=int, default=19)
    parser.add_argument("--records", type=int, default=150, help="records taken from each archive (default: 150)")
    parser.add_argument("--rules", default="0.2:3,0.25:5,0.2:5,0.25:100",
                        help="SHARE:FACTOR,... (default: the rule before, the rule now and two others)")
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--consecutive", type=int, default=3, help="(default: 3, a strength level's count)")
    args = parser.parse_args(argv)
    rules = [tuple(float(x) for x in item.split(":")) for item in args.rules.split(",")]
    network = OnnxEvaluator(args.network, device="cpu", seed=0)  # the symmetries drawn alike each run
    games = []
    for name, record in finished_games(args.sources, args.size, args.records):
        rows = evaluations(network, record)
        if rows:
            games.append((name, BLACK if record.result.startswith("B") else WHITE, len(record.moves), rows))
    area = args.size * args.size
    print(f"{len(games)} games")
    print("| rule (share:factor) | false resignations | beyond the winrate alone | losers resigning | "
          "their moves saved beyond the winrate alone |")
    print("|---|---|---|---|---|")
    for share, factor in rules:
        false = extra = losers = saved = 0
        examples = []
        for name, winner, moves, rows in games:
            alone = first_resignation(rows, area, args.threshold, 0, 0, args.consecutive)
            resigned = first_resignation(rows, area, args.threshold, share, factor, args.consecutive)
            if resigned and resigned[0] == winner:
                false += 1
                if not (alone and alone[0] == winner):
                    extra += 1
                    examples.append(f"{name} move {resigned[1]}")
            elif resigned:
                losers += 1
                saved += (alone[1] if alone and alone[0] != winner else moves) - resigned[1]
        print(f"| {share:g}:{factor:g} | {false} | {extra} | {losers} | {saved} |")
        for example in examples[:5]:
            print(f"    added: {example}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
