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

    python -m tools.rules_consistency weights/9x9.onnx ../shared/data/go9_curated.tar.xz --size 9
    python -m tools.rules_consistency weights/default.onnx ../shared/data/go19_curated.tar.xz --size 19
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from gtp_engine import features, sgf_io
from gtp_engine.board import BLACK
from gtp_engine.game import RULE_SETS, GameState, Rules
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.training import splits

RULES = RULE_SETS  # every rule set this engine plays


def held_out_positions(source: str, size: int, count: int, val_fraction: float, per_game: int,
                       seed: int) -> list[tuple[sgf_io.GameRecord, int]]:
    """count (record, move number) pairs of held-out games of the board size, up to per_game a game, at distinct
    move numbers drawn uniformly from the game's."""
    rng = np.random.default_rng(seed)
    chosen = []
    for name, data in sgf_io.read_sgf_files(source):
        try:
            record = sgf_io.load_sgf(data, source=name)
        except sgf_io.SgfError:
            continue
        if (record.width, record.height) != (size, size) or record.handicap or len(record.moves) < 10:
            continue
        key = splits.record_key(record)
        if splits.split_of(key, val_fraction) == "val":
            moves = rng.choice(len(record.moves), size=min(per_game, count - len(chosen)), replace=False)
            chosen += [(record, int(m)) for m in sorted(moves)]
            if len(chosen) == count:
                break
    return chosen


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
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    network = OnnxEvaluator(args.network, device="cpu", symmetry_mode="none")
    records = held_out_positions(args.games, args.size, args.positions, args.val_fraction, args.per_game,
                                 args.seed)
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
