"""tools/pachi_match.py: the programs' command lines (equal threads, no pondering, the lag reserve, the clock),
building Pachi when it is missing, and a match that goes on from the games in its folder. Fake GTP programs stand
in for Pachi, our engine and the referee: nothing here needs Pachi, GNU Go or a network."""

from __future__ import annotations

import json
import sys

import pytest

from gtp_engine import sgf_io
from tools import pachi_match

# A GTP program that passes every move, answers every final_score with B+2.5 and every final_status_list with no
# stone, and writes its arguments (first line) and every command it gets to LOG.
FAKE = """
import pathlib, sys
with pathlib.Path({log!r}).open("a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        log.write(line)
        log.flush()
        answers = {{"name": {name!r}, "version": "1", "genmove": "pass", "final_score": "B+2.5"}}
        print(f"= {{answers.get(words[0], '')}}\\n", flush=True)
        if words[0] == "quit":
            break
"""


@pytest.fixture
def fakes(tmp_path):
    """(engine command, Pachi binary, referee command, log folder): fake programs under tmp_path."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("ours", "referee"):
        (tmp_path / f"{name}.py").write_text(FAKE.format(name=f"fake {name}", log=str(logs / name)))
    pachi = tmp_path / "bin" / "pachi"
    pachi.parent.mkdir()
    pachi.write_text(f"#!{sys.executable}\n" + FAKE.format(name="fake Pachi", log=str(logs / "pachi")))
    pachi.chmod(0o755)
    return f"{sys.executable} {tmp_path / 'ours.py'}", pachi, f"{sys.executable} {tmp_path / 'referee.py'}", logs


def run(fakes, out, *args: str) -> int:
    engine, pachi, referee, _ = fakes
    return pachi_match.main(["--engine", engine, "--pachi", str(pachi), "--referee", referee, "--out", str(out),
                             *args])


def test_both_programs_get_equal_threads_no_pondering_the_lag_reserve_and_the_clock(fakes, tmp_path, capsys):
    assert run(fakes, tmp_path / "match", "--games", "1", "--threads", "3", "--size", "13") == 0
    logs = fakes[3]
    ours, pachi = ((logs / name).read_text().splitlines() for name in ("ours", "pachi"))
    assert ours[0] == "--threads 1 --evaluation-threads 2 --ponder off --lag-buffer 0.1"
    assert pachi[0] == "threads=3,pondering=0"
    assert "time_settings 0 2 1" in ours and "time_settings 0 2 1" in pachi  # 2 s a move on 13x13
    assert "boardsize 13" in pachi and "komi 7" in pachi
    assert pachi_match.engine_command("gtp-engine", 6).endswith("--evaluation-threads 5 --ponder off "
                                                                "--lag-buffer 0.1 --batches-in-flight 6")


def test_time_odds_give_pachi_its_own_clock(fakes, tmp_path):
    assert run(fakes, tmp_path / "match", "--games", "2", "--size", "19", "--pachi-seconds", "8") == 0
    logs = fakes[3]
    ours, pachi = ((logs / name).read_text().splitlines() for name in ("ours", "pachi"))
    assert [line for line in ours if line.startswith("time_settings")] == ["time_settings 0 2 1"] * 2
    assert [line for line in pachi if line.startswith("time_settings")] == ["time_settings 0 8 1"] * 2


def test_a_folder_keeps_its_conditions_and_refuses_others(fakes, tmp_path, capsys):
    out = tmp_path / "match"
    assert run(fakes, out, "--games", "1", "--size", "19", "--komi", "7.5") == 0
    assert json.loads((out / pachi_match.CONDITIONS).read_text()) == {
        "size": 19, "komi": 7.5, "threads": 2, "seconds": 2, "pachi_seconds": 2}
    for other in (["--pachi-seconds", "8"], ["--seconds", "3"], ["--threads", "1"], ["--komi", "6.5"]):
        with pytest.raises(SystemExit) as stop:
            run(fakes, out, "--games", "2", "--size", "19", "--komi", "7.5", *other)
        assert stop.value.code == 2 and "give the match its own folder" in capsys.readouterr().err
    assert run(fakes, out, "--games", "2", "--size", "19", "--komi", "7.5") == 0
    assert len(list(out.glob("game-*.sgf"))) == 2


def test_a_match_goes_on_from_the_games_in_its_folder(fakes, tmp_path, capsys):
    out = tmp_path / "match"
    assert run(fakes, out, "--games", "2") == 0
    first = capsys.readouterr().out.splitlines()
    assert first[0] == "game 1: fake ours (B) vs fake Pachi (W): B+2.5 in 2 moves"
    assert first[1] == "game 2: fake Pachi (B) vs fake ours (W): B+2.5 in 2 moves"
    written = (out / "game-1.sgf").read_bytes()

    assert run(fakes, out, "--games", "4") == 0
    done = capsys.readouterr()
    assert "2 games already in" in done.err
    lines = done.out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["game 3", "game 4"]
    assert lines[0].startswith("game 3: fake ours (B)")  # the colours of an unbroken match
    assert lines[2].startswith("fake ours vs fake Pachi: 2 wins, 2 losses, 0 draws in 4 games")
    assert lines[3].startswith("score 0.500 (95%: ") and "as Black 1.000" in lines[3] and "as White 0.000" in lines[3]
    assert (out / "game-1.sgf").read_bytes() == written
    assert [sgf_io.load_sgf_file(out / f"game-{n}.sgf").black for n in (3, 4)] == ["fake ours", "fake Pachi"]


def test_a_finished_match_only_prints_its_summary(fakes, tmp_path, capsys):
    out = tmp_path / "match"
    assert run(fakes, out, "--games", "2") == 0
    capsys.readouterr()
    engine, _, referee, _ = fakes
    missing = tmp_path / "nowhere" / "pachi"  # no build is tried: no game is left to play
    assert pachi_match.main(["--engine", engine, "--pachi", str(missing), "--referee", referee, "--out", str(out),
                             "--games", "2"]) == 0
    assert capsys.readouterr().out.startswith("fake ours vs fake Pachi: 1 wins, 1 losses")
    assert not missing.exists()


def _game(out, number: int, size: int = 9, black: str = "ours", white: str = "Pachi", result: str | None = "B+1"):
    from gtp_engine.game import GameState

    out.mkdir(exist_ok=True)
    (out / f"game-{number}.sgf").write_bytes(sgf_io.save_sgf(GameState(size), black=black, white=white,
                                                             result=result))


@pytest.mark.parametrize("games, problem", [
    ([dict(number=1), dict(number=3)], "game-3.sgf but no game-2.sgf"),
    ([dict(number=1, size=13)], "a 13x13 game, not 9x9"),
    ([dict(number=1, result=None)], "no result (RE)"),
    ([dict(number=1), dict(number=2)], "our engine should be White, 'ours' as in game-1.sgf, but is 'Pachi'"),
])
def test_a_folder_the_match_cannot_go_on_from_is_a_usage_error(fakes, tmp_path, capsys, games, problem):
    out = tmp_path / "match"
    for game in games:
        _game(out, **game)
    with pytest.raises(SystemExit) as stop:
        run(fakes, out, "--games", "4")
    assert stop.value.code == 2 and problem in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--games", "0"], ["--threads", "0"], ["--seconds", "0"], ["--size", "1"],
                                  ["--pachi-seconds", "0"]])
def test_bad_numbers_are_usage_errors(fakes, tmp_path, args):
    with pytest.raises(SystemExit):
        run(fakes, tmp_path / "match", *args)


def test_an_out_that_is_a_file_is_a_usage_error(fakes, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        run(fakes, tmp_path / "file")
    assert "is a file" in capsys.readouterr().err


def test_a_missing_pachi_is_built_with_the_build_script(fakes, tmp_path, monkeypatch):
    _, pachi, _, _ = fakes
    script = tmp_path / "build.sh"
    script.write_text(f'cp {pachi} "$1"\n')
    monkeypatch.setattr(pachi_match, "BUILD_SCRIPT", script)
    built = tmp_path / "built" / "pachi"
    built.parent.mkdir()
    pachi_match.ensure_pachi(built)
    assert built.read_text() == pachi.read_text()
    script.write_text("exit 1\n")
    with pytest.raises(RuntimeError, match="could not build"):
        pachi_match.ensure_pachi(tmp_path / "built" / "other")


def test_a_sitting_whose_engine_answers_another_name_ends_with_an_error(fakes, tmp_path, capsys):
    out = tmp_path / "match"
    assert run(fakes, out, "--games", "1") == 0
    other = tmp_path / "other.py"
    other.write_text(FAKE.format(name="renamed", log=str(tmp_path / "logs" / "other")))
    _, pachi, referee, _ = fakes
    assert pachi_match.main(["--engine", f"{sys.executable} {other}", "--pachi", str(pachi), "--referee", referee,
                             "--out", str(out), "--games", "2"]) == 1
    assert "our engine should be White, 'fake ours' as in game-1.sgf, but is 'renamed'" in capsys.readouterr().err
