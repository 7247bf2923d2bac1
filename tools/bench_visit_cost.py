"""Search cost per visit beside the network: the CPU time a search spends per playout outside the network, against
the network's own time per position, measured in the same run.

Usage (from the repository root):
    python -m tools.bench_visit_cost [--sizes 9 19] [--playouts 3000] [--repeat 3] [--seconds 3] [--profile]

Each size searches one position (9x9: the empty board; 19x19: after two opening moves) for a fixed number of
playouts with the engine's default SearchConfig but one batch in flight and no early stop, through CachedEvaluator
over the shipped int8 network on one onnxruntime thread, so that the network runs in the calling thread, with
random symmetries (the engine's default) from a fixed seed, so that every search grows the same tree. Times are
the main thread's CPU time (time.thread_time), the median of --repeat searches:
- search us/visit: the search's CPU time per playout less the time inside the network's forward (onnxruntime).
- network us/position: the forward's CPU time per evaluated position, at the search's batch.
- ratio: search / network. With the network in a worker thread, visits/s can approach the network's rate only
  while this stays well below 1 (the GIL serialises the search's Python).
- without the network between: the same search (the same tree: its forwards' outputs recorded, then answered in
  order by a fresh evaluator of the same seed) with no onnxruntime run between its batches. The difference to
  search us/visit is what the network's runs cost the search's own code on the same core (caches and branch
  history it evicts); a search thread that keeps its core while the network runs on the other is spared it.
- beside a busy core: search us/visit and network us/position measured again while another process runs the same
  network without pause on the other core, as the evaluation thread of the pipelined search does; each with its
  factor over the measurement alone. Where two cores share caches, memory bandwidth or a physical core (a
  virtual machine's vCPUs may), they slow each other and the pipelined search pays the factor on both sides; a
  factor near 1 says the gap to the bare network is the search's own work.
The parts below it replay what one more search evaluated, each part timed alone (medians of --repeat), per
evaluated position: the descent's copy of the root's position and the play of the leaf's line on it (the leaf
positions the engine's tree makes for this evaluator, position.kind_for: compiled search positions where built,
else GameStates); features.encode; NetworkEvaluator.evaluate less forward and encode (symmetry, softmax);
CachedEvaluator less its inner evaluator (keys, lookups, stores). The rest of the search's cost is the tree (mcts.py). Last, the pipelined search:
--seconds long searches with the engine's default settings (batches in flight, an evaluation thread, the search
thread computing batches while it waits), medians of --repeat: the search thread's CPU a visit less the forwards it
ran itself (what holds a 2-core search below the bare network's rate), the network's CPU a position in either thread,
visits/s and the cores kept busy. --profile prints a cProfile listing of one search per size.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import multiprocessing
import pstats
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from gtp_engine import features, native, position
from gtp_engine.coords import PASS
from gtp_engine.evaluator import CachedEvaluator
from gtp_engine.game import GameState
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.search import SearchConfig, Searcher, StopCondition, StoppingPolicy

WEIGHTS = {size: Path(__file__).resolve().parent.parent / "weights" / name
           for size, name in ((9, "9x9.int8.onnx"), (19, "default.int8.onnx"))}
OPENING_MOVES = {9: 0, 19: 2}
CACHE = 100_000
SEED = 1
# The fixed-playout searches: one batch in flight, and no early stop, which would end a 3,000-playout search of the
# empty 9x9 board near half its playouts.
FIXED_PLAYOUTS = SearchConfig(stop=StoppingPolicy(early_stop=False), batches_in_flight=1)


class TimedNetwork:
    """The int8 network on one thread whose forward adds its CPU time and positions to counters."""

    def __init__(self, size: int):
        self.network = OnnxEvaluator(WEIGHTS[size], device="cpu", threads=1, seed=SEED)
        self.forward = self.network.forward
        self.network.forward = self._timed_forward
        self.seconds = 0.0
        self.positions = 0
        self.seconds_by_thread: dict[int, float] = {}  # thread ident -> forward CPU seconds in it
        self._lock = threading.Lock()

    def _timed_forward(self, spatial, global_):
        started = time.thread_time()
        outputs = self.forward(spatial, global_)
        spent = time.thread_time() - started
        with self._lock:  # the pipelined search runs forwards in two threads at once
            self.seconds += spent
            self.positions += len(spatial)
            thread = threading.get_ident()
            self.seconds_by_thread[thread] = self.seconds_by_thread.get(thread, 0.0) + spent
        return outputs


def opening(size: int, moves: int, seed: int = 7) -> GameState:
    rng = random.Random(seed)
    state = GameState(size)
    for _ in range(moves):
        legal = [state.grid.points[flat] for flat, ok in enumerate(state.legal_mask()[:-1].tolist()) if ok]
        state.play(rng.choice(legal))
    return state


def search_costs(size: int, root: GameState, playouts: int) -> tuple[float, float]:
    """(search us per visit less the forward, forward us per position) of one fresh search."""
    timed = TimedNetwork(size)
    searcher = Searcher(CachedEvaluator(timed.network, CACHE), FIXED_PLAYOUTS)
    started = time.thread_time()
    made = searcher.search(root, StopCondition(playouts=playouts)).snapshot.playouts
    total = time.thread_time() - started
    return (total - timed.seconds) / made * 1e6, timed.seconds / max(1, timed.positions) * 1e6


def pipelined_costs(size: int, root: GameState, seconds: float) -> tuple[float, float, float, float]:
    """(visits per second, cores busy, search thread us per visit less the forwards it ran, forward us per position)
    of one search of `seconds` with the engine's default SearchConfig: batches in flight, computed by an evaluation
    thread and by the search thread while it waits, as the engine searches."""
    timed = TimedNetwork(size)
    searcher = Searcher(CachedEvaluator(timed.network, CACHE), SearchConfig())
    wall, process, thread = time.perf_counter(), time.process_time(), time.thread_time()
    result = searcher.search(root, StopCondition(deadline=time.monotonic() + seconds))
    wall, process = time.perf_counter() - wall, time.process_time() - process
    thread = time.thread_time() - thread - timed.seconds_by_thread.get(threading.get_ident(), 0.0)
    visits = result.snapshot.playouts
    return (visits / wall, process / wall, thread / visits * 1e6, timed.seconds / max(1, timed.positions) * 1e6)


def run_network_forever(size: int, running) -> None:
    """The int8 network on one thread over one batch of the search's size, without pause; sets `running` once it
    runs (a multiprocessing Event)."""
    network = OnnxEvaluator(WEIGHTS[size], device="cpu", threads=1, seed=SEED)
    spatial, global_ = features.encode([opening(size, OPENING_MOVES[size])] * SearchConfig().batch_size)
    network.forward(spatial, global_)
    running.set()
    while True:
        network.forward(spatial, global_)


@contextlib.contextmanager
def network_beside(size: int) -> Iterator[None]:
    """Another process running the network on the other core for the duration (see the module docstring)."""
    context = multiprocessing.get_context("spawn")  # a fork would copy this process's onnxruntime threads' state
    running = context.Event()
    process = context.Process(target=run_network_forever, args=(size, running), daemon=True)
    process.start()
    try:
        if not running.wait(timeout=60):
            raise RuntimeError("the process that runs the network beside the search did not start")
        yield
    finally:
        process.kill()
        process.join()


def answer_in_order(network: OnnxEvaluator, outputs: list) -> Iterator:
    """Makes network.forward answer `outputs` in order instead of running onnxruntime (del network.forward
    restores it); the iterator left shows whether every output was asked for. A replay that asks for more is
    another tree: RuntimeError."""
    answers = iter(outputs)

    def answer(spatial, global_):
        output = next(answers, None)
        if output is None:
            raise RuntimeError("the replayed search grew another tree: it asked for more evaluations")
        return output

    network.forward = answer
    return answers


def search_without_network(size: int, root: GameState, playouts: int, repeat: int) -> float:
    """Search us per visit of one search replayed without onnxruntime (see the module docstring), median."""
    network = OnnxEvaluator(WEIGHTS[size], device="cpu", threads=1, seed=SEED)
    forward, outputs = network.forward, []

    def recording(spatial, global_):
        outputs.append(forward(spatial, global_))
        return outputs[-1]

    network.forward = recording
    Searcher(CachedEvaluator(network, CACHE), FIXED_PLAYOUTS).search(root, StopCondition(playouts=playouts))
    costs = []
    for _ in range(repeat):
        network = OnnxEvaluator(WEIGHTS[size], device="cpu", threads=1, seed=SEED)  # its symmetries drawn afresh
        answers = answer_in_order(network, outputs)
        searcher = Searcher(CachedEvaluator(network, CACHE), FIXED_PLAYOUTS)
        started = time.thread_time()
        made = searcher.search(root, StopCondition(playouts=playouts)).snapshot.playouts
        costs.append((time.thread_time() - started) / made * 1e6)
        if next(answers, None) is not None:
            raise RuntimeError("the replayed search grew another tree: it asked for fewer evaluations")
    return statistics.median(costs)


def recorded_batches(network: OnnxEvaluator, root: GameState, playouts: int) -> list[list]:
    """The batches of leaf positions that one search sent to the network, in order (a tree never changes a leaf's
    position once it is gathered)."""
    batches = []

    class Recorder:
        accepts_positions = network.accepts_positions

        def evaluate(self, states):
            batches.append(list(states))
            return network.evaluate(states)

    searcher = Searcher(CachedEvaluator(Recorder(), CACHE), FIXED_PLAYOUTS)
    searcher.search(root, StopCondition(playouts=playouts))
    return batches


def median_seconds(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.thread_time()
        run()
        times.append(time.thread_time() - started)
    return statistics.median(times)


def part_costs(size: int, root: GameState, playouts: int, repeat: int) -> dict[str, float]:
    """Microseconds per evaluated position of each part (see the module docstring)."""
    network = OnnxEvaluator(WEIGHTS[size], device="cpu", threads=1, seed=SEED)
    batches = recorded_batches(network, root, playouts)
    outputs = [network.run(*features.encode(batch)) for batch in batches]
    rng = np.random.default_rng(SEED)
    symmetries = [rng.integers(0, 8, len(batch)) for batch in batches]
    positions = sum(len(batch) for batch in batches)
    kind = position.kind_for(network)
    root_position = kind.root(root)
    games = [state if isinstance(state, GameState) else kind.game_state(state)  # the root's batch: its GameState
             for batch in batches for state in batch]
    lines = [[point for _, point in game.moves[len(root.moves):]] for game in games]

    def descend() -> None:  # as the descent plays its line: one call
        for line in lines:
            kind.play_line(kind.copy(root_position), line)

    def encode() -> None:
        for batch, batch_symmetries in zip(batches, symmetries):
            features.encode(batch, batch_symmetries)

    def replayed(run: Callable[[], None]) -> Callable[[], None]:
        """run with the network's forward answering the recorded outputs in order."""
        def wrapped() -> None:
            answer_in_order(network, outputs)
            try:
                run()
            finally:
                del network.forward  # the class's again
        return wrapped

    evaluate = replayed(lambda: [network.evaluate(batch) for batch in batches])

    def cache_all() -> None:
        cache = CachedEvaluator(network, CACHE)
        for batch in batches:
            cache.evaluate(batch)

    cached = replayed(cache_all)
    seconds = {name: median_seconds(run, repeat) for name, run in
               (("descent", descend), ("encode", encode), ("evaluate", evaluate), ("cached", cached))}
    parts = {
        "copy + play of the descent": seconds["descent"],
        "features.encode": seconds["encode"],
        "NetworkEvaluator less forward, encode": seconds["evaluate"] - seconds["encode"],
        "CachedEvaluator less inner": seconds["cached"] - seconds["evaluate"],
    }
    return {name: value / positions * 1e6 for name, value in parts.items()} | {
        "plies per descent": sum(map(len, lines)) / positions}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[9, 19], choices=sorted(WEIGHTS))
    parser.add_argument("--playouts", type=int, default=3000, help="playouts per search (default 3000)")
    parser.add_argument("--repeat", type=int, default=3, help="searches per size, median kept (default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each pipelined search (default 3)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile listing of one search per size")
    args = parser.parse_args(argv)

    print(f"{'size':6s} {'playouts':>8s} {'search us/visit':>16s} {'network us/position':>20s} {'ratio':>6s}")
    for size in args.sizes:
        root = opening(size, OPENING_MOVES[size])
        search_costs(size, root, min(300, args.playouts))  # warm-up: onnxruntime's first runs are slow
        costs = [search_costs(size, root, args.playouts) for _ in range(args.repeat)]
        search = statistics.median(cost[0] for cost in costs)
        network = statistics.median(cost[1] for cost in costs)
        print(f"{size}x{size:<4d} {args.playouts:8d} {search:16.1f} {network:20.1f} {search / network:6.2f}")
        alone = search_without_network(size, root, args.playouts, args.repeat)
        print(f"    {'search without the network between':40s} {alone:6.1f} us/visit")
        with network_beside(size):
            beside = [search_costs(size, root, args.playouts) for _ in range(args.repeat)]
        search_beside = statistics.median(cost[0] for cost in beside)
        forward_beside = statistics.median(cost[1] for cost in beside)
        print(f"    {'beside a busy core: search':40s} {search_beside:6.1f} us/visit ({search_beside / search:.2f}x); "
              f"network {forward_beside:.1f} us/position ({forward_beside / network:.2f}x)")
        parts = part_costs(size, root, args.playouts, args.repeat)
        plies = parts.pop("plies per descent")
        for name, micros in parts.items():
            print(f"    {name:40s} {micros:6.1f} us/position")
        kind = position.kind_for(OnnxEvaluator(WEIGHTS[size], device="cpu", threads=1)).name
        print(f"    ({plies:.1f} plies per descent; leaf positions: {kind})")
        pipelined = [pipelined_costs(size, root, args.seconds) for _ in range(args.repeat)]
        rate, cores, thread, forward = (statistics.median(cost[k] for cost in pipelined) for k in range(4))
        print(f"    {'pipelined search, the engine defaults':40s} {thread:6.1f} us/visit in the search thread beside "
              f"{forward:.1f} us/position of network; {rate:,.0f} visits/s on {cores:.2f} cores")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(search_costs, size, root, args.playouts)
            print(f"--- cProfile: one {size}x{size} search of {args.playouts} playouts ---")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    print(f"compiled twins: {native.describe()}")


if __name__ == "__main__":
    main()
