"""GTP sessions with the engine as a subprocess and no network: the handshake, framing, error words, set-up,
handicap, time, rules, SGF and the ways the process ends."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from engine_process import ROOT, wait_for_exit


def test_handshake_answers_while_the_network_loads(engine, tmp_path):
    # A named pipe nobody writes to: the network load blocks in open() for as long as the test runs, so the
    # answers below can only come from a handshake that does not wait for it (no wall-clock bound needed).
    weights = tmp_path / "never-written.onnx"
    os.mkfifo(weights)
    gtp = engine("--weights", str(weights), "--device", "cpu")
    gtp.send("1 protocol_version")
    gtp.send("2 name")
    gtp.send("3 list_commands")
    replies = [gtp.response(timeout=60) for _ in range(3)]
    assert [r.text for r in replies[:2]] == ["2", "gtp_engine"]
    assert [r.id for r in replies] == [1, 2, 3]
    assert "genmove" in replies[2].lines
    assert gtp.ok("boardsize 9") == "" and gtp.ok("play b e5") == ""


def test_listed_commands_are_exactly_the_known_ones(engine):
    gtp = engine()
    listed = gtp.ok("list_commands").split("\n")
    assert len(listed) == len(set(listed)) and "quit" in listed
    for name in listed:
        assert gtp.ok(f"known_command {name}") == "true"
        if name != "quit":
            reply = gtp(name)  # without arguments: may fail, but must be understood
            assert reply.text != "unknown command", name
    for name in ("analyze", "genmove_analyze", "foo", "kata-raw-nn-policy"):
        assert gtp.ok(f"known_command {name}") == "false"
        assert gtp(name).text == "unknown command"


def test_input_is_preprocessed_and_ids_are_echoed(engine):
    gtp = engine()
    gtp.process.stdin.write(b"\r\n# a comment line\n7 name\r\n\tboardsize\t 9 # comment\r\n\x00\x7fkomi 6.5\n"
                            b"   \n8\tget_komi\n12 foo\n13 play b\n")
    gtp.process.stdin.flush()
    replies = [gtp.response(5) for _ in range(6)]
    assert [(r.ok, r.id, r.text) for r in replies] == [
        (True, 7, "gtp_engine"), (True, None, ""), (True, None, ""), (True, 8, "6.5"),
        (False, 12, "unknown command"), (False, 13, "syntax error"),
    ]
    gtp.send("quit")
    gtp.response(5)
    assert gtp.close() == 0
    # Exactly the responses, each closed by one empty line: nothing else reached stdout.
    assert gtp.raw.decode() == "=7 gtp_engine\n\n=\n\n=\n\n=8 6.5\n\n?12 unknown command\n\n?13 syntax error\n\n=\n\n"


ILLEGAL_REQUESTS = [  # (set-up, command, the error words)
    ([], "play x d4", "syntax error"),
    ([], "play b", "syntax error"),
    ([], "play b i5", "syntax error"),
    (["boardsize 9"], "play b j10", "illegal move"),
    (["boardsize 9", "play b e5"], "play w e5", "illegal move"),
    (["boardsize 9", "play w a2", "play w b1"], "play b a1", "illegal move"),  # suicide
    (["boardsize 9", "play b c5", "play b d6", "play b d4", "play w e6", "play w f5", "play w e4", "play w d5",
      "play b e5"], "play w d5", "illegal move"),  # ko: d5 would retake at once
    ([], "undo", "cannot undo"),
    (["boardsize 9", "fixed_handicap 2"], "undo", "cannot undo"),
    ([], "boardsize 1", "unacceptable size"),
    ([], "boardsize 26", "unacceptable size"),
    ([], "boardsize nine", "syntax error"),
    ([], "fixed_handicap 10", "invalid number of stones"),
    (["boardsize 5"], "fixed_handicap 2", "invalid number of stones"),
    (["play b d4"], "fixed_handicap 2", "board not empty"),
    (["play b d4"], "set_free_handicap c3 d16", "board not empty"),
    ([], "place_free_handicap 1", "invalid number of stones"),
    ([], "set_free_handicap a1", "bad vertex list"),
    ([], "set_free_handicap a1 a1", "bad vertex list"),
    ([], "set_free_handicap pass a1", "bad vertex list"),
    ([], "set_free_handicap a1 z99", "bad vertex list"),
    ([], "loadsgf /nonexistent/game.sgf", "cannot load file"),
    ([], "final_score", "cannot score"),
    ([], "komi seven", "syntax error"),
    ([], "komi nan", "syntax error"),
    ([], "time_settings 300 30", "syntax error"),
    ([], "time_left b soon 0", "syntax error"),
    ([], "kgs-time_settings byoyomi 300", "syntax error"),
    ([], "kata-time_settings fischer 300", "syntax error"),
    ([], "final_status_list maybe", "syntax error"),
    ([], "known_command", "syntax error"),
]


def test_illegal_requests_get_the_protocol_error_words(engine):
    gtp = engine()
    answers = []
    for setup, command, error in ILLEGAL_REQUESTS:
        gtp.ok("boardsize 19")
        for line in setup:
            gtp.ok(line)
        reply = gtp(command)
        answers.append((command, reply.ok, reply.text))
    assert answers == [(command, False, error) for _, command, error in ILLEGAL_REQUESTS]



def test_commands_that_need_the_network_say_why_they_cannot_run(engine):
    gtp = engine()  # no network at all (an unusable one ends the process: tests/test_unusable_network.py)
    for command in ("genmove b", "lz-analyze b 10", "kata-genmove_analyze w", "reg_genmove b", "gogui-ownership"):
        reply = gtp(command)
        assert not reply.ok and reply.text.startswith("no network loaded: no network for 19x19 boards in ")
    assert gtp.ok("name") == "gtp_engine"  # and the engine keeps going


def board_rows(diagram: str) -> list[str]:
    """The rows of a showboard diagram as strings of X, O and '.', top row first."""
    rows = []
    for line in diagram.split("\n"):
        match = re.fullmatch(r"\s*(\d+)(.*?)(\d+)", line)
        if match:
            rows.append(re.sub(r"[ ()]", "", match.group(2)))
    return rows


def test_board_setup_keeps_komi_and_supports_rectangles(engine):
    gtp = engine()
    gtp.ok("komi 6.5")
    gtp.ok("boardsize 13")
    assert gtp.ok("get_komi") == "6.5"
    gtp.ok("play b a13")
    gtp.ok("clear_board")
    assert board_rows(gtp.ok("showboard")) == ["." * 13] * 13
    gtp.ok("boardsize 7 5")
    assert board_rows(gtp.ok("showboard")) == ["." * 7] * 5
    gtp.ok("rectangular_boardsize 4 6")
    gtp.ok("play w d6")
    assert board_rows(gtp.ok("showboard"))[0] == "...O"
    gtp.ok("boardsize 9:3")
    assert len(board_rows(gtp.ok("showboard"))) == 3
    assert gtp.ok("get_komi") == "6.5"


def test_play_captures_undo_and_showboard(engine):
    gtp = engine()
    gtp.ok("boardsize 5")
    for move in ("b b1", "w a1", "b a2", "w pass", "B C5", "white E5"):
        gtp.ok(f"play {move}")
    rows = board_rows(gtp.ok("showboard"))
    assert rows == ["..X.O", ".....", ".....", "X....", ".X..."]  # the white stone at A1 was captured
    assert "Black (X) 1" in gtp.ok("showboard")
    gtp.ok("undo")
    gtp.ok("undo")
    gtp.ok("undo")  # the pass
    gtp.ok("undo")  # the capture: A1 comes back
    assert board_rows(gtp.ok("showboard"))[4] == "OX..."
    assert board_rows(gtp.ok("showboard"))[3] == "....."
    gtp.ok("gg-undo 2")
    assert board_rows(gtp.ok("showboard")) == ["....."] * 5
    assert gtp("gg-undo 1").text == "cannot undo"


def test_handicap_commands(engine):
    gtp = engine()
    assert gtp.ok("fixed_handicap 9") == "D4 Q16 D16 Q4 D10 Q10 K4 K16 K10"
    assert "White to play" in gtp.ok("showboard")
    gtp.ok("clear_board")
    stones = gtp.ok("place_free_handicap 13").split()
    assert len(stones) == len(set(stones)) == 13 and "pass" not in stones
    assert sum(row.count("X") for row in board_rows(gtp.ok("showboard"))) == 13
    gtp.ok("boardsize 6")
    assert len(set(gtp.ok("place_free_handicap 5").split())) == 5  # no fixed layout below 7x7
    gtp.ok("clear_board")
    gtp.ok("set_free_handicap b2 e5 c3")
    assert "White to play" in gtp.ok("showboard")
    assert gtp("undo").text == "cannot undo"


def test_komi_follows_the_rules_and_the_handicap_until_the_controller_sets_it(engine):
    gtp = engine("--rules", "japanese")
    assert gtp.ok("get_komi") == "6.5"
    gtp.ok("fixed_handicap 2")
    assert gtp.ok("get_komi") == "0.5"
    gtp.ok("clear_board")
    assert gtp.ok("get_komi") == "6.5"
    gtp.ok("kata-set-rules chinese")
    assert gtp.ok("get_komi") == "7.5"
    gtp.ok("place_free_handicap 3")
    assert gtp.ok("get_komi") == "0.5"
    gtp.ok("clear_board")
    gtp.ok("komi 5")
    gtp.ok("fixed_handicap 4")
    gtp.ok("clear_board")
    gtp.ok("kata-set-rules japanese")
    assert gtp.ok("get_komi") == "5"  # the controller's komi stays


def test_time_commands_accept_what_controllers_send(engine):
    gtp = engine()
    for line in ("time_settings 300 30 5", "time_settings 0 1 0", "time_settings 1800 0 0",
                 "kgs-time_settings byoyomi 300 30 5", "time_left black 212 0", "time_left white 27 3",
                 "kgs-time_settings canadian 600 300 25", "time_left w 41 3", "kgs-time_settings none",
                 "kgs-time_settings absolute 60", "time_left b -2 0", "time_settings 60.5 10.5 1",
                 "kata-time_settings fischer-capped 600 10 1200 -1", "kata-time_settings fischer 300 5"):
        gtp.ok(line)
    assert gtp.ok("kata-list_time_settings").split() == ["none", "absolute", "byoyomi", "canadian", "fischer",
                                                         "fischer-capped"]
    assert float(gtp.ok("cputime")) >= 0


def test_rules_can_be_read_and_set(engine):
    gtp = engine("--rules", "japanese")
    assert '"scoring":"TERRITORY"' in gtp.ok("kata-get-rules")
    gtp.ok("boardsize 9")
    for move in ("b a1", "w a3", "w b2", "w c1", "b b1"):
        gtp.ok(f"play {move}")
    assert gtp("play b a2").text == "illegal move"  # suicide of three stones
    gtp.ok("kata-set-rules tromp-taylor")  # where it is legal
    rules = gtp.ok("kata-get-rules")
    assert '"scoring":"AREA"' in rules and '"suicide":true' in rules
    gtp.ok("play b a2")
    assert board_rows(gtp.ok("showboard"))[6:] == ["O........", ".O.......", "..O......"]
    aga = '{"scoring":"AREA","ko":"SITUATIONAL","suicide":false,"whiteHandicapBonus":"N-1","friendlyPassOk":true}'
    refused = gtp(f"kata-set-rules {aga}")  # the game so far has a suicide: these rules cannot replay it
    assert not refused.ok and "suicide" in refused.text
    gtp.ok("clear_board")
    gtp.ok(f"kata-set-rules {aga}")
    assert "aga rules" in gtp.ok("showboard")
    gtp.ok('kata-set-rules {"tax":"ALL"}')  # KataGo's defaults for the rest: Tromp-Taylor's, taxed
    assert '"tax":"ALL"' in gtp.ok("kata-get-rules")
    refused = gtp('kata-set-rules {"hasButton":true}')  # played only approximately: refused, the field named
    assert not refused.ok and "hasButton" in refused.text
    refused = gtp('kata-set-rules {"scoring":"AREA","ko":"SOMETIMES"}')
    assert not refused.ok and "ko" in refused.text
    assert not gtp("kata-set-rules backgammon").ok


@pytest.mark.parametrize("ru, scoring", [
    ("Japanese", "TERRITORY"),  # the record's rules, as KataGo's loadsgf takes them
    ("backgammon", "AREA"),  # no rule set: the session's stay
    (None, "AREA"),
])
def test_loadsgf_takes_the_rules_the_records_ru_names(engine, tmp_path, ru, scoring):
    gtp = engine()
    gtp.ok("kata-set-rules chinese")
    path = tmp_path / "game.sgf"
    path.write_text(f"(;GM[1]FF[4]SZ[9]KM[6.5]{f'RU[{ru}]' if ru else ''};B[ee];W[cc])")
    gtp.ok(f"loadsgf {path}")
    assert json.loads(gtp.ok("kata-get-rules"))["scoring"] == scoring
    assert gtp.ok("get_komi") == "6.5"


def test_printsgf_and_loadsgf_round_trip(engine, tmp_path):
    gtp = engine()
    gtp.ok("boardsize 9")
    gtp.ok("komi 5.5")
    gtp.ok("set_free_handicap c3 g7")
    for move in ("w e5", "b d4", "w pass", "b e6"):
        gtp.ok(f"play {move}")
    picture = board_rows(gtp.ok("showboard"))
    sgf = gtp.ok("printsgf")
    assert sgf.startswith("(;") and "HA[2]" in sgf and "KM[5.5]" in sgf
    path = tmp_path / "a game with spaces.sgf"
    gtp.ok(f"printsgf {path}")
    assert path.read_text().startswith("(;")
    gtp.ok("boardsize 13")
    gtp.ok("komi 0")
    gtp.ok(f"loadsgf {path}")
    assert board_rows(gtp.ok("showboard")) == picture
    assert gtp.ok("get_komi") == "5.5"
    gtp.ok(f'loadsgf "{path}" 3')  # up to, not including, move 3: handicap, W e5, B d4
    assert "move 2; White to play" in gtp.ok("showboard")
    gtp.ok("undo")
    gtp.ok("undo")
    assert gtp("undo").text == "cannot undo"


def test_quit_answers_then_ends_the_process(engine):
    gtp = engine()
    reply = gtp("5 quit")
    assert (reply.ok, reply.id) == (True, 5)
    assert wait_for_exit(gtp.process, 5) < 5 and gtp.process.returncode == 0


def test_end_of_input_ends_the_process(engine):
    gtp = engine()
    gtp.ok("name")
    gtp.process.stdin.close()
    assert wait_for_exit(gtp.process, 5) < 5 and gtp.process.returncode == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_end_the_process(engine, signum):
    gtp = engine()
    gtp.ok("name")
    gtp.process.send_signal(signum)
    assert wait_for_exit(gtp.process, 5) < 5 and gtp.process.returncode == 0


def run_main(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtp_engine", *args], input="quit\n", capture_output=True,
                          text=True, cwd=ROOT, timeout=30)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--colour", "black"], "unrecognized arguments: --colour"),
        (["--visits", "0"], "--visits: expected a positive integer"),
        (["--time", "soon"], "--time: expected a positive number of seconds"),
        (["--ponder", "maybe"], "--ponder: expected on or off"),
        (["--rules", "backgammon"], "unknown rules 'backgammon'"),
        (["--device", "gpu"], "--device: expected auto, cpu, cuda or tensorrt"),
        (["--config", "/nonexistent.toml"], "cannot read config file"),
    ],
)
def test_bad_command_lines_exit_with_status_2_and_say_why(args, message):
    result = run_main(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_config_file_sets_options_and_flags_win(engine, tmp_path):
    path = tmp_path / "engine.toml"
    path.write_text('rules = "japanese"\nvisits = 10\n')
    assert '"scoring":"TERRITORY"' in engine("--config", str(path)).ok("kata-get-rules")
    assert '"scoring":"AREA"' in engine("--config", str(path), "--rules", "chinese").ok("kata-get-rules")
    path.write_text("visitz = 10\n")
    result = run_main("--config", str(path))
    assert result.returncode == 2 and "unknown option 'visitz'" in result.stderr
