"""Loop: AlphaZero's generations of self-play, training, export, gating and promotion, resumable from disk.

Terms:
- settings: LoopConfig holds the loop's own settings and, nested, the configs of its jobs: selfplay
  (selfplay.SelfPlayConfig), train (train.TrainConfig, with the loop's defaults in TRAIN) and gate
  (gating.GateConfig), each field a setting of the loop except the ones the loop sets itself (LOOP_SETS: the
  loop's board size, komi and rules, a seed per job, the candidate's data, preset, start and checkpoint interval).
- run folder: everything the loop knows lives here, so that killing the process anywhere and running the same
  command again continues where it stopped:
    loop.json    the LoopConfig, nested as it is (a rerun must give the same one, except RESUMABLE_CHANGES; a
                 loop.json of the flat config before the nesting reads through EARLIER_NAMES)
    state.json   the generation and the phase to run next, and the generation of the current best
    best.onnx    the current best network (what self-play and the gate play with); best.pt its checkpoint
    gen-0000/    the initial network (model.onnx) and its checkpoint (checkpoint.pt; imported by import_onnx.py
                 for an ONNX init, so training continues from the network's own weights)
    gen-NNNN/    selfplay/batch-KKK/  self-play shard folders (selfplay.play), complete when report.json exists
                 anchor/              with --anchor: this generation's random draw of expert games (shards)
                 train/               the candidate's training run (train.py: resumes itself; model.onnx at the end)
                 average/             with average_generations > 1: the candidate, the mean of the last candidates'
                                      trained weights (averaging.py; checkpoint.pt, then model.onnx when complete)
                 gate/                the gate match (gating.py: resumes with its finished games; result.json)
                 gnugo/               the optional match of the best against GNU Go (result.json, sgf/)
                 summary.json         the generation's figures, written when it is recorded
    metrics.csv  one row per recorded generation (rebuilt from the summaries), strength.png its plot, loop.log
- generation g >= 1, in phases: selfplay (batches of games by the best network; a batch that was cut short is played
  again) -> train (the candidate continues from the previous candidate's weights, or the initial checkpoint's, on the
  self-play of the last window_generations generations, plus anchor_samples samples of expert games when an anchor is
  set; with average_generations > 1 the candidate is then the average of the trained weights of the last that many
  generations, its norms recalibrated on the window, while training goes on from each generation's own weights)
  -> gate (candidate against best: gating.py's rule; with gated off no match is played and every candidate is
  promoted, as in AlphaZero and KataGo) -> promote (copies into best.*, and into promote_to when set, each
  atomically) -> gnugo (every gnugo_every generations, when set: the best, as the engine at the gate's visits,
  against GNU Go in a match of match.py, played again whole if it was cut short) -> record. state.json moves to the
  next phase only after a phase's output is complete, and every phase can run again over a partial output of its own,
  so a kill costs at most the unfinished part of one phase.
- metrics.csv columns: games, samples, full_visits and fast_visits (the generation's playout caps), selfplay_seconds
  (summed over batches: with several workers more than the wall time), games_per_hour and evaluations_per_second (per
  self-play process), train_* and val_* (the candidate's last training and validation losses), gate_* (games, score
  and Elo with their 95% intervals, LLR), promoted, best_generation, best_elo, candidate_elo (Elo as below), gnugo_*
  (games, score and Elo of the best against GNU Go, where played), seconds (self-play, training and gate time,
  exports excluded). An ungated loop leaves the gate_* and Elo columns empty: its strength curve is the GNU Go
  matches'.
- Elo: a gate's estimate is the candidate's rating against the best's; the best's cumulative Elo is the sum of
  the estimates of the promoted candidates (generation 0 at 0), the curve of strength.png. A score of 0 or 1
  counts as half a game short of it, to keep sums finite.
- precision: what self-play, the gate and the GNU Go matches play with. fp32: the exported networks themselves.
  int8: each network's int8 sibling NAME.int8.onnx (quantize.py), made the first time it is needed and calibrated on
  positions of the latest finished self-play games (this generation's, else the previous one's), held-out
  games checking the agreement, with the fewest leading block convolutions in fp32 (INT8_FP32_CONVS) that meet
  quantize's agreement targets (the shipped 19x19 network needs two); the fp32 file plays while no self-play games
  exist yet (generation 1's self-play) or when no int8 version meets them. On a CPU the int8 network runs at 2.7x
  its fp32 source, and self-play at 1.7x the games per hour (tools/bench_selfplay.py, 9x9 b6c64).
  Training, export and promotion stay in fp32; promotion copies the int8 sibling along.
- runner: what executes the phases' work (self-play and gate jobs, whose Engine opens their networks, and
  training); LocalRunner runs it in this process, distributed.RayRunner on Ray actors. The loop itself and
  everything on disk is the same for both.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import logging
import math
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from gtp_engine import match, match_stats
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import KOMI
from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import averaging, dataset, export_onnx, gating, import_onnx, quantize, runs, selfplay, train
from gtp_engine.training import model as model_lib
from gtp_engine.training.files import replacing
from gtp_engine.training.torch_evaluator import BACKENDS, open_evaluator

log = logging.getLogger(__name__)

CONFIG = "loop.json"
STATE = "state.json"
BEST_ONNX = "best.onnx"
BEST_CHECKPOINT = "best.pt"
LOG = "loop.log"
METRICS = "metrics.csv"
PLOT = "strength.png"
SUMMARY = "summary.json"
ANCHOR = "anchor"
AVERAGE = "average"
PRECISIONS = ("fp32", "int8")
CALIBRATION_POSITIONS = 1024  # int8 precision: self-play positions for calibration, as many for the agreement
INT8_FP32_CONVS = (0, 1, 2)  # int8 precision: leading block convolutions kept in fp32, tried in turn (see precision)
TRAIN_CHECKPOINT_STEPS = 500  # a candidate's training validates and checkpoints this often: what a kill can lose
# Settings a rerun may change: how far to go, where to promote, and how the work is executed (dotted: nested).
RESUMABLE_CHANGES = ("generations", "promote_to", "backend", "device", "precision", "train.device", "gnugo_every",
                     "gnugo_games", "gnugo_level", "average_generations", "gate.processes")
# The fields of the nested configs that the loop sets itself for each job: the loop's board, komi and rules, a
# seed per job, and the candidate's data, start, preset and checkpoint interval.
LOOP_SETS = {"selfplay": ("size", "komi", "rules", "seed"), "gate": ("size", "komi", "rules", "seed"),
             "train": ("data", "preset", "init_from", "eval_every", "seed")}
# The names of nested settings when LoopConfig copied them (loop.json of earlier runs; their flags still work).
EARLIER_NAMES = {
    "full_visits": "selfplay.full_visits", "fast_visits": "selfplay.fast_visits",
    "full_search_fraction": "selfplay.full_search_fraction", "prune_policy_target": "selfplay.prune_policy_target",
    "parallel_games": "selfplay.parallel_games", "val_fraction": "selfplay.val_fraction",
    "train_steps": "train.steps", "batch_size": "train.batch_size", "lr": "train.lr",
    "warmup_steps": "train.warmup_steps", "value_weight": "train.value_weight",
    "search_value_weight": "train.search_value_weight", "val_samples": "train.val_samples",
    "train_device": "train.device", "gate_games": "gate.max_games", "gate_visits": "gate.visits",
    "gate_elo1": "gate.sprt_elo1", "gate_fixed_games": "gate.fixed_games", "gate_fixed_score": "gate.fixed_score",
}
# A candidate's training, where the loop's defaults differ from a supervised run's: shorter, slower, smaller.
TRAIN = train.TrainConfig(steps=1000, lr=3e-4, warmup_steps=50, val_samples=10_000)
COLUMNS = ("generation", "games", "samples", "full_visits", "fast_visits", "selfplay_seconds", "games_per_hour",
           "evaluations_per_second", "train_samples", "train_steps", "train_loss", "val_policy_loss",
           "val_value_loss", "val_policy_top1", "gate_games", "gate_score", "gate_score_low", "gate_score_high",
           "gate_elo", "gate_elo_low", "gate_elo_high", "gate_llr", "promoted", "best_generation", "best_elo",
           "candidate_elo", "gnugo_games", "gnugo_score", "gnugo_elo", "gnugo_elo_low", "gnugo_elo_high", "seconds")


@dataclass(frozen=True)
class LoopConfig:
    """The loop's own settings, and the self-play, training and gate configs of its jobs (LOOP_SETS aside)."""

    init: str  # checkpoint (.pt) or network (.onnx) of generation 0
    generations: int = 10  # run until this generation is recorded (a rerun with more continues)
    games_per_generation: int = 256
    batch_games: int = 64  # self-play games per shard folder: the unit of resumption and of distributed work
    window_generations: int = 4  # train on the self-play of this many latest generations
    size: int = 9
    komi: float = KOMI
    rules: str = "chinese"  # a rule set, or several separated by commas (game_setups.py)
    anchor: str = ""  # shard folder of expert games (ingest) mixed into every candidate's training; "": none
    anchor_samples: int = 0  # samples of it per generation, a fresh random draw of whole games each time
    preset: str = ""  # candidates' model preset; "": the initial network's
    promote_to: str = ""  # also copy each promoted network here (e.g. weights/9x9.onnx); "": nowhere
    gated: bool = True  # False: no gate match, every candidate is promoted (the gate's settings serve GNU Go)
    gnugo_every: int = 0  # play the best against GNU Go every this many generations (0: never)
    gnugo_games: int = 20
    gnugo_level: int = 10
    backend: str = "auto"  # what runs the network in self-play and gating (torch_evaluator.BACKENDS)
    device: str = "auto"  # the backend's device for self-play and gating
    precision: str = "fp32"  # the networks self-play and the gate play with: fp32, or their int8 siblings
    seed: int = 0
    # Playout cap randomization's schedule (KataGo anneals its caps over a run, 600/100 to 1000/200): the full
    # and fast visits move linearly from selfplay.full_visits and fast_visits at generation 1 to these at
    # generation visit_ramp_generations, and stay there. 0: self-play keeps its visits.
    final_full_visits: int = 0
    final_fast_visits: int = 0
    visit_ramp_generations: int = 0
    # Weight averaging (averaging.py): the candidate is the mean of the trained weights of the last this many
    # generations (those there are), its norms recalibrated on the window; 1: the candidate is its own training's.
    # On loop9j (9x9 b6c64) the average of generations 32-35 beat generation 28 0.595 in 200 games, 34 alone 0.552.
    average_generations: int = 1
    selfplay: selfplay.SelfPlayConfig = field(default_factory=selfplay.SelfPlayConfig)
    train: train.TrainConfig = TRAIN  # train.device: the torch device of training
    gate: gating.GateConfig = field(default_factory=gating.GateConfig)  # gate.visits also for GNU Go matches

    def __post_init__(self) -> None:
        if min(self.generations, self.games_per_generation, self.batch_games, self.window_generations,
               self.average_generations) < 1:
            raise ValueError("generations, games_per_generation, batch_games, window_generations and "
                             "average_generations must be positive")
        if bool(self.anchor) != (self.anchor_samples > 0):
            raise ValueError("--anchor and --anchor-samples go together")
        if Path(self.init).suffix not in (".pt", ".onnx"):
            raise ValueError(f"--init {self.init}: a checkpoint (.pt) or a network (.onnx)")
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"--precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.preset:
            model_lib.preset(self.preset)
        ramp = (self.final_full_visits, self.final_fast_visits, self.visit_ramp_generations)
        if any(ramp) and not (self.visit_ramp_generations >= 1 and 1 <= self.final_fast_visits
                              <= self.final_full_visits):
            raise ValueError("--final-full-visits, --final-fast-visits and --visit-ramp-generations go together, "
                             "with 1 <= final fast visits <= final full visits and a ramp of at least 1 generation")
        # The nested configs say what their jobs will do: the loop's board, komi and rules.
        board = {"size": self.size, "komi": self.komi, "rules": self.rules}
        object.__setattr__(self, "selfplay", dataclasses.replace(self.selfplay, **board))
        object.__setattr__(self, "gate", dataclasses.replace(self.gate, **board))

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))  # as loop.json holds it: lists, not tuples

    @classmethod
    def from_dict(cls, values: dict) -> LoopConfig:
        nested = {"selfplay": selfplay.SelfPlayConfig, "train": train.TrainConfig, "gate": gating.GateConfig}
        built = {name: kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in values[name].items()})
                 for name, kind in nested.items() if name in values}
        return cls(**{**values, **built})

    def selfplay_config(self, generation: int, batch: int) -> selfplay.SelfPlayConfig:
        full, fast = self.visits(generation)
        return dataclasses.replace(self.selfplay, seed=_seed(self.seed, generation, batch), full_visits=full,
                                   fast_visits=fast)

    def visits(self, generation: int) -> tuple[int, int]:
        """The full and fast visits of the generation's self-play, on the schedule when one is set."""
        start = (self.selfplay.full_visits, self.selfplay.fast_visits)
        if not self.visit_ramp_generations:
            return start
        ramp = self.visit_ramp_generations
        progress = 1.0 if generation >= ramp else (generation - 1) / (ramp - 1)
        full, fast = (round(a + progress * (b - a))  # rounding keeps fast <= full, as at both ends
                      for a, b in zip(start, (self.final_full_visits, self.final_fast_visits)))
        return full, fast

    def gate_config(self, generation: int) -> gating.GateConfig:
        return dataclasses.replace(self.gate, seed=_seed(self.seed, generation, 999))

    def engine(self) -> Engine:
        return Engine(self.backend, self.device)


