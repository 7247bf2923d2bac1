"""tools/refit_ownership.py on the tiny network and the fixture games: the fit lowers the ownership error it
minimises, and a refitted file answers the policy, value and score of the original exactly."""

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from gtp_engine.training import sgf_ingest  # noqa: E402
from gtp_engine.training.sgf_ingest import IngestConfig  # noqa: E402
from tools import refit_ownership  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    out = tmp_path_factory.mktemp("refit-shards")
    config = IngestConfig(size=9, min_moves=10, val_fraction=0.5, workers=1, ownership_playouts=8)
    sgf_ingest.ingest([FIXTURES], out, config, progress=False)
    return out


def test_the_fit_lowers_the_error_and_leaves_every_other_output_alone(tiny_onnx_model, shards, tmp_path, capsys):
    model = onnx.load(str(tiny_onnx_model))
    session, name = refit_ownership.feature_session(model, threads=1)
    rng = np.random.default_rng(0)
    v, target, stones = refit_ownership.features_and_targets(
        session, name, refit_ownership.samples(shards, "train", 200, rng), 9)
    before = onnx.numpy_helper.to_array(refit_ownership.readout(model)).reshape(-1).astype(np.float64)
    after = refit_ownership.fit(before, v, target, steps=100, lr=0.05)
    assert refit_ownership.evaluate(after, v, target, stones)["mse"] < \
        refit_ownership.evaluate(before, v, target, stones)["mse"]

    copy = tmp_path / "refit.onnx"
    shutil.copy(tiny_onnx_model, copy)
    assert refit_ownership.main(["--shards", str(shards), "--network", str(tiny_onnx_model), "--apply", str(copy),
                                 "--train-samples", "200", "--val-samples", "100", "--steps", "50",
                                 "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("before: train mse") and "\nafter: train mse" in printed and "val mse" in printed
    rng = np.random.default_rng(1)
    inputs = {"spatial": rng.integers(0, 2, (4, 15, 9, 9)).astype(np.float32),
              "global": rng.normal(size=(4, 8)).astype(np.float32)}
    inputs["spatial"][:, 0] = 1.0  # on the board everywhere
    original = ort.InferenceSession(str(tiny_onnx_model), providers=["CPUExecutionProvider"]).run(None, inputs)
    refitted = ort.InferenceSession(str(copy), providers=["CPUExecutionProvider"]).run(None, inputs)
    for label, a, b in zip(("policy", "value", "score"), original[:3], refitted[:3]):
        assert np.array_equal(a, b), label
    assert not np.array_equal(original[3], refitted[3])
    assert "refitted by tools/refit_ownership.py" in onnx.load(str(copy)).metadata_props[0].value
