"""Import: an exported ONNX network becomes a checkpoint again, so training can continue from shipped weights.

Terms:
- initializers: the weights stored in the ONNX graph. The exporter keeps torch's state_dict names, except
  where it stores identical tensors once (stored_names) or folds a norm away (below).
- folded pair: a convolution followed directly by a batch norm. The exporter's optimizer folds the norm into
  the convolution (weight scaled per output channel, a bias "<conv>.weight_bias" added), so the norm's scale,
  shift and running statistics are gone and cannot be recovered one by one. The pairs are found by tracing the
  torch model (torch.fx), not listed by hand, so a new preset needs nothing here.
- recalibration: each folded pair gets back an equivalent norm: the folded convolution, and a norm whose
  running mean and variance are those of the convolution's output on calibration positions, with scale
  sqrt(variance + eps) and shift (folded bias + mean). In eval mode that is exactly the folded network, whatever
  the statistics; in training mode, where batch statistics replace the running ones, it starts close to it
  because the calibration positions are like the ones training will see.
- calibration positions: games the network plays itself, each move drawn from its policy, cut at random
  lengths, by default on the first board size it was trained on (19 when the file names none).
- parity: the checkpoint's model and onnxruntime must agree (export_onnx.parity) or the import fails, naming
  the file, and writes nothing.

    python -m gtp_engine.training import-onnx weights/9x9.onnx runs/9x9.pt
"""

from __future__ import annotations

import ast
import logging
import os
from pathlib import Path

import numpy as np
import torch

from gtp_engine import features
from gtp_engine.game import GameState, Rules
from gtp_engine.onnx_evaluator import ModelLoadError, OnnxEvaluator
from gtp_engine.training import checkpoint as checkpoint_lib
from gtp_engine.training import export_onnx
from gtp_engine.training import model as model_lib
from gtp_engine.training.files import network_metadata

log = logging.getLogger(__name__)

FOLDED_BIAS_SUFFIX = ".weight_bias"  # the exporter's name for a folded convolution's new bias
CALIBRATION_GAMES = 64
_UNTRACKED = ("num_batches_tracked",)  # buffers the ONNX graph never holds
_SCOPES = "pkg.torch.onnx.name_scopes"  # node metadata: the module path of the node, then the operation
_NODE_PARAMETERS = {  # ONNX operation: the torch module it comes from and its parameters, in input order
    "BatchNormalization": (torch.nn.BatchNorm2d, ("weight", "bias", "running_mean", "running_var")),
    "Conv": (torch.nn.Conv2d, ("weight", "bias")),
    "Gemm": (torch.nn.Linear, ("weight", "bias")),
}


class OnnxImportError(checkpoint_lib.CheckpointError):
    """An ONNX file that cannot become a checkpoint; the message names the file and the reason."""


def import_onnx(path: str | os.PathLike, size: int | None = None, calibration_games: int = CALIBRATION_GAMES,
                seed: int = 0, tolerance: float = export_onnx.TOLERANCE) -> checkpoint_lib.Checkpoint:
    """The checkpoint whose model computes what the ONNX file at path computes (checked by parity); size:
    the board size of the calibration games (default: the first size the network was trained on, else 19);
    calibration_games 0: none, for a model that will only be evaluated."""
    import onnx
    from onnx import numpy_helper

    path = Path(path)
    if not path.is_file():
        raise OnnxImportError(path, "no such file")
    try:
        proto = onnx.load(str(path))
    except Exception as e:  # onnx raises several types for a missing or corrupt file
        raise OnnxImportError(path, f"not a readable ONNX file ({type(e).__name__}: {e})") from e
    metadata = _metadata(proto, path)
    if metadata.get("precision", "fp32") != "fp32":
        source = metadata.get("quantization", {}).get("source", "its fp32 source")
        raise OnnxImportError(path, f"an {metadata['precision']} network cannot be trained further; import {source}")
    try:
        config = model_lib.ModelConfig.from_dict(metadata["config"])
    except (TypeError, ValueError, KeyError) as e:
        raise OnnxImportError(path, f"bad model config in its metadata: {e}") from e
    initializers = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    net = model_lib.build(config)
    state = net.state_dict()
    folded = folded_pairs(net)
    stored_as = stored_names(proto, net)
    loaded = {}
    for name, tensor in state.items():
        if name.endswith(_UNTRACKED) or any(name.startswith(norm + ".") for norm in folded.values()):
            continue
        if stored_as.get(name, name) not in initializers:
            raise OnnxImportError(path, f"the {config.name} weight {name} is not in the file")
        value = torch.from_numpy(np.array(initializers[stored_as.get(name, name)]))
        if value.shape != tensor.shape:
            raise OnnxImportError(path, f"{name} has shape {tuple(value.shape)}, the {config.name} model "
                                     f"{tuple(tensor.shape)}")
        loaded[name] = value
    biases = {}
    for conv, norm in folded.items():
        bias = initializers.get(conv + FOLDED_BIAS_SUFFIX)
        if bias is None:
            raise OnnxImportError(path, f"{norm} is neither in the file nor folded into {conv}")
        biases[norm] = torch.from_numpy(np.array(bias))
    state.update(loaded)
    net.load_state_dict(state)
    net.eval()
    trained_sizes = list(metadata.get("trained_sizes") or [])
    size = size or (trained_sizes[0] if trained_sizes else 19)
    _recalibrate(net, biases, calibration_positions(path, size, calibration_games, seed) if calibration_games else [])
    worst = export_onnx.parity(net, path, seed=seed)
    if not worst <= tolerance:
        raise OnnxImportError(path, f"the imported model differs from the file by {worst:.3g} (tolerance "
                                 f"{tolerance:g})")
    provenance = {**metadata.get("training", {}), "imported_from": str(path), "import_parity_max_abs_diff": worst}
    log.info("imported %s (%s, %d folded norms recalibrated, parity %.2g)", path, config.name, len(folded), worst)
    return checkpoint_lib.from_model(net, trained_sizes, provenance)


