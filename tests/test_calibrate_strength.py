"""tools/calibrate_strength.py's anchors and pairs: GNU Go's levels, Pachi at a fixed number of playouts, the engine's
own levels, and what it refuses. Nothing here starts a program."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from gtp_engine.game import Rules
from gtp_engine.match import GameResult
from tools import calibrate_strength as calibrate


def test_each_kind_of_anchor_has_its_name_and_command():
    assert calibrate.anchor_command("10") == ("GNU Go 3.8 level 10", "gnugo --mode gtp --chinese-rules --level 10")
    assert calibrate.anchor_command("0")[1] == "gnugo --mode gtp --chinese-rules --level 0"  # its weakest level
    name, command = calibrate.anchor_command("pachi8000", Path("/opt/pachi dir/pachi"))
    assert name == "Pachi 8000 playouts"
    assert shlex.split(command) == ["/opt/pachi dir/pachi", "-t", "=8000", "threads=1,pondering=0"]
    name, command = calibrate.anchor_command("pachi-light3000", Path("pachi"))
    assert name == "Pachi 3000 light playouts"
    assert shlex.split(command) == ["pachi", "-t", "=3000", "threads=1,pondering=0,playout=light"]
    assert calibrate.anchor_command("10", rules=Rules.named("japanese"))[1] == \
        "gnugo --mode gtp --japanese-rules --level 10"  # counts as the rules count
    name, command = calibrate.anchor_command("4k")
    assert name == "level 4k" and shlex.split(command)[-2:] == ["--strength", "4k"]
    # another network for the levels, and for a rank as the anchor
    assert shlex.split(calibrate.engine_command("1d", "--weights 'my net.onnx'"))[-4:] == \
        ["--strength", "1d", "--weights", "my net.onnx"]
    assert calibrate.anchor_command("4k", engine_flags="--weights x.onnx")[1].endswith("--strength 4k --weights x.onnx")


@pytest.mark.parametrize("anchor, problem", [
    ("11", "rank"), ("-1", "rank"), ("pachi499", "at least 500 playouts"), ("pachi-light100", "at least 500"),
    ("pachi", "rank"), ("gnugo", "rank"),
])
def test_what_is_no_anchor_is_refused(anchor, problem):
    with pytest.raises(ValueError, match=problem):
        calibrate.anchor_command(anchor)


def test_pairs_name_a_level_and_an_anchor():
    assert calibrate.parse_pairs("4k:pachi8000, 8k:10,1d:4k") == [("4k", "pachi8000"), ("8k", "10"), ("1d", "4k")]
    with pytest.raises(ValueError):
        calibrate.parse_pairs("max:10")
    with pytest.raises(ValueError, match="500"):
        calibrate.parse_pairs("4k:pachi100")


def test_a_handicap_is_refused_with_openings_or_where_the_board_has_no_such_layout(tmp_path, capsys):
    records = Path(__file__).resolve().parent / "training" / "fixtures"
    for arguments, problem in ((["--handicap", "4", "--openings", str(records)], "without --openings"),
                               (["--handicap", "9", "--size", "7"], "no fixed handicap of 9 stones on 7x7"),
                               (["--gives", "10", "--size", "19"], "no fixed handicap of 10 stones on 19x19"),
                               (["--gives", "2", "--handicap", "2"], "not allowed with argument")):
        with pytest.raises(SystemExit) as stopped:
            calibrate.main(["match", "--pairs", "12k:10", "--games", "2", *arguments])
        assert stopped.value.code == 2 and problem in capsys.readouterr().err


def test_a_row_counts_wins_draws_and_losses():
    results = [GameResult(True, "B+R", 50), GameResult(False, "0", 60), GameResult(True, "W+3", 70),
               GameResult(False, "W+R", 40)]  # the level (A) wins games 1 and 4, draws game 2
    row = calibrate.row("9k", "0", results)
    assert row.startswith("| 9k | GNU Go 3.8 level 0 | 2-1-1 | 0.62 | ") and row.endswith(" | 4 |")


def test_a_row_names_the_levels_handicap():
    assert calibrate.row("12k", "10", [], handicap=4) == \
        "| 12k | GNU Go 3.8 level 10, the level taking 4 stones | - | - | - | 0 |"
    assert calibrate.row("4k", "10", [], handicap=-4) == \
        "| 4k | GNU Go 3.8 level 10, the level giving 4 stones | - | - | - | 0 |"
    assert calibrate.row("12k", "10", [], handicap=1, komi=-1) == \
        "| 12k | GNU Go 3.8 level 10, the level taking Black at komi -1 | - | - | - | 0 |"
