"""Train: supervised training of a model preset on shards (dataset.py): validation, metrics, plot, checkpoints
that resume, and export to ONNX at the end.

Terms:
- run folder: runs.RunFolder: config.json (its TrainConfig), checkpoint.pt (the latest, written atomically),
  metrics.csv (one row per evaluation), after the last step model.onnx; and here curves.png. A resumed run
  may change only data, device, compute_dtype, compile, eval_every and val_samples, and must find the same shards
  (by name and size).
- step: one optimizer update on one batch. The batch stream is a function of the step (dataset.Shards.batches)
  and the learning rate too, so a run resumed from a checkpoint at step n continues exactly as the
  uninterrupted run would have.
- evaluation: every eval_every steps and after the last one: losses and top-1 accuracy on the first
  val_samples validation samples (no symmetry), a metrics row with the training means since the previous row,
  the plot, and a checkpoint.
- loss: policy cross-entropy (against the soft policy target where the shards have one, over the samples whose
  policy_mask is set; else against the move played: dataset.py) + value_weight * value cross-entropy over
  (win, loss, draw), against the game's result blended with the search value (dataset.py) where the shards
  have one: (1 - search_value_weight) * result + search_value_weight * ((1 + q) / 2 win, (1 - q) / 2 loss)
  + score_weight * Huber loss of the score in units of 20 points + ownership_weight * mean
  squared ownership error + opponent_policy_weight * cross-entropy of the opponent policy against the reply
  played (KataGo's auxiliary target: dataset.py's opponent_move); the last four only over samples that have
  that target. With opponent_policy_weight > 0 the network is built with the opponent policy output
  (model.py); it costs nothing at play time, where the export leaves it out.
- parts: train_parts, the parts of the network (model.PARTS: trunk, policy, value) that learn; the others keep
  the initial weights (init_from) and their batch statistics, so a run that trains only the value head leaves
  the policy exactly as it was.
- top-1 accuracy: how often the move played is the policy's largest logit.
- initial weights: a new run starts from random weights, or from the weights of the checkpoint init_from
  (same preset; its optimizer state and step count are not taken; an opponent policy output the one network
  has and the other lacks is left at its initial weights or dropped). A resumed run ignores it: its own
  checkpoint holds everything.
- stop: after `steps` steps, or earlier at max_minutes, at stop_at, or on SIGINT/SIGTERM; every stop saves a
  checkpoint first, and running the same command again resumes from it.
- compute dtype: runs.py's; by default bfloat16 on CUDA, and on a CPU with bf16 instructions whichever of float32
  and bfloat16 a timed trial of this run's training step (on a copy of the network) finds faster: about twice the
  samples/s for bfloat16 on the project's 2-core AMD EPYC, 0.6x on its 2-core Intel Xeon. The network and its
  inputs are kept channels-last on every device: oneDNN's convolutions and cuDNN's are faster in that layout.
- compile: with `compile`, the training steps run the network through torch.compile (COMPILE_BACKEND), which
  fuses the norms, activations and masks around the convolutions: 1.27x the samples/s of a bfloat16 step for
  b6c64 on 19x19 at batch 256 on the 2-core EPYC, after about 35 s of compilation at the first step. Validation
  keeps the plain module (its batches vary in size and run without gradients: a second compilation would cost
  more than it saves). A network dynamo cannot compile runs as it is, with a warning.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import dataset, metrics_csv, runs
from gtp_engine.training import model as model_lib
from gtp_engine.training.files import CHECKPOINT, METRICS, ONNX  # noqa: F401 (the run folder's names, for callers)

log = logging.getLogger(__name__)

PLOT = "curves.png"
OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "step")
# Fields that may change between a run and its resumption: they do not change what is computed.
_RESUMABLE_CHANGES = ("data", "device", "compute_dtype", "compile", "eval_every", "val_samples")
# A rule input in fewer of the training samples is not among a network's trained rules (the engine feeds the nearest
# trained ones instead): the 19x19 archive's 353 AGA records, 0.5% of its samples, did not teach that input.
MIN_RULES_SHARE = 0.02
COMPILE_BACKEND = "inductor"  # torch.compile's code generator for `compile` (tests use a cheaper one)
_LOSSES = ("loss", "policy_loss", "policy_top1", "value_loss", "score_loss", "ownership_loss", "opponent_policy_loss")
COLUMNS = ("step", "samples", "epoch", "lr", "seconds", "samples_per_s") + tuple(f"train_{k}" for k in _LOSSES) \
    + tuple(f"val_{k}" for k in _LOSSES)


@dataclass(frozen=True)
class TrainConfig:
    data: tuple[str, ...] = ()  # shard folders (one board size); required to train
    preset: str = "b6c64"
    batch_size: int = 256
    steps: int = 10_000
    optimizer: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 1e-4
    momentum: float = 0.9  # sgd only
    schedule: str = "cosine"  # cosine to zero, or step: x0.1 at 50% and 75% of the steps
    warmup_steps: int = 100
    value_weight: float = 1.0
    search_value_weight: float = 0.0  # share of the search value in the value target, where shards have one
    score_weight: float = 0.1
    ownership_weight: float = 0.5
    opponent_policy_weight: float = 0.0  # the auxiliary opponent-reply policy (KataGo: 0.15); 0: no such output
    augment: bool = True  # one random symmetry per sample
    eval_every: int = 500
    val_samples: int = 50_000
    window_samples: int = 2_000_000
    seed: int = 0
    device: str = "auto"  # auto: cuda when available
    compute_dtype: str = "auto"  # runs.COMPUTE_DTYPES; auto: bfloat16 where the device has it natively
    compile: bool = False  # run the training steps through torch.compile (see compile)
    init_from: str = ""  # checkpoint whose weights start a new run (same preset); "": random weights
    train_parts: tuple[str, ...] = model_lib.PARTS  # the parts that learn (see parts)

    def __post_init__(self) -> None:
        model_lib.preset(self.preset)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}")
        if self.opponent_policy_weight < 0:
            raise ValueError("opponent_policy_weight must not be negative")
        if not 0.0 <= self.search_value_weight <= 1.0:
            raise ValueError("search_value_weight must be in [0, 1]")
        if self.compute_dtype not in runs.COMPUTE_DTYPES:
            raise ValueError(f"compute_dtype must be one of {runs.COMPUTE_DTYPES}")
        if not self.train_parts or set(self.train_parts) - set(model_lib.PARTS):
            raise ValueError(f"train_parts must be some of {model_lib.PARTS}")
        if set(self.train_parts) != set(model_lib.PARTS) and not self.init_from:
            raise ValueError("training only some parts needs init_from: the others would stay random")
        if min(self.batch_size, self.steps, self.eval_every) < 1:
            raise ValueError("batch_size, steps and eval_every must be positive")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "data": list(self.data)}

    @property
    def model(self) -> model_lib.ModelConfig:
        """The network this run trains: the preset, with the opponent policy output when it has a weight."""
        return dataclasses.replace(model_lib.preset(self.preset), opponent_policy=self.opponent_policy_weight > 0)


def prepare(net: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """`net` on `device`, channels-last (see compute dtype)."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # one input shape per run: the fastest kernels are worth finding
    return net.to(device).to(memory_format=torch.channels_last)


