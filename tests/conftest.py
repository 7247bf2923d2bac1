"""Shared fixtures. Add fixtures here; do not change existing ones without checking their users."""

from pathlib import Path

import pytest


# A randomly initialised "tiny" network (export_onnx.export_random("tiny", seed=0)), committed so that the engine's
# tests need no torch; tests/training/test_fixture_network.py checks it is current and regenerates it.
TINY_NETWORK = Path(__file__).resolve().parent / "fixtures" / "tiny.onnx"


@pytest.fixture(scope="session")
def tiny_onnx_model():
    """Path of the committed tiny test network (random weights: it plays randomly). Read it, do not write it."""
    return TINY_NETWORK


@pytest.fixture
def fixed_size_network(tiny_onnx_model, tmp_path):
    """make(height, width=height, name="fixed.onnx") -> the tiny network's path as if exported for one board:
    its spatial input's height and width fixed (an export without dynamic axes), written under tmp_path."""
    import onnx

    def make(height: int, width: int | None = None, name: str = "fixed.onnx"):
        model = onnx.load(str(tiny_onnx_model))
        for dim, size in zip(model.graph.input[0].type.tensor_type.shape.dim[2:4], (height, width or height)):
            dim.ClearField("dim_param")
            dim.dim_value = size
        onnx.save(model, str(tmp_path / name))
        return tmp_path / name

    return make


@pytest.fixture
def random_states():
    """make(size, count, seed=0, max_fill=0.7, **GameState args) -> GameStates, each after 0..max_fill * area
    random legal moves; size is an int or (width, height)."""
    import numpy as np

    from gtp_engine.game import GameState

    def make(size, count, seed=0, max_fill=0.7, **game_args):
        rng = np.random.default_rng(seed)
        states = []
        for _ in range(count):
            width, height = size if isinstance(size, tuple) else (size, size)
            state = GameState(width, height, **game_args)
            for _ in range(int(rng.integers(0, int(max_fill * state.grid.area) + 1))):
                state.play(state.grid.from_flat(int(rng.choice(np.flatnonzero(state.legal_mask())))))
                if state.is_over:
                    break
            states.append(state)
        return states

    return make


@pytest.fixture(scope="session")
def tiny_int8_model(tiny_onnx_model, tmp_path_factory):
    """Path of tiny_onnx_model quantized to int8 (training/quantize.py), tiny.int8.onnx in a temporary folder (the
    committed fixtures are read, never written), calibrated on 64 positions of random games; the agreement
    targets are not required of a random network."""
    pytest.importorskip("onnx")
    import numpy as np

    from gtp_engine.game import GameState
    from gtp_engine.training import quantize

    rng = np.random.default_rng(5)
    positions = []
    for _ in range(64):
        state = GameState(9)
        for _ in range(int(rng.integers(0, 50))):
            state.play(state.grid.from_flat(int(rng.choice(np.flatnonzero(state.legal_mask())))))
            if state.is_over:
                break
        positions.append(state)
    path = tmp_path_factory.mktemp("int8") / "tiny.int8.onnx"
    quantize.quantize(tiny_onnx_model, path, positions, [], calibration_name="random games", require_targets=False)
    return path


@pytest.fixture
def trained_network(tiny_onnx_model, tmp_path):
    """make(*sizes, name="trained.onnx") -> the tiny network's path as if trained on these board sizes (its
    metadata's trained_sizes), written under tmp_path."""
    import json

    import onnx

    def make(*sizes: int, name: str = "trained.onnx"):
        model = onnx.load(str(tiny_onnx_model))
        entry = next(p for p in model.metadata_props if p.key == "gtp_engine")
        entry.value = json.dumps({**json.loads(entry.value), "trained_sizes": list(sizes)})
        onnx.save(model, str(tmp_path / name))
        return tmp_path / name

    return make
