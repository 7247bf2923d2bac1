"""tools/match.py: Elo and SPRT arithmetic, and a short real match (the engine against GNU Go, GNU Go referee)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from conftest import ROOT, gnugo_path

from gtp_engine import sgf_io

sys.path.insert(0, str(ROOT))
from tools import match  # noqa: E402


def test_elo_and_its_interval():
    assert match.elo(0.5) == 0
    assert match.elo(0.75) == pytest.approx(190.85, abs=0.01)
    assert match.elo(1.0) == math.inf and match.elo(0.0) == -math.inf
    estimate, low, high = match.elo_interval([1, 1, 0, 1, 0.5, 1, 0, 1])
    assert low < estimate < high and estimate == pytest.approx(match.elo(5.5 / 8))
    wide = match.elo_interval([1, 0] * 5)
    narrow = match.elo_interval([1, 0] * 500)
    assert narrow[2] - narrow[1] < wide[2] - wide[1]


def test_sprt_accepts_the_right_hypothesis():
    low, high = match.sprt_bounds()
    strong = [1.0] * 70 + [0.0] * 30  # score 0.7: about +150 Elo
    weak = [1.0] * 30 + [0.0] * 70
    assert match.sprt_llr(strong, 0, 50) > high
    assert match.sprt_llr(weak, 0, 50) < low
    assert low < match.sprt_llr([1.0, 0.0] * 5, 0, 50) < high


def test_results_are_normalized():
    assert match.normalized_result("B+3.0") == "B+3"
    assert match.normalized_result("w+0.5") == "W+0.5"
    assert match.normalized_result("0") == "0"
    with pytest.raises(match.GtpError):
        match.normalized_result("unknown")


def test_a_short_match_writes_sgf_and_an_elo_line(tiny_onnx_model, tmp_path):
    gnugo = gnugo_path()
    if gnugo is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo)")
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 4 --seed 1"
    result = subprocess.run(
        [sys.executable, "-m", "tools.match", "--a", engine, "--b", f"{gnugo} --mode gtp --level 0",
         "--referee", f"{gnugo} --mode gtp", "--size", "7", "--games", "2", "--max-moves", "40",
         "--sgf-dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().split("\n")
    assert lines[0].startswith("game 1: gtp_engine (B) vs GNU Go (W): ")
    assert lines[1].startswith("game 2: GNU Go (B) vs gtp_engine (W): ")
    assert lines[-1].startswith("gtp_engine vs GNU Go: ") and "Elo " in lines[-1] and "95%" in lines[-1]
    records = [sgf_io.load_sgf_file(tmp_path / f"game-{n}.sgf") for n in (1, 2)]
    assert [(r.black, r.white) for r in records] == [("gtp_engine", "GNU Go"), ("GNU Go", "gtp_engine")]
    for record, line in zip(records, lines):
        assert line.split(": ")[2].split(" in ")[0] == record.result
        record.to_game()  # every move legal
