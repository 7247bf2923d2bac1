"""Benchmark the network evaluator: positions per second of OnnxEvaluator.evaluate (features, symmetry, inference,
post-processing) beside a bare InferenceSession.run on pre-built input tensors, in the same run and session.

Each preset is a randomly initialised network (speed does not depend on the weights). Bare and full runs alternate
for --rounds rounds and the best rate of each is kept, which filters out other load on a shared machine.
The target: at batch >= 8 the evaluator reaches >= 85% of the bare rate.

    python -m tools.bench_eval                                  # b6c64 b6c96 b10c128, 9x9 and 19x19, batch 1..256
    python -m tools.bench_eval --presets b6c64 --sizes 9 --batches 8 64 --threads 2
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gtp_engine import features
from gtp_engine.onnx_evaluator import OUTPUTS, OnnxEvaluator
from gtp_engine.training import model as model_lib
from gtp_engine.training.export_onnx import export_random, random_positions

TARGET = 0.85


def rate(call, count: int, min_time: float) -> float:
    """Positions per second of call() evaluating `count` positions, run for at least min_time seconds."""
    call()  # warm-up: first-run allocations for this shape
    calls, start = 0, time.perf_counter()
    while True:
        call()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return calls * count / elapsed


def bench(evaluator: OnnxEvaluator, states: list, min_time: float, rounds: int) -> tuple[float, float]:
    spatial, global_ = features.encode(states)
    feeds = {"spatial": spatial, "global": global_}
    bare, full = 0.0, 0.0
    for _ in range(rounds):
        bare = max(bare, rate(lambda: evaluator.session.run(OUTPUTS, feeds), len(states), min_time))
        full = max(full, rate(lambda: evaluator.evaluate(states), len(states), min_time))
    return bare, full


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["b6c64", "b6c96", "b10c128"], choices=list(model_lib.PRESETS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[9, 19])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads (0: all cores)")
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda", "tensorrt"])
    parser.add_argument("--symmetry", default="random", help="evaluator symmetry mode (random, none, average)")
    parser.add_argument("--min-time", type=float, default=0.4, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("gtp_engine").setLevel(logging.INFO)

    rng = np.random.default_rng(0)
    positions = {size: random_positions(size, 64, rng) for size in args.sizes}
    print(f"{'preset':8} {'size':>5} {'batch':>5} {'bare pos/s':>11} {'evaluator':>10} {'ratio':>6}  "
          f"{'GFLOP/s':>7}  target")
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        for preset in args.presets:
            path = Path(folder) / f"{preset}.onnx"
            export_random(path, preset)
            evaluator = OnnxEvaluator(path, device=args.device, threads=args.threads, symmetry_mode=args.symmetry)
            for size in args.sizes:
                flops = model_lib.flops_per_position(model_lib.preset(preset), size, size)
                for batch in args.batches:
                    states = [positions[size][i % len(positions[size])] for i in range(batch)]
                    bare, full = bench(evaluator, states, args.min_time, args.rounds)
                    ratio = full / bare
                    verdict = "" if batch < 8 else ("ok" if ratio >= TARGET else "BELOW")
                    failures += verdict == "BELOW"
                    print(f"{preset:8} {size:>3}x{size:<2}{batch:>5} {bare:>11.0f} {full:>10.0f} {ratio:>6.2f}  "
                          f"{bare * flops / 1e9:>7.1f}  {verdict}", flush=True)
    print(f"device {evaluator.provider}, {args.threads} threads, symmetry {args.symmetry}; "
          f"{failures} rows at batch >= 8 below {TARGET:.0%} of the bare session")
    return 0


if __name__ == "__main__":
    sys.exit(main())