@dataclass(frozen=True)
class Engine:
    """What runs a job's networks: the backend (torch_evaluator.BACKENDS), its device, and its CPU threads (0:
    the backend's choice; the runner sets them)."""

    backend: str = "auto"
    device: str = "auto"
    threads: int = 0

    def open(self, network: str, seed: int):
        return open_evaluator(network, self.backend, self.device, self.threads, seed)


@dataclass(frozen=True)
class SelfPlayJob:
    """One batch of self-play games by one network into one shard folder."""

    network: str
    games: int
    config: selfplay.SelfPlayConfig
    out: str
    engine: Engine = Engine()


@dataclass(frozen=True)
class GateJob:
    """A gate match of the candidate against the best, in its folder."""

    candidate: str
    best: str
    config: gating.GateConfig
    out: str
    engine: Engine = Engine()


def with_threads(job: SelfPlayJob | GateJob, threads: int) -> SelfPlayJob | GateJob:
    return dataclasses.replace(job, engine=dataclasses.replace(job.engine, threads=threads))


def job_threads(config: selfplay.SelfPlayConfig | gating.GateConfig, cores: int = 0) -> int:
    """onnxruntime's threads per call for a self-play or gate job on `cores` cores (0: this machine's): the cores
    shared among its pipelined calls, or, unpipelined, all `cores` (0: onnxruntime's own choice)."""
    return config.network_threads(cores or None) or cores


