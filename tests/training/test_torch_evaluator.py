"""The torch backend: a network run by torch evaluates positions as onnxruntime does (symmetries included), the
backend choice follows its rule, self-play runs on it, and a file it cannot use is refused with its name."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine.network_evaluator import ModelLoadError  # noqa: E402
from gtp_engine.onnx_evaluator import OnnxEvaluator  # noqa: E402
from gtp_engine.training import selfplay  # noqa: E402
from gtp_engine.training.torch_evaluator import GraphedForward, TorchEvaluator, open_evaluator  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("symmetry_mode", ["none", 5, "average"])
def test_torch_evaluates_as_onnxruntime_does(tiny_onnx_model, random_states, symmetry_mode):
    states = random_states(7, 10, seed=2) + random_states(7, 3, seed=3, max_fill=0.0)
    want = OnnxEvaluator(tiny_onnx_model, device="cpu", symmetry_mode=symmetry_mode).evaluate(states)
    got = TorchEvaluator.from_onnx(tiny_onnx_model, device="cpu", symmetry_mode=symmetry_mode,
                                   max_batch=4).evaluate(states)  # several chunks
    for field in ("policy", "value", "score", "ownership"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), atol=1e-5, err_msg=field)


def test_the_backend_rule(tiny_onnx_model):
    assert isinstance(open_evaluator(tiny_onnx_model, "onnx", "cpu"), OnnxEvaluator)
    torch_cpu = open_evaluator(tiny_onnx_model, "torch", "cpu")
    assert isinstance(torch_cpu, TorchEvaluator) and torch_cpu.provider == "torch-cpu"
    assert open_evaluator(tiny_onnx_model, "auto", "cpu").provider == "cpu"  # an explicit device is kept
    if not torch.cuda.is_available():
        assert open_evaluator(tiny_onnx_model, "auto", "auto").provider == "cpu"
    with pytest.raises(ValueError, match="backend must be one of auto, onnx, torch"):
        open_evaluator(tiny_onnx_model, "tensorflow")


def test_self_play_runs_on_the_torch_backend(tiny_onnx_model, tmp_path):
    evaluator = open_evaluator(tiny_onnx_model, "torch", "cpu", seed=1)
    config = selfplay.SelfPlayConfig(size=5, komi=2.0, full_visits=8, fast_visits=3, parallel_games=2, seed=4)
    report = selfplay.play(evaluator, 2, config, tmp_path / "games", progress=False)
    assert report.games == 2 and report.samples > 0
    assert json.loads((tmp_path / "games" / selfplay.REPORT).read_text())["games"] == 2


def test_a_missing_network_is_named(tmp_path):
    with pytest.raises(ModelLoadError, match="nothing.onnx: no such file"):
        open_evaluator(tmp_path / "nothing.onnx", "torch", "cpu")


class _CpuGraphs(GraphedForward):
    """GraphedForward with a stand-in for CUDA's capture: static buffers on the CPU, a replay that recomputes into
    the static outputs in place (as a graph's replay overwrites them), and a fault to inject."""

    def __init__(self, compute, device, fault=None):
        super().__init__(compute, device)
        self.fault, self.captures = fault, []

    def capture(self, spatial, global_):
        if self.fault == "capture":
            raise RuntimeError("operation not permitted when stream is capturing")
        inputs = (spatial.clone(), global_.clone())
        outputs = tuple(o.clone() for o in self._compute(*inputs))

        def replay():
            for static, fresh in zip(outputs, self._compute(*inputs)):
                static.copy_(fresh + 1.0 if self.fault == "wrong" else fresh)

        self.captures.append(len(spatial))
        return inputs, outputs, replay


def test_cuda_graph_buckets_return_the_eager_outputs(tiny_onnx_model, random_states):
    """Batches padded to their bucket, the outputs copied out before the next replay overwrites them, one capture
    per bucket; a capture that fails or disagrees with the eager forward turns the graphs off, never the answer."""
    states = random_states(7, 11, seed=4)
    want = TorchEvaluator.from_onnx(tiny_onnx_model, device="cpu", symmetry_mode="none").evaluate(states)
    evaluator = TorchEvaluator.from_onnx(tiny_onnx_model, device="cpu", symmetry_mode="none")
    evaluator.graphs = graphs = _CpuGraphs(evaluator._compute, evaluator.device)
    first = evaluator.evaluate(states[:3])  # bucket 4
    again = [evaluator.evaluate(states[i:j]) for i, j in ((3, 8), (8, 11), (0, 3))]  # buckets 8, 4, 4
    assert graphs.captures == [4, 8] and graphs.usable
    for field in ("policy", "value", "score", "ownership"):
        got = np.concatenate([getattr(b, field) for b in [first] + again[:2]])
        np.testing.assert_allclose(got, getattr(want, field), atol=1e-5, err_msg=field)
        np.testing.assert_array_equal(getattr(again[2], field), getattr(first, field), err_msg=field)
    for fault in ("capture", "wrong"):
        evaluator.graphs = broken = _CpuGraphs(evaluator._compute, evaluator.device, fault)
        got = evaluator.evaluate(states)
        assert not broken.usable
        np.testing.assert_allclose(got.policy, want.policy, atol=1e-5, err_msg=fault)
    assert GraphedForward.bucket(1) == 1 and GraphedForward.bucket(8) == 8 and GraphedForward.bucket(9) == 16
