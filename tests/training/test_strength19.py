"""tools/strength19.py: held-out top-1 of an ONNX network on real 19x19 validation games against an independent
count (positions replayed from the SGF, encoded by features.encode, run through the torch network the ONNX was
exported from), its interval over games, and the match rows' intervals and targets."""

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import features, match, sgf_io  # noqa: E402
from gtp_engine.training import export_onnx, sgf_ingest, splits  # noqa: E402
from tools import strength19  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures19"


def test_held_out_top1_counts_the_validation_games_as_the_network_sees_them(tmp_path, tiny_onnx_model):
    shards = tmp_path / "shards"
    sidecar = sgf_ingest.ingest([FIXTURES], shards, sgf_ingest.IngestConfig(size=19, val_fraction=0.3, workers=1),
                                progress=False)
    row = strength19.held_out_top1(str(tiny_onnx_model), [str(shards)], samples=10**6, batch=100)
    assert row["samples"] == sidecar["samples"]["val"] and row["games"] == sidecar["games"]["val"] >= 1

    net = export_onnx.random_model("tiny", seed=0).eval()  # the network tiny_onnx_model was exported from
    hits = total = 0
    for path in sorted(FIXTURES.glob("*.sgf")):
        record = sgf_io.load_sgf_file(path)
        if splits.split_of(splits.record_key(record), 0.3) != "val":
            continue
        state = record.to_game(max_moves=0)
        states, moves = [], []
        for color, point in record.moves:
            states.append(state.copy())
            moves.append(state.grid.flat(point))
            state.play(point, color)
        spatial, global_ = features.encode(states)
        with torch.no_grad():
            policy = net(torch.from_numpy(spatial), torch.from_numpy(global_))[0].numpy()
        hits += int((policy.argmax(axis=1) == np.array(moves)).sum())
        total += len(moves)
    assert total == row["samples"]
    assert abs(row["top1"] * total - hits) <= 1  # onnxruntime and torch may split a near-tie differently
    assert row["low"] <= row["top1"] <= row["high"]


def test_the_interval_is_taken_over_games_not_positions():
    hits = np.array([1] * 10 + [0] * 10, bool)
    low, high = strength19._clustered_interval(hits, np.repeat([0, 1], 10))
    assert (low, high) == (0.0, 1.0)  # two games, one all hits, one all misses: nothing is known
    low, high = strength19._clustered_interval(hits, np.arange(20))  # one position a game: the usual interval
    assert low == pytest.approx(0.5 - 1.96 * np.sqrt(0.25 / 19)) and high == pytest.approx(1 - low)


def test_match_rows_carry_the_score_interval_and_the_issue_target():
    row = strength19.summarize("search19", [1.0] * 19 + [0.0])
    assert (row["wins"], row["losses"], row["games"], row["met"]) == (19, 1, 20, True)
    assert row["low"] < row["score"] == 0.95 < row["high"]
    assert "19 wins, 0 draws, 1 losses in 20 games" in strength19.format_row(row)
    short = strength19.summarize("raw", [1.0] * 10)  # perfect, but fewer games than the issue's figure needs
    assert not short["met"]
    assert "no game played" in strength19.format_row(strength19.summarize("search13", []))


def test_an_opponent_that_cannot_start_is_named(tiny_onnx_model, capsys):
    code = strength19.main(["match", str(tiny_onnx_model), "raw", "--games", "1", "--gnugo", "no-such-gnugo-here"])
    assert code == 1
    assert "no-such-gnugo-here" in capsys.readouterr().err


def test_engine_command_uses_this_python_and_the_measurement_options():
    command = strength19.engine_command("w.onnx", strength19.MEASUREMENTS["raw"])
    assert command.startswith(sys.executable) and "--weights w.onnx --visits 1 --threads 1" in command


def test_a_measurement_goes_on_from_the_games_an_earlier_run_left(tiny_onnx_model, tmp_path, monkeypatch, capsys):
    # our engine as opponent and referee, on 7x7 with a move cap, so that real games take seconds
    monkeypatch.setitem(strength19.MEASUREMENTS, "raw", strength19.Measurement(7, "--visits 1 --threads 1", None,
                                                                              0.85, 3))
    engine = strength19.engine_command(str(tiny_onnx_model), strength19.MEASUREMENTS["raw"])

    def run(games: int, opponent: str = engine) -> dict:
        return strength19.run_match(str(tiny_onnx_model), "raw", games, tmp_path, None, gnugo=opponent,
                                    referee=engine, max_moves=8)

    first = run(1)
    assert first["games"] == 1 and (tmp_path / "raw" / "game-1.sgf").exists()
    game_one = (tmp_path / "raw" / "game-1.sgf").read_bytes()
    capsys.readouterr()
    both = run(3)
    out = capsys.readouterr().out
    assert "raw: 1 games of an earlier run" in out
    assert [line.split(":")[0] for line in out.splitlines()[1:]] == ["raw game 2", "raw game 3"]
    assert both["games"] == 3 and (tmp_path / "raw" / "game-1.sgf").read_bytes() == game_one
    records = [sgf_io.load_sgf_file(tmp_path / "raw" / f"game-{n}.sgf") for n in (1, 2, 3)]
    scores = [match.GameResult(n % 2 == 1, r.result, len(r.moves)).score_for_a for n, r in zip((1, 2, 3), records)]
    assert both["wins"] == scores.count(1.0) and both["losses"] == scores.count(0.0)
    assert run(3)["games"] == 3 and "raw game" not in capsys.readouterr().out  # nothing left to play

    with pytest.raises(ValueError, match=r"raw: its games were played with another opponent"):
        run(4, opponent=engine + " --seed 3")
    (tmp_path / "raw" / strength19.MEASUREMENT_FILE).write_text("{")
    with pytest.raises(ValueError, match=r"measurement.json: not readable JSON"):
        run(4)
    (tmp_path / "raw" / strength19.MEASUREMENT_FILE).unlink()
    with pytest.raises(ValueError, match="no measurement.json"):
        run(4)
