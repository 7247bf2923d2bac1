"""How much a network's raw winrate moves with the rules it is told: for positions of held-out games, Black's winrate
(the network alone, no search, no symmetry) under each rule set minus its winrate under chinese rules, at the
record's komi, and with komi adjusted.

Terms:
- held-out game: one of the records whose game key falls in the validation split (splits.split_of at
  --val-fraction, the training runs' rule), so that a supervised network never trained on it.
- as given: the inputs as features.encode makes them for the game's rules (what the engine fed every network
  before networks stated their trained rules); fed: what NetworkEvaluator gives the network now (the nearest
  trained rules in place of the others, network_evaluator.py).
- difference: per position, winrate under a rule set minus winrate under chinese rules, both from Black's view;
  reported as its mean, its mean absolute value and its largest absolute value. At the same komi, territory rule
  sets are a point worse for Black than area ones on average (Black, moving first, most often places a stone
  more, which area counting counts), so their mean is expected a little below zero.
- adjusted: the same with the usual point between the two counts taken out: a territory rule set at the record's
  komi against chinese rules at a point more. A large adjusted mean or maximum says the network reads an input
  it never learnt.
- positions: up to --per-game positions of each held-out game, at distinct move numbers drawn uniformly.
- symmetry spread (--symmetry-spread): the same measure between the network's winrate under chinese rules on the
  board as it is and on the board turned by each other symmetry: how far one evaluation's winrate is from another's
  with nothing but the board's orientation changed, the scale against which a rule set's difference is read.
- outcomes (--outcomes RULES): which of the two ways of evaluating a rule set's games predicts their results
  better: positions of held-out games played under those rules (their RU), without handicap and with a winner,
  their winrate as given and as chinese rules (at a point more komi for a territory rule set, as fed rules
  map them), each scored by its log loss against the recorded winner. The difference (as given minus as chinese;
  below 0: the network's own input for the rules predicts better) has a 95% interval from resampling whole games;
  it is also given by the part of the game (the move number over the game's length).

    python -m tools.rules_consistency weights/9x9.onnx ../shared/data/go9_curated.tar.xz --size 9
    python -m tools.rules_consistency weights/default.onnx ../shared/data/go19_curated.tar.xz --size 19
    python -m tools.rules_consistency weights/default.onnx ../shared/data/go19_curated.tar.xz --outcomes japanese
    python -m tools.rules_consistency weights/default.onnx ../shared/data/go19_curated.tar.xz --symmetry-spread
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Iterator

import numpy as np

from gtp_engine import features, sgf_io, symmetry
from gtp_engine.board import BLACK
from gtp_engine.game import RULE_SETS, GameState, Rules
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.training import splits

RULES = RULE_SETS  # every rule set this engine plays


def held_out_games(source: str, size: int, val_fraction: float) -> Iterator[sgf_io.GameRecord]:
    """The held-out games of the board size without handicap and with at least 10 moves, in the archive's order."""
    for name, data in sgf_io.read_sgf_files(source):
        try:
            record = sgf_io.load_sgf(data, source=name)
        except sgf_io.SgfError:
            continue
        if ((record.width, record.height) == (size, size) and not record.handicap and len(record.moves) >= 10
                and splits.split_of(splits.record_key(record), val_fraction) == "val"):
            yield record


def held_out_positions(source: str, size: int, count: int, val_fraction: float, per_game: int,
                       seed: int) -> list[tuple[sgf_io.GameRecord, int]]:
    """count (record, move number) pairs of held-out games of the board size, up to per_game a game, at distinct
    move numbers drawn uniformly from the game's."""
    rng = np.random.default_rng(seed)
    chosen = []
    for record in held_out_games(source, size, val_fraction):
        moves = rng.choice(len(record.moves), size=min(per_game, count - len(chosen)), replace=False)
        chosen += [(record, int(m)) for m in sorted(moves)]
        if len(chosen) == count:
            break
    return chosen


def held_out_results(source: str, size: int, rules_name: str, val_fraction: float, per_game: int,
                     seed: int) -> list[tuple[sgf_io.GameRecord, int, bool]]:
    """(record, move number, Black won) for up to per_game distinct move numbers of each held-out game of the board
    size played under the named rules (its RU), with KM and a winner in RE."""
    rng = np.random.default_rng(seed)
    chosen = []
    for record in held_out_games(source, size, val_fraction):
        winner = (record.result or "").upper()[:2]
        if record.komi is None or winner not in ("B+", "W+") or record.game_rules().name != rules_name:
            continue
        moves = rng.choice(len(record.moves), size=min(per_game, len(record.moves)), replace=False)
        chosen += [(record, int(m), winner == "B+") for m in sorted(moves)]
    return chosen


