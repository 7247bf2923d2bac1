"""Board masks in an exported network, and dropping the ones the engine never needs.

Terms:
- board mask: the on-board plane, input channel 0 (model.py), which the network slices out of its input once and
  multiplies into its spatial activations, so that a board zero-padded into a larger tensor gets the same answer
  as the board alone.
- whole-board input: a batch in which every position fills its tensor (height x width is the board). Its mask is
  all ones, and each multiplication by it returns its other operand bit for bit. The engine, self-play, the gate
  and quantize only ever send whole boards: features.encode encodes a position at its own size.
- dropping the masks: the ONNX graph without those multiplications; their consumers read the other operand.
  What else reads the mask stays: the pooling's area (its sum), the off-board policy logits and the ownership's
  mask, each computed once per position. onnxruntime cannot remove a multiplication by an input itself, and
  these cost 9% of the fp32 9x9 network's time and 13% of the int8 one's (tools/profile_network.py).
- metadata: a file with dropped masks says so in its gtp_engine metadata ("board_masks": "dropped", with the
  number of multiplications removed); it needs whole-board input.

    python -m gtp_engine.training drop-board-masks weights/9x9.onnx          # in place
    python -m gtp_engine.training drop-board-masks NET.onnx OUT.onnx
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import numpy as np

from gtp_engine import features
from gtp_engine.network_evaluator import ModelLoadError
from gtp_engine.onnx_evaluator import METADATA_KEY, OnnxEvaluator
from gtp_engine.training.files import network_metadata, replacing, set_network_metadata
from gtp_engine.training.probes import random_positions

log = logging.getLogger(__name__)

SPATIAL_INPUT = "spatial"
CHECK_SIZES = (9, 13, 19)
TOLERANCE = 1e-5  # the outputs are equal bit for bit in fp32; int8 kernels may fuse differently without the Mul


class BoardMaskError(ValueError):
    pass


def mask_output(graph) -> str:
    """The name of the tensor the graph slices out of its spatial input as the board mask."""
    slices = [n for n in graph.node if n.op_type == "Slice" and n.input and n.input[0] == SPATIAL_INPUT]
    if len(slices) != 1:
        raise BoardMaskError(f"expected one Slice of the {SPATIAL_INPUT!r} input (the board mask), found {len(slices)}")
    return slices[0].output[0]


def drop(model) -> int:
    """Removes from the ONNX ModelProto every multiplication by the board mask; returns how many it removed."""
    graph = model.graph
    mask = mask_output(graph)
    replaced: dict[str, str] = {}  # output of a removed Mul -> its other operand
    kept = []
    for node in graph.node:
        if node.op_type == "Mul" and mask in node.input:
            replaced[node.output[0]] = node.input[1] if node.input[0] == mask else node.input[0]
        else:
            kept.append(node)

    def source(name: str) -> str:
        while name in replaced:
            name = replaced[name]
        return name

    for node in kept:
        for i, name in enumerate(node.input):
            node.input[i] = source(name)
    for output in graph.output:  # a graph output must keep its name
        if output.name in replaced:
            kept.append(_identity(source(output.name), output.name))
    del graph.node[:]
    graph.node.extend(kept)
    return len(replaced)


def _identity(source: str, name: str):
    import onnx

    return onnx.helper.make_node("Identity", [source], [name], name=f"{name}_identity")


def metadata_of(model) -> dict:
    metadata = network_metadata(model)
    if metadata is None:
        raise BoardMaskError(f"no {METADATA_KEY} metadata: not a gtp_engine network")
    return metadata


def drop_file(source: str | os.PathLike, out: str | os.PathLike | None = None, seed: int = 0) -> float:
    """Writes `source` without its board masks to `out` (default: in place) once both agree on whole boards of
    CHECK_SIZES; returns the largest difference of any output. A file whose masks are already dropped is left
    as it is (0.0)."""
    import onnx
    from google.protobuf.message import DecodeError

    source, out = Path(source), Path(out or source)
    try:
        model = onnx.load(str(source))
    except FileNotFoundError:
        raise BoardMaskError(f"{source}: no such file") from None
    except (OSError, DecodeError) as e:
        raise BoardMaskError(f"{source}: not a readable ONNX file ({e})") from None
    try:
        metadata = metadata_of(model)
    except BoardMaskError as e:
        raise BoardMaskError(f"{source}: {e}") from None
    if metadata.get("board_masks") == "dropped":
        if out != source:
            out.write_bytes(source.read_bytes())
        return 0.0
    removed = drop(model)
    if not removed:
        raise BoardMaskError(f"{source}: no multiplication by the board mask found")
    metadata.update(board_masks="dropped", board_masks_dropped=removed)
    set_network_metadata(model, metadata)
    with replacing(out, suffix=".tmp.onnx") as tmp:
        onnx.save(model, str(tmp))
        worst = difference(source, tmp, seed)
        if not worst <= TOLERANCE:
            raise BoardMaskError(f"{source}: without its board masks the network differs by {worst:.3g} on whole "
                                 f"boards (tolerance {TOLERANCE:g}); not written")
    log.info("%s: %d board-mask multiplications dropped (largest difference %.2g) -> %s", source, removed, worst, out)
    return worst


def difference(a: str | os.PathLike, b: str | os.PathLike, seed: int = 0) -> float:
    """Largest absolute difference of any output of networks a and b on random whole-board positions."""
    rng = np.random.default_rng(seed)
    first = OnnxEvaluator(a, device="cpu", symmetry_mode="none")
    second = OnnxEvaluator(b, device="cpu", symmetry_mode="none")
    worst = 0.0
    for size in CHECK_SIZES:
        spatial, global_ = features.encode(random_positions(size, 6, rng))
        for x, y in zip(first.run(spatial, global_), second.run(spatial, global_)):
            worst = max(worst, float(np.abs(x - y).max()))
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gtp_engine.training drop-board-masks",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="ONNX network written by export or quantize")
    parser.add_argument("out", nargs="?", help="file to write (default: the source, in place)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("gtp_engine").setLevel(logging.INFO)
    try:
        drop_file(args.source, args.out)
    except (BoardMaskError, ModelLoadError, OSError) as e:
        print(f"drop-board-masks failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
