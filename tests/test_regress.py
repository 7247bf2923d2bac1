"""tools/regress.py: GNU Go's .tst regression format and tsumego problems read into self-contained tests, GNU Go's
answer patterns, and whole runs over GTP against GNU Go (a referee that knows the answer) and our engine on the
tiny network, archives and bad suites included."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from gtp_engine import coords, sgf_io
from gtp_engine.board import BLACK, WHITE

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools import regress

GNUGO = shutil.which("gnugo") or shutil.which("gnugo", path=os.pathsep.join(["/usr/games", "/usr/local/games"]))
needs_gnugo = pytest.mark.skipif(GNUGO is None, reason="GNU Go is not installed (e.g. apt-get install gnugo)")

# Black's E5 and E4 have one liberty, E6, which joins them to the wall D7-F7: Black saves them there, White captures
# them there (GNU Go 3.8 answers E6 for both).
CAPTURE = "(;GM[1]FF[4]SZ[9]KM[7]AB[dc][ec][fc][ee][ef]AW[de][fe][df][ff][eg]PL[B])"

SUITE = """\
# a comment
boardsize 9
loadsgf capture.sgf
uct_param_player max_games 3000
10 reg_genmove black
#? [E6]

20 reg_genmove w
#? [!E6]*

play black E6
30 owl_attack D5
#? [1 E6]
40 reg_genmove white
#? [PASS|D3|F3]&
"""


def test_a_tst_file_becomes_self_contained_reg_genmove_tests(tmp_path):
    tests = regress.parse_tst(SUITE, "capture.tst", tmp_path)
    assert [(t.ident, t.color, str(t.pattern), t.gnugo_fails) for t in tests] == [
        ("10", "black", "E6", False), ("20", "white", "!E6", True), ("40", "white", "PASS|D3|F3", False)]
    loaded = f"loadsgf {(tmp_path / 'capture.sgf').resolve()}"
    fuego = "uct_param_player max_games 3000"
    assert tests[0].setup == tests[1].setup == (loaded, fuego)  # boardsize gave way to the position after it
    assert tests[2].setup == (loaded, fuego, "play black E6")  # owl_attack is GNU Go's own: no test, no setup


def test_gnu_go_patterns():
    one_of = regress.Pattern.parse("E5|E6|E3")
    assert one_of.accepts("e6") and one_of.accepts(" E3 ") and not one_of.accepts("E4") and not one_of.accepts("E55")
    anything_but = regress.Pattern.parse("!PASS")
    assert anything_but.accepts("D4") and not anything_but.accepts("pass")
    with pytest.raises(ValueError, match="pattern"):
        regress.Pattern.parse("E5|(")


def test_suite_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(regress.SuiteError, match=r"bad.tst, line 1: reg_genmove of 'purple'"):
        regress.parse_tst("1 reg_genmove purple\n#? [A1]\n", "bad.tst", tmp_path)
    with pytest.raises(regress.SuiteError, match="p.json: not a tsumego problem"):
        regress.parse_tsumego('{"AB": []}', "p.json", tmp_path, None)
    assert regress.main([str(tmp_path / "missing.tst")]) == 1


def test_a_tsumego_problem_is_loaded_as_its_position(tmp_path):
    problem = {"AB": ["ba", "bb", "cb"], "AW": ["ab", "ac", "bc"], "SZ": "19", "C": "White to play",
               "SOL": [["W", "aa", "", ""], ["B", "ca", "", ""]]}
    test = regress.parse_tsumego(json.dumps(problem), "set/Problem 1.json", tmp_path, None)
    assert test.color == "white" and test.pattern.accepts("A19") and not test.pattern.accepts("C19")
    assert test.name == "set:Problem 1" and test.region == ()
    record = sgf_io.load_sgf_file(test.setup[1].split(" ", 1)[1])
    g = coords.grid(19)
    assert sorted(record.setup) == sorted([(BLACK, coords.from_sgf(g, p)) for p in problem["AB"]]
                                          + [(WHITE, coords.from_sgf(g, p)) for p in problem["AW"]])
    assert record.first_player == WHITE and record.komi == 0


# Black to live in the top-left corner, White's stones around it on the sides that face the open board.
CORNER = {"AB": ["ba", "bb", "cb", "db", "da"], "AW": ["ea", "eb", "ec", "dc", "cc", "bc", "ac"], "SZ": "19",
          "C": "Black to play", "SOL": [["B", "ab", "", ""]]}


def test_a_framed_tsumego_is_decided_by_whether_the_defender_lives(tmp_path):
    test = regress.parse_tsumego(json.dumps(CORNER), "set/corner.json", tmp_path, 2)
    g = coords.grid(19)
    region = {coords.from_gtp(g, v) for v in test.region}
    # rows 19-17 and columns A-E hold stones: two points around them, rows 19-15 and columns A-G
    assert len(region) == 5 * 7 and coords.from_gtp(g, "G15") in region and coords.from_gtp(g, "H15") not in region
    record = sgf_io.load_sgf_file(test.setup[1].split(" ", 1)[1])
    game = record.to_game()  # loads: every chain of the frame has a liberty
    problem = {coords.from_sgf(g, p) for p in CORNER["AB"] + CORNER["AW"]}
    frame = {p: c for c, p in record.setup if p not in problem}
    assert not set(frame) & region
    eyes = [p for p in g.points if p not in region and p not in frame]
    assert eyes and all(len({frame.get(n) for n in g.neighbors[p]}) == 1 for p in eyes)
    # White, the attacker, walls the region in
    wall = [p for p in g.points if p not in region and any(n in region for n in g.neighbors[p])]
    assert wall and all(frame[p] == WHITE for p in wall)
    # Both colours hold frame groups with two eyes or more: settled.
    owner = game.area_ownership()
    for color, sign in ((BLACK, 1), (WHITE, -1)):
        assert sum(1 for p in eyes if owner[g.flat(p)] == sign) >= 2
    # The game is Black's exactly when Black, the defender, holds ALIVE_AT points of the region or more.
    black_frame = sum(1 for p in frame.values() if p == BLACK) + sum(1 for p in eyes if owner[g.flat(p)] == 1)
    white_frame = sum(1 for p in frame.values() if p == WHITE) + sum(1 for p in eyes if owner[g.flat(p)] == -1)
    for held, black_wins in ((regress.ALIVE_AT, True), (regress.ALIVE_AT - 1, False), (0, False), (12, True)):
        score = (black_frame + held) - (white_frame + len(region) - held) - record.komi
        assert (score > 0) == black_wins
    assert abs(record.komi) < 20


def write_suite(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "capture.sgf").write_text(CAPTURE)
    (folder / "capture.tst").write_text(SUITE)
    return folder


@needs_gnugo
def test_gnu_go_passes_a_capture_test_from_an_archive(tmp_path, capsys):
    suite = write_suite(tmp_path / "suite")
    archive = tmp_path / "suite.tar.xz"
    with tarfile.open(archive, "w:xz") as t:
        t.add(suite, arcname="regression")
    assert regress.main([str(archive), "--include", "*capture.tst", "--engine", f"{GNUGO} --mode gtp",
                         "--failures"]) == 0
    out = capsys.readouterr().out
    # E6 saves and captures: test 10 passes and test 20 (White: anything but E6) fails; after E6 White blocks
    assert "regression/capture.tst:10" not in out and "FAIL regression/capture.tst:20 white: answered E6" in out
    assert "regression/capture.tst: 2 of 3 passed" in out
    assert "tests GNU Go 3.8 fails (marked *): 0 of 1 passed" in out
    assert "setup commands the engine does not know, left out: uct_param_player" in out and "not counted" not in out


def test_our_engine_answers_tsumego_within_the_region(tmp_path, tiny_onnx_model, capsys):
    problems = tmp_path / "problems"
    problems.mkdir()
    for i, corner in enumerate(["aa", "sa", "as", "ss"]):
        g = coords.grid(19)
        row, col = g.row_col(coords.from_sgf(g, corner))
        near = coords.to_sgf(g, g.point(abs(row - 1), abs(col - 1)))
        problem = {"AB": [corner], "AW": [near], "SZ": "19", "C": "Black to play", "SOL": [["B", near, "", ""]]}
        (problems / f"p{i}.json").write_text(json.dumps(problem))
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --visits 8 --log-level error"
    assert regress.main([str(problems), "--region", "1", "--engine", engine, "--failures"]) == 0
    out = capsys.readouterr().out
    assert "problems: " in out and "all: " in out and "of 4 passed" in out and "not counted" not in out
    # the random network's answers, wherever they fall, lie within a point of the corner stones
    answers = [line.split("answered ")[1].split(",")[0] for line in out.splitlines() if line.startswith("FAIL")]
    assert answers and all(a[0] in "ABCRST" and int(a[1:]) in (1, 2, 3, 17, 18, 19) for a in answers)
