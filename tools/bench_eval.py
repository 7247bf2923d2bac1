"""Benchmark the network evaluator: positions per second of OnnxEvaluator.evaluate (features, symmetry, inference,
post-processing) beside a bare InferenceSession.run on pre-built input tensors, in the same run and session.

Each preset is a randomly initialised network (speed does not depend on the weights). Bare and full calls alternate
and the fastest of each counts, which filters out other load on a shared machine.
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
from gtp_engine.training.export_onnx import export_random
from gtp_engine.training.probes import random_positions

TARGET = 0.85


def bench(evaluator: OnnxEvaluator, states: list, min_time: float) -> tuple[float, float, float]:
    """(bare positions/s, evaluator positions/s, CPU-time ratio bare/evaluator) from alternating calls.

    The two calls alternate, so load from other processes falls on both alike. Rates come from the fastest call
    of each (the one least disturbed); the CPU-time ratio sums the process CPU time of all calls, which other
    processes hardly disturb at all, so it is the steadier measure of the evaluator's own overhead.
    """
    spatial, global_ = features.encode(states)
    feeds = {"spatial": spatial, "global": global_}
    evaluator.session.run(OUTPUTS, feeds)  # warm-up: first-run allocations for this shape
    evaluator.evaluate(states)
    bare, full = float("inf"), float("inf")
    bare_cpu = full_cpu = 0.0
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < min_time:
        t0, c0 = time.perf_counter(), time.process_time()
        evaluator.session.run(OUTPUTS, feeds)
        t1, c1 = time.perf_counter(), time.process_time()
        evaluator.evaluate(states)
        t2, c2 = time.perf_counter(), time.process_time()
        bare, full = min(bare, t1 - t0), min(full, t2 - t1)
        bare_cpu += c1 - c0
        full_cpu += c2 - c1
        calls += 1
    return len(states) / bare, len(states) / full, bare_cpu / full_cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["b6c64", "b6c96", "b10c128"], choices=list(model_lib.PRESETS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[9, 19])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads (0: all cores)")
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda", "tensorrt"])
    parser.add_argument("--symmetry", default="random", type=lambda v: int(v) if v.isdigit() else v,
                        help="evaluator symmetry mode: random, none, average or 0..7")
    parser.add_argument("--min-time", type=float, default=1.5, help="seconds per row (at least 3 pairs of calls)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("gtp_engine").setLevel(logging.INFO)

    rng = np.random.default_rng(0)
    positions = {size: random_positions(size, 64, rng) for size in args.sizes}
    print(f"{'preset':8} {'size':>5} {'batch':>5} {'bare pos/s':>11} {'evaluator':>10} {'ratio':>6} {'cpu ratio':>9}"
          f"  {'GFLOP/s':>7}  target")
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
                    bare, full, cpu_ratio = bench(evaluator, states, args.min_time)
                    ratio = full / bare
                    verdict = "" if batch < 8 else ("ok" if ratio >= TARGET else "BELOW")
                    failures += verdict == "BELOW"
                    print(f"{preset:8} {size:>3}x{size:<2}{batch:>5} {bare:>11.0f} {full:>10.0f} {ratio:>6.2f} "
                          f"{cpu_ratio:>9.2f}  {bare * flops / 1e9:>7.1f}  {verdict}", flush=True)
    print(f"device {evaluator.provider}, {args.threads} threads, symmetry {args.symmetry}; "
          f"{failures} rows at batch >= 8 below {TARGET:.0%} of the bare session")
    return 0


if __name__ == "__main__":
    sys.exit(main())
