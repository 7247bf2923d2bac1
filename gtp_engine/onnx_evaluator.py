"""ONNX evaluator: runs an exported network with onnxruntime behind the Evaluator protocol.

Terms:
- model file: an .onnx written by gtp_engine.training.export_onnx, with the inputs, outputs and metadata of the
  network contract (training/model.py): inputs "spatial" [N, C, H, W] and "global" [N, G]; outputs "policy"
  logits [N, H*W + 1], "value" (win, loss, draw) logits [N, 3], "score" [N], "ownership" [N, H, W]; metadata
  under METADATA_KEY, JSON with at least features_version, spatial_channels, global_features, min_size, max_size.
- device: "cpu", "cuda", "tensorrt", or "auto" (TensorRT, else CUDA, else CPU: the first that actually loads).
  An explicit GPU device that does not load is an error, not a silent fallback.
- symmetry mode: "random" (one random board symmetry per position and evaluation), "average" (the mean over all
  symmetries of the board, 8 or 4 times the work), "none", or a fixed symmetry number 0..7 (symmetry.py).
- ModelLoadError: the one error for a model that cannot be used (missing, corrupt, built for other features,
  or for another board size); its message names the file and the reason.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import onnxruntime as ort

from gtp_engine import features, symmetry
from gtp_engine.evaluator import EvaluationBatch

if TYPE_CHECKING:
    from gtp_engine.game import GameState

log = logging.getLogger(__name__)

METADATA_KEY = "gtp_engine"
INPUTS = ("spatial", "global")
OUTPUTS = ("policy", "value", "score", "ownership")
DEVICES = ("auto", "cpu", "cuda", "tensorrt")
# Provider lists per device: nodes a GPU provider cannot run fall back to the next one.
_CHAINS = {
    "tensorrt": ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"),
    "cuda": ("CUDAExecutionProvider", "CPUExecutionProvider"),
    "cpu": ("CPUExecutionProvider",),
}


_INVERSE = np.array(symmetry.INVERSE)


class ModelLoadError(Exception):
    """A model file that cannot be used; str() is '<file>: <reason>'."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass(frozen=True)
class ModelInfo:
    """What a model file says about itself (metadata), plus the provider it runs on."""

    path: str
    features_version: int
    spatial_channels: int
    global_features: int
    min_size: int
    max_size: int
    preset: str
    trained_sizes: tuple[int, ...]
    provider: str
    metadata: dict

    def describe(self) -> str:
        sizes = "x, ".join(map(str, self.trained_sizes)) + "x" if self.trained_sizes else "no recorded sizes"
        return f"{Path(self.path).name} ({self.preset}, features v{self.features_version}, trained on {sizes})"


def open_session(path: str | os.PathLike, device: str = "auto", threads: int = 0) -> tuple[ort.InferenceSession, str]:
    """An InferenceSession on the requested device and the device it actually runs on; ModelLoadError if none."""
    path = Path(path)
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if not path.is_file():
        raise ModelLoadError(path, "no such file")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    available = ort.get_available_providers()
    wanted = ["tensorrt", "cuda", "cpu"] if device == "auto" else [device]
    failures = []
    for name in wanted:
        chain = _CHAINS[name]
        if chain[0] not in available:
            failures.append(f"{name}: not in this onnxruntime build")
            continue
        quiet = device == "auto" and name != "cpu"  # a GPU missing its libraries is normal here; failures are kept
        if quiet:
            ort.set_default_logger_severity(4)
        try:
            session = ort.InferenceSession(str(path), sess_options=options, providers=list(chain))
        except Exception as e:  # onnxruntime has its own exception types, for a bad file and a failing provider
            if name == "cpu" or type(e).__name__ in ("InvalidProtobuf", "InvalidGraph", "NoSuchFile"):
                raise ModelLoadError(path, f"onnxruntime cannot load it ({_first_line(e)})") from None
            failures.append(f"{name}: {_first_line(e)}")
            continue
        finally:
            if quiet:
                ort.set_default_logger_severity(2)
        if session.get_providers()[0] == chain[0]:
            return session, name
        failures.append(f"{name}: the provider did not load")
    raise ModelLoadError(path, f"no usable device for --device {device} ({'; '.join(failures)})")