PARTS = ((0.0, 0.5), (0.5, 0.8), (0.8, 1.0))  # of a game's length, for the outcomes by part of the game


def outcomes(network: OnnxEvaluator, positions: list[tuple[sgf_io.GameRecord, int, bool]], rules_name: str,
             seed: int = 0) -> dict:
    """The log loss of Black's winrate against the recorded winner, as given and as chinese (see outcomes)."""
    rules = RULES[rules_name]
    records = [(record, moves) for record, moves, _ in positions]
    given = states_under(records, rules)
    chinese = states_under(records, RULES["chinese"], komi_shift=1.0 if rules.scoring == "territory" else 0.0)
    usable = [i for i in range(len(records)) if given[i] is not None and chinese[i] is not None]
    black_won = np.array([positions[i][2] for i in usable], dtype=np.float64)
    part = np.array([positions[i][1] / len(positions[i][0].moves) for i in usable])
    game = np.array([id(positions[i][0]) for i in usable])

    def log_loss(states: list) -> np.ndarray:
        winrate = np.concatenate([black_winrates(network, [states[i] for i in usable[k:k + 64]], fed=False)
                                  for k in range(0, len(usable), 64)])
        winrate = np.clip(winrate, 1e-4, 1 - 1e-4)
        return -(black_won * np.log(winrate) + (1 - black_won) * np.log(1 - winrate))

    loss_given, loss_chinese = log_loss(given), log_loss(chinese)
    rng = np.random.default_rng(seed)
    report = {"positions": len(usable), "games": len(set(game.tolist())), "parts": {}}
    for low, high in ((0.0, 1.0), *PARTS):
        rows = np.flatnonzero((part >= low) & (part < high if high < 1 else part <= high))
        if not len(rows):
            continue
        difference = loss_given[rows] - loss_chinese[rows]
        by_game: dict[int, list[int]] = {}
        for j, g in enumerate(game[rows].tolist()):
            by_game.setdefault(g, []).append(j)
        groups = list(by_game.values())
        means = [difference[np.concatenate([groups[k] for k in rng.integers(len(groups), size=len(groups))])].mean()
                 for _ in range(1000)]
        report["parts"][f"{low:g}-{high:g}"] = {
            "positions": len(rows), "log_loss_given": round(float(loss_given[rows].mean()), 4),
            "log_loss_chinese": round(float(loss_chinese[rows].mean()), 4),
            "difference": round(float(difference.mean()), 4),
            "interval": [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)]}
    return report


def states_under(records: list[tuple[sgf_io.GameRecord, int]], rules: Rules,
                 komi_shift: float = 0.0) -> list[GameState | None]:
    """Each position replayed under the rules (None where a move is illegal under them), at the record's komi plus
    komi_shift."""
    states = []
    for record, moves in records:
        try:
            state = record.to_game(rules=rules, max_moves=moves)
        except sgf_io.SgfError:
            states.append(None)
            continue
        state.komi += komi_shift
        states.append(state)
    return states


def black_winrates(network: OnnxEvaluator, states: list[GameState], fed: bool) -> np.ndarray:
    """Black's winrate of each position, with the inputs fed (NetworkEvaluator) or as given (see the docstring)."""
    if fed:
        value = network.evaluate(states).value
    else:
        spatial, global_ = features.encode(states)
        policy, value_logits, score, ownership = network.run(spatial, global_)
        value = features.decode(policy, value_logits, ownership, states[0].grid, None)[1]
    black = np.array([state.to_play == BLACK for state in states])
    return (np.where(black, value, -value) + 1) / 2


def measure(network: OnnxEvaluator, records: list[tuple[sgf_io.GameRecord, int]]) -> dict:
    under = {name: states_under(records, rules) for name, rules in RULES.items()}
    chinese_a_point_more = states_under(records, RULES["chinese"], komi_shift=1.0)
    usable = [i for i in range(len(records))
              if all(states[i] is not None for states in [*under.values(), chinese_a_point_more])]
    report = {"positions": len(usable)}
    for mode in ("as given", "fed"):
        fed = mode == "fed"
        winrates = {name: black_winrates(network, [states[i] for i in usable], fed) for name, states in under.items()}
        adjusted_reference = black_winrates(network, [chinese_a_point_more[i] for i in usable], fed)
        rows = {}
        for name, values in winrates.items():
            territory = RULES[name].scoring == "territory"
            rows[name] = {"winrate": round(float(values.mean()), 4),
                          **_differences(values - winrates["chinese"], ""),
                          **_differences(values - (adjusted_reference if territory else winrates["chinese"]),
                                         "adjusted_")}
        report[mode] = rows
    return report