def _opened_engine(job: SelfPlayJob | GateJob) -> Engine:
    """The job's engine, with job_threads where it names no thread count."""
    return job.engine if job.engine.threads else dataclasses.replace(job.engine, threads=job_threads(job.config))


def run_selfplay(job: SelfPlayJob, progress: bool = True) -> dict:
    """Plays a batch into job.out (replacing a batch that was cut short); returns its report."""
    out = Path(job.out)
    if (out / selfplay.REPORT).exists():
        return json.loads((out / selfplay.REPORT).read_text())
    if out.exists():
        shutil.rmtree(out)  # cut short: play it again
    evaluator = _opened_engine(job).open(job.network, job.config.seed)
    return selfplay.play(evaluator, job.games, job.config, out, progress=progress).to_dict()


def run_gate(job: GateJob, progress: bool = True) -> gating.GateResult:
    """Plays the job's match: in this process, or with config.processes > 1 in that many (gating.play_parts), each
    on its share of this machine's cores (the job's thread count is per call of one process: not used then)."""
    if job.config.processes > 1:
        cores = max(1, (os.cpu_count() or 1) // job.config.processes)
        part = with_threads(job, job_threads(job.config, cores))
        return gating.play_parts(functools.partial(_part_networks, part), job.config, job.out, progress=progress)
    return gating.play_match(*_gate_networks(job), job.config, job.out, progress=progress)


def _gate_networks(job: GateJob) -> tuple[Evaluator, Evaluator]:
    """The job's (candidate, best), opened where the match is played."""
    engine = _opened_engine(job)
    return engine.open(job.candidate, job.config.seed), engine.open(job.best, job.config.seed + 1)


def _part_networks(job: GateJob) -> tuple[Evaluator, Evaluator]:
    """_gate_networks in a part's own process, with torch's CPU threads (all cores, unless told) limited to the
    part's share, so that the parts do not contend for every core."""
    torch.set_num_threads(job.engine.threads)
    return _gate_networks(job)


def run_train(config: train.TrainConfig, run_dir: str, progress: bool = True) -> dict:
    summary = train.train(config, run_dir, export=True, progress=progress)
    if not summary["finished"]:
        raise InterruptedError(f"training in {run_dir} stopped at step {summary['step']}; run the same command "
                               f"again to resume")
    return summary


class Runner(Protocol):
    def selfplay(self, jobs: list[SelfPlayJob]) -> list[dict]: ...

    def train(self, config: train.TrainConfig, run_dir: str) -> dict: ...

    def gate(self, job: GateJob) -> gating.GateResult: ...


class LocalRunner:
    """Runs every phase in this process, one self-play batch after another; cores: what the self-play and gate
    jobs share among their network calls (job_threads; 0: all of this machine's)."""

    def __init__(self, progress: bool = True, cores: int = 0):
        self.progress, self.cores = progress, cores

    def _threads(self, job: SelfPlayJob | GateJob) -> SelfPlayJob | GateJob:
        return with_threads(job, job_threads(job.config, self.cores)) if self.cores else job

    def selfplay(self, jobs: list[SelfPlayJob]) -> list[dict]:
        return [run_selfplay(self._threads(job), self.progress) for job in jobs]

    def train(self, config: train.TrainConfig, run_dir: str) -> dict:
        return run_train(config, run_dir, self.progress)

    def gate(self, job: GateJob) -> gating.GateResult:
        return run_gate(self._threads(job), self.progress)


# ---- the loop -------------------------------------------------------------------------------------------


def run(config: LoopConfig, run_dir: str | Path, runner: Runner | None = None, progress: bool = True,
        threads: int = 0) -> dict:
    """Runs (or resumes) the loop in run_dir until config.generations is recorded; returns the state.

    runner: LocalRunner(progress, threads) unless given; threads: the cores of the local runner.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    runner = runner or LocalRunner(progress, threads)
    handler = logging.FileHandler(run_dir / LOG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    package_log = logging.getLogger("gtp_engine")
    package_log.addHandler(handler)
    level = package_log.level
    if package_log.getEffectiveLevel() > logging.INFO:  # the log file gets the phases whatever stderr shows
        package_log.setLevel(logging.INFO)
    try:
        _check_config(config, run_dir)
        state = _read_state(run_dir)
        if state is None:
            state = _initialise(config, run_dir)
        bar = runs.progress(progress, total=config.generations, initial=state["generation"] - 1, unit="gen",
                            desc="loop")
        while state["generation"] <= config.generations:
            phase = state["phase"]
            log.info("generation %d: %s", state["generation"], phase)
            state = _PHASE_STEPS[phase](config, run_dir, state, runner)
            _write_state(run_dir, state)
            if phase == "record":
                bar.update(1)
        bar.close()
        return state
    finally:
        package_log.removeHandler(handler)
        package_log.setLevel(level)
        handler.close()


def _initialise(config: LoopConfig, run_dir: Path) -> dict:
    """Generation 0: the initial network becomes the best."""
    gen0 = _gen_dir(run_dir, 0)
    gen0.mkdir(parents=True, exist_ok=True)
    init = Path(config.init)
    if init.suffix == ".pt":
        ckpt = checkpoint_lib.load(init)
        _copy(init, gen0 / train.CHECKPOINT)
        export_onnx.export_checkpoint(gen0 / train.CHECKPOINT, gen0 / train.ONNX)
    else:  # the network itself stays the best; its imported checkpoint is where the first candidate starts
        ckpt = import_onnx.import_onnx(init, seed=config.seed)
        checkpoint_lib.save(ckpt, gen0 / train.CHECKPOINT)
        _copy(init, gen0 / train.ONNX)
    _copy(gen0 / train.CHECKPOINT, run_dir / BEST_CHECKPOINT)
    _copy(gen0 / train.ONNX, run_dir / BEST_ONNX)
    state = {"generation": 1, "phase": "selfplay", "best_generation": 0, "best_elo": 0.0,
             "preset": ckpt.config.name}
    _write_state(run_dir, state)
    return state


def _selfplay(config: LoopConfig, run_dir: Path, state: dict, runner: Runner) -> dict:
    generation = state["generation"]
    folder = _gen_dir(run_dir, generation) / "selfplay"
    network = play_network(config, run_dir, run_dir / BEST_ONNX, generation)
    jobs, left = [], config.games_per_generation
    while left > 0:
        games = min(config.batch_games, left)
        jobs.append(SelfPlayJob(str(network), games, config.selfplay_config(generation, len(jobs)),
                                str(folder / f"batch-{len(jobs):03d}"), config.engine()))
        left -= games
    reports = runner.selfplay(jobs)
    log.info("generation %d self-play: %d games, %d samples, %.0f games/h and %.0f evaluations/s per process",
             generation, sum(r["games"] for r in reports), sum(r["samples"] for r in reports),
             3600 * sum(r["games"] for r in reports) / max(sum(r["seconds"] for r in reports), 1e-9),
             sum(r["evaluations"] for r in reports) / max(sum(r["seconds"] for r in reports), 1e-9))
    return {**state, "phase": "train"}


def _train(config: LoopConfig, run_dir: Path, state: dict, runner: Runner) -> dict:
    generation = state["generation"]
    if config.anchor:
        _write_anchor(config, run_dir, generation)
    summary = runner.train(train_config(config, run_dir, generation, state["preset"]),
                           str(_gen_dir(run_dir, generation) / "train"))
    log.info("generation %d candidate trained: %s", generation, summary["validation"])
    return {**state, "phase": "gate"}


def _write_anchor(config: LoopConfig, run_dir: Path, generation: int) -> None:
    """The generation's draw of expert games (gen-NNNN/anchor/); a draw cut short is drawn again."""
    folder = _gen_dir(run_dir, generation) / ANCHOR
    if (folder / dataset.SIDECAR).exists():
        return
    shutil.rmtree(folder, ignore_errors=True)
    sidecar = dataset.write_sample(config.anchor, folder, config.anchor_samples, _seed(config.seed, generation, 1))
    log.info("generation %d: %d samples of %d expert games from %s mixed in", generation,
             sidecar["samples"]["train"], sidecar["games"]["train"], config.anchor)


def training_window(config: LoopConfig, run_dir: Path, generation: int) -> tuple[str, ...]:
    """The shard folders of the generation's candidate: the window's self-play and the generation's anchor draw."""
    window = [str(batch) for g in range(max(1, generation - config.window_generations + 1), generation + 1)
              for batch in _batches(run_dir, g)]
    if not window:
        raise ValueError(f"no shard folders: generation {generation}'s window of {config.window_generations} "
                         f"generations holds no finished self-play")
    if config.anchor:
        window.append(str(_gen_dir(run_dir, generation) / ANCHOR))
    return tuple(window)


def train_config(config: LoopConfig, run_dir: Path, generation: int, preset: str) -> train.TrainConfig:
    """The candidate's training: on the training window, from the previous candidate's weights."""
    previous = _gen_dir(run_dir, generation - 1) / ("train" if generation > 1 else "") / train.CHECKPOINT
    return dataclasses.replace(
        config.train, data=training_window(config, run_dir, generation), preset=config.preset or preset,
        eval_every=min(config.train.steps, TRAIN_CHECKPOINT_STEPS), seed=_seed(config.seed, generation, 0),
        init_from=str(previous) if previous.exists() else "")


def _gate(config: LoopConfig, run_dir: Path, state: dict, runner: Runner) -> dict:
    generation = state["generation"]
    if not config.gated:
        return {**state, "phase": "promote"}
    folder = _gen_dir(run_dir, generation)
    network = candidate(config, run_dir, generation) / train.ONNX
    played = play_network(config, run_dir, network, generation)
    best = play_network(config, run_dir, run_dir / BEST_ONNX, generation)
    if played.name.endswith(quantize.INT8_SUFFIX) != best.name.endswith(quantize.INT8_SUFFIX):
        played, best = network, run_dir / BEST_ONNX  # both in one precision: a fair match
    runner.gate(GateJob(str(played), str(best), config.gate_config(generation), str(folder / "gate"),
                        config.engine()))
    return {**state, "phase": "promote"}


def candidate(config: LoopConfig, run_dir: Path, generation: int) -> Path:
    """The folder of the generation's candidate (checkpoint.pt, model.onnx): its training's, or with
    average_generations > 1 the average of the last candidates' trained weights, made here the first time."""
    folder = _gen_dir(run_dir, generation)
    if config.average_generations == 1:
        return folder / "train"
    averaged = folder / AVERAGE
    if not (averaged / train.ONNX).exists():  # the ONNX file is written last: a kill before it averages again
        first = max(1, generation - config.average_generations + 1)
        snapshots = [_gen_dir(run_dir, g) / "train" / train.CHECKPOINT for g in range(first, generation + 1)]
        ckpt = averaging.average_snapshots(snapshots, training_window(config, run_dir, generation),
                                           batch_size=config.train.batch_size,
                                           seed=_seed(config.seed, generation, 2), device=config.train.device)
        averaged.mkdir(exist_ok=True)
        checkpoint_lib.save(ckpt, averaged / train.CHECKPOINT)
        export_onnx.export_checkpoint(averaged / train.CHECKPOINT, averaged / train.ONNX)
        log.info("generation %d: the candidate is the average of generations %d to %d", generation, first,
                 generation)
    return averaged


def play_network(config: LoopConfig, run_dir: Path, network: Path, generation: int) -> Path:
    """The file self-play and the gate run for `network` at config.precision (see the module docstring)."""
    if config.precision == "fp32":
        return network
    int8 = quantize.default_out(network)
    if int8.exists():
        return int8
    games = [_gen_dir(run_dir, g) / "selfplay" for g in (generation, generation - 1)
             if g >= 1 and _batches(run_dir, g)]
    if not games:
        log.info("%s plays in fp32: no self-play games yet to calibrate its int8 version on", network)
        return network
    calibration = quantize.game_positions(games[0], config.size, CALIBRATION_POSITIONS, held_out=False,
                                          seed=config.seed)
    held_out = quantize.game_positions(games[0], config.size, CALIBRATION_POSITIONS, held_out=True,
                                       seed=config.seed + 1)
    for fp32_convs in INT8_FP32_CONVS:
        try:
            quantize.quantize(network, int8, calibration, held_out, fp32_convs=fp32_convs,
                              calibration_name=f"self-play of {games[0].parent.name}")
            return int8
        except quantize.QuantizeError as error:
            failure = error
    log.warning("%s plays in fp32 (int8 tried with %s leading block convolutions in fp32): %s", network,
                "/".join(map(str, INT8_FP32_CONVS)), failure)
    return network


def _promote(config: LoopConfig, run_dir: Path, state: dict, runner: Runner) -> dict:
    generation = state["generation"]
    folder = _gen_dir(run_dir, generation)
    result = gating.read_result(folder / "gate") if config.gated else None
    if result is not None and not result.promoted:
        log.info("generation %d not promoted: %s", generation, result.describe())
        return {**state, "phase": "gnugo", "promoted": False}
    promoted = candidate(config, run_dir, generation)
    _copy(promoted / train.CHECKPOINT, run_dir / BEST_CHECKPOINT)
    for target in [run_dir / BEST_ONNX] + ([Path(config.promote_to)] if config.promote_to else []):
        _copy_network(promoted / train.ONNX, target)
    best_elo = state["best_elo"] + (_finite_elo(result) if result else 0.0)
    log.info("generation %d promoted %s", generation,
             f"(cumulative Elo {best_elo:+.0f}): {result.describe()}" if result else "(no gate)")
    return {**state, "phase": "gnugo", "promoted": True, "best_generation": generation, "best_elo": best_elo,
            "previous_best_elo": state["best_elo"]}


def _gnugo(config: LoopConfig, run_dir: Path, state: dict, runner: Runner) -> dict:
    generation = state["generation"]
    folder = _gen_dir(run_dir, generation) / "gnugo"
    if config.gnugo_every and generation % config.gnugo_every == 0 and not (folder / "result.json").exists():
        result = match_gnugo(play_network(config, run_dir, run_dir / BEST_ONNX, generation), config, folder)
        log.info("generation %d: the best (generation %d) against GNU Go level %d: score %.3f, Elo %+.0f",
                 generation, state["best_generation"], config.gnugo_level, result["score"], result["elo"])
    return {**state, "phase": "record"}


def match_gnugo(network: Path, config: LoopConfig, folder: Path) -> dict:
    """The network (the engine at the gate's visits) against GNU Go at gnugo_level (match.py: GNU Go referee,
    area counting); writes and returns {"games", "wins", "draws", "losses", "score", "elo", "elo_low",
    "elo_high"}."""
    shutil.rmtree(folder, ignore_errors=True)  # a match cut short is played again
    folder.mkdir(parents=True)
    engine = (f"{shlex.quote(sys.executable)} -m gtp_engine --weights {shlex.quote(str(network))} "
              f"--device {config.device} --visits {config.gate.visits}")
    try:
        _, _, games = match.play_match(engine, f"gnugo --mode gtp --level {config.gnugo_level}", config.gnugo_games,
                                       config.size, config.komi, sgf_dir=folder / "sgf")
    except match.GtpError as error:
        raise RuntimeError(f"the match against GNU Go failed: {error}") from None
    results = [game.score_for_a for game in games]
    elo, elo_low, elo_high = match_stats.elo_interval(results)
    summary = {"games": len(results), "wins": results.count(1.0), "draws": results.count(0.5),
               "losses": results.count(0.0), "score": match_stats.score(results), "elo": elo, "elo_low": elo_low,
               "elo_high": elo_high}
    with replacing(folder / "result.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=1))
    return summary


def _record(config: LoopConfig, run_dir: Path, state: dict, runner: Runner) -> dict:
    generation = state["generation"]
    folder = _gen_dir(run_dir, generation)
    reports = [json.loads((batch / selfplay.REPORT).read_text()) for batch in _batches(run_dir, generation)]
    gate = gating.read_result(folder / "gate") if config.gated else None
    metrics = train.read_metrics(folder / "train" / train.METRICS)[-1]
    seconds = sum(r["seconds"] for r in reports)
    before = state.get("previous_best_elo", state["best_elo"]) if state["promoted"] else state["best_elo"]
    summary = {
        "generation": generation,
        "games": sum(r["games"] for r in reports),
        "samples": sum(r["samples"] for r in reports),
        **dict(zip(("full_visits", "fast_visits"), config.visits(generation))),
        "selfplay_seconds": round(seconds, 1),
        "games_per_hour": round(3600 * sum(r["games"] for r in reports) / max(seconds, 1e-9), 1),
        "evaluations_per_second": round(sum(r["evaluations"] for r in reports) / max(seconds, 1e-9), 1),
        "train_samples": int(metrics["samples"]),
        "train_steps": int(metrics["step"]),
        "train_loss": metrics["train_loss"],
        "val_policy_loss": metrics["val_policy_loss"],
        "val_value_loss": metrics["val_value_loss"],
        "val_policy_top1": metrics["val_policy_top1"],
        **_gate_columns(gate),
        "promoted": state["promoted"],
        "best_generation": state["best_generation"],
        "best_elo": state["best_elo"] if gate else None,
        "candidate_elo": before + _finite_elo(gate) if gate else None,
        **_gnugo_columns(folder / "gnugo" / "result.json"),
        "seconds": round(seconds + metrics["seconds"] + (gate.seconds if gate else 0.0), 1),
    }
    with replacing(folder / SUMMARY) as tmp:
        tmp.write_text(json.dumps(summary, indent=1))
    _write_metrics(run_dir)
    plot_strength(run_dir / METRICS, run_dir / PLOT)
    log.info("generation %d recorded: %d games, %d samples, %s, best generation %d", generation, summary["games"],
             summary["samples"], f"gate {gate.score:.3f}, Elo {state['best_elo']:+.0f}" if gate else "no gate",
             state["best_generation"])
    state = {k: v for k, v in state.items() if k not in ("promoted", "previous_best_elo")}
    return {**state, "generation": generation + 1, "phase": "selfplay"}


_PHASE_STEPS = {"selfplay": _selfplay, "train": _train, "gate": _gate, "promote": _promote, "gnugo": _gnugo,
                "record": _record}


# ---- metrics and plot -----------------------------------------------------------------------------------


def read_metrics(path: str | Path) -> list[dict]:
    with Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


def _write_metrics(run_dir: Path) -> None:
    """metrics.csv from every recorded generation's summary (so it never holds a row twice)."""
    rows = [json.loads(p.read_text()) for p in sorted(run_dir.glob(f"gen-*/{SUMMARY}"))]
    with replacing(run_dir / METRICS) as tmp, tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else "" if v is None else v)
                             for k, v in row.items() if k in COLUMNS})


