"""Value network: AlphaGo's (2016) value network, trained on one position per game of RL policy play.

Terms:
- value game: U is drawn uniformly from 1..max_ply; the first U-1 moves come from the SL policy, move U is a
  uniformly random candidate (policy_play.py), and the RL policy plays both sides from there to the end, which
  is scored by area counting. The one kept position is the one right after the random move (s_{U+1} in the
  paper), with the game's result from the side to move there. Successive positions of a game are nearly the
  same and share one result, so training on all of them memorises games instead of judging positions
  (AlphaGo's reason for one per game). A game that ends before that position gives nothing (counted).
- value data: a shard folder of dataset.py, one sample per game: value 0 (the side to move won), 1 (lost) or 2
  (draw); the policy target is the move the RL policy played there (dataset.py has no policy mask; the value
  training here ignores it); score and ownership are set, since the game was played out and counted. Games go
  to the validation split by their key, as in ingest.
- value training: from a checkpoint (the SL one by default), the value head's cross-entropy over (win, loss,
  draw) alone. trainable "head": only the value part learns (model.train_parts: the trunk and policy frozen
  in eval mode, so the policy stays the initial network's exactly); "all": the trunk too (the policy head then
  means nothing). The run folder is runs.py's: config.json, checkpoint.pt every eval_every steps and at every stop
  (max_minutes, SIGINT, SIGTERM; rerunning resumes), metrics.csv, and model.onnx at the end, which the engine
  loads as a network like any other.
- value losses: cross-entropy in nats over the samples with a value target, and the mean squared error of the
  expected value p(win) - p(loss) against the result z = +1 / -1 (AlphaGo's measure, on its [-1, 1] scale).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch.nn import functional as F

from gtp_engine.board import BLACK, EMPTY
from gtp_engine.game import KOMI
from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import dataset, runs, splits
from gtp_engine.training import model as model_lib
from gtp_engine.training.alphago import policy_play

log = logging.getLogger(__name__)

SL, RANDOM_MOVE, RL = 0, 1, 2  # the agents of a value game, in policy_play's agent list
TRAINABLE = ("head", "all")
COLUMNS = ("step", "samples", "lr", "seconds", "train_value_loss", "val_value_loss", "val_value_mse")
_RESUMABLE_CHANGES = ("data", "device", "eval_every")


# ---- data -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ValueDataConfig:
    games: int = 1024
    batch: int = 128  # games played together
    max_ply: int = 0  # L: U is drawn from 1..L; 0: the board's area
    size: int = 9
    komi: float = KOMI
    temperature: float = 1.0
    max_moves: int = 0  # 0: three times the board's area
    val_fraction: float = 0.1
    shard_samples: int = 4096
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        if min(self.games, self.batch, self.shard_samples) < 1 or self.max_ply < 0:
            raise ValueError("games, batch and shard_samples must be positive, max_ply 0 or positive")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError("val_fraction must be in [0, 1)")
        self.play_config()

    def play_config(self) -> policy_play.PlayConfig:
        return policy_play.PlayConfig(size=self.size, komi=self.komi, temperature=self.temperature,
                                      max_moves=self.max_moves)


def value_games(sl: model_lib.GoNet, rl: model_lib.GoNet, games: int, config: ValueDataConfig,
                rng: np.random.Generator, device: torch.device | str = "cpu") -> list[dict]:
    """Plays `games` value games together; returns the kept samples as dataset.ShardWriter games."""
    limit = config.max_ply or config.size * config.size
    random_ply = rng.integers(1, limit + 1, size=games) - 1  # 0-based ply of move U

    def schedule(game: int, ply: int) -> int:
        return SL if ply < random_ply[game] else RANDOM_MOVE if ply == random_ply[game] else RL

    results = policy_play.play([sl, policy_play.RANDOM, rl], games, config.play_config(), rng, schedule,
                               record=lambda game, ply, agent: ply == random_ply[game] + 1, device=device)
    return [sample_of(result) for result in results if result.steps]


def sample_of(result: policy_play.GameResult) -> dict:
    """The game's one recorded step as a one-sample game for dataset.ShardWriter."""
    (step,) = result.steps
    to_play = np.array([step.to_play], np.uint8)
    game = dataset.compact(step.spatial[None].astype(np.float32), to_play)
    winner = result.winner
    lead = result.score if step.to_play == BLACK else -result.score
    state = result.state
    key = splits.game_key(state.grid.width, state.grid.height, state.setup, state.moves)
    game.update(
        to_play=to_play, globals=step.global_[None], move=np.array([step.move], np.int16),
        value=np.array([2 if winner == EMPTY else 0 if winner == step.to_play else 1], np.int8),
        score=np.array([lead], np.float32), score_mask=np.array([True]),
        game_ownership=result.state.area_ownership()[None], ownership_mask=np.array([True]),
        game_key=np.array([key], np.uint64),
        game_source=np.array([f"value game, move {step.ply} kept of {result.plies}"]))
    return game


