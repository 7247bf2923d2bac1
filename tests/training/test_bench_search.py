"""tools/bench_search.py: a short run on a random tiny network prints a row per network and backend, with the
search's visits/s beside the bare network's rate and their ratio, on onnxruntime (fp32 and int8) and on torch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools import bench_search  # noqa: E402

SHORT = ["--preset", "tiny", "--sizes", "9", "--seconds", "0.3", "--rounds", "1", "--leela", "off"]


def rows(output: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in output.splitlines() if line.startswith("tiny")}


def test_onnxruntime_rows_for_the_network_and_its_int8_sibling(capsys, one_thread):
    assert bench_search.main(SHORT) == 0
    out = capsys.readouterr().out
    table = rows(out)
    assert set(table) == {"tiny.onnx", "tiny.int8.onnx"}
    for name, (_, size, batch, session, search, kept, *_rest) in table.items():
        assert (size, batch) == ("9x9", "8")
        assert float(session) > 0 and float(search) > 0
        assert float(kept) == pytest.approx(float(search) / float(session), abs=0.006)
    assert "onnxruntime cpu" in out


def test_the_torch_backend_measures_the_fp32_network_only(capsys, one_thread):
    assert bench_search.main(SHORT + ["--backend", "torch", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    table = rows(out)
    assert set(table) == {"tiny.onnx"}
    _, size, batch, session, search, kept, *_ = table["tiny.onnx"]
    assert float(session) > 0 and float(search) > 0
    assert "torch torch-cpu: the bare rate is the evaluator's forward alone" in out


def test_leela_zero_is_compared_at_the_blocks_and_channels_of_our_preset():
    assert bench_search.preset_shape("b10c128") == (10, 128)
    assert bench_search.preset_shape("b6c64") == (6, 64)
    assert bench_search.preset_shape("tiny") is None and bench_search.preset_shape("?") is None
