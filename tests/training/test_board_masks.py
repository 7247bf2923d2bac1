"""Board masks: an exported network without its board-mask multiplications answers whole boards exactly as one
with them, says so in its metadata, and the command drops them from an older file (fp32 or int8) in place."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")  # export_onnx makes the networks
onnx = pytest.importorskip("onnx")

from gtp_engine import features  # noqa: E402
from gtp_engine.onnx_evaluator import METADATA_KEY, OnnxEvaluator  # noqa: E402
from gtp_engine.training import board_masks, export_onnx, quantize  # noqa: E402
from gtp_engine.training import __main__ as training_cli  # noqa: E402


def _muls(path) -> int:
    return [node.op_type for node in onnx.load(str(path)).graph.node].count("Mul")


def _metadata(path) -> dict:
    return json.loads(next(p.value for p in onnx.load(str(path)).metadata_props if p.key == METADATA_KEY))


@pytest.fixture(scope="module")
def masked(tmp_path_factory):
    """The tiny random network exported with its board masks, as files were before they were dropped."""
    path = tmp_path_factory.mktemp("masked") / "masked.onnx"
    export_onnx.export_random(path, "tiny", seed=0, keep_board_masks=True)
    return path


def test_export_drops_the_masks_and_answers_whole_boards_the_same(masked, tiny_onnx_model, random_states):
    assert _metadata(tiny_onnx_model)["board_masks"] == "dropped"
    assert "board_masks" not in _metadata(masked)
    dropped = _metadata(tiny_onnx_model)["board_masks_dropped"]
    assert dropped > 0 and _muls(masked) - _muls(tiny_onnx_model) == dropped
    with_masks, without = (OnnxEvaluator(p, device="cpu", symmetry_mode="none") for p in (masked, tiny_onnx_model))
    for size in (5, (7, 9), 19):
        spatial, global_ = features.encode(random_states(size, 4, seed=3))
        for a, b in zip(with_masks.run(spatial, global_), without.run(spatial, global_)):
            np.testing.assert_array_equal(a, b)


def test_a_padded_board_needs_the_masks(masked, tiny_onnx_model, random_states):
    """The contract the dropped masks give up: a 9x9 board zero-padded into a 13x13 tensor."""
    with_masks, without = (OnnxEvaluator(p, device="cpu", symmetry_mode="none") for p in (masked, tiny_onnx_model))
    spatial, global_ = features.encode(random_states(9, 2, seed=4))
    padded = np.zeros((2, spatial.shape[1], 13, 13), np.float32)
    padded[:, :, :9, :9] = spatial
    whole = with_masks.run(spatial, global_)[1]
    assert np.allclose(with_masks.run(padded, global_)[1], whole, atol=1e-5)
    assert not np.allclose(without.run(padded, global_)[1], whole, atol=1e-5)


def test_the_command_drops_them_from_fp32_and_int8_files(masked, tmp_path, random_states):
    fp32 = tmp_path / "net.onnx"
    fp32.write_bytes(masked.read_bytes())
    int8 = tmp_path / "net.int8.onnx"
    quantize.quantize(masked, int8, random_states(9, 16, seed=5), [], calibration_name="random games",
                      require_targets=False)
    before = {p: OnnxEvaluator(p, device="cpu", symmetry_mode="none") for p in (fp32, int8)}
    spatial, global_ = features.encode(random_states(9, 8, seed=6))
    expected = {p: e.run(spatial, global_) for p, e in before.items()}
    for path in (fp32, int8):
        assert training_cli.main(["drop-board-masks", str(path)]) == 0
        meta = _metadata(path)
        assert meta["board_masks"] == "dropped" and meta["board_masks_dropped"] > 0
        evaluator = OnnxEvaluator(path, device="cpu", symmetry_mode="none")  # the engine's checks
        for a, b in zip(expected[path], evaluator.run(spatial, global_)):
            np.testing.assert_allclose(a, b, rtol=0, atol=board_masks.TOLERANCE)
    assert _metadata(int8)["precision"] == "int8" and "quantization" in _metadata(int8)
    again = fp32.read_bytes()
    assert board_masks.drop_file(fp32) == 0.0 and fp32.read_bytes() == again  # nothing left to drop


def test_bad_files_get_a_message_naming_them(tmp_path, capsys):
    missing = tmp_path / "missing.onnx"
    assert board_masks.main([str(missing)]) == 1
    assert f"{missing}: no such file" in capsys.readouterr().err
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x01not an onnx file at all")
    assert board_masks.main([str(garbage)]) == 1
    assert f"{garbage}:" in capsys.readouterr().err
    foreign = tmp_path / "foreign.onnx"
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    onnx.save(onnx.helper.make_model(graph), str(foreign))
    assert board_masks.main([str(foreign)]) == 1
    assert "not a gtp_engine network" in capsys.readouterr().err