def make_data(sl_path: str, rl_path: str, out_dir: str | Path, config: ValueDataConfig,
              max_minutes: float | None = None, progress: bool = True) -> dict:
    """Plays config.games value games (fewer when max_minutes runs out) into a new shard folder; returns the
    sidecar."""
    device = runs.device(config.device)
    sl = checkpoint_lib.load(sl_path).build_model().to(device)
    rl = checkpoint_lib.load(rl_path).build_model().to(device)
    writer = dataset.ShardWriter(out_dir, config.size, config.size, config.shard_samples)
    started = time.monotonic()
    played = kept = 0
    bar = runs.progress(progress, total=config.games, unit="game", desc="value-data")
    with runs.StopFlag(max_minutes) as stop:
        while played < config.games and not stop.stopped:
            count = min(config.batch, config.games - played)
            rng = np.random.default_rng([config.seed, played])
            for game in value_games(sl, rl, count, config, rng, device):
                writer.add(splits.split_of(int(game["game_key"][0]), config.val_fraction), game)
                kept += 1
            played += count
            bar.update(count)
    bar.close()
    return writer.finish({
        "sources": {"sl": str(sl_path), "rl": str(rl_path)},
        "config": dataclasses.asdict(config),
        "counts": {"games_played": played, "samples": kept, "ended_before_kept_position": played - kept},
        "seconds": round(time.monotonic() - started, 1),
    })


# ---- losses ---------------------------------------------------------------------------------------------------

def value_terms(value_logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample cross-entropy and squared error of p(win) - p(loss) against z (targets 0 win, 1 loss, 2 draw;
    callers drop the masked -1 first)."""
    logits = value_logits.float()
    cross_entropy = F.cross_entropy(logits, targets, reduction="none")
    p = torch.softmax(logits, dim=1)
    z = torch.tensor([1.0, -1.0, 0.0], device=logits.device)[targets]
    return cross_entropy, (p[:, 0] - p[:, 1] - z).square()


def evaluate(net: model_lib.GoNet, arrays: dict[str, np.ndarray], height: int, width: int, batch_size: int = 512,
             device: torch.device | str = "cpu") -> dict[str, float]:
    """Value cross-entropy and MSE of net (in eval mode) over the samples of `arrays` that have a value target."""
    has_value = np.flatnonzero(arrays["value"] >= 0)
    if not len(has_value):
        raise dataset.DatasetError("no samples with a value target")
    was_training = net.training
    net.eval()
    sums = np.zeros(2)
    with torch.no_grad():
        for start in range(0, len(has_value), batch_size):
            batch = dataset.to_device(dataset.take(arrays, has_value[start:start + batch_size]), device)
            spatial, global_, targets = dataset.expand(batch, height, width)
            terms = value_terms(net(spatial, global_)[1], targets["value"])
            sums += [float(t.sum()) for t in terms]
    net.train(was_training)
    return {"value_loss": float(sums[0]) / len(has_value), "value_mse": float(sums[1]) / len(has_value),
            "samples": len(has_value)}


def evaluate_checkpoints(paths: Sequence[str], data: str, split: str = "val", samples: int = 50_000,
                         device: str = "auto") -> dict[str, dict[str, float]]:
    """evaluate() of each checkpoint on the first `samples` samples of a shard folder's split."""
    shards = dataset.Shards([data], split)
    arrays = shards.head(samples)
    torch_device = runs.device(device)
    return {path: evaluate(checkpoint_lib.load(path).build_model().to(torch_device), arrays, shards.height,
                           shards.width, device=torch_device) for path in paths}


# ---- training -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ValueTrainConfig:
    data: tuple[str, ...]  # value data folders (make_data)
    init: str  # checkpoint the value network starts from
    trainable: str = "head"
    steps: int = 2000
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    augment: bool = True  # one random symmetry per sample
    eval_every: int = 250
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.trainable not in TRAINABLE:
            raise ValueError(f"trainable must be one of {TRAINABLE}")
        if min(self.steps, self.batch_size, self.eval_every) < 1:
            raise ValueError("steps, batch_size and eval_every must be positive")
        if not self.data:
            raise ValueError("no shard folders")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "data": list(self.data)}


