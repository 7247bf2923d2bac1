"""Runs: the scaffold every resumable training run stands on (train, value-train, reinforce), and the stop,
progress and device helpers of every long training stage.

Terms:
- run folder: where one run keeps config.json (its config, rewritten at each start), checkpoint.pt (the latest,
  replaced atomically), metrics.csv (one row per evaluation or iteration) and, after the last step, model.onnx.
  Running the same command again resumes from the checkpoint; what the run adds beside these is its own.
- config key: the provenance entry of the checkpoint that holds the run's config ("train_config", ...); a
  checkpoint without it belongs to another kind of run.
- resumable change: a config field a resumed run may give another value (where the data lie, the device, how
  often to evaluate): it does not change what is computed. Any other changed field refuses the resumption, since
  the run would no longer be the one its checkpoint continues. A field newer than the checkpoint was at its
  default there.
- position: the metrics column that counts the run's progress (step, iteration). On resumption the rows past
  the checkpoint's position (written between a row and a crash before the save) are dropped.
- stop: SIGINT, SIGTERM (main thread only) or the deadline (max_minutes after the start) ask the loop to stop
  after the current step; the loop saves a checkpoint first. Signals are handled only while the StopFlag is
  entered; outside, they act as usual.
- device: a torch device name, or "auto": CUDA when there is one, else the CPU.
- compute dtype: what the forward pass computes in (COMPUTE_DTYPES): "float32"; "bfloat16", under autocast (no
  loss scaling needed; losses and the optimizer stay in float32); "auto", bfloat16 on CUDA, float32 on a CPU
  without bf16 instructions (bfloat16 is emulated there, and slower), and on a CPU whose oneDNN has them
  (AVX512-BF16 or AMX) whichever of the two a timed trial of the run's own training step finds faster
  (resolve_compute_dtype): bfloat16 made about twice the samples/s of float32 on a 2-core AMD EPYC (b6c64,
  19x19), and 0.6x on a 2-core Intel Xeon with AVX512-BF16 (b6c64, 9x9 and 19x19).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm import tqdm

from gtp_engine.training import metrics_csv
from gtp_engine.training.files import CHECKPOINT, METRICS, ONNX, replacing

log = logging.getLogger(__name__)

CONFIG = "config.json"


def device(name: str):
    """The torch device a run's device setting names ("auto": CUDA when available, else the CPU)."""
    import torch  # here, so that numpy-only stages (rollout-train) use this module without torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


COMPUTE_DTYPES = ("auto", "float32", "bfloat16")


def computes_bf16(device, compute_dtype: str) -> bool:
    """Whether a run on `device` with this compute dtype setting computes its forward pass in bfloat16."""
    import torch

    if compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(f"compute dtype must be one of {COMPUTE_DTYPES}, not {compute_dtype!r}")
    if compute_dtype != "auto":
        return compute_dtype == "bfloat16"
    return device.type == "cuda" or (device.type == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported())


_RESOLVED: dict[tuple, str] = {}  # resolve_compute_dtype's timed choices, for this process
TRIAL_STEPS = 3  # timed steps per dtype (after one untimed) when "auto" has to be measured


def resolve_compute_dtype(device, compute_dtype: str, key: tuple, trial: Callable[[str], None],
                          clock: Callable[[], float] = time.perf_counter) -> str:
    """"float32" or "bfloat16": what a run with this setting computes in (see compute dtype). trial(dtype) runs
    one training step in that dtype without changing the run; it is timed only when "auto" meets a CPU with bf16
    instructions, once per process and key (what the step's speed depends on: the network and batch shape)."""
    if compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(f"compute dtype must be one of {COMPUTE_DTYPES}, not {compute_dtype!r}")
    if compute_dtype != "auto":
        return compute_dtype
    if not computes_bf16(device, "auto"):
        return "float32"
    if device.type != "cpu":
        return "bfloat16"
    if key not in _RESOLVED:
        seconds = {}
        for dtype in ("float32", "bfloat16"):
            trial(dtype)  # first-call allocations and oneDNN's kernel choice
            start = clock()
            for _ in range(TRIAL_STEPS):
                trial(dtype)
            seconds[dtype] = clock() - start
        _RESOLVED[key] = min(seconds, key=seconds.get)
        log.info("compute dtype auto on this CPU: a training step takes %.0f ms in float32 and %.0f ms in "
                 "bfloat16; %s", 1000 * seconds["float32"] / TRIAL_STEPS, 1000 * seconds["bfloat16"] / TRIAL_STEPS,
                 _RESOLVED[key])
    return _RESOLVED[key]


