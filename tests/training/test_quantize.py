"""Quantize: an int8 network written from a tiny fp32 one loads through the engine's checks, records where it
came from, and agrees with its source; real games give the calibration and held-out positions."""

import json
from pathlib import Path

import numpy as np
import pytest

from gtp_engine.onnx_evaluator import ModelLoadError, OnnxEvaluator
from gtp_engine.training import quantize

onnx = pytest.importorskip("onnx")

FIXTURES = Path(__file__).parent / "fixtures"
# A tiny random network in int8 against its fp32 source on the same positions (measured with onnxruntime 1.31 on
# an AVX-512 VNNI CPU: value and policy within 3e-5, a random network's outputs being small); the tolerances
# leave room for CPUs whose int8 kernels round differently, not for a broken file.
VALUE_TOLERANCE = 0.01
POLICY_TOLERANCE = 0.01


def test_game_positions_split_the_games_between_calibration_and_held_out():
    calibration = quantize.game_positions(FIXTURES, 9, 100, held_out=False)
    held_out = quantize.game_positions(FIXTURES, 9, 100, held_out=True)
    assert calibration and held_out
    assert len(calibration) + len(held_out) <= 8 * quantize.POSITIONS_PER_GAME
    assert all(s.grid.width == 9 and s.moves for s in calibration + held_out)
    assert len(quantize.game_positions(FIXTURES, 9, 3, held_out=False)) == 3
    assert quantize.game_positions(FIXTURES, 19, 10, held_out=False) == []  # no 19x19 games there
    games = {tuple(s.moves[:12]) for s in calibration} & {tuple(s.moves[:12]) for s in held_out}
    assert not games  # no game on both sides


def test_the_int8_network_loads_and_agrees_with_its_source(tiny_onnx_model, tiny_int8_model, random_states):
    fp32 = OnnxEvaluator(tiny_onnx_model, device="cpu", symmetry_mode="none")
    int8 = OnnxEvaluator(tiny_int8_model, device="cpu", symmetry_mode="none")
    assert int8.info.precision == "int8" and fp32.info.precision == "fp32"
    ops = [node.op_type for node in onnx.load(str(tiny_int8_model)).graph.node]
    assert ops.count("QuantizeLinear") >= 3 and "DequantizeLinear" in ops  # the block convolutions are in int8
    assert "int8" in int8.info.describe()
    meta = int8.info.metadata
    assert meta["quantization"]["source"] == tiny_onnx_model.name
    assert len(meta["quantization"]["source_sha256"]) == 64
    assert "random games (64 positions)" == meta["quantization"]["calibration"]
    assert {k: v for k, v in meta.items() if k not in ("precision", "quantization")} == fp32.info.metadata
    for size in (9, 7):
        states = random_states(size, 16, seed=3)
        a, b = fp32.evaluate(states), int8.evaluate(states)
        assert np.abs(a.value - b.value).max() <= VALUE_TOLERANCE
        assert np.abs(a.policy - b.policy).max() <= POLICY_TOLERANCE
        assert np.allclose(b.policy.sum(axis=1), 1.0, atol=1e-5)
    agreement = quantize.agreement(fp32, int8, random_states(9, 32, seed=4))
    assert agreement.positions == 32 and agreement.value_mad <= VALUE_TOLERANCE


def test_quantize_records_agreement_and_refuses_a_network_below_target(tiny_onnx_model, tmp_path, random_states,
                                                                       monkeypatch):
    positions = random_states(9, 16, seed=6)
    meta = quantize.quantize(tiny_onnx_model, tmp_path / "a.int8.onnx", positions, positions[:8],
                             require_targets=False)
    assert meta["quantization"]["agreement"]["positions"] == 8
    stored = json.loads(onnx.load(str(tmp_path / "a.int8.onnx")).metadata_props[0].value)
    assert stored["quantization"] == meta["quantization"]
    monkeypatch.setattr(quantize, "MIN_TOP1_AGREEMENT", 1.01)  # unreachable: every network is below it
    with pytest.raises(quantize.QuantizeError, match="agreement below target"):
        quantize.quantize(tiny_onnx_model, tmp_path / "b.int8.onnx", positions, positions[:8])
    assert not (tmp_path / "b.int8.onnx").exists()


def test_an_int8_network_is_not_quantized_again(tiny_int8_model, tmp_path, random_states):
    with pytest.raises(quantize.QuantizeError, match="already int8"):
        quantize.quantize(tiny_int8_model, tmp_path / "again.onnx", random_states(9, 4), [])


def test_the_command_line_writes_the_sibling(tiny_onnx_model, tmp_path, capsys):
    source = tmp_path / "net.onnx"
    source.write_bytes(tiny_onnx_model.read_bytes())
    assert quantize.main([str(source), "--calibration", str(FIXTURES), "--size", "9", "--force"]) == 0
    assert OnnxEvaluator(tmp_path / "net.int8.onnx", device="cpu").info.precision == "int8"
    assert quantize.main([str(tmp_path / "missing.onnx"), "--calibration", str(FIXTURES)]) == 1
    assert "missing.onnx: no such file" in capsys.readouterr().err


def test_a_corrupt_int8_file_is_refused(tiny_int8_model, tmp_path):
    path = tmp_path / "cut.int8.onnx"
    path.write_bytes(tiny_int8_model.read_bytes()[:3000])
    with pytest.raises(ModelLoadError, match="onnxruntime cannot load it"):
        OnnxEvaluator(path, device="cpu")


def test_an_int8_network_is_not_imported_for_training(tiny_int8_model, tiny_onnx_model):
    pytest.importorskip("torch")  # import_onnx builds a torch model; the rest of quantize's tests need none
    from gtp_engine.training import import_onnx

    with pytest.raises(import_onnx.OnnxImportError, match=f"an int8 network cannot be trained further; import "
                                                          f"{tiny_onnx_model.name}"):
        import_onnx.import_onnx(tiny_int8_model)