def compiled(net: torch.nn.Module) -> torch.nn.Module:
    """net through torch.compile (see compile); where dynamo fails, the plain module runs instead."""
    import torch._dynamo

    torch._dynamo.config.suppress_errors = True  # an optimisation that fails must not stop a training run
    return torch.compile(net, backend=COMPILE_BACKEND)


def forward(net: torch.nn.Module, batch: dict, height: int, width: int, device: torch.device,
            compute_dtype: str, opponent: bool = False) -> tuple[tuple, dict]:
    """(outputs, targets) of a batch from dataset.take() on a prepare()d net; the opponent policy among the
    outputs when `opponent`."""
    spatial, global_, targets = dataset.expand(dataset.to_device(batch, device), height, width)
    with runs.autocast(device, compute_dtype):
        return net(spatial.contiguous(memory_format=torch.channels_last), global_, opponent=opponent), targets


def learning_rate(config: TrainConfig, step: int) -> float:
    """The learning rate for the update at `step` (0-based)."""
    warmup = min(1.0, (step + 1) / config.warmup_steps) if config.warmup_steps else 1.0
    progress = min(step, config.steps) / config.steps
    if config.schedule == "cosine":
        decay = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        decay = 0.1 ** sum(progress >= milestone for milestone in (0.5, 0.75))
    return config.lr * warmup * decay


