"""Command line of the training package: python -m gtp_engine.training COMMAND ..., one subcommand per stage.

    python -m gtp_engine.training ingest ../shared/data/go9_curated.tar.xz --out data/go9 --size 9
    python -m gtp_engine.training train --data data/go9 --out runs/go9-b6c64 --preset b6c64 --steps 20000
    python -m gtp_engine.training export runs/go9-b6c64/checkpoint.pt go9.onnx
    python -m gtp_engine.training import-onnx weights/9x9.onnx runs/9x9.pt
    python -m gtp_engine.training grow weights/9x9.onnx runs/9x9-b10c64.pt --preset b10c64
    python -m gtp_engine.training average runs/loop9/gen-00{07,08,09,10}/train/checkpoint.pt --data DIRS --out avg.pt
    python -m gtp_engine.training quantize weights/9x9.onnx --calibration ../shared/data/go9_curated.tar.xz
    python -m gtp_engine.training selfplay --weights weights/9x9.onnx --out data/selfplay9-000 --games 64
    python -m gtp_engine.training loop --init runs/go9-b6c64-main/checkpoint.pt --out runs/loop9 --generations 20
    python -m gtp_engine.training gate runs/loop9/best.onnx weights/9x9.onnx --out runs/gate9 --max-games 200
    python -m gtp_engine.training reinforce --init runs/go9-b6c64/checkpoint.pt --out runs/rl/go9 --iterations 40
    python -m gtp_engine.training policy-match runs/rl/go9/checkpoint.pt runs/go9-b6c64/checkpoint.pt --games 200
    python -m gtp_engine.training value-data --sl SL.pt --rl RL.pt --out data/value9 --games 4096
    python -m gtp_engine.training value-train --data data/value9 --init SL.pt --out runs/rl/value9
    python -m gtp_engine.training value-eval A.pt B.pt --data data/go9
    python -m gtp_engine.training rollout-train ../shared/data/go9_curated.tar.xz --out rollout-9x9.npz --size 9

Every field of the stages' configs (IngestConfig, TrainConfig, SelfPlayConfig, ...) is a flag of the same name
(underscores as dashes); the loop's nested configs are flags with their section's prefix (--selfplay-noise-fraction,
--train-weight-decay, --gate-parallel-games; the flags of earlier versions, --full-visits, --lr, --gate-games, ...,
still work). The configs are built here and nowhere else. Logs and progress bars go to stderr.

Config files: --config FILE reads a TOML file of flag = value lines for the command (names without the dashes,
dashes or underscores), the loop's sections as tables ([selfplay], [train], [gate]); flags given on the command
line win over the file. As for the engine, the file is read by gtp_engine.config.read_toml.

    # loop9.toml, for: python -m gtp_engine.training loop --config loop9.toml --generations 30
    init = "weights/9x9.onnx"
    out = "runs/loop9"
    games-per-generation = 320
    [selfplay]
    full-visits = 100
    noise-fraction = 0.25
    [train]
    weight-decay = 3e-5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from typing import Any

import numpy as np
import torch

from gtp_engine.config import ConfigError, read_toml
from gtp_engine.network_evaluator import ModelLoadError
from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import (averaging, board_masks, dataset, export_onnx, gating, grow, import_onnx, loop,
                                 quantize, runs, selfplay, sgf_ingest, train)
from gtp_engine.training import model as model_lib
from gtp_engine.training.alphago import policy_gradient, policy_play, rollout_train, value_net
from gtp_engine.training.torch_evaluator import BACKENDS

_HELP = {
    "size": "board size of the games to keep",
    "max_handicap": "most handicap stones a kept game may have",
    "min_moves": "fewest moves a kept game may have",
    "require_result": "skip games without a readable result (else they give policy samples only)",
    "keep_draws": "keep drawn games (value target: draw)",
    "min_rank": "skip games where a player's stated rank (e.g. 3d, 5k) is below this",
    "min_elo": "skip games where a player's stated Elo number is below this",
    "val_fraction": "fraction of games held out for validation",
    "shard_samples": "samples per shard file (a 19x19 sample is about 11 bytes on disk)",
    "workers": "worker processes (0: one per core)",
    "seed": "seed of the command's randomness (ingest: the record shuffle; training: batches and symmetries; "
            "games: openings, noise and move sampling)",
    "relabel_share": "share of the training games ended by counting that are labelled under a rule set and komi "
                     "drawn anew (their margin moved by the komi; another scoring only where the game ended in "
                     "two passes without a seki)",
    "relabel_rules": "rule sets a relabelled game draws from, separated by commas",
    "relabel_komi_stdev": "spread of a relabelled game's komi around the record's own (a normal draw, rounded to a "
                          "half point)",
    "ownership_playouts": "rollouts of the final board that judge the dead stones of a game ended by counting, "
                          "for its ownership target where the count without them gives the recorded margin (0: only "
                          "games whose final board counts as it stands)",
    "data": "shard folders written by ingest",
    "preset": "model preset (training/model.py)",
    "steps": "optimizer steps in the whole run",
    "eval_every": "steps between validation, metrics row, plot and checkpoint",
    "val_samples": "validation samples used at each evaluation",
    "window_samples": "samples loaded and shuffled together",
    "device": "auto, cpu, cuda, cuda:1, ...",
    "compile": "run the training steps through torch.compile (1.27x on a 2-core CPU for b6c64 on 19x19, after "
               "about 35 s of compilation)",
    "compute_dtype": "what the forward pass computes in: float32, bfloat16 (autocast), or auto (bfloat16 on CUDA; "
                     "on a CPU with bf16 instructions the faster of the two in a timed trial of the run's step)",
    "generations": "run until this generation is recorded (a rerun with more continues)",
    "games_per_generation": "self-play games per generation",
    "batch_games": "self-play games per shard folder (the unit of resumption and of Ray work)",
    "window_generations": "train each candidate on the self-play of this many latest generations",
    "average_generations": "the candidate is the mean of the trained weights of this many latest generations, its "
                           "norms recalibrated on the window (stochastic weight averaging); 1: no averaging",
    "train_steps": "optimizer steps per generation",
    "gate_games": "most games of a gate match (candidate against best)",
    "gate_visits": "visits per move in gate matches, both networks",
    "gate_elo1": "the gate SPRT's H1 Elo (H0: 0)",
    "gate_fixed_games": "a gate undecided at its cap promotes only with at least this many games ...",
    "gate_fixed_score": "... and at least this score",
    "promote_to": "also copy each promoted network here, e.g. weights/9x9.onnx",
    "train_device": "torch device for training: auto, cpu, cuda, ...",
    "backend": "what runs the network: onnx (onnxruntime), torch, or auto (onnxruntime on a GPU, else torch on "
               "CUDA, else onnxruntime on the CPU)",
    "device_of_backend": "the backend's device: auto, cpu, cuda, tensorrt (onnx), cuda:1 (torch) (default: auto)",
    "precision": "what self-play and the gate play with: fp32 (the networks), or int8 (each one's int8 sibling, "
                 "quantized on the latest self-play games; about 1.7x the self-play games per hour on a CPU)",
    "gnugo_every": "play the best network against GNU Go every this many generations (0: never)",
    "gnugo_games": "games of each match against GNU Go",
    "gnugo_level": "GNU Go's level in those matches",
    "positions_per_game": "positions drawn from each game (0: every position)",
    "min_pattern_count": "3x3 patterns seen fewer times than this share one weight",
    "epochs": "passes over the training positions",
    "l2": "L2 penalty on the weights",
    "init_from": "checkpoint whose weights start a new run (same preset)",
    "train_parts": "the parts of the network that learn: trunk, policy, value (value, score and ownership); the "
                   "others keep init-from's weights exactly",
    "value_weight": "weight of the value loss",
    "opponent_policy_weight": "weight of the auxiliary opponent-reply policy loss (KataGo: 0.15); above 0 the "
                              "network gets that output (left out of the ONNX export); 0: none",
    "search_value_weight": "share of the search's value (self-play shards) in the value target; the game's "
                           "result has the rest",
    "rules": "rule set of the games (game.py's names: chinese, japanese, tromp-taylor, ...), or several separated "
             "by commas: self-play draws one for each game, the gate's pairs of games take them in turn",
    "komi_stdev": "spread of an even game's komi around its rule set's (a normal draw, rounded to a half point)",
    "handicap_share": "share of games in which Black has handicap stones (2 .. max-handicap, GTP's fixed points; "
                      "komi the rules' handicap komi)",
    "max_handicap": "most handicap stones of a handicap game",
    "full_visits": "root visits of a full search (its visit distribution is a policy target)",
    "fast_visits": "root visits of a fast search (no policy target, no noise)",
    "full_search_fraction": "share of searches that are full ones",
    "gated": "play a gate match before promoting a candidate (--no-gated: every candidate is promoted, as in "
             "AlphaZero and KataGo, and strength shows only in the GNU Go matches)",
    "final_full_visits": "full visits at the end of the schedule (playout cap annealing, as KataGo's 600 to 1000); "
                         "0: no schedule",
    "final_fast_visits": "fast visits at the end of the schedule; 0: no schedule",
    "visit_ramp_generations": "generation at which the full and fast visits reach their final values, linearly "
                              "from the self-play settings at generation 1; 0: no schedule",
    "parallel_games": "games in progress at once; their leaves go to the evaluator together",
    "leaves_per_game": "leaves each game's tree adds to a round (virtual loss)",
    "evaluation_threads": "threads computing one half of the games' positions while the search works on the other "
                          "half (pipelining); 0: none, all games in one round",
    "noise_alpha_total": "Dirichlet alpha times the number of legal moves at the root",
    "noise_fraction": "weight of the Dirichlet noise in a full search's root priors",
    "prune_policy_target": "drop the visits that noise and virtual loss alone explain from policy targets",
    "forced_playouts": "k of KataGo's forced playouts: each root move of a full search gets at least "
                       "sqrt(k * prior * visits) visits (KataGo: 2; 0: none)",
    "temperature_moves": "first moves drawn in proportion to visits (default: area // 8)",
    "resign_winrate": "resign below this winrate (0: never)",
    "resign_consecutive": "searches in a row of one player below resign_winrate before it resigns",
    "no_resign_fraction": "share of games played out without resignation (false-resignation check)",
    "iterations": "iterations (minibatches of games, one update each) in the whole run",
    "games": "games in all (value-data) or per iteration (reinforce)",
    "baseline": "subtracted from the reward: none, or mean (the iteration's mean reward)",
    "pool_every": "iterations between additions of the learner to the opponent pool",
    "komi": "komi of the games (of the first rule set's; another scoring's a point apart, territory the lower)",
    "temperature": "moves are sampled from softmax(logits / temperature) over the legal non-eye moves",
    "max_moves": "plies after which a game is scored as it stands (0: the stage's default, two or three times "
                 "the area)",
    "visits": "playouts per move, both networks",
    "max_games": "the match never plays more games",
    "sprt_elo0": "the SPRT's H0: A is this many Elo stronger",
    "sprt_elo1": "the SPRT's H1: A is this many Elo stronger",
    "sprt_alpha": "chance of accepting H1 when H0 holds",
    "sprt_beta": "chance of accepting H0 when H1 holds",
    "sprt_min_games": "the SPRT decides nothing before this many games",
    "fixed_games": "undecided at max-games: A wins only with at least this many games ...",
    "fixed_score": "... and at least this score",
    "opening_moves": "first moves of each game drawn in proportion to the visits (variety)",
    "processes": "processes playing the match, each a block of its games with its own networks (a machine of many "
                 "cores, or one GPU shared); more than 1: the match plays all max-games games",
    "start_window": "seconds after which no game starts; the games begun finish and the match stops unfinished, "
                    "resumable (a time limit then leaves every game it began finished); 0: none",
    "chunk": "positions per forward/backward pass of an update",
    "batch": "games played together",
    "max_ply": "the kept position follows a random move at ply U ~ uniform 1..max_ply (0: the board's area)",
    "init": "checkpoint the value network starts from",
    "trainable": "head (value head only, trunk frozen) or all",
}


# The flags of earlier versions of the loop command, for its nested settings.
_LOOP_ALIASES = {dotted: "--" + name.replace("_", "-") for name, dotted in loop.EARLIER_NAMES.items()
                 if "--" + dotted.replace("_", "-").replace(".", "-") != "--" + name.replace("_", "-")}


def _add_config_flags(parser: argparse.ArgumentParser, config_type, skip=(), prefix: str = "", template=None,
                      aliases: dict[str, str] | None = None, always_required=()) -> None:
    """A flag per field of config_type (prefix: a section, "train." gives --train-lr with dest "train.lr");
    defaults from template where given, else the field's; always_required: fields that must be given although
    they have a default."""
    for field in dataclasses.fields(config_type):
        if field.name in skip:
            continue
        dest = prefix + field.name
        flags = ["--" + dest.replace("_", "-").replace(".", "-")] + [a for a in [(aliases or {}).get(dest)] if a]
        kind = str(field.type)
        required = field.name in always_required or (field.default is dataclasses.MISSING
                                                      and field.default_factory is dataclasses.MISSING)
        default = getattr(template, field.name) if template is not None else None if required else field.default
        help_text = _HELP.get(field.name, "") + ("" if required else f" (default: {default})")
        if kind == "bool":
            parser.add_argument(*flags, dest=dest, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
            continue
        common = {"dest": dest, "required": required, "default": default, "help": help_text,
                  "metavar": field.name.upper()}
        if kind.startswith("tuple"):
            parser.add_argument(*flags, nargs="+", **common)
        else:
            parser.add_argument(*flags, type=float if "float" in kind else int if "int" in kind else str, **common)


def _config(config_type, args: argparse.Namespace, prefix: str = "", template=None, **extra):
    values = {f.name: getattr(args, prefix + f.name) for f in dataclasses.fields(config_type)
              if hasattr(args, prefix + f.name)}
    values.update(extra)
    if isinstance(values.get("data"), list):
        values["data"] = tuple(values["data"])
    return dataclasses.replace(template, **values) if template is not None else config_type(**values)


def _add_run_flags(parser: argparse.ArgumentParser, holds: str = "checkpoint, metrics.csv, model.onnx") -> None:
    """The flags of a command that trains in a run folder (runs.py)."""
    parser.add_argument("--out", required=True, help=f"run folder ({holds}); the same command again resumes it")
    parser.add_argument("--max-minutes", type=float, help="stop (with a checkpoint) after this long")
    parser.add_argument("--no-export", action="store_true", help="do not export model.onnx after the last step")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


# The loop's nested configs: (section, type, defaults).
_LOOP_SECTIONS = (("selfplay", selfplay.SelfPlayConfig, selfplay.SelfPlayConfig()),
                  ("train", train.TrainConfig, loop.TRAIN), ("gate", gating.GateConfig, gating.GateConfig()))


def _add_loop_flags(parser: argparse.ArgumentParser) -> None:
    nested = {section for section, _, _ in _LOOP_SECTIONS}
    _add_config_flags(parser, loop.LoopConfig, skip=("init", "size") + tuple(nested))
    for section, kind, template in _LOOP_SECTIONS:
        _add_config_flags(parser, kind, skip=loop.LOOP_SETS[section], prefix=section + ".", template=template,
                          aliases=_LOOP_ALIASES)


def _loop_config(args: argparse.Namespace) -> loop.LoopConfig:
    nested = {section: _config(kind, args, section + ".", template) for section, kind, template in _LOOP_SECTIONS}
    return _config(loop.LoopConfig, args, **nested)


def _apply_config_file(parser: argparse.ArgumentParser, path: str) -> None:
    """Makes the values of a TOML config file the defaults of parser's flags, so that flags win over the file;
    raises ConfigError naming the file and the option for an unknown name or a bad value."""
    flags = {flag: action for action in parser._actions for flag in action.option_strings}
    defaults: dict[str, Any] = {}
    for key, value in runs.flatten(read_toml(path), "-").items():
        action = flags.get("--" + key.replace("_", "-"))
        if action is None or action.dest in ("help", "config"):
            raise ConfigError(f"config file {path}: unknown option {key!r} for {parser.prog}")
        try:
            defaults[action.dest] = _file_value(action, value)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"config file {path}: {key}: {error}") from None
        action.required = False
    parser.set_defaults(**defaults)


def _file_value(action: argparse.Action, value: Any) -> Any:
    if isinstance(action, argparse.BooleanOptionalAction):
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if action.nargs == "+":
        items = value if isinstance(value, list) else [value]
        return [action.type(item) if action.type else str(item) for item in items]
    if isinstance(value, (bool, list)):
        raise ValueError(f"expected one value, got {value!r}")
    if action.type is int and not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return action.type(value) if action.type else str(value)


# Commands that parse their own arguments (the main parser only lists them).
_OWN_PARSERS = {"export": export_onnx.main, "quantize": quantize.main, "drop-board-masks": board_masks.main}


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line, over the command's --config file where one is given; a bad file ends the program
    with status 2 and the reason, as a bad flag does."""
    parser = argparse.ArgumentParser(prog="python -m gtp_engine.training", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, help="torch and numpy threads, and the cores that self-play and gate "
                        "matches share among their network calls (default: torch's and onnxruntime's choice)")
    commands = parser.add_subparsers(dest="command", required=True)

    ingest = commands.add_parser("ingest", help="SGF folders/archives -> shards")
    ingest.add_argument("sources", nargs="+", help=".sgf files, folders, .tar(.xz/.gz/.bz2) or .zip archives")
    ingest.add_argument("--out", required=True, help="empty folder for the shards and index.json")
    _add_config_flags(ingest, sgf_ingest.IngestConfig)

    run = commands.add_parser("train", help="supervised training on shards; resumes a run folder")
    _add_run_flags(run, "checkpoint, metrics.csv, curves.png, model.onnx")
    run.add_argument("--stop-at", type=int, help="stop (with a checkpoint) at this step")
    _add_config_flags(run, train.TrainConfig, always_required=("data",))

    reinforce = commands.add_parser("reinforce", help="REINFORCE of a policy against a pool of its earlier "
                                                      "versions (AlphaGo 2016); resumes a run folder")
    reinforce.add_argument("--init", help="supervised checkpoint to start from (not needed to resume)")
    _add_run_flags(reinforce, "checkpoint, pool/, metrics.csv, model.onnx")
    _add_config_flags(reinforce, policy_gradient.ReinforceConfig)

    versus = commands.add_parser("policy-match", help="policy-only games (no search) of checkpoint A against B")
    versus.add_argument("a", help="checkpoint of A (Black in even games)")
    versus.add_argument("b", help="checkpoint of B")
    versus.add_argument("--games", type=int, default=200, help="games (default: 200)")
    versus.add_argument("--batch", type=int, default=100, help="games played together (default: 100)")
    versus.add_argument("--seed", type=int, default=0, help="seed of the move sampling (default: 0)")
    versus.add_argument("--device", default="cpu", help="auto, cpu, cuda, ... (default: cpu)")
    _add_config_flags(versus, policy_play.PlayConfig)

    value_data = commands.add_parser("value-data", help="AlphaGo's value-network data: one position per game "
                                                        "of SL, one random move, then RL play")
    value_data.add_argument("--sl", required=True, help="checkpoint of the SL policy (moves before the random one)")
    value_data.add_argument("--rl", required=True, help="checkpoint of the RL policy (moves after it)")
    value_data.add_argument("--out", required=True, help="empty folder for the shards and index.json")
    value_data.add_argument("--max-minutes", type=float, help="stop after this long with the games played")
    value_data.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_config_flags(value_data, value_net.ValueDataConfig)

    value_train = commands.add_parser("value-train", help="train a value network on value-data; resumes")
    _add_run_flags(value_train)
    _add_config_flags(value_train, value_net.ValueTrainConfig)

    value_eval = commands.add_parser("value-eval", help="value cross-entropy and MSE of checkpoints on shards")
    value_eval.add_argument("checkpoints", nargs="+", help="checkpoint files")
    value_eval.add_argument("--data", required=True, help="shard folder")
    value_eval.add_argument("--split", default="val", choices=dataset.SPLITS, help="split (default: val)")
    value_eval.add_argument("--samples", type=int, default=50_000, help="first samples used (default: 50000)")
    value_eval.add_argument("--device", default="auto", help="auto, cpu, cuda, ... (default: auto)")

    play = commands.add_parser("selfplay", help="self-play games of one network -> shards, sgf/, report.json")
    play.add_argument("--weights", required=True, help="ONNX network")
    play.add_argument("--out", required=True, help="empty folder for the shards, index.json, sgf/ and report.json")
    play.add_argument("--games", type=int, required=True, help="games to play")
    play.add_argument("--backend", choices=BACKENDS, default="auto", help=_HELP["backend"])
    play.add_argument("--device", default="auto", help=_HELP["device_of_backend"])
    play.add_argument("--size", type=int, default=9, help="board size (default: 9)")
    play.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_config_flags(play, selfplay.SelfPlayConfig, skip=("size",))

    match = commands.add_parser("gate", help="networks A and B play at equal visits (gating.py's match); "
                                             "resumes its folder")
    match.add_argument("candidate", help="ONNX network A (the candidate: Black in even games)")
    match.add_argument("best", help="ONNX network B")
    match.add_argument("--out", required=True, help="match folder (games.jsonl, sgf/, result.json)")
    match.add_argument("--fixed-length", action="store_true",
                       help="play all max-games games (the SPRT decides nothing before the last one)")
    match.add_argument("--backend", choices=BACKENDS, default="auto", help=_HELP["backend"])
    match.add_argument("--device", default="auto", help=_HELP["device_of_backend"])
    match.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_config_flags(match, gating.GateConfig)

    score = commands.add_parser("gate-score", help="the finished games of a gate's folder, complete or stopped "
                                                   "(a timeout), scored for the candidate overall and by colour")
    score.add_argument("out", help="the match folder (--out of gate)")

    roll = commands.add_parser("rollout-train", help="SGF records -> rollout policy weights (.npz) with its "
                                                     "held-out move-prediction accuracy")
    roll.add_argument("sources", nargs="+", help=".sgf files, folders, .tar(.xz/.gz/.bz2) or .zip archives")
    roll.add_argument("--out", required=True, help="weights file to write (.npz)")
    roll.add_argument("--games", type=int, help="most games used, drawn at random (default: all)")
    roll.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_config_flags(roll, rollout_train.RolloutTrainConfig, skip=("games",))

    generations = commands.add_parser("loop", help="AlphaZero generations: self-play, train, gate, promote; "
                                                   "resumes a run folder")
    generations.add_argument("--init", required=True, help="checkpoint (.pt) or network (.onnx) to start from")
    generations.add_argument("--out", required=True, help="run folder (state.json, metrics.csv, strength.png, "
                                                          "loop.log, gen-NNNN/)")
    generations.add_argument("--size", type=int, default=9, help="board size (default: 9)")
    generations.add_argument("--ray", action="store_true", help="run self-play and training on Ray actors")
    generations.add_argument("--ray-address", help="Ray cluster to join (default: a local one)")
    generations.add_argument("--workers", type=int, default=2, help="Ray self-play workers (default: 2)")
    generations.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_loop_flags(generations)

    bring_back = commands.add_parser("import-onnx", help="ONNX network -> checkpoint (folded norms "
                                                         "recalibrated; parity-checked), to train it further")
    bring_back.add_argument("network", help="ONNX file written by export")
    bring_back.add_argument("out", help="checkpoint file to write (.pt)")
    bring_back.add_argument("--size", type=int, help="board size of the calibration games (default: the first "
                                                     "size the network was trained on)")
    bring_back.add_argument("--seed", type=int, default=0, help="seed of the calibration games")

    deeper = commands.add_parser("grow", help="checkpoint or ONNX network -> a checkpoint of a deeper preset that "
                                              "computes the same (new blocks start as identities), to train on")
    deeper.add_argument("source", help="checkpoint (.pt) or ONNX file written by export")
    deeper.add_argument("out", help="checkpoint file to write (.pt)")
    deeper.add_argument("--preset", required=True, help="the deeper preset, of the same width (e.g. b10c64)")
    deeper.add_argument("--seed", type=int, default=0, help="seed of the new blocks' weights and of an ONNX "
                                                            "source's import")

    mean = commands.add_parser("average", help="checkpoints of one training run -> the mean of their weights, "
                                               "norms recalibrated on shards (stochastic weight averaging)")
    mean.add_argument("snapshots", nargs="+", help="checkpoints (.pt) of one training run")
    mean.add_argument("--data", nargs="+", required=True, help="shard folders whose training split the norms are "
                                                               "measured on (e.g. the last snapshot's training data)")
    mean.add_argument("--out", required=True, help="checkpoint file to write (.pt)")
    mean.add_argument("--batches", type=int, default=averaging.RECALIBRATION_BATCHES,
                      help=f"batches the norms are measured on (default: {averaging.RECALIBRATION_BATCHES})")
    mean.add_argument("--batch-size", type=int, default=256, help="positions a batch (default: 256)")
    mean.add_argument("--seed", type=int, default=0, help="seed of the batches and their symmetries")
    mean.add_argument("--device", default="auto", help="torch device (default: auto)")

    export = commands.add_parser("export", help="checkpoint -> ONNX with a parity check (export_onnx's options)",
                                 add_help=False)
    export.add_argument("arguments", nargs=argparse.REMAINDER)

    shrink = commands.add_parser("quantize", help="fp32 ONNX -> int8 ONNX, calibrated on real games and checked "
                                                  "against its source (quantize.py's options)", add_help=False)
    shrink.add_argument("arguments", nargs=argparse.REMAINDER)

    unmask = commands.add_parser("drop-board-masks", help="ONNX -> the same network without its board-mask "
                                                          "multiplications, for whole-board input (board_masks.py)",
                                 add_help=False)
    unmask.add_argument("arguments", nargs=argparse.REMAINDER)

    for command, subparser in commands.choices.items():
        if command not in _OWN_PARSERS:
            subparser.add_argument("--config", metavar="FILE",
                                   help="TOML file of this command's flags (flags given here win over it)")
    config_file = _config_file_of(argv, commands.choices)
    if config_file is not None:
        try:
            _apply_config_file(*config_file)
        except ConfigError as error:
            config_file[0].error(str(error))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else list(argv)
    if raw and raw[0] in _OWN_PARSERS:  # their own parsers (argparse's REMAINDER would eat --help first)
        return _OWN_PARSERS[raw[0]](raw[1:])
    args = parse_args(raw)
    if args.command in _OWN_PARSERS:  # after global flags such as --threads
        return _OWN_PARSERS[args.command](args.arguments)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("gtp_engine").setLevel(logging.INFO)  # the exporters' INFO chatter stays out
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        if args.command == "selfplay":
            config = _config(selfplay.SelfPlayConfig, args)
            threads = loop.job_threads(config, args.threads or 0)
            evaluator = loop.Engine(args.backend, args.device, threads).open(args.weights, config.seed)
            report = selfplay.play(evaluator, args.games, config, args.out, progress=not args.no_progress)
            print(json.dumps(report.to_dict(), indent=1), file=sys.stderr)
        elif args.command == "import-onnx":
            checkpoint_lib.save(import_onnx.import_onnx(args.network, size=args.size, seed=args.seed), args.out)
        elif args.command == "grow":
            source = (checkpoint_lib.load(args.source) if args.source.endswith(".pt")
                      else import_onnx.import_onnx(args.source, seed=args.seed))
            checkpoint_lib.save(grow.grow(source, model_lib.preset(args.preset), seed=args.seed), args.out)
        elif args.command == "average":
            checkpoint_lib.save(averaging.average_snapshots(args.snapshots, args.data, args.batches, args.batch_size,
                                                            args.seed, args.device), args.out)
        elif args.command == "gate":
            config = _config(gating.GateConfig, args)
            config = config.fixed_length() if args.fixed_length else config
            engine = loop.Engine(args.backend, args.device, loop.job_threads(config, args.threads or 0))
            result = loop.run_gate(loop.GateJob(args.candidate, args.best, config, args.out, engine),
                                   progress=not args.no_progress)
            print(json.dumps(result.to_dict(), indent=1), file=sys.stderr)
        elif args.command == "gate-score":
            print(json.dumps(gating.tally(args.out), indent=1), file=sys.stderr)
        elif args.command == "loop":
            state = _run_loop(args)
            print(json.dumps(state, indent=1), file=sys.stderr)
        elif args.command == "ingest":
            config = _config(sgf_ingest.IngestConfig, args)
            sidecar = sgf_ingest.ingest(args.sources, args.out, config)
            summary = {k: sidecar[k] for k in ("samples", "games", "bytes", "counts", "seconds")}
            print(json.dumps(summary, indent=1), file=sys.stderr)
        elif args.command == "reinforce":
            config = _config(policy_gradient.ReinforceConfig, args)
            summary = policy_gradient.reinforce(config, args.out, args.init, max_minutes=args.max_minutes,
                                                export=not args.no_export, progress=not args.no_progress)
            print(json.dumps(summary, indent=1), file=sys.stderr)
        elif args.command == "policy-match":
            device = runs.device(args.device)
            nets = [checkpoint_lib.load(path).build_model().to(device) for path in (args.a, args.b)]
            summary = policy_play.match(*nets, args.games, _config(policy_play.PlayConfig, args),
                                        np.random.default_rng(args.seed), args.batch, device)
            print(json.dumps({"a": args.a, "b": args.b, **summary}, indent=1), file=sys.stderr)
        elif args.command == "value-data":
            config = _config(value_net.ValueDataConfig, args)
            sidecar = value_net.make_data(args.sl, args.rl, args.out, config, max_minutes=args.max_minutes,
                                          progress=not args.no_progress)
            print(json.dumps({k: sidecar[k] for k in ("samples", "games", "counts", "seconds")}, indent=1),
                  file=sys.stderr)
        elif args.command == "value-train":
            config = _config(value_net.ValueTrainConfig, args)
            summary = value_net.train_value(config, args.out, max_minutes=args.max_minutes,
                                            export=not args.no_export, progress=not args.no_progress)
            print(json.dumps(summary, indent=1), file=sys.stderr)
        elif args.command == "value-eval":
            losses = value_net.evaluate_checkpoints(args.checkpoints, args.data, args.split, args.samples,
                                                    args.device)
            print(json.dumps(losses, indent=1), file=sys.stderr)
        elif args.command == "rollout-train":
            config = _config(rollout_train.RolloutTrainConfig, args)
            summary = rollout_train.train_rollout(args.sources, args.out, config, progress=not args.no_progress)
            print(json.dumps(summary, indent=1), file=sys.stderr)
        else:
            config = _config(train.TrainConfig, args)
            summary = train.train(config, args.out, max_minutes=args.max_minutes, stop_at=args.stop_at,
                                  export=not args.no_export, progress=not args.no_progress)
            print(json.dumps(summary, indent=1), file=sys.stderr)
    except (ValueError, OSError, dataset.DatasetError, checkpoint_lib.CheckpointError, export_onnx.ExportError,
            ModelLoadError) as e:
        print(f"{args.command} failed: {e}", file=sys.stderr)
        return 1
    return 0


def _config_file_of(argv: list[str], commands: dict) -> tuple[argparse.ArgumentParser, str] | None:
    """(the command's parser, the file) when argv gives a command --config FILE, else None."""
    command = next((i for i, word in enumerate(argv) if word in commands), None)
    if command is None:
        return None
    rest = argv[command + 1:]
    for i, word in enumerate(rest):
        if word == "--config" and i + 1 < len(rest):
            return commands[argv[command]], rest[i + 1]
        if word.startswith("--config="):
            return commands[argv[command]], word.split("=", 1)[1]
    return None


def _run_loop(args: argparse.Namespace) -> dict:
    config = _loop_config(args)
    runner = None
    if args.ray:
        from gtp_engine.training import distributed  # imports ray, which only this path needs

        runner = distributed.RayRunner(args.workers, args.ray_address, train_threads=args.threads or 0)
    try:
        return loop.run(config, args.out, runner, progress=not args.no_progress, threads=args.threads or 0)
    finally:
        if runner is not None:
            runner.close()


if __name__ == "__main__":
    sys.exit(main())
