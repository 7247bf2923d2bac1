"""ONNX evaluator: runs an exported network with onnxruntime behind the Evaluator protocol.

Terms:
- model file: an .onnx written by gtp_engine.training.export_onnx, with the inputs, outputs and metadata of the
  network contract (training/model.py): inputs "spatial" [N, C, H, W] and "global" [N, G]; outputs "policy"
  logits [N, H*W + 1], "value" (win, loss, draw) logits [N, 3], "score" [N], "ownership" [N, H, W]; metadata
  under METADATA_KEY, JSON with at least features_version, spatial_channels, global_features, min_size, max_size;
  a quantized network (training/quantize.py) adds "precision": "int8" and its "quantization" record; a network
  that says which rules it was trained on, "trained_rules": [{"scoring": "area", "ko": "positional",
  "suicide": false}, ...] (network_evaluator.py: trained rules).
- device: "cpu", "cuda", "tensorrt", or "auto" (TensorRT, else CUDA, else CPU: the first that actually loads).
  An explicit GPU device that does not load is an error (DeviceUnavailable), not a silent fallback.
- GPU libraries: onnxruntime-gpu needs the CUDA and cuDNN libraries it was built for. Those of the pip packages
  the `gpu` extra installs (onnxruntime-gpu[cuda,cudnn]) are loaded before the first GPU attempt
  (onnxruntime.preload_dlls); without them the system's libraries are used, where there are any.
- onnxruntime's own log: its lines (in colour, on stderr) are let through at --log-level debug only, where they
  say why a GPU provider did not load; at the other levels a failure reaches the user as this engine's
  ModelLoadError, naming the file and the reason.
- symmetries, output conversion, size checks and ModelLoadError: network_evaluator.py, shared with the torch
  evaluator of the training package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import logging
import os
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort

from gtp_engine import features
from gtp_engine.network_evaluator import (
    INT8_SUFFIX,
    DeviceUnavailable,
    ModelInfo,
    ModelLoadError,
    NetworkEvaluator,
    is_int8_name,
    trained_rules_of,
)

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
# onnxruntime's logger severity: warnings and up where this engine logs at debug level, else fatal errors only.
_DEBUG_SEVERITY, _QUIET_SEVERITY = 2, 4
# sys.stdout is global: the engine loads two networks at once (the default size's and the one boardsize asked
# for), and two redirections of it that overlap restore it wrongly.
_QUIET_LOCK = threading.Lock()


def open_session(path: str | os.PathLike, device: str = "auto", threads: int = 0) -> tuple[ort.InferenceSession, str]:
    """An InferenceSession on the requested device and the device it actually runs on; ModelLoadError if none."""
    path = Path(path)
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if path.is_dir():
        raise ModelLoadError(path, "is a directory (give the .onnx file, or the folder as --weights-dir)")
    if not path.is_file():
        raise ModelLoadError(path, "no such file")
    try:
        path.open("rb").close()
    except OSError as error:
        raise ModelLoadError(path, f"cannot be read ({error.strerror})") from None
    ort.set_default_logger_severity(_DEBUG_SEVERITY if log.isEnabledFor(logging.DEBUG) else _QUIET_SEVERITY)
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
        if name != "cpu":
            _preload_gpu_libraries()
        try:
            with _quietly() if name != "cpu" else contextlib.nullcontext():
                session = ort.InferenceSession(str(path), sess_options=options, providers=list(chain))
        except Exception as e:  # onnxruntime has its own exception types, for a bad file and a failing provider
            if name == "cpu" or type(e).__name__ in ("InvalidProtobuf", "InvalidGraph", "NoSuchFile"):
                raise ModelLoadError(path, f"onnxruntime cannot load it ({_first_line(e)})") from None
            failures.append(f"{name}: {_first_line(e)}")
            continue
        if session.get_providers()[0] == chain[0]:
            return session, name
        failures.append(f"{name}: onnxruntime's {chain[0]} did not load")
    raise DeviceUnavailable(path, f"no usable device for --device {device} ({'; '.join(failures)})")


@functools.cache
def _preload_gpu_libraries() -> None:
    """Loads the CUDA and cuDNN libraries of the nvidia pip packages (the gpu extra), else the system's, once per
    process; what onnxruntime prints about libraries it did not find goes to the debug log, not to the user."""
    preload = getattr(ort, "preload_dlls", None)  # onnxruntime 1.21 and later
    if preload is None:
        return
    printed = io.StringIO()
    with _QUIET_LOCK, contextlib.redirect_stdout(printed):
        try:
            preload(directory="")  # the nvidia site packages, then the default library paths
        except Exception as error:  # noqa: BLE001 - the provider's own attempt says what is missing
            print(f"preload_dlls failed: {error}")
    for line in printed.getvalue().splitlines():
        log.debug("onnxruntime: %s", line)


@contextlib.contextmanager
def _quietly():
    """The "EP Error ... Falling back" onnxruntime prints on stdout, where a GPU provider fails and it retries
    without it, kept off stdout, one thread at a time."""
    with _QUIET_LOCK, contextlib.redirect_stdout(io.StringIO()):
        yield


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
            precision=str(meta.get("precision", "fp32")),
            trained_rules=trained_rules_of(meta),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise ModelLoadError(path, f"unreadable '{METADATA_KEY}' metadata ({type(e).__name__}: {e})") from None
    if info.precision not in ("fp32", "int8"):
        raise ModelLoadError(path, f"unknown precision {info.precision!r} in its metadata (fp32 or int8)")
    if info.precision == "int8" and not isinstance(meta.get("quantization"), dict):
        raise ModelLoadError(path, "int8 network without its 'quantization' record (source, calibration) in the "
                                   "metadata (was it written by gtp_engine.training quantize?)")
    if is_int8_name(path) and info.precision != "int8":
        raise ModelLoadError(path, f"named as an int8 network (*{INT8_SUFFIX}) but its metadata says "
                                   f"{info.precision}")
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
    height, width = inputs["spatial"][2:4]
    if isinstance(height, int) or isinstance(width, int):  # an export with a fixed board: only that size runs
        if height != width or not info.min_size <= height <= info.max_size:
            raise ModelLoadError(path, f"input 'spatial' is fixed at {height}x{width}, outside the square sizes "
                                       f"{info.min_size}..{info.max_size} its metadata names")
        info = dataclasses.replace(info, min_size=height, max_size=height)
    return info


class OnnxEvaluator(NetworkEvaluator):
    """Evaluator over an ONNX model file (network_evaluator.NetworkEvaluator does the rest)."""

    def __init__(self, path: str | os.PathLike, device: str = "auto", threads: int = 0,
                 symmetry_mode: str | int = "random", max_batch: int = 256, seed: int | None = None):
        super().__init__(symmetry_mode, max_batch, seed)
        self.session, provider = open_session(path, device, threads)
        self.info = read_info(self.session, path, provider)
        log.info("network %s runs on %s", self.info.describe(), provider)
        trained = self.info.trained_rules
        log.info("network %s was trained on %s", Path(path).name,
                 "; ".join(rules.describe() + " rules" for rules in trained) if trained is not None else
                 "rules its metadata does not state: every rule input is given to it as the game's")

    def forward(self, spatial: np.ndarray, global_: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(self.session.run(OUTPUTS, {"spatial": spatial, "global": global_}))


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