def losses(outputs, targets: dict, config: TrainConfig) -> dict[str, torch.Tensor]:
    """Each term (scalar tensors) and their weighted sum "loss"; masked terms average over their samples."""
    policy, value, score, ownership = (o.float() for o in outputs[:4])
    move = targets["move"]
    if "policy" in targets:
        soft = -(targets["policy"] * F.log_softmax(policy, dim=1)).sum(dim=1)
        policy_loss = _masked_mean(soft, targets["policy_mask"])
    else:
        policy_loss = F.cross_entropy(policy, move)
    out = {"policy_loss": policy_loss, "policy_top1": (policy.argmax(dim=1) == move).float().mean()}
    has_value = targets["value"] >= 0
    value_target = F.one_hot(targets["value"].clamp(min=0), 3).float()
    if "search_value" in targets and config.search_value_weight > 0:
        q = targets["search_value"].clamp(-1.0, 1.0)
        searched = torch.stack([(1 + q) / 2, (1 - q) / 2, torch.zeros_like(q)], dim=1)
        value_target = (1 - config.search_value_weight) * value_target + config.search_value_weight * searched
    value_loss = -(value_target * F.log_softmax(value, dim=1)).sum(dim=1)
    out["value_loss"] = _masked_mean(value_loss, has_value)
    score_error = F.smooth_l1_loss(score / model_lib.SCORE_SCALE, targets["score"] / model_lib.SCORE_SCALE,
                                   reduction="none")
    out["score_loss"] = _masked_mean(score_error, targets["score_mask"])
    ownership_error = (ownership - targets["ownership"]).square().mean(dim=(1, 2))
    out["ownership_loss"] = _masked_mean(ownership_error, targets["ownership_mask"])
    out["opponent_policy_loss"] = torch.zeros((), device=policy.device)
    if len(outputs) > 4:
        replied = targets["opponent_move"] >= 0
        reply_loss = F.cross_entropy(outputs[4].float(), targets["opponent_move"].clamp(min=0), reduction="none")
        out["opponent_policy_loss"] = _masked_mean(reply_loss, replied)
    out["loss"] = (out["policy_loss"] + config.value_weight * out["value_loss"]
                   + config.score_weight * out["score_loss"] + config.ownership_weight * out["ownership_loss"]
                   + config.opponent_policy_weight * out["opponent_policy_loss"])
    return out


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1)