def symmetry_spread(path: str, records: list[tuple[sgf_io.GameRecord, int]]) -> dict:
    """The difference measure between chinese-rules winrates on the board as it is and turned by each other
    symmetry (see symmetry spread), over the pairs of every other symmetry together; also the share of pairs
    beyond 0.10 and 0.15."""
    states = [state for state in states_under(records, RULES["chinese"]) if state is not None]
    turned = [OnnxEvaluator(path, device="cpu", symmetry_mode=number)
              for number in symmetry.symmetries_for(states[0].width, states[0].height)]
    plain = black_winrates(turned[0], states, fed=True)
    difference = np.concatenate([black_winrates(network, states, fed=True) - plain for network in turned[1:]])
    return {"positions": len(states), "symmetries": len(turned), **_differences(difference, ""),
            "beyond_0.10": round(float((np.abs(difference) > 0.10).mean()), 4),
            "beyond_0.15": round(float((np.abs(difference) > 0.15).mean()), 4)}


def _differences(difference: np.ndarray, prefix: str) -> dict:
    return {f"{prefix}mean": round(float(difference.mean()), 4),
            f"{prefix}mean_abs": round(float(np.abs(difference).mean()), 4),
            f"{prefix}max_abs": round(float(np.abs(difference).max()), 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("network", help="an .onnx network file")
    parser.add_argument("games", help="SGF records: a folder, a file or an archive (see sgf_io.read_sgf_files)")
    parser.add_argument("--size", type=int, default=19)
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--per-game", type=int, default=5, help="most positions of one game (default: 5)")
    parser.add_argument("--val-fraction", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--outcomes", choices=[name for name in RULES if name != "chinese"],
                        help="instead: how well the rule set's own input predicts its held-out games' results, "
                             "against chinese inputs (see outcomes)")
    parser.add_argument("--symmetry-spread", action="store_true",
                        help="instead: how far the chinese winrate moves when only the board's orientation does "
                             "(see symmetry spread)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    network = OnnxEvaluator(args.network, device="cpu", symmetry_mode="none")
    if args.outcomes:
        positions = held_out_results(args.games, args.size, args.outcomes, args.val_fraction, args.per_game,
                                     args.seed)
        if not positions:
            parser.error(f"{args.games}: no held-out {args.size}x{args.size} game under {args.outcomes} rules")
        report = outcomes(network, positions, args.outcomes, args.seed)
        if args.json:
            print(json.dumps(report, indent=1))
            return 0
        print(f"{args.network}: {report['positions']} positions of {report['games']} held-out {args.outcomes} "
              f"games; log loss of Black's winrate against the result, as given and as chinese")
        print(f"  {'part of game':<14}{'positions':>10}{'as given':>10}{'as chinese':>12}{'difference':>12}"
              f"  95% interval")
        for name, row in report["parts"].items():
            print(f"  {name:<14}{row['positions']:>10}{row['log_loss_given']:>10.4f}{row['log_loss_chinese']:>12.4f}"
                  f"{row['difference']:>+12.4f}  {row['interval'][0]:+.4f} .. {row['interval'][1]:+.4f}")
        return 0
    records = held_out_positions(args.games, args.size, args.positions, args.val_fraction, args.per_game,
                                 args.seed)
    if args.symmetry_spread:
        report = symmetry_spread(args.network, records)
        print(json.dumps(report, indent=1 if args.json else None))
        return 0
    report = measure(network, records)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{args.network}: {report['positions']} positions of held-out games; Black's winrate under each rule set "
          f"minus under chinese rules, at the same komi and adjusted (territory rule sets against chinese at a "
          f"point more komi)")
    columns = ("winrate", "mean", "mean_abs", "max_abs", "adjusted_mean", "adjusted_mean_abs", "adjusted_max_abs")
    for mode in ("as given", "fed"):
        print(f"{mode}:")
        print(f"  {'rules':<16}" + "".join(f"{column:>18}" for column in columns))
        for name in RULES:
            print(f"  {name:<16}" + "".join(f"{report[mode][name][column]:>18.4f}" for column in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
