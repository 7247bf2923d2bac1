"""tools/ablation.py: a small real table (5x5, a tiny random network, GNU Go referee), resuming from the journal
without replaying games, one row per cell with the journal's counts, interval math as match_stats, clear errors."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from gtp_engine import match_stats, sgf_io

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools import ablation

GNUGO = shutil.which("gnugo") or shutil.which("gnugo", path="/usr/games")
CELLS = [(c, o) for c in ("lambda0", "lambda1", "policy") for o in ("default", "gnugo")]


def table_rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| configuration")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def journal(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def small_run(tiny_onnx_model, tmp_path_factory):
    """(argv, out, stdout): 1 game in each of 6 cells on 5x5 at 2 visits per move."""
    if GNUGO is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo): it is the referee")
    out = tmp_path_factory.mktemp("ablation")
    argv = ["--size", "5", "--komi", "7", "--visits", "2", "--games", "1", "--max-moves", "16",
            "--configs", "lambda0,lambda1,policy", "--out", str(out),
            "--engine", f"{sys.executable} -m gtp_engine",
            "--engine-args", f"--weights {tiny_onnx_model} --device cpu --threads 1 --seed 1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)  # python -m gtp_engine finds the package here
        stdout = _run(argv)
    return argv, out, stdout


def _run(argv: list[str]) -> str:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = ablation.main(argv)
    assert status == 0
    return buffer.getvalue()


def test_the_table_has_one_row_per_cell_with_the_journal_counts(small_run):
    _, out, stdout = small_run
    records = journal(out)
    assert sorted((r["config"], r["opponent"], r["game"]) for r in records) == sorted((c, o, 1) for c, o in CELLS)
    assert (out / "table.md").read_text() == stdout
    rows = table_rows(stdout)
    assert len(rows) == len(CELLS)
    for (config, opponent), cells in zip(CELLS, rows):
        assert cells[0] == ablation.config_label(config)
        mine = [r for r in records if (r["config"], r["opponent"]) == (config, opponent)]
        wins = sum(r["score"] == 1 for r in mine)
        draws = sum(r["score"] == 0.5 for r in mine)
        assert cells[2] == str(len(mine))
        assert cells[3] == f"{wins} / {len(mine) - wins - draws} / {draws}"
        mine_visits = "1" if config == "policy" else "2"  # root visits from kata-genmove_analyze
        assert cells[6] == f"{mine_visits} / {'2' if opponent == 'default' else '–'}"


def test_games_are_recorded_with_alternating_colours_and_their_sgf(small_run):
    _, out, _ = small_run
    for record in journal(out):
        assert (record["black"], record["white"]) == (record["config"], record["opponent"])  # game 1: Black
        sgf = sgf_io.load_sgf_file(out / record["sgf"])
        assert sgf.result == record["result"]
        assert (sgf.black, sgf.white) == (record["black"], record["white"])
        game = sgf.to_game()  # every move legal
        assert game.move_number == len(record["moves"])
        winner_is_black = record["result"].startswith("B+")
        assert record["score"] == (0.5 if record["result"] == "0" else float(winner_is_black))


def test_a_rerun_plays_only_the_games_the_journal_lacks(small_run, monkeypatch, tmp_path):
    argv, first, _ = small_run
    out = tmp_path / "copy"
    shutil.copytree(first, out)
    argv = [str(out) if a == str(first) else a for a in argv]
    monkeypatch.chdir(ROOT)
    before = (out / "journal.jsonl").read_text()

    def no_program(*args, **kwargs):
        raise AssertionError("a finished game was played again")

    with monkeypatch.context() as patch:
        patch.setattr(ablation.Programs, "get", no_program)
        _run(argv)
    assert (out / "journal.jsonl").read_text() == before

    more = _run(argv[:argv.index("--games")] + ["--games", "2", "--cells", "policy/*"]
                + argv[argv.index("--games") + 2:])
    assert (out / "journal.jsonl").read_text().startswith(before)
    new = journal(out)[len(before.splitlines()):]
    assert [(r["config"], r["opponent"], r["game"]) for r in new] == [("policy", "default", 2), ("policy", "gnugo", 2)]
    assert all((r["black"], r["white"]) == (r["opponent"], r["config"]) for r in new)  # game 2: White
    assert [row[2] for row in table_rows(more)] == ["2", "2"]


def write_run(out: Path, records: list[dict]) -> None:
    settings = ablation.Settings(size=9, komi=7, time=0.5, visits=None, gnugo_level=10, max_moves=243,
                                 engine_args="", rollout_weights=None)
    out.mkdir(exist_ok=True)
    (out / "settings.json").write_text(json.dumps(settings.__dict__))
    (out / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_score_and_elo_intervals_are_match_stats(tmp_path):
    results = [1, 0, 0.5, 1, 1, 0, 1]
    write_run(tmp_path, [{"config": "lambda0.5", "opponent": "gnugo", "game": n, "score": s, "visits": 100 + n}
                         for n, s in enumerate(results, 1)])
    rows = table_rows(_run(["--table-only", "--out", str(tmp_path), "--cells", "lambda0.5/gnugo"]))
    score, low, high = match_stats.score_interval(results)
    elo, elo_low, elo_high = match_stats.elo_interval(results)
    assert rows == [["λ=0.5", "GNU Go level 10", "7", "4 / 2 / 1", f"{score:.2f} ({low:.2f} .. {high:.2f})",
                     f"{elo:+.0f} ({elo_low:+.0f} .. {elo_high:+.0f})", "104 / –"]]
    assert (score, low, high) != pytest.approx((0.5, 0.5, 0.5))


def test_an_even_score_is_plus_zero_elo_and_a_clean_sweep_infinite_with_a_finite_lower_bound(tmp_path):
    write_run(tmp_path, [{"config": "policy", "opponent": o, "game": n, "score": s}
                         for o, scores in (("default", [1, 0]), ("gnugo", [1, 1])) for n, s in enumerate(scores, 1)])
    rows = table_rows(_run(["--table-only", "--out", str(tmp_path), "--configs", "policy"]))
    assert [row[5] for row in rows] == ["+0 (-inf .. +inf)", "+inf (-113 .. +inf)"]  # Wilson's interval for 2 of 2


def test_a_cell_without_games_is_a_row_of_dashes(tmp_path):
    write_run(tmp_path, [])
    rows = table_rows(_run(["--table-only", "--out", str(tmp_path), "--configs", "policy", "--opponents", "gnugo"]))
    assert rows == [["policy network only (1 visit)", "GNU Go level 10", "0", "0 / 0 / 0", "–", "–", "– / –"]]


def test_a_line_cut_short_at_the_end_of_the_journal_is_dropped(tmp_path, capsys):
    write_run(tmp_path, [{"config": "policy", "opponent": "gnugo", "game": 1, "score": 1}])
    with open(tmp_path / "journal.jsonl", "a") as file:
        file.write('{"config": "policy", "opp')
    assert len(ablation.read_journal(tmp_path / "journal.jsonl")) == 1
    assert "unfinished last line" in capsys.readouterr().err
    assert (tmp_path / "journal.jsonl").read_text().count("\n") == 1


def test_other_settings_than_the_journal_s_are_refused(tmp_path, capsys):
    write_run(tmp_path, [])
    status = ablation.main(["--out", str(tmp_path), "--time", "1", "--games", "1"])
    assert status == 2
    assert "time 0.5 there, 1.0 now" in capsys.readouterr().err


def test_a_missing_rollout_file_is_named(tmp_path, capsys):
    missing = tmp_path / "nothing.npz"
    status = ablation.main(["--out", str(tmp_path / "out"), "--visits", "2", "--configs", "lambda0.5",
                            "--opponents", "default", "--rollout-weights", str(missing)])
    assert status == 2
    assert f"rollout weights {missing}: no such file" in capsys.readouterr().err


def test_gnu_go_not_installed_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ablation, "EXTRA_PATH", str(tmp_path))
    status = ablation.main(["--out", str(tmp_path / "out"), "--visits", "2", "--configs", "policy"])
    assert status == 2
    assert "'gnugo' is not installed" in capsys.readouterr().err


def test_configuration_names():
    assert ablation.parse_config("lambda0.50") == "lambda0.5"
    assert ablation.parse_config("policy") == "policy"
    for bad in ("lambda2", "lambda", "mcts"):
        with pytest.raises(ValueError):
            ablation.parse_config(bad)
    settings = ablation.Settings(9, 7, 0.5, None, 10, 243, "--threads 1", "r.npz")
    assert ablation.engine_command("gtp", settings, "lambda1") == "gtp --threads 1 --time 0.5 --lambda 1 " \
                                                                  "--rollout-weights r.npz"
    assert ablation.engine_command("gtp", settings, "policy") == "gtp --threads 1 --visits 1"
    assert ablation.engine_command("gtp", settings, None) == "gtp --threads 1 --time 0.5"


def test_a_configuration_without_its_rollout_policy_stops_before_any_game(tiny_onnx_model, tmp_path, monkeypatch,
                                                                          capsys):
    if GNUGO is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo): it is the referee")
    monkeypatch.chdir(ROOT)
    empty = tmp_path / "no-weights"
    empty.mkdir()
    status = ablation.main(["--out", str(tmp_path / "out"), "--size", "5", "--visits", "2", "--configs", "lambda1",
                            "--opponents", "default", "--engine", f"{sys.executable} -m gtp_engine", "--engine-args",
                            f"--weights {tiny_onnx_model} --weights-dir {empty} --device cpu --threads 1"])
    assert status == 1
    assert f"no rollout policy for 5x5 boards in {empty}" in capsys.readouterr().err
    assert not (tmp_path / "out" / "journal.jsonl").exists()
