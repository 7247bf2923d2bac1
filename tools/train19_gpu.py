"""The 19x19 GPU recipe: ingest go19_curated on the device's cores, train in chunks that each fit one device command,
carry the checkpoint back between commands (and between machines), export ONNX at the end. Runs the same on a CPU.

Terms:
- call: one command on the device machine (10 minutes at most); it runs `step` once. Calls are chained so the
  machine stays warm (it is given back after 30 s idle), and a fresh machine only costs a new ingest.
- work folder: where a call keeps the unpacked archive (sgf/part-NN/), the shards (shards/part-NN/, one folder a
  part) and the run folder (run/) (--work, runs/gpu19 by default; runs/ is ignored by git, so it stays on a warm
  machine between calls and is rebuilt on a fresh one).
- part: every --ingest-parts'th record of the archive in name order, ingested on its own, so that a call cut short
  keeps the parts it finished; train.py reads the parts' shard folders as one data set.
- carry folder: what a call wrote to --out, copied back by the caller and carried into the next call (--carry,
  .ckpt19 by default): the checkpoint in parts of at most PART_BYTES (the device returns files of 16 MiB at most),
  MANIFEST naming the parts with their SHA-256 and the step, and the run's metrics.csv.
- recipe: the training settings (RECIPE and the command line), which must be the same in every call: train.py
  refuses to resume a run with other settings. The step count follows from --epochs and the shards' size, so it
  is the same on every machine that ingests the same archive (ingest is deterministic).
- budget: --command-seconds less what this call has spent since main() began (ingest, loading) and --margin for
  the interpreter's start-up, saving, splitting and sending the checkpoint back; training stops there and saves
  (train.py's max_minutes).
- fit (--fit): a new run's step count chosen in its first call from a probe (15 timed training steps of the preset
  on this device) so that the whole run, warm-up to the end of the cosine decay, fits that call's budget; a device
  lent for minutes gets a finished network rather than a long run cut off at a high learning rate.
- resumption: train.py's: weights, optimizer state, step, learning-rate schedule and batch stream are all functions
  of the checkpoint's step, so chunks of any length give the run an uninterrupted one would.

Usage (from the repository root; docs/gpu-runs.md gives the GPU calls):
  python -m tools.train19_gpu step --archive .data19/go19_curated.tar.xz --out $OUT --fit
  python -m tools.train19_gpu bench --presets b6c64 b10c128 --batch-size 256
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path

import torch

from gtp_engine import sgf_io
from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import dataset, export_onnx, runs, sgf_ingest, train
from gtp_engine.training import model as model_lib
from gtp_engine.training.files import CHECKPOINT, METRICS, replacing

log = logging.getLogger("train19_gpu")

MANIFEST = "manifest.json"
SPLIT_DONE = "split-done"
PART_BYTES = 15 * 2**20  # under the device's 16 MiB a returned file
MAX_PARTS = 5  # with the manifest, metrics.csv and model.onnx: the device returns 8 files at most
# The recipe's settings: b10c128, the first candidate; batch 2048 under bf16 autocast (train.py turns it on
# with CUDA); AdamW with the learning rate scaled from the shipped b6c64 run's 2e-3 at batch 128 (sqrt rule, capped).
RECIPE = {
    "preset": "b10c128",
    "batch_size": 2048,
    "epochs": 2.0,
    "lr": 4e-3,
    "warmup_steps": 500,
    "weight_decay": 1e-4,
    "eval_every": 1000,
    "val_samples": 65_536,
    "window_samples": 4_000_000,
}


class RecipeError(Exception):
    """A carry folder or work folder that cannot be used; the message says which and why."""


# ---- data -----------------------------------------------------------------------------------------------------

def split_archive(archive: Path, folder: Path, parts: int) -> list[Path]:
    """The archive's SGF records unpacked into `parts` folders (record i of the sorted names into part i % parts),
    once: a finished split is marked by SPLIT_DONE and kept."""
    done = folder / SPLIT_DONE
    names = [folder / f"part-{k:02d}" for k in range(parts)]
    if done.exists() and done.read_text() == f"{archive.name} {parts}":
        return names
    if not archive.exists():
        raise RecipeError(f"{archive}: no such archive (carry it into the call, e.g. .data19/go19_curated.tar.xz)")
    shutil.rmtree(folder, ignore_errors=True)
    records = sorted(sgf_io.read_sgf_files(archive))
    for number, (name, data) in enumerate(records):
        path = names[number % parts] / Path(name).relative_to(Path(name).anchor)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    done.write_text(f"{archive.name} {parts}")
    return names


def ensure_shards(archive: Path, work: Path, config: sgf_ingest.IngestConfig, parts: int,
                  deadline: float = math.inf) -> list[Path] | None:
    """The shard folders of the archive's parts, ingesting the parts that have no finished shards under `config` (a
    killed ingest leaves no sidecar, which is written last); None when the deadline comes before the last part is
    done (the next call goes on from there). A part is not started unless it should end, at the pace of the last
    one, in time."""
    sources = split_archive(archive, work / "sgf", parts)
    folders, pace = [], None
    for source in sources:
        folder = work / "shards" / source.name
        folders.append(folder)
        try:
            if _same_ingest(dataset.read_sidecar(folder).get("config", {}), config):
                continue
        except dataset.DatasetError:
            pass
        if pace is not None and time.monotonic() + 1.2 * pace > deadline:
            return None
        shutil.rmtree(folder, ignore_errors=True)
        started = time.monotonic()
        sidecar = sgf_ingest.ingest([source], folder, config, progress=False)
        pace = time.monotonic() - started
        samples = sidecar["samples"]["train"] + sidecar["samples"]["val"]
        log.warning("ingest %s: %d games, %d samples (%d val) in %.0f s on %d workers: %.0f samples/s, %.1f MB",
                    source.name, sidecar["counts"]["games"], samples, sidecar["samples"]["val"], pace, config.workers,
                    samples / max(pace, 1e-9), sidecar["bytes"] / 1e6)
        if config.relabel_share:
            log.warning("ingest %s: games by setup %s", source.name, sidecar["counts"]["setups"])
    return folders


def _same_ingest(written: dict, config: sgf_ingest.IngestConfig) -> bool:
    """Whether a shard folder's sidecar config is `config`'s, the number of worker processes aside (a setting the
    sidecar lacks was written before it existed, and so with its default)."""
    wanted, defaults = dataclasses.asdict(config), dataclasses.asdict(sgf_ingest.IngestConfig())
    return all(written.get(key, defaults[key]) == value for key, value in wanted.items() if key != "workers")


def ingest_config(args: argparse.Namespace) -> sgf_ingest.IngestConfig:
    return sgf_ingest.IngestConfig(
        size=args.size, val_fraction=args.val_fraction, workers=args.workers or os.cpu_count(),
        relabel_share=args.relabel_share, relabel_rules=args.relabel_rules,
        relabel_komi_stdev=args.relabel_komi_stdev, ownership_playouts=args.ownership_playouts)


# ---- carrying the checkpoint ----------------------------------------------------------------------------------

def write_carry(run_dir: Path, out: Path) -> dict:
    """The run's checkpoint in parts, MANIFEST and metrics.csv into out; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    data = (run_dir / CHECKPOINT).read_bytes()
    parts = math.ceil(len(data) / PART_BYTES) or 1
    if parts > MAX_PARTS:
        raise RecipeError(f"{run_dir / CHECKPOINT}: {len(data) / 2**20:.0f} MiB needs {parts} parts; the device "
                          f"returns {MAX_PARTS} beside the other files")
    names = []
    for number in range(parts):
        name = f"{CHECKPOINT}.{number:03d}"
        (out / name).write_bytes(data[number * PART_BYTES:(number + 1) * PART_BYTES])
        names.append(name)
    provenance = checkpoint_lib.load(run_dir / CHECKPOINT).provenance
    manifest = {"parts": names, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "steps": int(provenance["steps"]), "train_config": provenance["train_config"],
                "validation": provenance.get("validation", {})}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    if (run_dir / METRICS).exists():
        shutil.copyfile(run_dir / METRICS, out / METRICS)
    return manifest