def read_info(session: ort.InferenceSession, path: str | os.PathLike, provider: str) -> ModelInfo:
    """Checks the session against the network contract and this engine's features; ModelLoadError if it fails."""
    raw = session.get_modelmeta().custom_metadata_map.get(METADATA_KEY)
    if raw is None:
        raise ModelLoadError(path, f"no '{METADATA_KEY}' metadata (was it written by gtp_engine.training.export_onnx?)")
    try:
        meta = json.loads(raw)
        info = ModelInfo(
            path=str(path),
            features_version=int(meta["features_version"]),
            spatial_channels=int(meta["spatial_channels"]),
            global_features=int(meta["global_features"]),
            min_size=int(meta["min_size"]),
            max_size=int(meta["max_size"]),
            preset=str(meta.get("preset", "?")),
            trained_sizes=tuple(int(s) for s in meta.get("trained_sizes", ())),
            provider=provider,
            metadata=meta,
        )
    except (ValueError, KeyError, TypeError) as e:
        raise ModelLoadError(path, f"unreadable '{METADATA_KEY}' metadata ({type(e).__name__}: {e})") from None
    if info.features_version != features.FEATURES_VERSION:
        raise ModelLoadError(path, f"network uses features version {info.features_version}, this engine computes "
                                   f"version {features.FEATURES_VERSION}")
    inputs = {i.name: i.shape for i in session.get_inputs()}
    outputs = {o.name for o in session.get_outputs()}
    if set(inputs) != set(INPUTS) or not set(OUTPUTS) <= outputs:
        raise ModelLoadError(path, f"inputs {sorted(inputs)} and outputs {sorted(outputs)} do not follow the "
                                   f"network contract (inputs {list(INPUTS)}, outputs {list(OUTPUTS)})")
    expected = {"spatial": features.SPATIAL_CHANNELS, "global": features.GLOBAL_FEATURES}
    for name, channels in expected.items():
        if inputs[name][1] != channels:
            raise ModelLoadError(path, f"input '{name}' has {inputs[name][1]} channels, features v"
                                       f"{features.FEATURES_VERSION} have {channels}")
    return info


class OnnxEvaluator:
    """Evaluator over an ONNX model file. Not thread-safe for concurrent evaluate calls (one search thread)."""

    def __init__(self, path: str | os.PathLike, device: str = "auto", threads: int = 0,
                 symmetry_mode: str | int = "random", max_batch: int = 256, seed: int | None = None):
        if not (symmetry_mode in ("random", "average", "none") or symmetry_mode in symmetry.ALL):
            raise ValueError(f"symmetry mode must be random, average, none or 0..7, not {symmetry_mode!r}")
        self.session, provider = open_session(path, device, threads)
        self.info = read_info(self.session, path, provider)
        self.symmetry_mode = symmetry_mode
        self.max_batch = max_batch
        self._rng = np.random.default_rng(seed)
        self._sizes_checked: set[tuple[int, int]] = set()
        log.info("network %s runs on %s", self.info.describe(), provider)

    @property
    def provider(self) -> str:
        return self.info.provider

    def check_size(self, width: int, height: int) -> None:
        """Raises ModelLoadError when the network cannot play a width x height board."""
        if (width, height) in self._sizes_checked:
            return
        low, high = self.info.min_size, self.info.max_size
        if not (low <= width <= high and low <= height <= high):
            raise ModelLoadError(self.info.path, f"board size {width}x{height} is outside the sizes this network "
                                                 f"accepts ({low}..{high})")
        if self.info.trained_sizes and max(width, height) not in self.info.trained_sizes:
            log.warning("network %s was not trained on %dx%d boards", self.info.describe(), width, height)
        self._sizes_checked.add((width, height))

    def run(self, spatial: np.ndarray, global_: np.ndarray) -> tuple[np.ndarray, ...]:
        """Raw outputs (policy logits, value logits, score, ownership) for prepared inputs, in chunks of max_batch."""
        step = self.max_batch
        parts = [self.session.run(OUTPUTS, {"spatial": spatial[i:i + step], "global": global_[i:i + step]})
                 for i in range(0, len(spatial), step)]
        return tuple(parts[0]) if len(parts) == 1 else tuple(np.concatenate(column) for column in zip(*parts))

    def evaluate(self, states: Sequence[GameState]) -> EvaluationBatch:
        count = len(states)
        if not count:
            return EvaluationBatch.empty()
        g = states[0].grid
        self.check_size(g.width, g.height)
        kinds = len(symmetry.symmetries_for(g.width, g.height))  # symmetries 0..kinds-1 keep the shape
        mode = self.symmetry_mode
        if mode == "average":
            syms = np.repeat(np.arange(kinds), count)
            states = list(states) * kinds
        elif mode == "random":
            syms = self._rng.integers(0, kinds, count)
        elif mode == "none":
            syms = None
        elif mode < kinds:
            syms = np.full(count, mode)
        else:
            raise ValueError(f"symmetry {mode} does not keep a {g.width}x{g.height} board's shape")
        spatial, global_ = features.encode(states, syms)
        policy_logits, value_logits, score, ownership = self.run(spatial, global_)

        area = g.area
        policy = _softmax(policy_logits)
        ownership = ownership.reshape(len(ownership), area)
        if syms is not None:
            # Back to the original board: original[j] = transformed[permutation of the inverse symmetry][j].
            back = symmetry.permutation_table(g.height, g.width)[_INVERSE[syms]]
            rows = np.arange(len(syms))[:, None]
            ownership = ownership[rows, back]
            policy[:, :area] = policy[rows, back]
        wdl = _softmax(value_logits)
        value = wdl[:, 0] - wdl[:, 1]
        if mode == "average":
            policy = policy.reshape(kinds, count, -1).mean(axis=0)
            value = value.reshape(kinds, count).mean(axis=0)
            score = score.reshape(kinds, count).mean(axis=0)
            ownership = ownership.reshape(kinds, count, -1).mean(axis=0)
        return EvaluationBatch(policy=policy, value=value, score=score, ownership=ownership)


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
