"""The committed test network tests/fixtures/tiny.onnx is what export_onnx.export_random("tiny", seed=0) makes
today: same metadata (the torch version and the parity figure aside) and the same outputs on the same positions.

When a change to the model, the features or the exporter makes it stale, regenerate it and commit the file:

    python tests/training/test_fixture_network.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny.onnx"
PRESET, SEED = "tiny", 0
_BUILD_DETAILS = ("torch", "parity_max_abs_diff")  # what may differ between two machines' exports


def regenerate(path: Path = FIXTURE) -> dict:
    from gtp_engine.training.export_onnx import export_random

    return export_random(path, PRESET, seed=SEED)


def test_the_committed_tiny_network_is_current(tmp_path):
    from gtp_engine.onnx_evaluator import OnnxEvaluator
    from gtp_engine import features
    from gtp_engine.training.probes import random_positions

    fresh = tmp_path / "tiny.onnx"
    regenerate(fresh)
    committed, made = (OnnxEvaluator(path, device="cpu", threads=1, symmetry_mode="none") for path in (FIXTURE, fresh))
    stale = "stale: regenerate it with `python tests/training/test_fixture_network.py` and commit it"
    strip = lambda meta: {k: v for k, v in meta.items() if k not in _BUILD_DETAILS}  # noqa: E731
    assert strip(committed.info.metadata) == strip(made.info.metadata), f"{FIXTURE} metadata {stale}"
    rng = np.random.default_rng(1)
    for size in (5, 9, 19):
        spatial, global_ = features.encode(random_positions(size, 4, rng))
        for got, want in zip(committed.run(spatial, global_), made.run(spatial, global_)):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, err_msg=f"{FIXTURE} outputs {stale}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(regenerate(), file=sys.stderr)
    print(f"wrote {FIXTURE}", file=sys.stderr)
