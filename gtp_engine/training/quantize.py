"""Quantize: an exported fp32 network becomes an int8 one (static quantization), checked against its source.

Terms:
- static quantization: weights and activations in int8, with the scale of every activation fixed beforehand
  from its range over calibration inputs (onnxruntime.quantization). Here, by default (scope "trunk"): every
  convolution of the residual blocks (FP32_CONVS leading ones may be kept in fp32), in QDQ format
  (QuantizeLinear/DequantizeLinear pairs that onnxruntime fuses into integer kernels), weights signed and per
  output channel, activations unsigned (the u8 x s8 product of VNNI; s8 activations ran at 1.2x fp32 against
  1.9x). The stem, the heads, normalisation, masks and pooling stay in fp32.
- calibration method: minmax takes each activation's whole range, percentile (the default) clips the top
  0.001% of it, which leaves the bulk of the values more int8 steps (the two compared on the shipped networks:
  docs/network-history.md).
- calibration positions / held-out positions: positions of real games (an SGF folder or archive), replayed
  with the engine's own rules and features. Games are split by their game key (splits.py), so no game gives
  positions to both sides; from each game a few positions at random move numbers are kept.
- agreement: on the held-out positions (symmetry none), the share of positions where both networks pick the
  same top policy move, the mean absolute difference of the value (win minus loss) and of the score.
- int8 file: the fp32 file's metadata plus "precision": "int8" and a "quantization" record (source file and
  its SHA-256, calibration data, method, agreement). The engine reads it like any network
  (onnx_evaluator.read_info) and finds it beside its source as <name>.int8.onnx (INT8_SUFFIX).

    python -m gtp_engine.training quantize weights/9x9.onnx weights/9x9.int8.onnx \\
        --calibration ../shared/data/go9_curated.tar.xz
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from gtp_engine import features, sgf_io
from gtp_engine.game import GameState
from gtp_engine.network_evaluator import ModelLoadError
from gtp_engine.onnx_evaluator import INT8_SUFFIX, OnnxEvaluator
from gtp_engine.training.files import replacing, set_network_metadata
from gtp_engine.training.splits import record_key, split_of

log = logging.getLogger(__name__)

SCOPES = {  # what gets quantized: the residual blocks' convolutions, every convolution, or those and dense layers
    "trunk": ("Conv",),
    "conv": ("Conv",),
    "all": ("Conv", "Gemm"),
}
CALIBRATIONS = ("minmax", "percentile", "entropy")
FP32_CONVS = 0  # leading convolutions of the residual blocks the trunk scope keeps in fp32 (module docstring)
HELD_OUT_FRACTION = 0.5  # share of the games (by game key) whose positions are held out from calibration
POSITIONS_PER_GAME = 4
# What a quantized network must reach on held-out positions; quantize() refuses to write one that does not.
MIN_TOP1_AGREEMENT = 0.97
MAX_VALUE_DIFF = 0.02


class QuantizeError(Exception):
    pass


@dataclass(frozen=True)
class Agreement:
    positions: int
    top1: float  # share of positions with the same top policy move
    value_mad: float  # mean |value_a - value_b|, value = win - loss
    score_mad: float  # mean |score_a - score_b|, points
    policy_mad: float  # mean over positions of the summed |p_a - p_b| (total variation x 2)

    def to_dict(self) -> dict:
        return {"positions": self.positions, "top1": round(self.top1, 4), "value_mad": round(self.value_mad, 5),
                "score_mad": round(self.score_mad, 4), "policy_l1": round(self.policy_mad, 4)}

    def meets_targets(self) -> bool:
        return self.top1 >= MIN_TOP1_AGREEMENT and self.value_mad <= MAX_VALUE_DIFF


def game_positions(source: str | os.PathLike, size: int, count: int, held_out: bool,
                   seed: int = 0) -> list[GameState]:
    """Up to `count` positions of size x size games from an SGF folder or archive: POSITIONS_PER_GAME per game at
    random move numbers, from the held-out games or from the others (see the module docstring)."""
    rng = np.random.default_rng(seed)
    positions: list[GameState] = []
    for record in _records(source):
        if len(positions) >= count:
            break
        if (record.width, record.height) != (size, size) or len(record.moves) < 2:
            continue
        if (split_of(record_key(record), HELD_OUT_FRACTION) == "val") != held_out:
            continue
        picks = sorted(1 + rng.choice(len(record.moves) - 1, min(POSITIONS_PER_GAME, len(record.moves) - 1),
                                      replace=False))  # after 1 .. len - 1 moves: the empty board once is enough
        try:
            game = record.to_game(max_moves=0)
            played = 0
            for ply in picks:
                for color, point in record.moves[played:ply]:
                    game.play(point, color)
                played = ply
                positions.append(game.copy())
        except ValueError:  # an illegal move in the record: keep what came before it
            continue
    return positions[:count]


def _records(source: str | os.PathLike) -> Iterator[sgf_io.GameRecord]:
    for name, data in sgf_io.read_sgf_files(source):
        try:
            yield sgf_io.load_sgf(data, name)
        except sgf_io.SgfError:
            continue


def agreement(a: OnnxEvaluator, b: OnnxEvaluator, positions: list[GameState], batch: int = 64) -> Agreement:
    """How closely network b follows network a on `positions` (one board size), symmetry none."""
    same, value, score, policy = 0, 0.0, 0.0, 0.0
    for i in range(0, len(positions), batch):
        chunk = positions[i:i + batch]
        x, y = a.evaluate(chunk), b.evaluate(chunk)
        same += int((x.policy.argmax(axis=1) == y.policy.argmax(axis=1)).sum())
        value += float(np.abs(x.value - y.value).sum())
        score += float(np.abs(x.score - y.score).sum())
        policy += float(np.abs(x.policy - y.policy).sum())
    n = max(1, len(positions))
    return Agreement(len(positions), same / n, value / n, score / n, policy / n)


def quantize(source: str | os.PathLike, out: str | os.PathLike, calibration: list[GameState],
             held_out: list[GameState], *, per_channel: bool = True, scope: str = "trunk",
             method: str = "percentile", quant_format: str = "qdq", calibration_name: str = "", batch: int = 8,
             require_targets: bool = True, fp32_convs: int = FP32_CONVS) -> dict:
    """Writes the int8 version of `source` to `out` and returns its metadata; QuantizeError when the result
    misses the agreement targets on `held_out` (unless require_targets is False)."""
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quant_pre_process, quantize_static)

    source, out = Path(source), Path(out)
    if not calibration:
        raise QuantizeError("no calibration positions")
    reference = OnnxEvaluator(source, device="cpu", symmetry_mode="none")  # checks the source first
    meta = dict(reference.info.metadata)
    if meta.get("precision", "fp32") != "fp32":
        raise QuantizeError(f"{source}: already {meta['precision']}; quantize its fp32 source")

    # Equal batches: the histogram calibrators (percentile, entropy) stack the outputs of all batches.
    batch = min(batch, len(calibration))
    calibration = calibration[: len(calibration) - len(calibration) % batch]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter(range(0, len(calibration), batch))

        def get_next(self) -> dict | None:
            start = next(self.batches, None)
            if start is None:
                return None
            spatial, global_ = features.encode(calibration[start:start + batch])
            return {"spatial": spatial, "global": global_}

    formats = {"qdq": QuantFormat.QDQ, "qoperator": QuantFormat.QOperator}
    with tempfile.TemporaryDirectory() as folder:
        prepared = Path(folder) / "prepared.onnx"
        quantized = Path(folder) / "quantized.onnx"
        methods = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
                   "entropy": CalibrationMethod.Entropy}
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(quantized), Reader(), quant_format=formats[quant_format],
                        per_channel=per_channel, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        op_types_to_quantize=list(SCOPES[scope]), calibrate_method=methods[method],
                        nodes_to_exclude=_fp32_convolutions(prepared, fp32_convs) if scope == "trunk" else [])
        meta.update(precision="int8", quantization={
            "source": source.name,
            "source_sha256": _sha256(source),
            "calibration": f"{calibration_name} ({len(calibration)} positions)",
            "method": f"onnxruntime {_ort_version()} static, {quant_format}, {method} calibration, "
                      f"activations u8 per tensor, weights s8 {'per channel' if per_channel else 'per tensor'}, "
                      f"scope {scope}" + (f", first {fp32_convs} block convolutions fp32" if scope == "trunk" else ""),
        })
        _write_metadata(quantized, meta)
        candidate = OnnxEvaluator(quantized, device="cpu", symmetry_mode="none")
        result = agreement(reference, candidate, held_out) if held_out else None
        if result is not None:
            meta["quantization"]["agreement"] = {"held_out": f"{calibration_name} held-out games", **result.to_dict()}
            _write_metadata(quantized, meta)
            log.info("agreement with %s on %d held-out positions: top-1 %.4f, value MAD %.4f, score MAD %.3f",
                     source.name, result.positions, result.top1, result.value_mad, result.score_mad)
            if require_targets and not result.meets_targets():
                raise QuantizeError(f"{out}: not written, agreement below target (top-1 {result.top1:.4f} < "
                                    f"{MIN_TOP1_AGREEMENT} or value MAD {result.value_mad:.4f} > {MAX_VALUE_DIFF})")
        with replacing(out) as tmp:
            tmp.write_bytes(quantized.read_bytes())
    return meta


def _fp32_convolutions(path: Path, leading: int) -> list[str]:
    """Names of the convolutions the trunk scope leaves in fp32: the stem (it reads the input planes), the
    heads' 1x1 convolutions, and the first `leading` convolutions of the residual blocks (graph order, which
    is the blocks' order)."""
    import onnx

    graph = onnx.load(str(path)).graph
    kernels = {i.name: tuple(i.dims[2:]) for i in graph.initializer}
    convs = [n for n in graph.node if n.op_type == "Conv"]
    outside = [n.name for n in convs if kernels.get(n.input[1]) != (3, 3) or n.input[0] == "spatial"]
    trunk = [n.name for n in convs if n.name not in outside]
    return outside + trunk[:leading]


