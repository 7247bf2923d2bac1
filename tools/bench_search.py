"""Benchmark the search: visits per second at the engine's default settings, beside the evaluator's own
throughput at the same batch size, measured in the same run; and Leela Zero 0.17 on a network of the same size
when it is installed.

The network is a randomly initialised preset (speed does not depend on the weights), evaluated as the engine
does it: OnnxEvaluator behind a CachedEvaluator, with the batch size and thread count of the default
EngineConfig. Each round searches for --seconds (from the empty board and from positions after random moves, a
fresh tree each time), then runs the evaluator alone for as long on the very batches that search sent it. The
best of --rounds rounds of each is kept, which filters out other load on a shared machine.

Targets on 2 CPU cores: search >= 70% of the evaluator's throughput on 9x9 and >= 85% on 19x19; on 19x19 with a
6x64 network at least twice Leela Zero's visits per second (it reached about 230-250 visits/s with -t 2).

    python -m tools.bench_search                           # b6c64, 9x9 and 19x19, Leela Zero if installed
    python -m tools.bench_search --sizes 9 --seconds 3 --rounds 2 --leela off
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gtp_engine.config import EngineConfig
from gtp_engine.evaluator import CachedEvaluator
from gtp_engine.game import GameState
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.search import SearchConfig, Searcher, StopCondition
from gtp_engine.training.export_onnx import export_random, random_positions

TARGETS = {9: 0.70, 19: 0.85}
LEELA_FACTOR = 2.0
LEELA_PATHS = ("leelaz", "/usr/lib/leelaz/bin/leelaz", "leela-zero")


class RecordingEvaluator:
    """Passes evaluations through, counting the positions the network saw and keeping the batches."""

    def __init__(self, inner):
        self.inner = inner
        self.positions = 0
        self.batches: list[list[GameState]] = []

    def evaluate(self, states):
        self.positions += len(states)
        self.batches.append([s.copy() for s in states])
        return self.inner.evaluate(states)


def evaluator_rate(evaluator, batches: list[list[GameState]], seconds: float) -> float:
    """Positions per second of evaluate() over `batches` in turn, for `seconds`."""
    positions, start, i = 0, time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        batch = batches[i % len(batches)]
        evaluator.evaluate(batch)
        positions += len(batch)
        i += 1
    return positions / (time.perf_counter() - start)


def search_rate(onnx: OnnxEvaluator, config: SearchConfig, roots: list[GameState], seconds: float,
                cache_positions: int) -> tuple[float, float, list[list[GameState]]]:
    """(visits per second, network positions per visit, the batches evaluated) over searches of each root for
    seconds / len(roots)."""
    playouts, elapsed, positions, batches = 0, 0.0, 0, []
    for root in roots:
        recorder = RecordingEvaluator(onnx)
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


def main(argv: list[str] | None = None) -> int:
    defaults = EngineConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="b6c64", help="network preset (b6c64 is Leela Zero's 6x64 size)")
    parser.add_argument("--sizes", nargs="+", type=int, default=[9, 19])
    parser.add_argument("--batch", type=int, default=defaults.player.search.batch_size, help="leaves per network call")
    parser.add_argument("--threads", type=int, default=defaults.network.threads or 0,
                        help="onnxruntime threads (0: its choice)")
    parser.add_argument("--seconds", type=float, default=6.0, help="search time per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--leela", choices=["auto", "off"], default="auto",
                        help="compare with Leela Zero (--cpu-only) when installed")
    parser.add_argument("--leela-threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")

    config = SearchConfig(batch_size=args.batch)
    rng = np.random.default_rng(0)
    failures, ours_19 = 0, None
    print(f"{'preset':7} {'size':>5} {'batch':>5} {'evaluator pos/s':>15} {'search visits/s':>15} {'ratio':>6} "
          f"{'net evals/visit':>15}  target")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{args.preset}.onnx"
        export_random(path, args.preset)
        onnx = OnnxEvaluator(path, device="cpu", threads=args.threads)
        for size in args.sizes:
            roots = [GameState(size)] + random_positions(size, 2, rng)
            search_rate(onnx, config, roots[:1], 1.0, 20_000)  # warm-up: first-run allocations
            evaluator, search, evals = 0.0, 0.0, 0.0
            for _ in range(args.rounds):
                rate, per_visit, batches = search_rate(onnx, config, roots, args.seconds, 20_000)
                if rate > search:
                    search, evals = rate, per_visit
                evaluator = max(evaluator, evaluator_rate(onnx, batches, args.seconds))
            ratio = search / evaluator
            target = TARGETS.get(size)
            verdict = "" if target is None else ("ok" if ratio >= target else "BELOW")
            failures += verdict == "BELOW"
            if size == 19:
                ours_19 = search
            print(f"{args.preset:7} {size:>3}x{size:<2}{args.batch:>5} {evaluator:>15.0f} {search:>15.0f} "
                  f"{ratio:>6.2f} {evals:>15.2f}  {'' if target is None else f'>= {target:.2f} '}{verdict}",
                  flush=True)
        print(f"onnxruntime {onnx.provider}, {args.threads or 'default'} threads, symmetry random, "
              f"CachedEvaluator; search config: batch {config.batch_size}, virtual loss {config.virtual_loss}")

        binary = next((b for b in map(shutil.which, LEELA_PATHS) if b), None)
        if args.leela == "auto" and ours_19 is not None:
            if binary is None:
                print("leela-zero is not installed (apt-get install leela-zero): no comparison")
            elif not args.preset.startswith("b6c64"):
                print("the Leela Zero comparison needs --preset b6c64 (6 blocks x 64 channels)")
            else:
                weights = Path(folder) / "leelaz_6x64.txt"
                leela_weights(weights, blocks=6, channels=64)
                leela = max((leela_rate(binary, weights, args.leela_threads, 1600) or 0.0)
                            for _ in range(max(1, args.rounds - 1)))
                if leela:
                    verdict = "ok" if ours_19 >= LEELA_FACTOR * leela else "BELOW"
                    failures += verdict == "BELOW"
                    print(f"leela-zero 0.17 --cpu-only -t {args.leela_threads}, random 6x64, 19x19: {leela:.0f} "
                          f"visits/s; ours {ours_19:.0f} visits/s = {ours_19 / leela:.2f}x  "
                          f"(target >= {LEELA_FACTOR:.0f}x) {verdict}")
    print(f"{failures} measurements below target; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs (other work on the machine lowers every number)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
