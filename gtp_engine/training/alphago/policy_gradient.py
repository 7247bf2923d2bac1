"""Policy gradient: AlphaGo's (2016) reinforcement learning of the policy network by REINFORCE.

Terms:
- learner: the policy being trained, started from a supervised checkpoint (--init).
- opponent pool: earlier versions of the learner, saved in the run folder's pool/ (pool/0000.pt is --init); every
  pool_every iterations the learner joins it. Each iteration's opponent is drawn uniformly from the pool, which
  keeps the learner from overfitting to its current self (AlphaGo's reason for the pool).
- iteration: one minibatch of `games` policy-only games (policy_play.py) of the learner against one opponent,
  the learner Black in even games and White in odd ones, followed by one SGD update.
- reward z: +1 for a win, -1 for a loss, 0 for a draw, from the learner's view, given to every learner move of
  the game. advantage: z minus the baseline: "none" (0, AlphaGo's first pass) or "mean" (the mean z of the
  iteration's games, which removes the drift of an unequal pairing and lowers the variance).
- update: the gradient of (1 / games) * sum over the learner's moves of advantage * log p(move | position),
  p being the distribution the move was sampled from (policy_play.log_policy: softmax over the candidates at
  the play temperature), taken with the network in eval mode so that batch normalisation uses the same
  statistics as during play; forced passes (a single candidate) carry no gradient and are skipped.
- trained parameters: the trunk and the policy head. The value, score and ownership heads are left out; their
  outputs after training are those heads on a changed trunk and mean nothing (value_net.py trains a value
  network).
- run folder: runs.py's: config.json, checkpoint.pt (learner, optimizer, iteration and pool, written atomically
  after every iteration), metrics.csv (one row per iteration), and model.onnx after the last iteration; and here
  pool/NNNN.pt. A stop (max_minutes, SIGINT, SIGTERM) comes after the iteration under way. Running the same
  command again resumes after the last saved iteration, exactly as the uninterrupted run: an iteration's
  randomness is a function of (seed, iteration).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import KOMI
from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import model as model_lib
from gtp_engine.training import runs
from gtp_engine.training.alphago import policy_play


POOL = "pool"
BASELINES = ("none", "mean")
NOT_TRAINED = ("value_", "ownership_")  # parameter name prefixes of the heads REINFORCE leaves alone
# Fields that may change between a run and its resumption: they do not change what is computed.
_RESUMABLE_CHANGES = ("iterations", "device")
COLUMNS = ("iteration", "opponent", "pool_size", "games", "wins", "losses", "draws", "win_rate", "mean_plies",
           "moves", "mean_log_p", "loss", "seconds")


@dataclass(frozen=True)
class ReinforceConfig:
    iterations: int = 100
    games: int = 64  # per iteration, half with each colour
    lr: float = 0.002
    momentum: float = 0.0
    weight_decay: float = 0.0
    # Without a baseline an iteration the learner loses entirely pushes down every move it played; on 9x9 such
    # iterations sent the policy from 77% to 12% against the SL one and back. "mean" removes those updates.
    baseline: str = "mean"
    pool_every: int = 5
    size: int = 9
    komi: float = KOMI
    temperature: float = 1.0
    max_moves: int = 0  # 0: three times the board's area
    chunk: int = 256  # positions per forward/backward pass of the update
    seed: int = 0
    device: str = "auto"  # auto: cuda when available

    def __post_init__(self) -> None:
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}")
        if min(self.iterations, self.games, self.pool_every, self.chunk) < 1:
            raise ValueError("iterations, games, pool_every and chunk must be positive")
        if self.games % 2:
            raise ValueError("games must be even (half with each colour)")
        self.play_config()

    def play_config(self) -> policy_play.PlayConfig:
        return policy_play.PlayConfig(size=self.size, komi=self.komi, temperature=self.temperature,
                                      max_moves=self.max_moves)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def trained_parameters(net: model_lib.GoNet) -> list[torch.nn.Parameter]:
    return [p for name, p in net.named_parameters() if not name.startswith(NOT_TRAINED)]


def advantages(rewards: np.ndarray, baseline: str) -> np.ndarray:
    """Per-game advantages from per-game rewards (see the module docstring)."""
    return rewards - rewards.mean() if baseline == "mean" else rewards.astype(np.float64)


def update(net: model_lib.GoNet, optimizer: torch.optim.Optimizer, steps: Sequence[policy_play.Step],
           advantage: Sequence[float], games: int, temperature: float, chunk: int,
           device: torch.device | str = "cpu") -> dict[str, float]:
    """One REINFORCE step on the moves `steps` with their advantages; returns the loss and the mean log p."""
    keep = [i for i, step in enumerate(steps) if step.candidates.sum() > 1]
    net.eval()  # batch normalisation as in play: this is the gradient of the policy that chose the moves
    optimizer.zero_grad(set_to_none=True)
    loss_sum, log_p_sum = 0.0, 0.0
    for start in range(0, len(keep), chunk):
        rows = [steps[i] for i in keep[start:start + chunk]]
        spatial = torch.from_numpy(np.stack([s.spatial for s in rows])).to(device, torch.float32)
        global_ = torch.from_numpy(np.stack([s.global_ for s in rows])).to(device)
        candidates = torch.from_numpy(np.stack([s.candidates for s in rows])).to(device)
        moves = torch.tensor([s.move for s in rows], device=device)
        weights = torch.tensor([advantage[i] for i in keep[start:start + chunk]], device=device,
                               dtype=torch.float32)
        logits = net(spatial, global_)[0].float()
        log_p = policy_play.log_policy(logits, candidates, temperature).gather(1, moves[:, None])[:, 0]
        loss = -(weights * log_p).sum() / games
        loss.backward()
        loss_sum += float(loss.detach())
        log_p_sum += float(log_p.detach().sum())
    optimizer.step()
    return {"loss": loss_sum, "mean_log_p": log_p_sum / max(len(keep), 1), "moves": len(keep)}


class _Run:
    def __init__(self, config: ReinforceConfig, run_dir: Path, init: str | None, progress: bool):
        self.config, self.run_dir, self.progress = config, run_dir, progress
        self.folder = runs.RunFolder(run_dir, config, "reinforce_config", _RESUMABLE_CHANGES, COLUMNS, "iteration")
        self.device = runs.device(config.device)
        ckpt = self.folder.load(with_optimizer=True)
        if ckpt is not None:
            if init is not None and str(init) != ckpt.provenance["init"]:
                raise ValueError(f"{self.folder.checkpoint} started from {ckpt.provenance['init']}, not {init}")
        elif init is None:
            raise ValueError(f"{run_dir} holds no run to resume: give --init, the supervised checkpoint to start from")
        else:
            ckpt = checkpoint_lib.load(init)
            ckpt.provenance = {"init": str(init), "init_provenance": ckpt.provenance, "iteration": 0,
                               "pool": [], "seconds": 0.0, "reinforce_config": config.to_dict(),
                               "notes": "policy network trained by REINFORCE; value, score and ownership heads "
                                        "not trained (meaningless after the trunk changed)"}
        self.trained_sizes = sorted(set(ckpt.trained_sizes) | {config.size})
        self.provenance = ckpt.provenance
        self.net = ckpt.build_model().to(self.device)
        self.optimizer = torch.optim.SGD(trained_parameters(self.net), lr=config.lr, momentum=config.momentum,
                                         weight_decay=config.weight_decay)
        if ckpt.optimizer_state is not None:
            self.optimizer.load_state_dict(ckpt.optimizer_state)
        if not self.provenance["pool"]:
            self._join_pool()
        self.folder.resumed_at(self.iteration)
        self._opponent: tuple[str, model_lib.GoNet] | None = None

    @property
    def iteration(self) -> int:
        return int(self.provenance["iteration"])

    def _join_pool(self) -> None:
        name = f"{POOL}/{self.iteration:04d}.pt"
        checkpoint_lib.save(checkpoint_lib.from_model(self.net, self.trained_sizes, self._member_provenance()),
                            self.run_dir / name)
        self.provenance["pool"] = self.provenance["pool"] + [name]

    def _member_provenance(self) -> dict:
        return {"reinforce_iteration": self.iteration, "init": self.provenance["init"],
                "notes": self.provenance["notes"]}

    def _opponent_net(self, name: str) -> model_lib.GoNet:
        if self._opponent is None or self._opponent[0] != name:
            self._opponent = (name, checkpoint_lib.load(self.run_dir / name).build_model().to(self.device))
        return self._opponent[1]

    def save(self) -> None:
        self.folder.save(checkpoint_lib.from_model(self.net, self.trained_sizes, self.provenance, self.optimizer))

    def iterate(self) -> dict:
        config = self.config
        started = time.monotonic()
        rng = np.random.default_rng([config.seed, self.iteration])
        pool = self.provenance["pool"]
        opponent = int(rng.integers(len(pool)))
        agents = [self.net, self._opponent_net(pool[opponent])]
        results = policy_play.play(agents, config.games, config.play_config(), rng,
                                   record=lambda game, ply, agent: agent == 0, device=self.device)
        learner_colors = [BLACK if game % 2 == 0 else WHITE for game in range(config.games)]
        rewards = np.array([r.reward(color) for r, color in zip(results, learner_colors)])
        game_advantage = advantages(rewards, config.baseline)
        steps = [step for result in results for step in result.steps]
        step_advantage = [a for result, a in zip(results, game_advantage) for _ in result.steps]
        terms = update(self.net, self.optimizer, steps, step_advantage, config.games, config.temperature,
                       config.chunk, self.device)
        self.provenance["iteration"] = self.iteration + 1
        seconds = time.monotonic() - started
        self.provenance["seconds"] = round(float(self.provenance["seconds"]) + seconds, 1)
        row = {"iteration": self.iteration, "opponent": pool[opponent], "pool_size": len(pool),
               "games": config.games, "wins": int((rewards > 0).sum()), "losses": int((rewards < 0).sum()),
               "draws": int((rewards == 0).sum()), "win_rate": float((rewards.mean() + 1) / 2),
               "mean_plies": float(np.mean([r.plies for r in results])), "moves": terms["moves"],
               "mean_log_p": terms["mean_log_p"], "loss": terms["loss"], "seconds": seconds}
        self.folder.append(row)
        if self.iteration % config.pool_every == 0:
            self._join_pool()
        self.save()
        return row

    def run(self, max_minutes: float | None) -> dict:
        bar = runs.progress(self.progress, total=self.config.iterations, initial=self.iteration, unit="it",
                            desc="reinforce")
        row = None
        with runs.StopFlag(max_minutes) as stop:
            while self.iteration < self.config.iterations and not stop.stopped:
                row = self.iterate()
                bar.update(1)
                bar.set_postfix(win=f"{row['win_rate']:.2f}", vs=row["opponent"], log_p=f"{row['mean_log_p']:.2f}")
        bar.close()
        return {"iteration": self.iteration, "finished": self.iteration >= self.config.iterations, "last": row}


def reinforce(config: ReinforceConfig, run_dir: str | Path, init: str | None = None, *,
              max_minutes: float | None = None, export: bool = True, progress: bool = True) -> dict:
    """Trains (or resumes) the run in run_dir; after the last iteration exports model.onnx when `export`.

    Returns {"iteration", "finished", "last" (the last metrics row of this session, or None), "checkpoint",
    "onnx" (path or None)}.
    """
    run = _Run(config, Path(run_dir), init, progress)
    run.folder.write_config(init=run.provenance["init"])
    return run.folder.finish(export=export, **run.run(max_minutes))