def autocast(device, compute_dtype: str):
    """The context the forward pass runs in (see compute dtype): a resolved dtype, or "auto" taken as bfloat16
    wherever the device has it (computes_bf16), for callers that time nothing (benchmarks)."""
    import torch

    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=computes_bf16(device, compute_dtype))


def progress(enabled: bool = True, **bar: Any) -> tqdm:
    """A progress bar on stderr (stdout stays for results), refreshed at most once a second; `bar`: tqdm's
    arguments (total, initial, unit, desc, ...)."""
    return tqdm(file=sys.stderr, disable=not enabled, mininterval=1.0, dynamic_ncols=True, **bar)


class StopFlag:
    """Asks a loop to stop: .stopped after SIGINT/SIGTERM (while entered) or once max_minutes have passed.

    clock: seconds, monotonic (injectable for tests)."""

    def __init__(self, max_minutes: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.deadline = clock() + 60.0 * max_minutes if max_minutes is not None else math.inf
        self.signalled = False
        self._previous: dict = {}

    @property
    def stopped(self) -> bool:
        return self.signalled or self.clock() >= self.deadline

    def _handle(self, signum, frame) -> None:
        log.warning("signal %d: stopping after this step (with a checkpoint)", signum)
        self.signalled = True

    def __enter__(self) -> StopFlag:
        with contextlib.suppress(ValueError):  # not the main thread: signals stay as they are
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


class RunFolder:
    """One resumable run's folder (see the module docstring).

    config: the run's frozen config dataclass (to_dict() when it has one, else dataclasses.asdict);
    resumable: its fields a resumption may change; columns, position: the metrics file's header and position
    column."""

    def __init__(self, path: str | Path, config: Any, config_key: str, resumable: Sequence[str],
                 columns: Sequence[str], position: str):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.config, self.config_key, self.resumable = config, config_key, tuple(resumable)
        self.columns, self.position = tuple(columns), position

    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def onnx(self) -> Path:
        return self.path / ONNX

    def config_dict(self) -> dict:
        to_dict = getattr(self.config, "to_dict", None)
        return to_dict() if to_dict else dataclasses.asdict(self.config)

    def load(self, with_optimizer: bool = True):
        """The run's checkpoint (checkpoint.Checkpoint), checked to be this run's; None for a new run."""
        from gtp_engine.training import checkpoint as checkpoint_lib

        if not self.checkpoint.exists():
            return None
        ckpt = checkpoint_lib.load(self.checkpoint, with_optimizer=with_optimizer)
        saved = ckpt.provenance.get(self.config_key)
        if saved is None:
            raise ValueError(f"{self.checkpoint} is not the checkpoint of this kind of run (no {self.config_key}); "
                             f"use another run folder")
        defaults = {f.name: f.default for f in dataclasses.fields(self.config)}
        changed = [key for key, value in self.config_dict().items()
                   if key not in self.resumable and saved.get(key, defaults.get(key)) != value]
        if changed:
            raise ValueError(f"{self.checkpoint} was trained with other settings ({', '.join(changed)}); "
                             f"use the same ones or another run folder")
        return ckpt

    def resumed_at(self, position: int) -> None:
        """Drops the metrics rows past the checkpoint's position, and says where the run resumes."""
        metrics_csv.truncate(self.metrics, self.columns, self.position, position)
        log.info("resuming %s at %s %d", self.checkpoint, self.position, position)

    def write_config(self, **extra: Any) -> None:
        with replacing(self.path / CONFIG) as tmp:
            tmp.write_text(json.dumps({**self.config_dict(), **extra}, indent=1, sort_keys=True))

    def save(self, ckpt) -> None:
        from gtp_engine.training import checkpoint as checkpoint_lib

        checkpoint_lib.save(ckpt, self.checkpoint)

    def append(self, row: dict) -> None:
        metrics_csv.append(self.metrics, self.columns, row)

    def finish(self, finished: bool, export: bool, **summary: Any) -> dict:
        """After a session: exports model.onnx from the saved checkpoint when the run is finished and `export`;
        returns summary with "finished", "checkpoint" and "onnx" (the path, or None)."""
        onnx = None
        if finished and export:
            from gtp_engine.training import export_onnx

            export_onnx.export_checkpoint(self.checkpoint, self.onnx)  # exactly what was saved
            onnx = str(self.onnx)
        return {**summary, "finished": finished, "checkpoint": str(self.checkpoint), "onnx": onnx}


def flatten(values: dict, separator: str = ".", prefix: str = "") -> dict:
    """Nested settings as one level, the keys joined by separator: {"train": {"lr": 1}} gives {"train.lr": 1}."""
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(flatten(value, separator, f"{prefix}{key}{separator}"))
        else:
            flat[prefix + key] = value
    return flat