class _Trainer:
    def __init__(self, config: TrainConfig, run_dir: Path, progress: bool):
        self.config, self.progress = config, progress
        self.folder = runs.RunFolder(run_dir, config, "train_config", _RESUMABLE_CHANGES, COLUMNS, "step")
        self.device = runs.device(config.device)
        if not config.data:
            raise ValueError("no shard folders (--data)")
        self.train_set = dataset.Shards(config.data, "train")
        self.val_set = dataset.Shards(config.data, "val")
        if not self.val_set.samples:
            raise dataset.DatasetError(f"no validation samples in {', '.join(config.data)}: ingest with "
                                       f"--val-fraction above 0")
        self.fingerprint = _fingerprint(self.train_set) + "/" + _fingerprint(self.val_set)
        torch.manual_seed(config.seed)
        self.net = prepare(model_lib.build(config.model), self.device)
        self.step_net = compiled(self.net) if config.compile else self.net  # the same parameters
        learning = model_lib.train_parts(self.net, config.train_parts)
        decay = [p for p in learning if p.ndim > 1]  # no weight decay on norms and biases
        rest = [p for p in learning if p.ndim <= 1]
        groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": rest, "weight_decay": 0.0}]
        if config.optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(groups, lr=config.lr)
        else:
            self.optimizer = torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum, nesterov=True)
        self.step = 0
        self.seconds = 0.0  # training time over all sessions of this run
        self.val_cache: dict | None = None
        self._compute_dtype: str | None = None  # config.compute_dtype resolved (runs.resolve_compute_dtype)

    # ---- state ----

    def resume(self) -> None:
        """Continues from the run folder's checkpoint, if there is one, after checking it is this run's; a new
        run starts from init_from's weights when given."""
        ckpt = self.folder.load(with_optimizer=True)
        if ckpt is None:
            if self.config.init_from:
                self.initialise(Path(self.config.init_from))
            return
        if ckpt.provenance.get("data_fingerprint") != self.fingerprint:
            raise ValueError(f"{self.folder.checkpoint} was trained on other shards; use the same data or another "
                             f"run folder")
        self.net.load_state_dict(ckpt.state_dict)
        self.optimizer.load_state_dict(ckpt.optimizer_state)
        self.step = int(ckpt.provenance["steps"])
        self.seconds = float(ckpt.provenance.get("seconds", 0.0))
        self.folder.resumed_at(self.step)

    def initialise(self, path: Path) -> None:
        """Loads the weights of the checkpoint at path (only them) into the new run's model."""
        ckpt = checkpoint_lib.load(path)
        wanted = self.config.model
        if dataclasses.replace(ckpt.config, opponent_policy=wanted.opponent_policy) != wanted:
            raise ValueError(f"{path}: a {ckpt.config.name} network ({ckpt.config.blocks} blocks, "
                             f"{ckpt.config.channels} channels) cannot start a {wanted.name} run; use --preset "
                             f"{ckpt.config.name} or another checkpoint")
        own = self.net.state_dict()
        weights = {key: value for key, value in ckpt.state_dict.items() if key in own}  # an opponent output dropped
        missing = set(own) - set(weights)
        if any(not key.startswith("opponent_") for key in missing):
            raise ValueError(f"{path}: weights missing for {sorted(missing)[:3]}")
        self.net.load_state_dict(weights, strict=False)
        log.info("starting from the weights of %s (%s steps)", path, ckpt.provenance.get("steps", "?"))

    def provenance(self, val: dict | None) -> dict:
        config = self.config
        return {
            "data": [f"{d} ({s['samples']['train']} train / {s['samples']['val']} val samples)"
                     for d, s in zip(config.data, self.train_set.sidecars)],
            "data_fingerprint": self.fingerprint,
            **self.trained_rules,
            "steps": self.step,
            "samples": self.step * config.batch_size,
            "seconds": round(self.seconds, 1),
            "train_config": config.to_dict(),
            "validation": val or {},
        }

    @functools.cached_property
    def trained_rules(self) -> dict:
        """{"trained_rules": the rule inputs of the shard folders' samples, each in at least MIN_RULES_SHARE of
        them where the sidecars count them (else every one)}, or {} when a sidecar predates them."""
        sidecars = self.train_set.sidecars
        if any(sidecar.get("rules") is None for sidecar in sidecars):
            return {}
        keyed = [[json.dumps(rules, sort_keys=True) for rules in sidecar["rules"]] for sidecar in sidecars]
        if not all("rule_samples" in sidecar for sidecar in sidecars):  # sidecars written before the counts
            return {"trained_rules": [json.loads(rules) for rules in sorted({key for keys in keyed for key in keys})]}
        samples: collections.Counter[str] = collections.Counter()
        for keys, sidecar in zip(keyed, sidecars):
            samples.update(dict(zip(keys, sidecar["rule_samples"])))
        total = sum(samples.values())
        learnt = sorted(rules for rules, count in samples.items() if count >= MIN_RULES_SHARE * total)
        for rules in sorted(set(samples) - set(learnt)):
            log.warning("rule inputs %s: %d of %d samples, too few to be learnt; not listed among the trained rules",
                        rules, samples[rules], total)
        return {"trained_rules": [json.loads(rules) for rules in learnt]}

    def save(self, val: dict | None = None) -> None:
        self.folder.save(checkpoint_lib.from_model(self.net, trained_sizes=[self.train_set.width],
                                                   provenance=self.provenance(val), optimizer=self.optimizer))

    # ---- computation ----

    def forward(self, batch: dict, net: torch.nn.Module, compute_dtype: str | None = None):
        return losses(*forward(net, batch, self.train_set.height, self.train_set.width, self.device,
                               compute_dtype or self.compute_dtype(), opponent=self.net.config.opponent_policy),
                      self.config)

    def compute_dtype(self) -> str:
        """float32 or bfloat16, decided once (by a timed trial on a copy of the network where "auto" needs one)."""
        if self._compute_dtype is None:
            head = self.val_set.head(self.config.batch_size)
            batch = dataset.take(head, np.arange(len(head["move"])))
            trial_net = copy.deepcopy(self.net)

            def trial(dtype: str) -> None:
                self.forward(batch, trial_net, dtype)["loss"].backward()
                trial_net.zero_grad(set_to_none=True)

            key = (self.device.type, repr(self.config.model), self.train_set.height, self.train_set.width,
                   self.config.batch_size)
            self._compute_dtype = runs.resolve_compute_dtype(self.device, self.config.compute_dtype, key, trial)
        return self._compute_dtype

    def validate(self) -> dict[str, float]:
        if self.val_cache is None:
            self.val_cache = self.val_set.head(self.config.val_samples)
        arrays = self.val_cache
        count = len(arrays["move"])
        sums = dict.fromkeys(_LOSSES, 0.0)
        self.net.eval()
        with torch.no_grad():
            for start in range(0, count, self.config.batch_size):
                index = np.arange(start, min(start + self.config.batch_size, count))
                terms = self.forward(dataset.take(arrays, index), self.net)
                for key in _LOSSES:
                    sums[key] += float(terms[key]) * len(index)
        model_lib.train_parts(self.net, self.config.train_parts)
        return {key: value / count for key, value in sums.items()}

    def run(self, max_minutes: float | None, stop_at: int | None) -> dict:
        config = self.config
        end = min(config.steps, stop_at if stop_at is not None else config.steps)
        stream = self.train_set.batches(config.batch_size, config.seed, start=self.step,
                                        window_samples=config.window_samples, augment=config.augment)
        sums = {key: torch.zeros((), device=self.device) for key in _LOSSES}
        counted, row_started, val = 0, time.monotonic(), None
        bar = runs.progress(self.progress, total=config.steps, initial=self.step, unit="step", desc="train")
        model_lib.train_parts(self.net, config.train_parts)
        with runs.StopFlag(max_minutes) as stop, contextlib.closing(stream):
            while self.step < end and not stop.stopped:
                lr = learning_rate(config, self.step)
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                terms = self.forward(next(stream), self.step_net)
                self.optimizer.zero_grad(set_to_none=True)
                terms["loss"].backward()
                self.optimizer.step()
                self.step += 1
                counted += 1
                for key in _LOSSES:
                    sums[key] += terms[key].detach()
                bar.update(1)
                if self.step % 20 == 0:
                    bar.set_postfix(loss=f"{float(terms['loss'].detach()):.3f}",
                                    top1=f"{float(terms['policy_top1']):.3f}")
                if self.step % config.eval_every == 0 or self.step == config.steps:
                    val = self._evaluate(sums, counted, row_started, lr)
                    sums = {key: torch.zeros((), device=self.device) for key in _LOSSES}
                    counted, row_started = 0, time.monotonic()
        bar.close()
        if counted:  # stopped between evaluations: keep the work
            self.seconds += time.monotonic() - row_started
            self.save(val)
        return {"step": self.step, "finished": self.step >= config.steps, "validation": val}

    def _evaluate(self, sums: dict, counted: int, row_started: float, lr: float) -> dict:
        elapsed = time.monotonic() - row_started
        self.seconds += elapsed
        train = {key: float(value) / counted for key, value in sums.items()}
        val = self.validate()
        samples = self.step * self.config.batch_size
        row = {"step": self.step, "samples": samples, "epoch": samples / self.train_set.samples, "lr": lr,
               "seconds": self.seconds, "samples_per_s": counted * self.config.batch_size / max(elapsed, 1e-9),
               **{f"train_{k}": v for k, v in train.items()}, **{f"val_{k}": v for k, v in val.items()}}
        self.folder.append(row)
        plot_metrics(self.folder.metrics, self.folder.path / PLOT)
        self.save(val)
        log.info("step %d: train loss %.4f top-1 %.3f | val loss %.4f top-1 %.3f value %.4f | %.0f samples/s",
                 self.step, train["loss"], train["policy_top1"], val["loss"], val["policy_top1"],
                 val["value_loss"], row["samples_per_s"])
        return val


