"""Export: a checkpoint (or a model in memory) becomes an ONNX file the engine can load.

Terms:
- network contract: the input and output names and shapes of training/model.py (INPUTS, OUTPUTS), with the
  batch, height and width dimensions left dynamic (sizes MIN_SIZE..MAX_SIZE).
- metadata: one JSON document under onnx_evaluator.METADATA_KEY in the file's metadata_props: format, features
  version and channel counts, accepted sizes, preset and its config, trained sizes, the rule inputs its training
  samples carried (trained_rules, where the checkpoint's provenance has them: network_evaluator.py; or the rule
  sets named with --trained-rules, where some of those rules were in too few samples to be learnt), training
  provenance (data, steps), the value head's meaning, and the parity measured at export.
- parity check: before the file gets its real name, onnxruntime (through the engine's own loader) and torch
  evaluate the same random positions of sizes PARITY_SIZES; any output differing by more than the tolerance
  (1e-4 in fp32) aborts the export with ExportError and leaves no file behind.
- board masks: dropped from the graph unless asked to keep them (board_masks.py): every caller of an exported
  network sends whole boards, where they only cost time.
- random model: a freshly initialised preset, exported the same way; tests and tools use it so that nothing
  depends on shipped weights.

    python -m gtp_engine.training.export_onnx CHECKPOINT OUT.onnx
    python -m gtp_engine.training.export_onnx --random tiny OUT.onnx
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import torch

from gtp_engine import features, network_evaluator
from gtp_engine.onnx_evaluator import ModelLoadError, OnnxEvaluator
from gtp_engine.training import board_masks, game_setups
from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import model as model_lib
from gtp_engine.training.files import replacing, set_network_metadata
from gtp_engine.training.probes import random_positions

log = logging.getLogger(__name__)

FORMAT = "gtp_engine-onnx-1"
MIN_SIZE, MAX_SIZE = 2, 25
PARITY_SIZES = (9, 13, 19)
TOLERANCE = 1e-4
RANDOM_PROVENANCE = {"data": "none: random weights", "steps": 0}


class ExportError(Exception):
    pass


def export(net: model_lib.GoNet, out_path: str | os.PathLike, trained_sizes=(), provenance: dict | None = None,
           tolerance: float = TOLERANCE, seed: int = 0, keep_board_masks: bool = False,
           trained_rules: str | None = None) -> dict:
    """Writes `net` as ONNX to out_path after the parity check; returns the metadata written. `trained_rules`: rule
    set names, separated by commas, whose rule inputs the file says it learnt, in place of the provenance's."""
    out_path = Path(out_path)
    if trained_rules is not None:
        stated = dict.fromkeys(network_evaluator.RuleInputs.of(rules) for rules in game_setups.rule_sets(trained_rules))
        provenance = {**(provenance or {}), "trained_rules_stated": trained_rules}
        learnt = {"trained_rules": [rules.to_json() for rules in stated]}
    else:
        learnt = {"trained_rules": provenance["trained_rules"]} if provenance and "trained_rules" in provenance else {}
    net = net.eval()
    metadata = {
        "format": FORMAT,
        "features_version": features.FEATURES_VERSION,
        "spatial_channels": net.config.spatial_channels,
        "global_features": net.config.global_features,
        "min_size": MIN_SIZE,
        "max_size": MAX_SIZE,
        "preset": net.config.name,
        "config": {k: v for k, v in net.config.to_dict().items() if k != "opponent_policy"},  # not in the file
        "trained_sizes": sorted(trained_sizes),
        **learnt,
        "training": dict(provenance or {}),
        "value": "logits of (win, loss, draw) for the side to move",
        "score": "lead of the side to move, points",
        "ownership": "tanh, +1 owned by the side to move",
        "torch": torch.__version__,
    }
    proto = _to_onnx(net)
    if not keep_board_masks:
        metadata.update(board_masks="dropped", board_masks_dropped=board_masks.drop(proto))
    with replacing(out_path, suffix=".tmp.onnx") as tmp:
        metadata["parity_max_abs_diff"] = 0.0
        _write(proto, metadata, tmp)
        worst = parity(net, tmp, seed=seed)
        if not worst <= tolerance:  # also catches NaN
            raise ExportError(f"{out_path}: onnxruntime differs from torch by {worst:.3g} (tolerance {tolerance:g});"
                              f" not written")
        metadata["parity_max_abs_diff"] = worst
        _write(proto, metadata, tmp)
    log.info("wrote %s (%s, parity %.2g)", out_path, net.config.name, worst)
    return metadata