def plot_strength(metrics_path: str | Path, png_path: str | Path) -> None:
    """Strength per generation: the best's cumulative Elo, and each candidate's with its gate's 95% interval."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # no pyplot: no global backend state
    from matplotlib.figure import Figure

    every = read_metrics(metrics_path)
    rows = [r for r in every if r["gate_games"]]  # an ungated generation has no Elo
    generations = [0] + [int(r["generation"]) for r in rows]
    best = [0.0] + [float(r["best_elo"]) for r in rows]
    against_gnugo = [r for r in every if r.get("gnugo_score")]
    figure = Figure(figsize=(9, 8 if against_gnugo else 5), dpi=80)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(2 if against_gnugo else 1, 1, 1)
    axes.step(generations, best, where="post", label="best network (cumulative gate Elo)")
    for r in rows:
        low = float(r["gate_elo_low"]) if r["gate_elo_low"] else -400.0
        high = float(r["gate_elo_high"]) if r["gate_elo_high"] else 400.0
        colour = "tab:green" if r["promoted"] == "True" else "tab:red"
        axes.errorbar([int(r["generation"])], [float(r["candidate_elo"])],
                      yerr=[[float(r["gate_elo"]) - low], [high - float(r["gate_elo"])]], fmt="o", color=colour,
                      capsize=3)
    axes.plot([], [], "o", color="tab:green", label="candidate, promoted (95% interval)")
    axes.plot([], [], "o", color="tab:red", label="candidate, not promoted")
    axes.set_xlabel("generation")
    axes.set_ylabel("Elo relative to generation 0")
    axes.set_title("strength per generation (gate matches)")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left")
    if against_gnugo:
        axes = figure.add_subplot(2, 1, 2)
        axes.plot([int(r["generation"]) for r in against_gnugo], [float(r["gnugo_score"]) for r in against_gnugo],
                  "o-")
        axes.set_xlabel("generation")
        axes.set_ylabel("score")
        axes.set_ylim(0, 1)
        axes.set_title("the best network against GNU Go")
        axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(str(png_path))


# ---- helpers --------------------------------------------------------------------------------------------


def _gate_columns(gate: gating.GateResult | None) -> dict:
    if gate is None:
        return {}
    return {"gate_games": gate.games, "gate_score": gate.score, "gate_score_low": gate.score_low,
            "gate_score_high": gate.score_high, "gate_elo": _finite_elo(gate),
            "gate_elo_low": gate.elo_low if math.isfinite(gate.elo_low) else None,
            "gate_elo_high": gate.elo_high if math.isfinite(gate.elo_high) else None, "gate_llr": gate.llr}


def _gnugo_columns(path: Path) -> dict:
    if not path.exists():
        return {}
    result = json.loads(path.read_text())
    return {f"gnugo_{key}": (value if math.isfinite(value) else None) for key, value in result.items()
            if key in ("games", "score", "elo", "elo_low", "elo_high")}


def _finite_elo(result: gating.GateResult) -> float:
    """The gate's Elo estimate, with a score of 0 or 1 moved half a game inwards."""
    if result.games == 0:
        return 0.0
    half = 0.5 / result.games
    return match_stats.elo(min(1 - half, max(half, result.score)))


