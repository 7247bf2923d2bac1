"""Where a network's time goes in onnxruntime on this machine: onnxruntime's own per-node profile of a session
as the engine opens it (onnx_evaluator.open_session), summed by kind of node.

Kinds: convolutions by kernel and input (stem: reads the input planes; 3x3: the residual blocks; 1x1: the heads),
int8 convolutions (QLinearConv), and every other operator type under its own name (Mul: the on-board masks and
pooling scales; Add: residual sums and pooled biases; ReduceSum/ReduceMax: global pooling; Reorder*/Transpose:
layout changes onnxruntime inserts around its blocked or int8 kernels). Percentages are of the summed node
time of one batch, so they hold on a loaded machine better than the absolute microseconds do. The session
has the engine's settings (onnx_evaluator.open_session): all graph optimisations, sequential execution.

    python -m tools.profile_network weights/9x9.onnx weights/9x9.int8.onnx --size 9
    python -m tools.profile_network weights/default.onnx weights/default.int8.onnx --size 19
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

from gtp_engine import features
from gtp_engine.game import GameState
from gtp_engine.onnx_evaluator import OUTPUTS


def positions(size: int, count: int, seed: int = 0) -> list[GameState]:
    rng = np.random.default_rng(seed)
    states = []
    for _ in range(count):
        state = GameState(size)
        for _ in range(size * size // 4):
            state.play(state.grid.from_flat(int(rng.choice(np.flatnonzero(state.legal_mask())))))
        states.append(state)
    return states


def kind_of(event: dict) -> str:
    op = event["args"].get("op_name", "?")
    if op in ("Conv", "FusedConv"):
        shapes = event["args"].get("input_type_shape", [])
        weight = list(shapes[1].values())[0] if len(shapes) > 1 else []
        if len(weight) == 4 and weight[2:] == [1, 1]:
            return "conv 1x1 (heads)"
        if len(weight) == 4 and weight[1] == features.SPATIAL_CHANNELS:
            return "conv 3x3 stem"
        return "conv 3x3 (blocks)"
    return op


def profile(path: Path, size: int, batch: int, runs: int) -> tuple[collections.Counter, int]:
    """(microseconds by kind: the sum of each node's median over `runs` runs of one batch, node count by kind)."""
    spatial, global_ = features.encode(positions(size, batch))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 0
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = os.path.join(folder, "profile")
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            session.run(OUTPUTS, {"spatial": spatial, "global": global_})
        events = json.loads(Path(session.end_profiling()).read_text())
    node_runs = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per_run = len(node_runs) // (runs + 1)
    durations: dict[str, list[float]] = collections.defaultdict(list)
    kinds = {}
    for event in node_runs[per_run:]:  # the first run allocates
        durations[event["name"]].append(event["dur"])
        kinds[event["name"]] = kind_of(event)
    times, counts = collections.Counter(), collections.Counter()
    for name, values in durations.items():  # the median run of each node: a run another process preempted is out
        times[kinds[name]] += float(np.median(values))
        counts[kinds[name]] += 1
    return times, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("networks", nargs="+", type=Path)
    parser.add_argument("--size", type=int, default=19)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    for path in args.networks:
        times, counts = profile(path, args.size, args.batch, args.runs)
        total = sum(times.values())
        print(f"{path.name}, {args.size}x{args.size}, batch {args.batch}: {total:.0f} us of node time per run (medians)")
        for kind, micros in times.most_common():
            print(f"  {kind:22} {100 * micros / total:5.1f}%  {micros:8.0f} us  {counts[kind]:3} nodes")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
