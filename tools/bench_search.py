"""Benchmark the search: visits per second at the engine's default settings, beside the bare network's
throughput at the same batch size, for the fp32 network and its int8 sibling, measured in the same run; and
Leela Zero 0.17 on a random network of the same nominal size (the 19x19 network's blocks and channels) when it is
installed.

Networks: the shipped ones (weights/9x9.onnx, weights/default.onnx for 19x19, each with its NAME.int8.onnx where
it exists), or with --preset a randomly initialised preset, quantized here on random positions (speed does not
depend on the weights). Each is searched as the engine does it: OnnxEvaluator behind a CachedEvaluator, with
the batch size, batches in flight, evaluation threads and network thread count of the default EngineConfig (4 in
flight; on 2 cores one evaluation thread and the search thread, one onnxruntime thread per run). Each round searches for
--seconds per network (from the empty board and from positions after random moves, a fresh tree each time), then
runs the bare onnxruntime session on the very batches that search
sent it (inputs encoded beforehand), fp32 and int8 in ten alternating turns, for --seconds in all per network. A
turn runs the session both ways the cores can be used: one call at a time on onnxruntime's own thread count (all
cores), and as many calls at once as the search makes (its evaluation threads and the search thread) on the
search's thread count, each caller's rate counted to the end of its own last call (no core idles in the count
while another finishes). The round's bare rate is the better way's mean over the round's turns (small batches
gain more from concurrent one-thread calls than from threads within a call). Search and session rates are the
means over rounds, each round's search beside its own session turns, so that load on a shared machine weighs on
both alike. (The best of many short turns, as this tool took before, is biased high: on 19x19 at batch 8, 0.2 s
turns of b10c128 ranged 254-331 positions/s, median 271, against 281-309 for 1.33 s runs.) int8/fp32 is the median
ratio of neighbouring turns.

Columns: session pos/s (InferenceSession.run alone), search visits/s, search/session (the share of the network's
throughput the search keeps), its 95% interval over the rounds (each round's search against its own session turns;
with --rounds 2 or more: on a machine whose speed wanders a few percent, one ratio near a target settles little),
and for int8 rows int8/fp32 (session speed-up).

Targets on 2 CPU cores: search >= 0.90 of the session's throughput on 9x9 and 19x19; int8 session >= 1.8x
fp32; on 19x19 at least 2.5x Leela Zero's visits per second at equal nominal size.

With --backend torch (needs the train extra) the network runs in torch instead (training/torch_evaluator.py:
CUDA when torch has it, bfloat16 autocast there), fp32 files only, the bare rate being the same evaluator's
forward alone: this is how the engine's search is measured on a GPU machine that has torch with CUDA but no
onnxruntime GPU build (the device machines of this project); --batch and --batches-in-flight then explore the
larger batches a GPU wants, and --cuda-graphs off runs the forward eager (the evaluator replays CUDA graphs by
default), so that two runs on one machine show what the graphs gain.

    python -m tools.bench_search                           # shipped networks, 9x9 and 19x19, Leela Zero if installed
    python -m tools.bench_search --sizes 9 --seconds 3 --rounds 2 --leela off
    python -m tools.bench_search --preset b6c64            # random networks of a preset instead
    python -m tools.bench_search --backend torch --device cuda --batch 64 --batches-in-flight 4 --leela off
    python -m tools.bench_search --device cuda --batch 64 --batches-in-flight 4 --leela off   # onnxruntime-gpu
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from gtp_engine import features, native
from gtp_engine.config import EngineConfig
from gtp_engine.evaluator import CachedEvaluator, accepts_positions, prepare
from gtp_engine.game import GameState
from gtp_engine.network_evaluator import with_precision
from gtp_engine.network_loader import shipped_weights
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.search import SearchConfig, Searcher, StopCondition

RECORDED_BATCHES = 200  # per search: the session runs on these
SLICES = 10  # turns of fp32 and int8 session measurements per round
SEARCH_TARGET = 0.90
INT8_TARGET = 1.8
LEELA_FACTOR = 2.5
LEELA_PATHS = ("leelaz", "/usr/lib/leelaz/bin/leelaz", "leela-zero")
LEELA_DEFAULT_SHAPE = (6, 64)  # blocks, channels: Leela Zero's network where ours names no bNcM preset
# Student's t, two-sided 95%, by degrees of freedom
T_975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
         15: 2.13, 20: 2.09, 30: 2.04, 40: 2.02, 60: 2.00, 120: 1.98}


def mean_interval(samples: list[float]) -> tuple[float, float] | None:
    """The 95% interval of the mean of independent samples (Student's t; a table's next lower degrees of freedom,
    so never narrower than exact), or None for fewer than two samples."""
    if len(samples) < 2:
        return None
    df = len(samples) - 1
    t = T_975[max(k for k in T_975 if k <= df)]
    half = t * float(np.std(samples, ddof=1)) / len(samples) ** 0.5
    mean = float(np.mean(samples))
    return mean - half, mean + half


def preset_shape(preset: str) -> tuple[int, int] | None:
    """(blocks, channels) of a preset named bNcM (b10c128: 10 residual blocks of 128 channels), else None."""
    match = re.fullmatch(r"b(\d+)c(\d+)", preset)
    return (int(match[1]), int(match[2])) if match else None


class RecordingEvaluator:
    """Passes evaluations through, counting the positions the network saw and keeping the batches."""

    def __init__(self, inner):
        self.inner = inner
        self.positions = 0
        self.batches: list[list] = []  # leaf positions (GameStates or compiled search positions)

    @property
    def accepts_positions(self) -> bool:  # the leaf positions the engine's search makes for its evaluator
        return accepts_positions(self.inner)

    def evaluate(self, states):
        self._record(states)
        return self.inner.evaluate(states)

    def prepare(self, states):
        """As the engine's evaluators: only the network's forward runs in the search's evaluation threads."""
        self._record(states)
        return prepare(self.inner, states)

    def _record(self, states) -> None:
        self.positions += len(states)
        if len(self.batches) < RECORDED_BATCHES:
            self.batches.append(list(states))  # a tree never changes a leaf's position once it is gathered


