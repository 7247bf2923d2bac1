"""tools/bench_search.py: a short run on a random tiny network prints a row per network and backend, with the
search's visits/s beside the bare network's rate and their ratio, on onnxruntime (fp32 and int8) and on torch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
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
    assert "torch torch-cpu (eager): the bare rate is the evaluator's forward alone" in out


def test_leela_zero_is_compared_at_the_blocks_and_channels_of_our_preset():
    assert bench_search.preset_shape("b10c128") == (10, 128)
    assert bench_search.preset_shape("b6c64") == (6, 64)
    assert bench_search.preset_shape("tiny") is None and bench_search.preset_shape("?") is None


def test_the_ratio_interval_is_students_t_over_the_rounds():
    assert bench_search.mean_interval([0.9]) is None
    low, high = bench_search.mean_interval([0.88, 0.92])  # mean 0.90, sd 0.0283, t(1) 12.71
    assert (low + high) / 2 == pytest.approx(0.90)
    assert high - low == pytest.approx(2 * 12.71 * 0.02828427 / 2 ** 0.5, rel=1e-4)
    low, high = bench_search.mean_interval([0.9, 0.9, 0.9, 0.9, 0.94])
    assert low < 0.908 < high  # the mean, t(4) 2.78
    assert high - low == pytest.approx(2 * 2.78 * 0.017889 / 5 ** 0.5, rel=1e-3)
    many = [0.9 + 0.01 * (i % 3) for i in range(40)]  # 39 degrees of freedom: t(30)'s 2.04, never narrower
    assert bench_search.mean_interval(many)[1] - bench_search.mean_interval(many)[0] == pytest.approx(
        2 * 2.04 * float(np.std(many, ddof=1)) / 40 ** 0.5)
