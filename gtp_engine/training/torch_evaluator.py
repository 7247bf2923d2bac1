"""Torch evaluator: the network run by torch behind the Evaluator protocol, for self-play and gating on machines
where torch has a GPU and onnxruntime has none (onnxruntime's GPU build is not installable everywhere torch's is).

Terms:
- backend: what runs the network for self-play and gating: "onnx" (onnx_evaluator.OnnxEvaluator, on its
  --device), "torch" (TorchEvaluator: CUDA when torch has it, else the CPU), or "auto": with --device auto,
  onnxruntime when it runs on a GPU, else torch when torch has CUDA, else onnxruntime on the CPU; with another
  device, onnxruntime on it. On the CPU onnxruntime is the faster (tools/bench_selfplay.py --backend measures).
- network file: an ONNX file exported by export_onnx; the torch backend imports it (import_onnx.py, without
  recalibration: inference only needs eval mode, which the import reproduces exactly), so every caller names
  networks the same way whatever the backend.
- precision: float32 on the CPU; on CUDA the forward pass runs under bfloat16 autocast, as training does, and the
  outputs are returned as float32.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import torch

from gtp_engine.network_evaluator import ModelInfo, NetworkEvaluator
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.training import import_onnx, runs
from gtp_engine.training import model as model_lib

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")


class TorchEvaluator(NetworkEvaluator):
    def __init__(self, net: model_lib.GoNet, info: ModelInfo, device: str = "auto", max_batch: int = 1024,
                 symmetry_mode: str | int = "random", seed: int | None = None):
        super().__init__(symmetry_mode, max_batch, seed)
        self.device = runs.device(device)
        self.net = net.to(self.device).eval()
        self.info = ModelInfo(**{**info.__dict__, "provider": f"torch-{self.device.type}"})
        log.info("network %s runs on %s", self.info.describe(), self.info.provider)

    @classmethod
    def from_onnx(cls, path: str | os.PathLike, **kwargs) -> TorchEvaluator:
        """The network of an exported file (ModelLoadError or OnnxImportError, naming it, if it is unusable)."""
        info = OnnxEvaluator(path, device="cpu").info  # the same checks and metadata as the onnx backend
        checkpoint = import_onnx.import_onnx(path, calibration_games=0)
        return cls(checkpoint.build_model(), info, **kwargs)

    def forward(self, spatial: np.ndarray, global_: np.ndarray) -> tuple[np.ndarray, ...]:
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.device.type == "cuda")
        with torch.inference_mode(), autocast:
            outputs = self.net(torch.from_numpy(spatial).to(self.device), torch.from_numpy(global_).to(self.device))
            return tuple(o.float().cpu().numpy() for o in outputs)

def open_evaluator(path: str | os.PathLike, backend: str = "auto", device: str = "auto", threads: int = 0,
                   seed: int | None = None) -> NetworkEvaluator:
    """The network at path on the backend asked for (see the module's terms); device: onnxruntime's for the onnx
    backend, torch's ("auto", "cpu", "cuda", "cuda:1", ...) for the torch one."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "torch":
        return TorchEvaluator.from_onnx(path, device=device, seed=seed)
    evaluator = OnnxEvaluator(path, device=device, threads=threads, seed=seed)
    if backend == "auto" and device == "auto" and evaluator.provider == "cpu" and torch.cuda.is_available():
        return TorchEvaluator.from_onnx(path, device="cuda", seed=seed)
    return evaluator

