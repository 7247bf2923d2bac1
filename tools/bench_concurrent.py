"""Benchmark concurrent searches over one network: visits and network positions per second for N searches at
once (the analysis engine's workers, a review's threads), each way they can share the network, beside the bare
onnxruntime session's throughput on the very batches they sent, measured in the same run.

Ways: "shared", every search calls the one CachedEvaluator over the network with its own batches and evaluation
threads (the analysis engine before batching.py); "batched", the searches go through one BatchingEvaluator over
that cache (the analysis engine and review now). Each search runs in its own thread with the analysis settings
of the default EngineConfig, on the shipped int8 networks, searching positions after random openings to --visits
from a fresh tree, one after another, for --seconds. Network positions are counted below the cache (a
RecordingEvaluator of tools/bench_search.py), so cache hits never pass for speed; they have their own column.

The session column replays the batches the network received in that measurement (sizes as they came) through the
bare session the way bench_search measures it (its session_rate): the better of one call at a time on
onnxruntime's own thread count and as many calls at once as the searches make on the search's thread count.
net/session is the share of that throughput the searches kept; batch, the mean positions of a network call (over
its first 200 calls); xN=1, the network positions per second against one search of the same way, measured in the
same round. Rounds alternate the ways, so that load from elsewhere on the machine weighs on both.

    python -m tools.bench_concurrent                              # 19x19 and 9x9, N = 1 2 4 8
    python -m tools.bench_concurrent --sizes 9 --clients 1 4 --seconds 5 --rounds 2
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from gtp_engine import features
from gtp_engine.batching import BatchingEvaluator
from gtp_engine.config import EngineConfig
from gtp_engine.evaluator import CachedEvaluator
from gtp_engine.network_evaluator import with_precision
from gtp_engine.network_loader import shipped_weights
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.search import Searcher, StopCondition
from tools.bench_search import RecordingEvaluator, opening, session_rate

WAYS = ("shared", "batched")
REPLAYED_BATCHES = 200


def measure(network, way: str, clients: int, size: int, visits: int, seconds: float, config, parallel: int,
            seed: int) -> dict:
    """N searches at once for `seconds`: visits, network positions, cache hits, the batches the network got."""
    recorder = RecordingEvaluator(network)
    cache = CachedEvaluator(recorder, 20_000)
    evaluator = BatchingEvaluator(cache, parallel=parallel) if way == "batched" else cache
    visits_done = [0] * clients
    end = time.monotonic() + seconds

    def search(i: int) -> None:
        rng = np.random.default_rng(seed + i)
        searcher = Searcher(evaluator, config)
        while time.monotonic() < end:
            root = opening(size, int(rng.integers(size * size // 8, size * size // 3)), rng)
            searcher.reset()
            result = searcher.search(root, StopCondition(visits=visits, deadline=end))
            visits_done[i] += result.snapshot.visits

    start = time.perf_counter()
    threads = [threading.Thread(target=search, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if way == "batched":
        evaluator.close()
    return {"visits": sum(visits_done) / elapsed, "positions": recorder.positions / elapsed,
            "hits": cache.hits / elapsed, "batches": recorder.batches,
            "mean_batch": float(np.mean([len(b) for b in recorder.batches])) if recorder.batches else 0.0}


def bare_rate(bare, searched, batches: list, seconds: float, callers: int) -> float:
    """The bare session's positions per second on these batches (see the module docstring)."""
    inputs = [features.encode(batch) for batch in batches[:REPLAYED_BATCHES] if batch]
    if not inputs:
        return 0.0
    whole = session_rate(bare, inputs, seconds / 2)
    together = session_rate(searched, inputs, seconds / 2, callers) if callers > 1 else 0.0
    return max(whole, together)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[19, 9])
    parser.add_argument("--clients", nargs="+", type=int, default=[1, 2, 4, 8], help="searches at once")
    parser.add_argument("--visits", type=int, nargs="+", default=None,
                        help="visits per search, one per size (default: 100 on 19x19, 400 on 9x9)")
    parser.add_argument("--seconds", type=float, default=8.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    engine = EngineConfig()
    config = engine.player.analysis_search.for_analysis()
    threads = engine.network_threads()
    parallel = config.evaluation_threads_for() + 1  # as the scheduler and the review size their batchers
    print(f"{'network':20} {'size':>5} {'N':>2} {'way':>7} {'visits/s':>9} {'net pos/s':>9} {'hits/s':>7} "
          f"{'batch':>5} {'session':>8} {'net/session':>11} {'xN=1':>5}")
    for k, size in enumerate(args.sizes):
        visits = args.visits[k] if args.visits else (100 if size >= 13 else 400)
        path = with_precision(shipped_weights(size, size), "auto")
        bare = OnnxEvaluator(path, device="cpu")
        searched = OnnxEvaluator(path, device="cpu", threads=threads)
        measure(searched, "shared", 1, size, 8, 1.0, config, parallel, 0)  # warm-up
        results: dict[tuple[str, int], list[dict]] = {}
        for round_ in range(args.rounds):
            for clients in args.clients:
                for way in args.ways if round_ % 2 == 0 else reversed(args.ways):
                    found = measure(searched, way, clients, size, visits, args.seconds, config, parallel, 100 * round_)
                    found["session"] = bare_rate(bare, searched, found.pop("batches"), args.seconds / 2, parallel)
                    results.setdefault((way, clients), []).append(found)
        for clients in args.clients:
            for way in args.ways:
                rows = results[(way, clients)]
                mean = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
                ratio = float(np.mean([r["positions"] / r["session"] for r in rows if r["session"]]))
                one = results.get((way, args.clients[0]))
                speedup = float(np.mean([r["positions"] / o["positions"] for r, o in zip(rows, one)])) if one else 0
                print(f"{Path(path).name:20} {size:>3}x{size:<2}{clients:>2} {way:>7} {mean['visits']:>9.0f} "
                      f"{mean['positions']:>9.0f} {mean['hits']:>7.0f} {mean['mean_batch']:>5.1f} "
                      f"{mean['session']:>8.0f} {ratio:>11.2f} {speedup:>5.2f}", flush=True)
    print(f"analysis settings, {visits} visits a search; onnxruntime cpu, {threads or 'its own choice of'} threads "
          f"a call; batched: max batch 64, {parallel} calls at once; xN=1 against N={args.clients[0]}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