def read_carry(carry: Path) -> dict | None:
    """The carry folder's manifest, None when the folder holds none (a first call)."""
    path = carry / MANIFEST
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise RecipeError(f"{path}: not a readable manifest ({e})") from None


def restore(carry: Path, run_dir: Path) -> int:
    """Puts the carried checkpoint into run_dir unless run_dir already holds it or a later one (a warm machine);
    returns the step the run continues from (0 for a new run)."""
    manifest = read_carry(carry)
    local = run_dir / CHECKPOINT
    local_steps = int(checkpoint_lib.load(local).provenance.get("steps", 0)) if local.exists() else -1
    if manifest is None or manifest["steps"] <= local_steps:
        return max(local_steps, 0)
    data = b"".join((carry / name).read_bytes() for name in manifest["parts"])
    if len(data) != manifest["bytes"] or hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise RecipeError(f"{carry}: the checkpoint parts do not match {MANIFEST} (a part missing or cut short "
                          f"in transfer); copy every file the last call returned")
    run_dir.mkdir(parents=True, exist_ok=True)
    with replacing(local) as tmp:
        tmp.write_bytes(data)
    if (carry / METRICS).exists():
        shutil.copyfile(carry / METRICS, run_dir / METRICS)
    return int(manifest["steps"])