def train(config: TrainConfig, run_dir: str | Path, *, max_minutes: float | None = None, stop_at: int | None = None,
          export: bool = True, progress: bool = True) -> dict:
    """Trains (or resumes) the run in run_dir; after the last step exports model.onnx when `export`.

    Returns {"step", "finished", "validation" (the last validation metrics, None if none this session),
    "checkpoint", "onnx" (path or None)}.
    """
    trainer = _Trainer(config, Path(run_dir), progress)
    trainer.resume()
    trainer.folder.write_config()
    return trainer.folder.finish(export=export, **trainer.run(max_minutes, stop_at))


# ---- metrics --------------------------------------------------------------------------------------------------

def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """A train run's metrics.csv, every value a number (NaN in a column added after the row was written)."""
    return [{key: float(value) if value else math.nan for key, value in row.items()} for row in metrics_csv.read(path)]


def plot_metrics(metrics_path: str | Path, png_path: str | Path) -> None:
    """The curves of a metrics CSV as a PNG: policy loss, top-1 accuracy, value loss, learning rate."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # no pyplot: no global backend state
    from matplotlib.figure import Figure

    rows = read_metrics(metrics_path)
    steps = [r["step"] for r in rows]
    figure = Figure(figsize=(10, 7), dpi=80)
    FigureCanvasAgg(figure)
    panels = (("policy loss", "policy_loss"), ("top-1 move accuracy", "policy_top1"), ("value loss", "value_loss"))
    for i, (title, key) in enumerate(panels):
        axes = figure.add_subplot(2, 2, i + 1)
        for split in ("train", "val"):
            axes.plot(steps, [r[f"{split}_{key}"] for r in rows], marker=".", label=split)
        axes.set_title(title)
        axes.set_xlabel("step")
        axes.legend()
        axes.grid(alpha=0.3)
    axes = figure.add_subplot(2, 2, 4)
    axes.plot(steps, [r["lr"] for r in rows], marker=".")
    axes.set_title("learning rate")
    axes.set_xlabel("step")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(str(png_path))


# ---- helpers --------------------------------------------------------------------------------------------------

def _fingerprint(shards: dataset.Shards) -> str:
    """Names and sizes of the shards, not their paths: a run may resume on another machine."""
    listing = sorted((path.name, count) for path, count in shards.files)
    return hashlib.blake2b(repr(listing).encode(), digest_size=8).hexdigest()
