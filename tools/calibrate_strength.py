"""Calibrates strength levels: each level plays an anchor of known strength over GTP, and the table says how it did;
and measures the levels' moves on positions of game records against the full-strength engine's.

Terms:
- pair LEVEL:ANCHOR: the engine at --strength LEVEL (gtp_engine/search/strength.py) against an anchor: a number N
  (0-10) is GNU Go 3.8 at --level N, pachiN is Pachi (tools/build_pachi.sh, no network) at N playouts a move on one
  thread without pondering (N at least 500), pachi-lightN the same with Pachi's light playouts (uniformly random
  moves instead of its patterns and tactics: weaker at equal playouts, an anchor that reaches below GNU Go's
  weakest level), a rank is the engine itself at that level (the levels' order: each beats the one below it).
  Levels and anchors play by playouts, not time, so the machine's load does not change their strength.
- games, colours, openings, referee, score and its 95% interval: as in tools/match.py (gtp_engine/match.py,
  gtp_engine/match_stats.py); the score is the level's.
- handicap (--handicap N, or --gives N): the level takes Black with N stones in every game, or gives them to the
  anchor (match.py's handicap match), the amateur ranks' own measure on 19x19, where a stone is about a rank: a
  level N ranks below (or above) its anchor should score about half its games. Territory rules (--rules japanese)
  count the stones as the ranks assume, and the komi is then 0.5. On 9x9, where a stone is worth several ranks,
  --handicap 1 --komi K: the level takes Black without stones in every game, from the openings, at komi K; the
  small-board convention gives the weaker Black and 2 points of komi a rank (K = 7 - 2 x ranks).
- moves (the `moves` command): on positions of game records (a random move number of each record, seeded), each
  level's genmove against a full-strength search of FULL_VISITS visits: the share of its moves within the top 10
  of the network's policy (averaged over the board's symmetries, as the levels read it), its agreement with the
  full-strength move, and the loss the full-strength search
  judges each move to cost (the search's lead minus the lead a search of the position after the move finds),
  the largest and how many lost more than half the board where the game was not already lost.

Usage (from the repository root):
  python -m tools.calibrate_strength match --pairs 12k:1,8k:10,5k:pachi8000,8k:12k --games 40 --size 9 --komi 7 \\
      [--openings ../shared/data/go9_curated.tar.xz] [--sgf-dir runs/strength] [--max-minutes 30] [--first-game N] \\
      [--engine-flags "--weights FILE"]
  python -m tools.calibrate_strength match --pairs 12k:10 --handicap 4 --rules japanese --size 19 --games 40
  python -m tools.calibrate_strength match --pairs 4k:10 --gives 4 --rules japanese --size 19 --games 40
  python -m tools.calibrate_strength match --pairs 12k:10 --handicap 1 --komi -1 --size 9 --games 40 \\
      --openings ../shared/data/go9_curated.tar.xz
  python -m tools.calibrate_strength moves --records ../shared/data/go9_curated.tar.xz --levels 12k,8k,4k,1d \\
      [--positions 40] [--size 9]
The match command prints a line per game, then one row per pair: level, anchor, wins-draws-losses, score, interval,
games; the moves command a row per level.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from gtp_engine import match_stats, network_loader, sgf_io
from gtp_engine.coords import PASS, grid
from gtp_engine.evaluator import legal_policy
from gtp_engine.game import HANDICAP_KOMI, GameState, Rules, fixed_handicap_points
from gtp_engine.match import CHINESE, GameResult, GtpError, Program, play_match, referee_for
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.player import Player, PlayerConfig
from gtp_engine.search import SearchConfig, Searcher, StopCondition, strength
from tools.match import openings_of
from tools.pachi_match import DEFAULT_PACHI, ensure_pachi

ENGINE = f"{shlex.quote(sys.executable)} -m gtp_engine --log-level error"
GNUGO = "gnugo --mode gtp --{scoring}-rules --level {level}"  # scoring: chinese or japanese
PACHI = "{binary} -t ={playouts} threads=1,pondering=0{options}"
PACHI_MIN_PLAYOUTS = 500  # its fixed-playouts mode's least (GJ_MINGAMES)
_PACHI_ANCHOR = re.compile(r"^pachi(-light)?(\d+)$")
FULL_VISITS = 800  # the full-strength search the moves command judges by (the engine's default visits)


def engine_command(level: str, flags: str = "") -> str:
    """The engine at `level`, with `flags` (further engine options, e.g. another network) after it."""
    return f"{ENGINE} --strength {level}" + (f" {flags}" if flags else "")


def anchor_command(anchor: str, pachi: Path = DEFAULT_PACHI, rules: Rules = CHINESE,
                   engine_flags: str = "") -> tuple[str, str]:
    """(its name in the table, its command) for an anchor (see pair), Pachi's binary at `pachi`, GNU Go counting
    as the rules score (area or territory), a rank with the levels' engine_flags; ValueError for none."""
    if anchor.isdigit() and 0 <= int(anchor) <= 10:
        scoring = "japanese" if rules.scoring == "territory" else "chinese"
        return f"GNU Go 3.8 level {anchor}", GNUGO.format(scoring=scoring, level=anchor)
    pachi_anchor = _PACHI_ANCHOR.match(anchor)
    if pachi_anchor:
        light, playouts = pachi_anchor.group(1), int(pachi_anchor.group(2))
        if playouts < PACHI_MIN_PLAYOUTS:  # fewer stop Pachi with a failed assertion
            raise ValueError(f"{anchor!r}: Pachi plays at least {PACHI_MIN_PLAYOUTS} playouts a move")
        return (f"Pachi {playouts} {'light ' if light else ''}playouts",
                PACHI.format(binary=shlex.quote(str(pachi)), playouts=playouts,
                             options=",playout=light" if light else ""))
    strength.parse_rank(anchor)
    return f"level {anchor}", engine_command(anchor, engine_flags)