def _write_metadata(path: Path, meta: dict) -> None:
    import onnx  # the train extra; the engine reads models through onnxruntime

    proto = onnx.load(str(path))
    set_network_metadata(proto, meta)
    onnx.save(proto, str(path))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def default_out(source: str | os.PathLike) -> Path:
    source = Path(source)
    return source.with_name(source.name.removesuffix(".onnx") + INT8_SUFFIX)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gtp_engine.training quantize",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="fp32 ONNX file written by export")
    parser.add_argument("out", nargs="?", help=f"int8 file to write (default: beside the source, *{INT8_SUFFIX})")
    parser.add_argument("--calibration", required=True, help="SGF folder or archive of real games")
    parser.add_argument("--size", type=int, help="board size of the games (default: the first size the network "
                                                 "was trained on, else 19)")
    parser.add_argument("--positions", type=int, default=2048, help="calibration positions")
    parser.add_argument("--held-out", type=int, default=2048, help="held-out positions for the agreement check")
    parser.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor, not per channel")
    parser.add_argument("--format", choices=["qdq", "qoperator"], default="qdq")
    parser.add_argument("--scope", choices=list(SCOPES), default="trunk",
                        help="trunk: the residual blocks' convolutions (stem and heads stay fp32); conv: every "
                             "convolution; all: convolutions and dense layers")
    parser.add_argument("--fp32-convs", type=int, default=FP32_CONVS,
                        help="leading convolutions of the residual blocks kept in fp32 under --scope trunk")
    parser.add_argument("--method", choices=CALIBRATIONS, default="percentile", help="calibration of activation ranges")
    parser.add_argument("--force", action="store_true", help="write the file even below the agreement targets")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("gtp_engine").setLevel(logging.INFO)
    try:
        size = args.size
        if size is None:
            trained = OnnxEvaluator(args.source, device="cpu").info.trained_sizes
            size = trained[0] if trained else 19
        calibration = game_positions(args.calibration, size, args.positions, held_out=False, seed=args.seed)
        held_out = game_positions(args.calibration, size, args.held_out, held_out=True, seed=args.seed + 1)
        log.info("%d calibration and %d held-out %dx%d positions from %s", len(calibration), len(held_out),
                 size, size, args.calibration)
        meta = quantize(args.source, args.out or default_out(args.source), calibration, held_out,
                        per_channel=not args.per_tensor, scope=args.scope, method=args.method, quant_format=args.format,
                        fp32_convs=args.fp32_convs,
                        calibration_name=Path(args.calibration).name, require_targets=not args.force)
    except (QuantizeError, ModelLoadError, OSError, ValueError) as e:
        print(f"quantize failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(meta["quantization"], indent=2, sort_keys=True), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