def _seed(seed: int, generation: int, part: int) -> int:
    return seed * 1_000_003 + generation * 1_009 + part


def _gen_dir(run_dir: Path, generation: int) -> Path:
    return run_dir / f"gen-{generation:04d}"


def _batches(run_dir: Path, generation: int) -> list[Path]:
    """The complete self-play shard folders of a generation."""
    return sorted(p.parent for p in (_gen_dir(run_dir, generation) / "selfplay").glob(f"batch-*/{selfplay.REPORT}"))


def _copy_network(source: Path, target: Path) -> None:
    """Copies a network and its int8 sibling, or removes the target's int8 sibling when the source has none (the
    engine would play it in place of the new network)."""
    source_int8, target_int8 = quantize.default_out(source), quantize.default_out(target)
    if source_int8.exists():
        _copy(source_int8, target_int8)
    else:
        target_int8.unlink(missing_ok=True)
    _copy(source, target)


def _copy(source: Path, target: Path) -> None:
    with replacing(target, suffix=target.suffix + ".tmp") as tmp:
        shutil.copyfile(source, tmp)


def _check_config(config: LoopConfig, run_dir: Path) -> None:
    """Writes loop.json for a new run; refuses a rerun with other settings (RESUMABLE_CHANGES excepted)."""
    path = run_dir / CONFIG
    if path.exists():
        current = runs.flatten(config.to_dict())
        # A setting newer than the run was at its default there; an earlier name stands for its nested setting.
        written = {EARLIER_NAMES.get(k, k): v for k, v in runs.flatten(json.loads(path.read_text())).items()}
        saved = {**runs.flatten(LoopConfig(init=config.init).to_dict()), **written}
        derived = {f"{section}.{name}" for section, names in LOOP_SETS.items() for name in names}
        changed = [k for k, v in current.items() if k not in RESUMABLE_CHANGES + tuple(derived) and saved.get(k) != v]
        if changed:
            raise ValueError(f"{run_dir} is a loop run with other settings ({', '.join(changed)}); use the same "
                             f"ones (see {path}) or another folder")
    with replacing(path) as tmp:
        tmp.write_text(json.dumps(config.to_dict(), indent=1, sort_keys=True))


def _read_state(run_dir: Path) -> dict | None:
    path = run_dir / STATE
    return json.loads(path.read_text()) if path.exists() else None


def _write_state(run_dir: Path, state: dict) -> None:
    with replacing(run_dir / STATE) as tmp:
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