def session_rate(network, inputs: list[tuple[np.ndarray, np.ndarray]], seconds: float, callers: int = 1) -> float:
    """Positions per second of the network's bare forward (the onnxruntime session, or the torch model) over
    encoded `inputs` in turn, for `seconds`, from `callers` threads at once: the sum of the callers' rates, each to
    the end of its own last call."""
    positions, ended, start = [0] * callers, [0.0] * callers, time.perf_counter()

    def work(caller: int) -> None:
        i = caller
        while time.perf_counter() - start < seconds:
            spatial, global_ = inputs[i % len(inputs)]
            network.forward(spatial, global_)
            positions[caller] += len(spatial)
            i += callers
        ended[caller] = time.perf_counter()

    threads = [threading.Thread(target=work, args=(caller,)) for caller in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(count / (end - start) for count, end in zip(positions, ended))


def search_rate(network, config: SearchConfig, roots: list[GameState], seconds: float,
                cache_positions: int) -> tuple[float, float, list[list[GameState]]]:
    """(visits per second, network positions per visit, the batches evaluated) over searches of each root for
    seconds / len(roots)."""
    playouts, elapsed, positions, batches = 0, 0.0, 0, []
    for root in roots:
        recorder = RecordingEvaluator(network)
        searcher = Searcher(CachedEvaluator(recorder, cache_positions), config)
        start = time.perf_counter()
        result = searcher.search(root, StopCondition(deadline=time.monotonic() + seconds / len(roots)))
        elapsed += time.perf_counter() - start
        playouts += result.snapshot.playouts
        positions += recorder.positions
        batches += [b for b in recorder.batches if len(b) == config.batch_size]
    return playouts / elapsed, positions / max(1, playouts), batches


def leela_weights(path: Path, blocks: int, channels: int, seed: int = 0) -> None:
    """A random Leela Zero network (text format version 1: 18 input planes, 19x19)."""
    rng = np.random.default_rng(seed)
    lines = ["1"]

    def numbers(values) -> None:
        lines.append(" ".join(f"{v:.5g}" for v in values))

    def conv(outputs: int, inputs: int, kernel: int) -> None:
        numbers(rng.normal(0.0, (2.0 / (inputs * kernel * kernel)) ** 0.5, outputs * inputs * kernel * kernel))
        numbers(np.zeros(outputs))  # biases
        numbers(np.zeros(outputs))  # batch-norm means
        numbers(np.ones(outputs))  # batch-norm variances

    def dense(outputs: int, inputs: int) -> None:
        numbers(rng.normal(0.0, (1.0 / inputs) ** 0.5, outputs * inputs))
        numbers(np.zeros(outputs))

    conv(channels, 18, 3)
    for _ in range(2 * blocks):
        conv(channels, channels, 3)
    conv(2, channels, 1)
    dense(362, 2 * 361)
    conv(1, channels, 1)
    dense(256, 361)
    dense(1, 256)
    path.write_text("\n".join(lines) + "\n")


def leela_rate(binary: str, weights: Path, threads: int, visits: int) -> float | None:
    """Leela Zero's own benchmark (empty 19x19 board, no pondering): playouts per second, or None."""
    try:
        run = subprocess.run([binary, "--cpu-only", "-t", str(threads), "-w", str(weights), "--benchmark",
                              "-v", str(visits)], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        logging.warning("leela-zero did not run: %s", error)
        return None
    match = re.search(r"(\d+) playouts, (\d+) n/s", run.stdout + run.stderr)
    if match is None:
        logging.warning("no speed in leela-zero's output:\n%s", (run.stdout + run.stderr)[-2000:])
        return None
    return float(match.group(2))


def opening(size: int, moves: int, rng: np.random.Generator) -> GameState:
    """A position after `moves` random legal moves."""
    state = GameState(size)
    for _ in range(moves):
        state.play(state.grid.from_flat(int(rng.choice(np.flatnonzero(state.legal_mask())))))
    return state


def networks(args, size: int, folder: Path) -> dict[str, Path]:
    """{"fp32": file, "int8": file} to measure on size x size boards (int8 missing where there is none)."""
    if args.preset is None:
        fp32 = shipped_weights(size, size)
        if fp32 is None:
            raise SystemExit(f"no shipped network for {size}x{size}")
        found = {"fp32": fp32}
        int8 = with_precision(fp32, "auto")
        if int8 != fp32:
            found["int8"] = int8
        return found
    from gtp_engine.training import quantize
    from gtp_engine.training.export_onnx import export_random
    from gtp_engine.training.probes import random_positions

    fp32 = folder / f"{args.preset}.onnx"
    if not fp32.exists():
        export_random(fp32, args.preset)
        positions = random_positions(19, 256, np.random.default_rng(1))
        quantize.quantize(fp32, quantize.default_out(fp32), positions, [], calibration_name="random positions",
                          require_targets=False)
    return {"fp32": fp32, "int8": quantize.default_out(fp32)}


def graphs_state(evaluators) -> str:
    """Whether the torch evaluators ran their forward from CUDA graphs (a capture that failed its check turns them
    off and logs why)."""
    graphs = [e.graphs for e in evaluators if getattr(e, "graphs", None) is not None]
    if not graphs:
        return "eager"
    return "CUDA graphs" if all(g.usable for g in graphs) else "CUDA graphs turned off, eager: see the log"


def open_network(args, path: Path, threads: int = 0):
    """The network at path on the chosen backend and --device: onnxruntime (threads on the CPU: 0 for its own
    choice), or torch."""
    if args.backend == "torch":
        from gtp_engine.training.torch_evaluator import TorchEvaluator

        return TorchEvaluator.from_onnx(path, device=args.device, cuda_graphs=args.cuda_graphs == "on")
    return OnnxEvaluator(path, device=args.device, threads=threads)


def main(argv: list[str] | None = None) -> int:
    defaults = EngineConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", help="measure a random network of this preset (b6c64 is Leela Zero's 6x64 "
                                         "size) instead of the shipped ones")
    parser.add_argument("--sizes", nargs="+", type=int, default=[9, 19])
    parser.add_argument("--batch", type=int, default=defaults.player.search.batch_size, help="leaves per network call")
    parser.add_argument("--threads", type=int, default=None,
                        help="onnxruntime threads of the search's network (default: the engine's, see --threads of "
                             "gtp-engine); the bare session always runs with onnxruntime's own choice")
    parser.add_argument("--batches-in-flight", type=int, default=defaults.player.search.batches_in_flight,
                        help="batches the search keeps in flight (1: no overlap of network and search; default: the "
                             "engine's)")
    parser.add_argument("--evaluation-threads", type=int, default=defaults.player.search.evaluation_threads,
                        help="threads that run the network beside the search thread (default: the engine's, the "
                             "cores but one)")
    parser.add_argument("--seconds", type=float, default=5.0, help="search time per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--leela", choices=["auto", "off"], default="auto",
                        help="compare with Leela Zero (--cpu-only) when installed")
    parser.add_argument("--leela-threads", type=int, default=2)
    parser.add_argument("--backend", choices=["onnx", "torch"], default="onnx",
                        help="what runs the network: onnxruntime on the CPU, or torch (fp32 files only; see above)")
    parser.add_argument("--device", default="auto",
                        help="auto (the GPU when the backend has one), cpu, cuda, or for onnxruntime tensorrt")
    parser.add_argument("--cuda-graphs", choices=["on", "off"], default="on",
                        help="torch backend on CUDA: replay the forward from CUDA graphs (the default) or run it eager")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")

    config = SearchConfig(batch_size=args.batch, batches_in_flight=args.batches_in_flight,
                          evaluation_threads=args.evaluation_threads)
    engine = dataclasses.replace(defaults, player=dataclasses.replace(defaults.player, search=config))
    threads = args.threads if args.threads is not None else engine.network_threads()
    callers = config.evaluation_threads_for() + 1 if args.backend == "onnx" else 1  # the search's network calls
    rng = np.random.default_rng(0)
    failures, ours_19, shape_19 = 0, {}, LEELA_DEFAULT_SHAPE
    shared_won = rounds_compared = 0  # of the rounds compared (each network's), those the search's way of calling won
    print(f"{'network':22} {'size':>5} {'batch':>5} {'session pos/s':>13} {'search visits/s':>15} "
          f"{'search/session':>14} {'95% interval':>12} {'int8/fp32':>9}  targets")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            files = networks(args, size, Path(folder))
            if args.backend == "torch":
                files.pop("int8", None)  # a quantized graph is onnxruntime's; torch imports fp32 files
            nets = {k: open_network(args, f) for k, f in files.items()}  # the bare sessions
            searched = {k: open_network(args, f, threads) for k, f in files.items()}
            roots = [GameState(size)] + [opening(size, moves, rng) for moves in (size * size // 6, size * size // 3)]
            rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in nets}  # (search, session) rates
            slices: dict[str, list[float]] = {name: [] for name in nets}  # session rates, measured in turn
            for network in list(nets.values()) + list(searched.values()):
                search_rate(network, config, roots[:1], 1.0, 20_000)  # warm-up: first-run allocations
            for _ in range(args.rounds):
                inputs, searched_rate = {}, {}
                for name, network in searched.items():
                    searched_rate[name], _, batches = search_rate(network, config, roots, args.seconds, 20_000)
                    inputs[name] = [features.encode(b) for b in batches[:RECORDED_BATCHES]]
                    if not inputs[name]:  # the bare session replays these
                        parser.error(f"the {name} search evaluated no full batch of {config.batch_size} in "
                                     f"{args.seconds:g} s: give it more --seconds")
                ways: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in nets}
                for _ in range(SLICES):  # alternating turns, so that both networks see the same load
                    for name, network in nets.items():
                        turn = args.seconds / SLICES / (2 if callers > 1 else 1)
                        whole = session_rate(network, inputs[name], turn)
                        shared = session_rate(searched[name], inputs[name], turn, callers) if callers > 1 else 0.0
                        ways[name][0].append(whole)
                        ways[name][1].append(shared)
                        slices[name].append(max(whole, shared))
                for name, (whole, shared) in ways.items():
                    shared_won += np.mean(shared) > np.mean(whole)
                    rounds_compared += 1
                    rounds[name].append((searched_rate[name], float(max(np.mean(whole), np.mean(shared)))))
            search = {name: float(np.mean([s for s, _ in rates])) for name, rates in rounds.items()}
            session = {name: float(np.mean([b for _, b in rates])) for name, rates in rounds.items()}
            for name, network in nets.items():
                kept = search[name] / session[name]
                interval = mean_interval([s / b for s, b in rounds[name]])
                shown = f"{interval[0]:.2f}..{interval[1]:.2f}" if interval else ""
                # int8/fp32: the median of the ratios of neighbouring turns, robust to load that comes and goes
                speedup = float(np.median(np.array(slices[name]) / np.array(slices["fp32"]))) \
                    if name != "fp32" else None
                gain = "" if speedup is None else f"{speedup:.2f}"
                verdicts = [("search", kept >= SEARCH_TARGET)]
                if speedup is not None:
                    verdicts.append(("int8", speedup >= INT8_TARGET))
                failures += sum(not ok for _, ok in verdicts)
                if size == 19:
                    ours_19[name] = search[name]
                    shape_19 = preset_shape(network.info.preset) or LEELA_DEFAULT_SHAPE
                print(f"{Path(network.info.path).name:22} {size:>3}x{size:<2}{args.batch:>5} {session[name]:>13.0f} "
                      f"{search[name]:>15.0f} {kept:>14.2f} {shown:>12} {gain:>9}  "
                      + ", ".join(f"{what} {'ok' if ok else 'BELOW'}" for what, ok in verdicts), flush=True)
        runner = (f"onnxruntime cpu: the search's calls on {threads or 'its own thread count'} threads each; the "
                  f"bare session the better, round by round, of one call at a time on onnxruntime's own thread count "
                  f"and {callers} calls at once as the search makes them ({shared_won} of {rounds_compared} rounds)") \
            if args.backend == "onnx" else \
            f"torch {next(iter(searched.values())).info.provider} ({graphs_state(searched.values())}): the bare " \
            f"rate is the evaluator's forward alone"
        print(f"{runner}; "
              f"symmetry random, CachedEvaluator; search config: batch {config.batch_size}, "
              f"{config.batches_in_flight} in flight, {config.evaluation_threads_for()} evaluation threads and the "
              f"search thread, virtual loss {config.tree.virtual_loss}, "
              f"compiled twins {native.describe()}; targets: "
              f"search/session >= {SEARCH_TARGET}, int8/fp32 >= {INT8_TARGET}")

        binary = next((b for b in map(shutil.which, LEELA_PATHS) if b), None)
        if args.leela == "auto" and ours_19:
            if binary is None:
                print("leela-zero is not installed (apt-get install leela-zero): no comparison")
            else:
                blocks, channels = shape_19
                weights = Path(folder) / f"leelaz_{blocks}x{channels}.txt"
                leela_weights(weights, blocks=blocks, channels=channels)
                runs = [leela_rate(binary, weights, args.leela_threads, 1600) for _ in range(max(1, args.rounds - 1))]
                leela = float(np.mean(runs)) if all(runs) else 0.0  # the mean, as ours
                if leela:
                    for name, ours in ours_19.items():
                        verdict = "ok" if ours >= LEELA_FACTOR * leela else "BELOW"
                        failures += verdict == "BELOW"
                        print(f"leela-zero --cpu-only -t {args.leela_threads}, random {blocks}x{channels}, 19x19: "
                              f"{leela:.0f} visits/s; ours ({name}) {ours:.0f} visits/s = {ours / leela:.2f}x  "
                              f"(target >= {LEELA_FACTOR}x) {verdict}")
    print(f"{failures} measurements below target; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs (other work on the machine lowers every number)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