def parse_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(","):
        level, _, anchor = item.strip().partition(":")
        if strength.parse_rank(level) is None:
            raise ValueError(f"{item!r}: the level must be a rank, not max")
        anchor_command(anchor)
        pairs.append((level, anchor))
    return pairs


def row(level: str, anchor: str, results: list[GameResult], handicap: int = 0, komi: float | None = None) -> str:
    """A table row: level, anchor (and the stones the level takes, or gives where handicap < 0; under handicap 1
    Black and the komi), wins-draws-losses, score, 95% interval, games."""
    scores = [g.score_for_a for g in results]
    verb = "taking" if handicap > 0 else "giving"
    if abs(handicap) == 1:
        terms = f", the level {verb} Black at komi {komi:g}"
    else:
        terms = f", the level {verb} {abs(handicap)} stones" if handicap else ""
    name = anchor_command(anchor)[0] + terms
    if not scores:
        return f"| {level} | {name} | - | - | - | 0 |"
    mean, low, high = match_stats.score_interval(scores)
    wins_draws_losses = "-".join(str(scores.count(score)) for score in (1.0, 0.5, 0.0))
    return (f"| {level} | {name} | {wins_draws_losses} | {mean:.2f} | "
            f"{low:.2f} .. {high:.2f} | {len(scores)} |")


def record_positions(path: Path, size: int, count: int, seed: int = 0) -> list[GameState]:
    """A position of each of the first `count` size x size records without setup stones: after a random number of
    its moves (seeded), at least 4 and before its last 4."""
    rng = np.random.default_rng(seed)
    positions = []
    for name, data in sgf_io.read_sgf_files(path):
        try:
            record = sgf_io.load_sgf(data, source=name)
            if (record.width, record.height) != (size, size) or record.setup or len(record.moves) < 12:
                continue
            positions.append(record.to_game(max_moves=int(rng.integers(4, len(record.moves) - 4))))
        except sgf_io.SgfError:
            continue
        if len(positions) == count:
            break
    return positions


