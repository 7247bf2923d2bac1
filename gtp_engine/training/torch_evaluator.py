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
- CUDA graphs: on CUDA the forward is captured once per input shape and bucket (the batch rounded up to a power
  of two, the rows past it left over from earlier calls: every layer is per position in eval mode) and replayed:
  one launch instead of the hundreds of kernels an eager b10c128 forward launches one by one, which set the
  rate of the engine's small batches (about 8 ms a call at batch 8 and at 64 on an H200, eager). Each new graph
  is checked against the eager forward on the inputs it was captured with; where capture fails or the two
  disagree, the evaluator logs why and runs eager from then on.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

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
                 symmetry_mode: str | int = "random", seed: int | None = None, cuda_graphs: bool = True):
        super().__init__(symmetry_mode, max_batch, seed)
        self.device = runs.device(device)
        self.net = net.to(self.device).eval()
        self.info = ModelInfo(**{**info.__dict__, "provider": f"torch-{self.device.type}"})
        self.graphs = GraphedForward(self._compute, self.device) if cuda_graphs and self.device.type == "cuda" else None
        log.info("network %s runs on %s%s", self.info.describe(), self.info.provider,
                 " (CUDA graphs)" if self.graphs else "")

    @classmethod
    def from_onnx(cls, path: str | os.PathLike, **kwargs) -> TorchEvaluator:
        """The network of an exported file (ModelLoadError or OnnxImportError, naming it, if it is unusable)."""
        info = OnnxEvaluator(path, device="cpu").info  # the same checks and metadata as the onnx backend
        checkpoint = import_onnx.import_onnx(path, calibration_games=0)
        return cls(checkpoint.build_model(), info, **kwargs)

    def forward(self, spatial: np.ndarray, global_: np.ndarray) -> tuple[np.ndarray, ...]:
        if self.graphs is not None and len(spatial):  # run() answers None once the graphs are off
            outputs = self.graphs.run(spatial, global_)
            if outputs is not None:
                return outputs
        outputs = self._compute(torch.from_numpy(spatial).to(self.device), torch.from_numpy(global_).to(self.device))
        return tuple(o.cpu().numpy() for o in outputs)

    def _compute(self, spatial: torch.Tensor, global_: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The raw outputs as float32 tensors on the device. No autocast cache: a graph must cast the weights
        inside itself."""
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.device.type == "cuda",
                                  cache_enabled=False)
        with torch.inference_mode(), autocast:
            return tuple(o.float() for o in self.net(spatial, global_))


class GraphedForward:
    """A forward (tensors in, a tuple of tensors out, every row computed from its own input row alone) replayed
    from CUDA graphs, one per input shape and bucket (see CUDA graphs in the module docstring). Calls from several
    threads take turns: a graph's buffers are shared. run() returns None where the graphs are not usable (then
    usable is False for good) and the caller runs eager."""

    CHECK_TOLERANCE = 0.02  # absolute and relative, graph against eager on the capture's inputs (bf16 noise ~1e-3)

    def __init__(self, compute: Callable[..., tuple[torch.Tensor, ...]], device: torch.device):
        self._compute, self._device = compute, device
        self._graphs: dict[tuple, tuple] = {}  # (bucket, row shapes) -> (replay, static inputs, static outputs)
        self._lock = threading.Lock()
        self.usable = True

    @staticmethod
    def bucket(rows: int) -> int:
        return 1 << max(0, rows - 1).bit_length()

    def run(self, spatial: np.ndarray, global_: np.ndarray) -> tuple[np.ndarray, ...] | None:
        rows = len(spatial)
        key = (self.bucket(rows), spatial.shape[1:], global_.shape[1:])
        with self._lock:
            if not self.usable:
                return None
            entry = self._graphs.get(key)
            if entry is None:
                entry = self._new_graph(key, spatial, global_)
                if entry is None:
                    return None
            replay, inputs, outputs = entry
            inputs[0][:rows].copy_(torch.from_numpy(spatial))
            inputs[1][:rows].copy_(torch.from_numpy(global_))
            replay()
            # copies (on any device): the next replay overwrites the outputs
            return tuple(o[:rows].to("cpu", copy=True).numpy() for o in outputs)

    def _new_graph(self, key: tuple, spatial: np.ndarray, global_: np.ndarray) -> tuple | None:
        """Captures and checks the graph for key (its static inputs filled from this call, its first row repeated
        into the bucket's spare rows); None, with usable False and a warning, where that fails."""
        bucket = key[0]
        fill = np.concatenate([spatial, np.repeat(spatial[:1], bucket - len(spatial), axis=0)])
        fill_global = np.concatenate([global_, np.repeat(global_[:1], bucket - len(global_), axis=0)])
        try:
            inputs, outputs, replay = self.capture(torch.from_numpy(fill), torch.from_numpy(fill_global))
            replay()
            want = self._compute(*inputs)
            for got, expected in zip(outputs, want):
                if not torch.allclose(got, expected, rtol=self.CHECK_TOLERANCE, atol=self.CHECK_TOLERANCE):
                    raise RuntimeError(f"the graph's outputs differ from the eager forward's by up to "
                                       f"{(got - expected).abs().max().item():.3g}")
        except Exception as error:  # any failure leaves the eager forward, which is always right
            log.warning("CUDA graphs off, the network runs eager: batch %d of %s: %s", bucket, key[1], error)
            self.usable = False
            self._graphs.clear()
            return None
        entry = self._graphs[key] = (replay, inputs, outputs)
        return entry

    def capture(self, spatial: torch.Tensor, global_: torch.Tensor) -> tuple[tuple, tuple, Callable[[], None]]:
        """((static spatial, static global) on the device, static outputs, replay) for inputs of this shape."""
        inputs = (spatial.to(self._device), global_.to(self._device))
        with torch.cuda.device(self._device):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture: kernel choices and workspaces settle first
                for _ in range(3):
                    self._compute(*inputs)
            torch.cuda.current_stream().wait_stream(side)
            # Its own memory pool: graphs that shared one would overwrite each other's buffers when replayed in
            # another order than they were captured in.
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                outputs = self._compute(*inputs)
        return inputs, outputs, graph.replay


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

