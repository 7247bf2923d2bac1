"""Counts finished game records under their own rules and compares the count with the recorded result; counts
the own-territory moves of each player.

Terms:
- scored record: a record whose result is a score (B+3.5, W+0.5, 0), not a resignation, time or forfeit, without
  handicap or setup stones, legal under its rules (RU; chinese where it has none).
- referee: GNU Go, with Japanese rules for territory rule sets and Chinese rules for area ones (gtp_engine/match.py's
  referee_for); it replays the record and names the dead stones (final_status_list dead).
- count: the rules core's score of the final position under the record's rules without the referee's dead stones
  (GameState.score); the referee's score: its own final_score.
- agreement: a count equal to the recorded result; reported for the count and for the referee's score, by rule
  set.
- own-territory move: as gtp_engine/match.py defines it; its total for each colour.

Usage (from the repository root):
  python -m tools.score_records ../shared/data/go9_curated.tar.xz --rules japanese --records 300
  python -m tools.score_records runs/rules/japanese          # the games of a match (tools/match.py --sgf-dir)
"""

from __future__ import annotations

import argparse
import collections
import sys
from dataclasses import dataclass

from gtp_engine import coords, sgf_io
from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import GameState, Rules, format_result
from gtp_engine.match import Program, normalized_result, own_territory_moves, referee_for


@dataclass
class Scored:
    name: str
    rules: str
    recorded: str
    count: str
    referee: str
    dead: list[int]
    own_territory_moves: dict[int, int]


def scored_records(source: str, rules_filter: set[str] | None, limit: int) -> list[tuple[str, GameState, str]]:
    """Up to `limit` scored records (name, game, recorded result) of the source, of the rule sets in rules_filter
    when given, in name order."""
    chosen = []
    for name, data in sgf_io.read_sgf_files(source):
        try:
            record = sgf_io.load_sgf(data, source=name)
            if record.setup or record.handicap or not record.result:
                continue
            recorded = normalized_result(record.result)
            game = record.to_game()
        except (sgf_io.SgfError, ValueError, LookupError):
            continue  # a resignation, time or forfeit, or a record that cannot be replayed
        if rules_filter is None or game.rules.name in rules_filter:
            chosen.append((name, game, recorded))
            if len(chosen) == limit:
                break
    return chosen


def score(name: str, game: GameState, recorded: str, referees: dict[str, Program]) -> Scored:
    command = referee_for(game.rules)
    if command not in referees:
        referees[command] = Program(command)
    referee = referees[command]
    referee.send(f"boardsize {game.width}")
    referee.send("clear_board")
    referee.send(f"komi {game.komi:g}")
    for color, point in game.moves:
        referee.send(f"play {'B' if color == BLACK else 'W'} {coords.to_gtp(game.grid, point)}")
    dead = [coords.from_gtp(game.grid, vertex) for vertex in referee.send("final_status_list dead").split()]
    return Scored(name, game.rules.name, recorded, format_result(game.score(dead)),
                  normalized_result(referee.send("final_score")), dead, own_territory_moves(game, dead))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="SGF records: a file, a folder or an archive (sgf_io.read_sgf_files)")
    parser.add_argument("--rules", action="append", help="only records of this rule set (again for more)")
    parser.add_argument("--records", type=int, default=1000, help="most records to score (default: 1000)")
    parser.add_argument("--show", action="store_true", help="one line per record whose count differs")
    args = parser.parse_args(argv)
    try:
        wanted = {Rules.named(name).name for name in args.rules} if args.rules else None
    except ValueError as error:
        parser.error(f"--rules: {error}")
    records = scored_records(args.source, wanted, args.records)
    if not records:
        print(f"{args.source}: no scored record" + (f" under {', '.join(sorted(wanted))}" if wanted else ""))
        return 1
    referees: dict[str, Program] = {}
    by_rules: dict[str, list[Scored]] = collections.defaultdict(list)
    try:
        for name, game, recorded in records:
            scored = score(name, game, recorded, referees)
            by_rules[scored.rules].append(scored)
            if args.show and scored.count != recorded:
                print(f"{name}: recorded {recorded}, counted {scored.count}, referee {scored.referee}")
    finally:
        for referee in referees.values():
            referee.close()
    for rules, scored in sorted(by_rules.items()):
        n = len(scored)
        count = sum(s.count == s.recorded for s in scored)
        referee = sum(s.referee == s.recorded for s in scored)
        black = sum(s.own_territory_moves[BLACK] for s in scored)
        white = sum(s.own_territory_moves[WHITE] for s in scored)
        print(f"{rules}: {n} scored records; the count agrees with the result in {count} ({count / n:.1%}), the "
              f"referee's score in {referee} ({referee / n:.1%}); own-territory moves: Black {black}, White {white}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