def folded_pairs(net: model_lib.GoNet) -> dict[str, str]:
    """{convolution: batch norm} for every norm whose only input is a convolution's output (what the exporter
    folds), found by tracing the model."""
    from torch import fx

    graph = fx.symbolic_trace(net, concrete_args={"opponent": False}).graph
    modules = dict(net.named_modules())
    pairs = {}
    for node in graph.nodes:
        if node.op != "call_module" or not isinstance(modules[node.target], torch.nn.BatchNorm2d):
            continue
        source = node.args[0]
        if (isinstance(source, fx.Node) and source.op == "call_module"
                and isinstance(modules[source.target], torch.nn.Conv2d) and len(source.users) == 1):
            pairs[source.target] = node.target
    return pairs


def stored_names(proto, net: model_lib.GoNet) -> dict[str, str]:
    """{state_dict name: initializer name} where they differ. The exporter's optimizer keeps one copy of
    identical initializers (a fresh network's norms are all ones and zeros), so a weight may be stored under
    another's name; each node's name scope, which the exporter records, says which module it computes."""
    modules = dict(net.named_modules())
    stored = {}
    for node in proto.graph.node:
        module_type, parameters = _NODE_PARAMETERS.get(node.op_type, (None, ()))
        scopes = {entry.key: entry.value for entry in node.metadata_props}.get(_SCOPES)
        if module_type is None or scopes is None:
            continue
        module = ast.literal_eval(scopes)[-2]
        if isinstance(modules.get(module), module_type):  # a folded convolution carries its norm's scope
            for parameter, initializer in zip(parameters, node.input[1:]):
                if initializer != f"{module}.{parameter}":
                    stored[f"{module}.{parameter}"] = initializer
    return stored


def _recalibrate(net: model_lib.GoNet, biases: dict[str, torch.Tensor], positions: list[GameState]) -> None:
    """Gives every folded norm the statistics of its input on positions (none: mean 0, variance 1), and the
    scale and shift that make it, in eval mode, add the folded bias and nothing else."""
    norms = dict(net.named_modules())
    statistics = {}

    def record(name):
        def hook(module, inputs, output):
            x = inputs[0].transpose(0, 1).flatten(1).double()  # [C, N*H*W], as batch statistics see it
            statistics[name] = (x.mean(dim=1), x.var(dim=1, unbiased=False))
        return hook

    with torch.no_grad():
        for name in biases:  # first as identity plus bias, so that later layers see the folded network
            norm = norms[name]
            norm.running_mean.zero_()
            norm.running_var.fill_(1.0 - norm.eps)
            norm.weight.fill_(1.0)
            norm.bias.copy_(biases[name])
        if not positions:  # eval mode is already exact; only training needs the statistics
            return
        handles = [norms[name].register_forward_hook(record(name)) for name in biases]
        spatial, global_ = features.encode(positions)
        net(torch.from_numpy(spatial), torch.from_numpy(global_))
        for handle in handles:
            handle.remove()
        for name, (mean, var) in statistics.items():
            norm = norms[name]
            norm.running_mean.copy_(mean.float())
            norm.running_var.copy_(var.float())
            norm.weight.copy_(torch.sqrt(var + norm.eps).float())
            norm.bias.copy_(biases[name] + mean.float())


def calibration_positions(path: Path, size: int, games: int, seed: int) -> list[GameState]:
    """Positions of `games` games the network plays itself, each move drawn from its policy (legal moves
    only), each game cut after a random number of moves up to 60% of the board."""
    rng = np.random.default_rng(seed)
    try:
        evaluator = OnnxEvaluator(path, device="cpu", symmetry_mode="none")
    except ModelLoadError as e:
        raise OnnxImportError(path, f"onnxruntime cannot run it: {e.reason}") from e
    states = [GameState(size, komi=7.0 if size < 19 else 7.5, rules=Rules.named("chinese")) for _ in range(games)]
    lengths = rng.integers(0, int(0.6 * size * size) + 1, size=games)
    for ply in range(int(lengths.max(initial=0))):
        playing = [s for s, length in zip(states, lengths) if ply < length and not s.is_over]
        if not playing:
            break
        policy = evaluator.evaluate(playing).policy
        for state, probabilities in zip(playing, policy):
            weights = probabilities.astype(np.float64) * state.legal_mask()
            weights[-1] = 0.0 if weights[:-1].sum() > 0 else 1.0  # a pass ends nothing worth calibrating on
            state.play(state.grid.from_flat(int(rng.choice(len(weights), p=weights / weights.sum()))))
    return states


def _metadata(proto, path: Path) -> dict:
    metadata = network_metadata(proto)
    if metadata is None:
        raise OnnxImportError(path, "no gtp_engine metadata (not exported by export_onnx)")
    if metadata.get("format") != export_onnx.FORMAT:
        raise OnnxImportError(path, f"format {metadata.get('format')!r}, not {export_onnx.FORMAT}")
    if metadata.get("features_version") != features.FEATURES_VERSION:
        raise OnnxImportError(path, f"features version {metadata.get('features_version')}, but this engine computes "
                                 f"version {features.FEATURES_VERSION}")
    return metadata