def measure_moves(levels: list[str], positions: list[GameState]) -> list[str]:
    """A row per level (see moves): level, positions, top-10 share, agreement, largest loss, half-board losses."""
    size = positions[0].width
    evaluator = OnnxEvaluator(network_loader.shipped_weights(size, size), device="cpu")

    def judge(state: GameState):
        return Searcher(evaluator, SearchConfig()).search(state, StopCondition(visits=FULL_VISITS))

    full = [judge(state) for state in positions]
    rows = []
    for name in levels:
        player = Player(evaluator, PlayerConfig(strength=strength.parse_rank(name)))
        within = agree = half = 0
        largest = 0.0
        for state, judged in zip(positions, full):
            move = player.genmove(state, state.to_play, StopCondition()).point
            policy = legal_policy(evaluator.evaluate_averaged([state]).policy[0], state)  # the network's own
            top10 = {state.grid.from_flat(int(i)) for i in np.argsort(-policy)[:10]}
            within += move in top10
            agree += move == judged.choice.point
            after = state.copy()
            after.play(move, state.to_play)
            lead = judged.snapshot.score_lead
            loss = lead + judge(after).snapshot.score_lead if move != PASS or not after.is_over else 0.0
            largest = max(largest, loss)
            half += lead > -state.grid.area / 2 and loss > state.grid.area / 2
        count = len(positions)
        rows.append(f"| {name} | {count} | {within / count:.2f} | {agree / count:.2f} | {largest:.1f} | {half} |")
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True)
    moves = commands.add_parser("moves", help="measure the levels' moves against the full-strength engine's")
    moves.add_argument("--records", type=Path, required=True, help="SGF file, folder or archive")
    moves.add_argument("--levels", required=True, help="LEVEL,... (ranks)")
    moves.add_argument("--positions", type=int, default=40, help="positions, one per record (default: 40)")
    moves.add_argument("--size", type=int, default=9)
    parser = commands.add_parser("match", help="play levels against anchors")
    parser.add_argument("--pairs", required=True,
                        help="LEVEL:ANCHOR,... (ANCHOR: a GNU Go level 0-10, pachiN for Pachi at N playouts, "
                             "pachi-lightN with light playouts, or a rank)")
    parser.add_argument("--games", type=int, default=40, help="games per pair (default: 40)")
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, help="(default: the rules' komi for the handicap: 7.5 under area and "
                                                   "6.5 under territory scoring, 0.5 with a handicap, 1 included)")
    parser.add_argument("--rules", default="chinese",
                        help="rule set of the games (default: chinese); the engine is told it, GNU Go anchors and "
                             "the referee count by its scoring")
    parser.add_argument("--openings", type=Path,
                        help="SGF file, folder or archive: each pair of games starts from the next record's first "
                             "moves (colours swapped within the pair)")
    parser.add_argument("--opening-moves", type=int, default=4, help="moves of each opening (default: 4)")
    parser.add_argument("--sgf-dir", type=Path, help="write LEVEL-vs-ANCHOR/game-N.sgf here")
    parser.add_argument("--pachi", type=Path, default=DEFAULT_PACHI,
                        help=f"Pachi's binary for Pachi anchors, built there when missing (default: {DEFAULT_PACHI})")
    handicaps = parser.add_mutually_exclusive_group()
    handicaps.add_argument("--handicap", type=int, default=0,
                           help="the level takes Black with this many stones in every game (no openings; 1: Black "
                                "without stones, from the openings; see handicap)")
    handicaps.add_argument("--gives", type=int, default=0,
                           help="the level gives the anchor this many stones in every game (see handicap)")
    parser.add_argument("--engine-flags", default="",
                        help="further options of the engine for the levels (and ranks as anchors), e.g. "
                             "'--weights FILE' to calibrate another network")
    parser.add_argument("--max-minutes", type=float, help="start no new game after this many minutes, in all")
    parser.add_argument("--first-game", type=int, default=1,
                        help="go on with pairs whose games before this one were played (colours and openings as if "
                             "they had not stopped; default: 1)")
    args = top.parse_args(argv)
    if args.command == "moves":
        return moves_command(moves, args)
    try:
        pairs = parse_pairs(args.pairs)
    except ValueError as error:
        parser.error(str(error))
    try:
        rules = Rules.named(args.rules)
    except ValueError as error:
        parser.error(f"--rules: {error}")
    stones = args.handicap or args.gives
    komi = (HANDICAP_KOMI if stones == 1 else rules.default_komi(stones)) if args.komi is None else args.komi
    openings = openings_of(parser, args.openings, args.size, args.opening_moves)
    if stones > 1:
        if openings:
            parser.error("--handicap, --gives: handicap games start from the stones, without --openings")
        try:
            fixed_handicap_points(grid(args.size), stones)
        except ValueError:
            parser.error(f"--handicap, --gives: no fixed handicap of {stones} stones on {args.size}x{args.size}")
    if any(_PACHI_ANCHOR.match(anchor) for _, anchor in pairs):
        try:
            ensure_pachi(args.pachi)
        except RuntimeError as error:
            parser.error(str(error))
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None

    rows = []
    for level, anchor in pairs:
        def report(number: int, black: Program, white: Program, result: GameResult) -> None:
            print(f"{level} vs {anchor}, game {number}: {black.name} (B) vs {white.name} (W): {result.result} in "
                  f"{result.moves} moves", flush=True)

        sgf_dir = args.sgf_dir / f"{level}-vs-{anchor}" if args.sgf_dir else None
        try:
            _, _, results = play_match(engine_command(level, args.engine_flags),
                                       anchor_command(anchor, args.pachi, rules, args.engine_flags)[1],
                                       args.games, args.size, komi, referee=referee_for(rules), rules=rules,
                                       sgf_dir=sgf_dir, deadline=deadline, on_game=report,
                                       openings=openings, first_game=args.first_game, handicap=stones,
                                       handicap_to_b=bool(args.gives))
        except GtpError as error:
            print(f"{level} vs {anchor}: match stopped: {error}", file=sys.stderr)
            return 1
        rows.append(row(level, anchor, results, args.handicap or -args.gives, komi))
        print(rows[-1], flush=True)
    print("| level | anchor | wins-draws-losses | score | 95% interval | games |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


def moves_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        levels = [level for level in args.levels.split(",") if strength.parse_rank(level) is not None]
        positions = record_positions(args.records, args.size, args.positions)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    if not positions:
        parser.error(f"{args.records}: no {args.size}x{args.size} record without setup stones")
    rows = measure_moves(levels, positions)
    print("| level | positions | within the policy's top 10 | agreement with full strength | largest loss "
          "(points) | losses above half the board |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
