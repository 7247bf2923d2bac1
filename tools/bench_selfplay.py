"""Benchmark self-play: games per hour and evaluations per second of training.selfplay with a given network,
beside the evaluator's own throughput on the very batches self-play sent it, measured in the same run.

Self-play runs first (a temporary output folder, deleted after), with every evaluator call recorded. Then the
evaluator (onnxruntime, or torch with --backend torch) runs alone on a sample of those batches, as many positions
again or for as long as --replay-seconds allows, from as many threads at once as self-play computes with (its
evaluation threads and the playing thread). The ratio of the two rates shows what the tree search, the encoding of
the samples and the game logic cost on top of the network (features of evaluated positions are inside evaluate in
both); "evaluator busy" is the part of self-play's wall time in which at least one evaluate call was running.

    python -m tools.bench_selfplay --weights weights/9x9.onnx --games 16
    python -m tools.bench_selfplay --weights weights/9x9.onnx --games 64 --device cuda --parallel-games 128
    python -m tools.bench_selfplay --weights weights/9x9.onnx --games 64 --backend torch --device cuda
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
import time
from dataclasses import replace

import torch

from gtp_engine import native
from gtp_engine.evaluator import accepts_positions
from gtp_engine.training import selfplay
from gtp_engine.training.selfplay import SelfPlayConfig
from gtp_engine.training.torch_evaluator import BACKENDS, open_evaluator

_KEPT_BATCHES = 400  # recorded batches kept for the replay (evenly over the run)


class _Recorder:
    """Wraps an evaluator: times its calls (the wall time with one or more running) and keeps every k-th batch of
    positions for the replay."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0
        self.batches: list[list] = []
        self.every = 1
        self._lock = threading.Lock()
        self._running = 0
        self._since = 0.0

    @property
    def accepts_positions(self) -> bool:  # self-play's trees then make the leaf positions they make for the network
        return accepts_positions(self.inner)

    def evaluate(self, states):
        with self._lock:
            if self._running == 0:
                self._since = time.perf_counter()
            self._running += 1
        try:
            return self.inner.evaluate(states)
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self.seconds += time.perf_counter() - self._since
                if self.calls % self.every == 0:
                    self.batches.append(list(states))
                    if len(self.batches) >= 2 * _KEPT_BATCHES:  # keep memory flat: thin out to every other one
                        self.batches = self.batches[::2]
                        self.every *= 2
                self.calls += 1


def replay(evaluator, batches: list[list], positions: int, max_seconds: float, threads: int = 1) -> float:
    """Positions per second of evaluator.evaluate alone over the batches, cycled, up to `positions` positions, from
    `threads` threads at once."""
    evaluator.evaluate(batches[0])  # warm-up
    lock = threading.Lock()
    done, start = 0, time.perf_counter()
    cursor = iter(range(10 ** 12))

    def work() -> None:
        nonlocal done
        while True:
            with lock:
                if done >= positions or time.perf_counter() - start >= max_seconds:
                    return
                states = batches[next(cursor) % len(batches)]
                done += len(states)
            evaluator.evaluate(states)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return done / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="ONNX network")
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=SelfPlayConfig.komi)
    parser.add_argument("--full-visits", type=int, default=SelfPlayConfig.full_visits)
    parser.add_argument("--fast-visits", type=int, default=SelfPlayConfig.fast_visits)
    parser.add_argument("--parallel-games", type=int, default=SelfPlayConfig.parallel_games)
    parser.add_argument("--leaves-per-game", type=int, default=SelfPlayConfig.leaves_per_game)
    parser.add_argument("--evaluation-threads", type=int, default=SelfPlayConfig.evaluation_threads,
                        help="self-play's pipelining (0: none; default: %(default)s)")
    parser.add_argument("--threads", type=int, default=None,
                        help="onnxruntime intra-op threads (0: all cores; default: self-play's choice)")
    parser.add_argument("--backend", default="onnx", choices=BACKENDS,
                        help="what runs the network (training/torch_evaluator.py; default: onnx)")
    parser.add_argument("--device", default="cpu",
                        help="the backend's device: cpu, cuda, tensorrt (onnxruntime-gpu and a GPU), auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replay-seconds", type=float, default=60.0, help="most time for the evaluator alone")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("gtp_engine").setLevel(logging.INFO)

    config = replace(SelfPlayConfig(), size=args.size, komi=args.komi, full_visits=args.full_visits,
                     fast_visits=args.fast_visits, parallel_games=args.parallel_games,
                     leaves_per_game=args.leaves_per_game, evaluation_threads=args.evaluation_threads, seed=args.seed)
    threads = config.network_threads() if args.threads is None else args.threads
    if args.backend != "onnx":
        torch.set_num_threads(threads or torch.get_num_threads())
    evaluator = open_evaluator(args.weights, args.backend, args.device, threads, args.seed)
    recorder = _Recorder(evaluator)
    with tempfile.TemporaryDirectory() as out:
        report = selfplay.play(recorder, args.games, config, out)
    callers = config.evaluation_threads + 1
    alone = replay(evaluator, recorder.batches, report.evaluations, args.replay_seconds, callers)
    rate = report.evaluations_per_second
    print(json.dumps(report.to_dict(), indent=1, sort_keys=True), file=sys.stderr)
    print(f"network {evaluator.info.describe()} on {evaluator.provider}, {threads} threads a call, "
          f"{config.evaluation_threads} evaluation threads; "
          f"{args.size}x{args.size}, {min(config.parallel_games, args.games)} games x {config.leaves_per_game} "
          f"leaves per round, visits {config.full_visits} full ({config.full_search_fraction:.0%}) / "
          f"{config.fast_visits} fast; compiled twins {native.describe()}")
    print(f"games {report.games}, moves {report.moves} ({report.moves / max(report.games, 1):.0f} per game), "
          f"{report.seconds:.0f} s")
    print(f"games/hour {report.games_per_hour:.0f}  moves/s {report.moves / report.seconds:.1f}")
    print(f"self-play evaluations/s {rate:.0f} (mean batch {report.mean_batch:.0f}); evaluator alone on the same "
          f"batches {alone:.0f}/s from {callers} threads; ratio {rate / alone:.2f}; evaluator busy for "
          f"{recorder.seconds / report.seconds:.0%} of self-play's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
