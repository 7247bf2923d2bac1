"""tools/bench_clock.py: the server's clock it keeps (what gtp2ogs sends, periods and games lost on time) and a short
real run against GNU Go."""

from __future__ import annotations

import subprocess
import sys

import pytest
from engine_process import ROOT, gnugo_path

sys.path.insert(0, str(ROOT))
from tools.bench_clock import ClockSpec, ServerClock  # noqa: E402


def test_byoyomi_clock_runs_main_time_then_periods_and_loses_on_the_last():
    clock = ServerClock(ClockSpec(9, "byoyomi", 10, 2, 3))
    assert clock.setup_commands() == ["kgs-time_settings byoyomi 10 2 3"]
    assert clock.time_left() == (10, 0)
    assert clock.play(9.5) == (False, None)
    assert clock.time_left() == (0, 0)  # floored, still main time
    lost, share = clock.play(1.5)  # 0.5 s of main time, then 1 s of the first period
    assert not lost and share == pytest.approx(0.5) and clock.time_left() == (2, 3)
    assert clock.play(4.5) == (False, pytest.approx(0.25))  # overruns two periods, 0.5 s into the third
    assert clock.periods_left == 1
    assert clock.play(2.01)[0]  # the last period overrun: the game is lost


def test_canadian_clock_shares_are_per_period_and_simple_time_is_one_stone():
    clock = ServerClock(ClockSpec(9, "canadian", 0, 10, 5))
    assert clock.setup_commands() == ["kgs-time_settings canadian 0 10 5"] and clock.time_left() == (10, 5)
    for _ in range(4):
        assert clock.play(1.9) == (False, None)
    assert clock.time_left() == (2, 1)
    assert clock.play(1.0) == (False, pytest.approx(0.86))  # the period closes: 8.6 s of 10 used
    assert clock.time_left() == (10, 5)
    assert clock.play(10.5)[0]
    simple = ServerClock(ClockSpec(9, "canadian", 0, 1, 1))
    assert simple.setup_commands() == ["time_settings 0 1 1"] and simple.time_left() == (1, 1)
    assert simple.play(0.8) == (False, pytest.approx(0.8)) and simple.play(1.01)[0]


def test_absolute_and_capped_fischer():
    absolute = ServerClock(ClockSpec(9, "absolute", 30))
    assert absolute.setup_commands() == ["time_settings 30 0 0"]
    assert absolute.play(29) == (False, None) and absolute.play(1.5)[0]
    fischer = ServerClock(ClockSpec(9, "fischer", 10, 1, cap=10.5))
    assert fischer.setup_commands() == ["kata-time_settings fischer-capped 10 1 10.5 -1"]
    assert fischer.play(0.2) == (False, None) and fischer.main_left == 10.5  # the cap
    assert fischer.play(10.6)[0]


def test_a_short_run_prints_a_line_per_clock(tiny_onnx_model, tmp_path):
    gnugo = gnugo_path()
    if gnugo is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo)")
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu"
    log = tmp_path / "moves.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "tools.bench_clock", "--clock", "move1", "--games", "1", "--size", "7", "--engine", engine,
         "--opponent", f"{gnugo} --mode gtp --level 0 --chinese-rules", "--log", str(log)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip().split("\n")[-1]
    assert line.startswith("move1") and "games   1" in line and "period used mean" in line and "time losses" in line
    assert log.read_text().count('"seconds"') > 5
