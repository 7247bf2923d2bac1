"""Benchmark network files against each other: bare onnxruntime positions per second of each file on the same
batches, in alternating turns, with the ratio of each to the first file and the largest output difference.

Positions are random-game positions of one board size, encoded once. Each round runs every file for --seconds
in turn; the best turn of each file and the median of the per-round ratios are printed, so that other load on a
shared machine hits all files alike. One onnxruntime thread per session by default, as the engine's search
runs its network beside its own thread on 2 cores.

    git show HEAD~1:weights/9x9.int8.onnx > /tmp/before.onnx
    python -m tools.bench_networks /tmp/before.onnx weights/9x9.int8.onnx --size 9
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from gtp_engine import features
from gtp_engine.game import GameState
from gtp_engine.onnx_evaluator import OnnxEvaluator


def positions(size: int, count: int, rng: np.random.Generator) -> list[GameState]:
    """Positions after 0 .. area / 2 random legal moves."""
    states = []
    for _ in range(count):
        state = GameState(size)
        for _ in range(int(rng.integers(0, size * size // 2))):
            legal = np.flatnonzero(state.legal_mask()[:-1])
            if not len(legal):
                break
            state.play(state.grid.from_flat(int(rng.choice(legal))))
        states.append(state)
    return states


def rate(evaluator: OnnxEvaluator, batches: list, seconds: float) -> float:
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for spatial, global_ in batches:
            evaluator.run(spatial, global_)
            done += len(spatial)
    return done / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("networks", nargs="+", help="ONNX files; ratios are against the first")
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--batch", type=int, default=8, help="positions per call (the engine's default: 8)")
    parser.add_argument("--batches", type=int, default=8, help="distinct batches cycled through")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (0: all cores)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=0.5, help="per file and round")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    states = positions(args.size, args.batch * args.batches, np.random.default_rng(args.seed))
    spatial, global_ = features.encode(states)
    batches = [(spatial[i:i + args.batch], global_[i:i + args.batch]) for i in range(0, len(states), args.batch)]
    evaluators = [OnnxEvaluator(path, device="cpu", threads=args.threads, symmetry_mode="none")
                  for path in args.networks]
    reference = [evaluators[0].run(s, g) for s, g in batches]
    rates = np.zeros((args.rounds, len(evaluators)))
    for r in range(args.rounds):
        for i, evaluator in enumerate(evaluators):
            rates[r, i] = rate(evaluator, batches, args.seconds)
    print(f"{args.size}x{args.size}, batch {args.batch}, {args.threads or 'all'} onnxruntime thread(s), "
          f"{args.rounds} rounds of {args.seconds} s")
    print(f"{'network':48} {'best pos/s':>11} {'ratio (median)':>15} {'max |diff|':>11}")
    for i, (path, evaluator) in enumerate(zip(args.networks, evaluators)):
        diff = max(float(np.abs(a - b).max()) for (s, g), ref in zip(batches, reference)
                   for a, b in zip(evaluator.run(s, g), ref))
        ratio = float(np.median(rates[:, i] / rates[:, 0]))
        print(f"{path:48} {rates[:, i].max():11.0f} {ratio:15.3f} {diff:11.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