# ---- the call -------------------------------------------------------------------------------------------------

def train_config(args: argparse.Namespace, folders: list[Path], steps: int) -> train.TrainConfig:
    return train.TrainConfig(
        data=tuple(str(folder) for folder in folders), preset=args.preset, batch_size=args.batch_size, steps=steps,
        lr=args.lr, warmup_steps=min(args.warmup_steps, max(1, steps // 10)), weight_decay=args.weight_decay,
        eval_every=args.eval_every, val_samples=args.val_samples, window_samples=args.window_samples,
        seed=args.seed, device=args.device, compile=args.compile, init_from=args.init_from or "")


def step(args: argparse.Namespace, started: float) -> dict:
    """One call: shards (ingested if missing), the checkpoint restored from the carry folder, training until the
    budget or the end, the checkpoint written to --out; model.onnx too when the run has finished."""
    work = Path(args.work)
    run_dir = work / "run"
    folders = ensure_shards(Path(args.archive), work, ingest_config(args), args.ingest_parts,
                            deadline=started + args.command_seconds - args.margin)
    if folders is None:
        report = {"ingest": "unfinished: run the same call again", "seconds": round(time.monotonic() - started)}
        print(json.dumps(report), flush=True)
        return report
    train_samples = sum(dataset.read_sidecar(folder)["samples"]["train"] for folder in folders)
    start_step = restore(Path(args.carry), run_dir)

    def budget_left() -> float:
        return args.command_seconds - (time.monotonic() - started) - args.margin

    steps = args.steps or math.ceil(args.epochs * train_samples / args.batch_size)
    probe = None
    if args.fit and (run_dir / CHECKPOINT).exists():
        steps = int(checkpoint_lib.load(run_dir / CHECKPOINT).provenance["train_config"]["steps"])
    elif args.fit:
        probe = probe_rate(args, folders)
        seconds = budget_left()
        steps = fitted_steps(probe["samples_per_s"], seconds, args.batch_size, steps)
        log.warning("fit: %.0f samples/s measured, %.0f s left: a run of %d steps (%.2f epochs)",
                    probe["samples_per_s"], seconds, steps, steps * args.batch_size / train_samples)
    config = train_config(args, folders, steps)
    seconds_left = budget_left()
    stop_at = start_step + args.max_steps if args.max_steps else None
    training_started = time.monotonic()
    if seconds_left > 0 and start_step < config.steps:
        summary = train.train(config, run_dir, max_minutes=seconds_left / 60, stop_at=stop_at, export=False,
                              progress=args.progress)
    else:
        summary = {"step": start_step, "finished": start_step >= config.steps, "validation": None}
    trained_seconds = time.monotonic() - training_started
    out = Path(args.out)
    if not (run_dir / CHECKPOINT).exists():
        raise RecipeError(f"{run_dir}: no checkpoint after this call (no time left to train: raise "
                          f"--command-seconds or lower --margin)")
    manifest = write_carry(run_dir, out)
    if args.export or (args.export is None and summary["finished"]):
        export_onnx.export_checkpoint(run_dir / CHECKPOINT, out / "model.onnx")
    done = summary["step"] - start_step
    report = {"step": summary["step"], "steps": config.steps, "finished": summary["finished"],
              "epoch": round(summary["step"] * config.batch_size / train_samples, 3),
              "steps_this_call": done, "samples_per_s": round(done * config.batch_size / max(trained_seconds, 1e-9)),
              "device": _device_name(config.device), "probe": probe, "validation": manifest["validation"],
              "onnx": (out / "model.onnx").exists(), "seconds": round(time.monotonic() - started)}
    print(json.dumps(report), flush=True)
    return report


# Of the training seconds a fitted run plans with, the share left for its steps: the rest pays for evaluations,
# checkpoints and the first step's kernel search, which the probe does not time.
FIT_SHARE = 0.9


def fitted_steps(samples_per_s: float, seconds: float, batch_size: int, most: int) -> int:
    """The step count of a new run that should end within `seconds` of training at `samples_per_s`, never more
    than `most` (what --steps or --epochs asks for) and at least one."""
    return max(1, min(most, int(samples_per_s * seconds * FIT_SHARE / batch_size)))


def probe_rate(args: argparse.Namespace, folders: list[Path], timed_steps: int = 15) -> dict:
    """The training samples/s of --preset at --batch-size on this device, timed on a throw-away network (the
    run's own starts after it, from its seed)."""
    shards = dataset.Shards(folders, "train")
    stream = shards.batches(args.batch_size, seed=0, window_samples=args.batch_size * (timed_steps + 4))
    batches = [next(stream) for _ in range(timed_steps + 2)]
    stream.close()
    row = time_training(args.preset, batches, shards, runs.device(args.device), args.compile)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return row


def time_training(preset: str, batches: list[dict], shards: dataset.Shards, device: torch.device,
                  compile_steps: bool) -> dict:
    """Samples/s (wall clock and per CPU second) of training steps of a fresh `preset` network on `batches`, the
    first two untimed (cudnn.benchmark picks its kernels, torch.compile compiles)."""
    torch.manual_seed(0)
    net = train.prepare(model_lib.build(preset), device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    step_net = train.compiled(net) if compile_steps else net
    config = train.TrainConfig(batch_size=len(batches[0]["move"]))  # the loss weights
    warm_up_started = time.perf_counter()
    for number, batch in enumerate(batches):
        if number == 2:
            _synchronize(device)
            started, cpu_started = time.perf_counter(), time.process_time()
        outputs, targets = train.forward(step_net, batch, shards.height, shards.width, device, config.compute_dtype)
        loss = train.losses(outputs, targets, config)["loss"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    _synchronize(device)
    timed = (len(batches) - 2) * config.batch_size
    # Per CPU second of this process too: on a shared machine the wall-clock rate says more about the others.
    return {"preset": preset, "samples_per_s": round(timed / (time.perf_counter() - started), 1),
            "samples_per_cpu_s": round(timed / max(time.process_time() - cpu_started, 1e-9), 1),
            "parameters": sum(p.numel() for p in net.parameters()), "compile": compile_steps,
            "warm_up_seconds": round(started - warm_up_started, 1)}


def _device_name(device: str) -> str:
    if device in ("auto", "cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"cpu ({torch.get_num_threads()} threads)"


# ---- throughput -----------------------------------------------------------------------------------------------

def bench(args: argparse.Namespace) -> list[dict]:
    """Training samples/s of each preset on the shards (the first preset is the reference), and how fast the
    batch stream alone runs, which must stay ahead of the device for the data loading to keep it fed."""
    work = Path(args.work)
    folders = ensure_shards(Path(args.archive), work, ingest_config(args), args.ingest_parts)
    shards = dataset.Shards(folders, "train")
    stream = shards.batches(args.batch_size, seed=0)
    next(stream)  # the first window's loading is not the steady rate
    started = time.perf_counter()
    for _ in range(args.bench_steps):
        next(stream)
    stream_rate = args.bench_steps * args.batch_size / (time.perf_counter() - started)
    device = runs.device(args.device)
    rows = [time_training(preset, [next(stream) for _ in range(args.bench_steps + 2)], shards, device, args.compile)
            for preset in args.presets]
    reference = rows[0]["samples_per_s"]
    cpu_reference = rows[0]["samples_per_cpu_s"]
    for row in rows:
        row["ratio_to_" + rows[0]["preset"]] = round(row["samples_per_s"] / reference, 3)
        row["cpu_ratio_to_" + rows[0]["preset"]] = round(row["samples_per_cpu_s"] / cpu_reference, 3)
        print(json.dumps({**row, "device": _device_name(args.device), "batch_size": args.batch_size,
                          "batch_stream_samples_per_s": round(stream_rate),
                          "train_samples": shards.samples}), flush=True)
    return rows


def _synchronize(device: torch.device) -> None:
    """Waits for the device's queued work, so a clock read after it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize()


# ---- command line ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("step", "bench"):
        sub = commands.add_parser(name)
        sub.add_argument("--archive", default=".data19/go19_curated.tar.xz", help="SGF archive (or folder)")
        sub.add_argument("--work", default="runs/gpu19", help="shards and run folder (kept on a warm machine)")
        sub.add_argument("--size", type=int, default=19)
        sub.add_argument("--val-fraction", type=float, default=0.02, help="games held out, by game key")
        sub.add_argument("--workers", type=int, default=0, help="ingest processes (default: one per core)")
        sub.add_argument("--ingest-parts", type=int, default=8,
                         help="the archive is ingested in this many parts, each its own shard folder, so that a "
                              "call cut short keeps the finished ones")
        sub.add_argument("--relabel-share", type=float, default=0.0,
                         help="share of the counted training games labelled under a rule set and komi drawn anew "
                              "(ingest's --relabel-share; shards ingested otherwise are ingested again)")
        sub.add_argument("--relabel-rules", default="chinese,japanese",
                         help="rule sets a relabelled game draws from, separated by commas")
        sub.add_argument("--relabel-komi-stdev", type=float, default=1.0,
                         help="spread of a relabelled game's komi around the record's own")
        sub.add_argument("--ownership-playouts", type=int, default=0,
                         help="rollouts that judge a counted game's dead stones for its ownership target (ingest's "
                              "--ownership-playouts)")
        sub.add_argument("--device", default="auto", help="auto (cuda when there is one), cuda or cpu")
        sub.add_argument("--batch-size", type=int, default=RECIPE["batch_size"])
        sub.add_argument("--compile", action="store_true",
                         help="training steps through torch.compile (train.py's compile; each call compiles again, "
                              "from inductor's cache on a warm machine)")
    run = commands.choices["step"]
    run.add_argument("--out", required=True, help="where the checkpoint parts, manifest, metrics (and ONNX) go")
    run.add_argument("--carry", default=".ckpt19", help="the last call's --out files, carried back")
    for key in ("preset", "epochs", "lr", "warmup_steps", "weight_decay", "eval_every", "val_samples",
                "window_samples"):
        run.add_argument("--" + key.replace("_", "-"), type=type(RECIPE[key]), default=RECIPE[key])
    run.add_argument("--steps", type=int, default=0, help="total steps (default: from --epochs)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--init-from", help="checkpoint whose weights start a new run (e.g. from import-onnx)")
    run.add_argument("--command-seconds", type=float, default=600.0, help="the device's limit a command")
    run.add_argument("--margin", type=float, default=90.0, help="seconds kept for saving and sending back")
    run.add_argument("--max-steps", type=int, default=0, help="stop after this many steps in this call")
    run.add_argument("--fit", action="store_true",
                     help="a new run gets the step count that ends it inside this call, from a timed probe of "
                          "the preset on this device (at most --steps or --epochs); a resumed run keeps its own")
    run.add_argument("--export", action=argparse.BooleanOptionalAction, default=None,
                     help="write model.onnx (--export: even before the last step; --no-export: not even after it; "
                          "default: after the last step)")
    run.add_argument("--progress", action="store_true", help="a progress bar on stderr")
    measure = commands.choices["bench"]
    measure.add_argument("--presets", nargs="+", default=["b6c64", "b10c128"])
    measure.add_argument("--bench-steps", type=int, default=10)
    measure.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    try:
        if args.command == "step":
            step(args, started)
        else:
            if args.threads:
                torch.set_num_threads(args.threads)
            bench(args)
    except (RecipeError, dataset.DatasetError, checkpoint_lib.CheckpointError, ValueError) as error:
        print(f"train19_gpu: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