def export_checkpoint(checkpoint_path: str | os.PathLike, out_path: str | os.PathLike, **kwargs) -> dict:
    ckpt = checkpoint_lib.load(checkpoint_path)
    return export(ckpt.build_model(), out_path, trained_sizes=ckpt.trained_sizes, provenance=ckpt.provenance,
                  **kwargs)


def random_model(preset: str = "tiny", seed: int = 0) -> model_lib.GoNet:
    """A freshly initialised preset in eval mode; the same seed gives the same weights."""
    torch.manual_seed(seed)
    net = model_lib.build(preset)
    # Random but not degenerate normalisation statistics, so the parity check covers them.
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 2.0)
    return net.eval()


def export_random(out_path: str | os.PathLike, preset: str = "tiny", seed: int = 0, **kwargs) -> dict:
    """random_model(preset, seed), exported (for tests and benchmarks; it plays randomly)."""
    return export(random_model(preset, seed), out_path, trained_sizes=(), provenance=RANDOM_PROVENANCE, seed=seed,
                  **kwargs)


def parity(net: model_lib.GoNet, onnx_path: str | os.PathLike, seed: int = 0) -> float:
    """Largest absolute difference between torch and onnxruntime outputs over random positions of PARITY_SIZES."""
    rng = np.random.default_rng(seed)
    evaluator = OnnxEvaluator(onnx_path, device="cpu", symmetry_mode="none")
    worst = 0.0
    for size in PARITY_SIZES:
        spatial, global_ = features.encode(random_positions(size, 6, rng))
        with torch.no_grad():
            expected = net(torch.from_numpy(spatial), torch.from_numpy(global_))
        for got, want in zip(evaluator.run(spatial, global_), expected):
            worst = max(worst, float(np.abs(got - want.numpy()).max()))
    return worst


def _to_onnx(net: model_lib.GoNet):
    """The model as an ONNX ModelProto with dynamic batch, height and width."""
    config = net.config
    # A non-square example with batch 2 keeps torch.export from tying height to width or batch to a constant.
    spatial = torch.zeros(2, config.spatial_channels, 9, 7)
    spatial[:, 0] = 1.0
    global_ = torch.zeros(2, config.global_features)
    batch = torch.export.Dim("batch", min=1, max=65536)
    height = torch.export.Dim("height", min=MIN_SIZE, max=MAX_SIZE)
    width = torch.export.Dim("width", min=MIN_SIZE, max=MAX_SIZE)
    with contextlib.redirect_stdout(io.StringIO()):  # the exporter prints progress; stdout is not ours to use
        program = torch.onnx.export(
            net, (spatial, global_), None,
            input_names=list(model_lib.INPUTS), output_names=list(model_lib.OUTPUTS),
            dynamic_shapes={"spatial": {0: batch, 2: height, 3: width}, "global_": {0: batch}},
            dynamo=True, optimize=True, verbose=False,
        )
    return program.model_proto


def _write(proto, metadata: dict, path: str | os.PathLike) -> None:
    import onnx  # only needed here; the engine reads models through onnxruntime

    set_network_metadata(proto, metadata)
    onnx.save(proto, str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="checkpoint file, or a preset name with --random")
    parser.add_argument("out", help="ONNX file to write")
    parser.add_argument("--random", action="store_true", help="export a randomly initialised preset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument("--keep-board-masks", action="store_true",
                        help="keep the board-mask multiplications (for callers that pad boards into larger tensors)")
    parser.add_argument("--trained-rules", metavar="NAMES",
                        help="rule sets, separated by commas, the network is said to have learnt (the engine feeds "
                             "it the nearest of them for others); default: every rule input its samples carried")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("gtp_engine").setLevel(logging.INFO)
    try:
        if args.random:
            metadata = export_random(args.out, args.source, seed=args.seed, keep_board_masks=args.keep_board_masks)
        else:
            metadata = export_checkpoint(args.source, args.out, tolerance=args.tolerance, seed=args.seed,
                                         keep_board_masks=args.keep_board_masks, trained_rules=args.trained_rules)
    except (ExportError, checkpoint_lib.CheckpointError, ModelLoadError, ValueError) as e:
        print(f"export failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(metadata, indent=2, sort_keys=True), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