def train_value(config: ValueTrainConfig, run_dir: str | Path, *, max_minutes: float | None = None,
                export: bool = True, progress: bool = True) -> dict:
    """Trains (or resumes) a value network in run_dir; after the last step exports model.onnx when `export`.

    Returns {"step", "finished", "validation" (the last held-out losses), "checkpoint", "onnx"}.
    """
    folder = runs.RunFolder(run_dir, config, "value_config", _RESUMABLE_CHANGES, COLUMNS, "step")
    device = runs.device(config.device)
    train_set, val_set = dataset.Shards(config.data, "train"), dataset.Shards(config.data, "val")
    if not val_set.samples:
        raise dataset.DatasetError(f"no validation samples in {', '.join(config.data)}")
    resumed = folder.load(with_optimizer=True)
    ckpt = resumed or checkpoint_lib.load(config.init)
    net = ckpt.build_model().to(device)
    learning_parts = model_lib.PARTS if config.trainable == "all" else ("value",)
    optimizer = torch.optim.AdamW(model_lib.train_parts(net, learning_parts), lr=config.lr,
                                  weight_decay=config.weight_decay)
    step, seconds = 0, 0.0
    if resumed:
        optimizer.load_state_dict(ckpt.optimizer_state)
        step, seconds = int(ckpt.provenance["steps"]), float(ckpt.provenance["seconds"])
        folder.resumed_at(step)
        init_provenance = ckpt.provenance["init_provenance"]
    else:
        init_provenance = ckpt.provenance
    folder.write_config()
    val_arrays = val_set.head(val_set.samples)

    def save(validation: dict | None) -> None:
        provenance = {"data": [f"{d} ({s['samples']['train']} train / {s['samples']['val']} val samples)"
                               for d, s in zip(config.data, train_set.sidecars)],
                      "steps": step, "seconds": round(seconds, 1), "value_config": config.to_dict(),
                      "init_provenance": init_provenance, "validation": validation or {},
                      "notes": f"value network (AlphaGo 2016): value head trained on one position per RL game "
                               f"from {config.init}; trainable: {config.trainable}"
                               + ("; the policy head is the initial network's" if config.trainable == "head"
                                  else "; policy, score and ownership heads not trained")}
        folder.save(checkpoint_lib.from_model(net, sorted(set(ckpt.trained_sizes) | {train_set.width}), provenance,
                                              optimizer))

    stream = train_set.batches(config.batch_size, config.seed, start=step, augment=config.augment)
    bar = runs.progress(progress, total=config.steps, initial=step, unit="step", desc="value-train")
    loss_sum, counted, row_started, validation = 0.0, 0, time.monotonic(), None
    with runs.StopFlag(max_minutes) as stop:
        while step < config.steps and not stop.stopped:
            lr = config.lr * 0.5 * (1.0 + math.cos(math.pi * step / config.steps))  # cosine to zero
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = dataset.to_device(next(stream), device)
            spatial, global_, targets = dataset.expand(batch, train_set.height, train_set.width)
            has_value = targets["value"] >= 0
            cross_entropy, _ = value_terms(net(spatial, global_)[1][has_value], targets["value"][has_value])
            loss = cross_entropy.mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            loss_sum += float(loss.detach())
            counted += 1
            bar.update(1)
            if step % config.eval_every == 0 or step == config.steps:
                seconds += time.monotonic() - row_started
                validation = evaluate(net, val_arrays, val_set.height, val_set.width, device=device)
                model_lib.train_parts(net, learning_parts)
                folder.append({"step": step, "samples": step * config.batch_size, "lr": lr, "seconds": seconds,
                               "train_value_loss": loss_sum / counted, "val_value_loss": validation["value_loss"],
                               "val_value_mse": validation["value_mse"]})
                save(validation)
                bar.set_postfix(val_loss=f"{validation['value_loss']:.3f}", mse=f"{validation['value_mse']:.3f}")
                loss_sum, counted, row_started = 0.0, 0, time.monotonic()
    bar.close()
    stream.close()
    if counted:  # stopped between evaluations: keep the work
        seconds += time.monotonic() - row_started
        save(validation)
    return folder.finish(step >= config.steps, export, step=step, validation=validation)
