"""Thousands of random and malformed lines: the engine answers each command line exactly once, in order, with
its id, never crashes a handler ("internal error") and writes nothing but GTP responses on stdout."""

from __future__ import annotations

import random
import re

import pytest
from engine_process import start_engine

FRAMED = re.compile(r"(?:[=?]\d*(?: [^\n]*)?\n(?:[^\n]+\n)*\n)*")
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
COMMANDS = ["protocol_version", "name", "version", "known_command", "list_commands", "boardsize",
            "rectangular_boardsize", "clear_board", "komi", "get_komi", "kata-get-rules", "kata-set-rules", "play",
            "undo", "gg-undo", "genmove", "kgs-genmove_cleanup", "reg_genmove", "lz-genmove_analyze",
            "kata-genmove_analyze", "gogui-interrupt", "stop", "kgs-game_over", "fixed_handicap",
            "place_free_handicap", "set_free_handicap", "time_settings", "kgs-time_settings", "kata-time_settings",
            "kata-list_time_settings", "time_left", "cputime", "final_score", "final_status_list", "lz-analyze",
            "kata-analyze", "gogui-analyze_commands", "gogui-ownership", "gogui-policy", "gogui-best_moves",
            "gogui-winrate", "clear_cache", "showboard", "loadsgf", "printsgf", "Play", "GENMOVE", "foo", "",
            "known-command", "quitt"]
TOKENS = ["b", "w", "black", "White", "B", "x", "pass", "PASS", "resign", "a1", "A1", "e5", "j9", "i5", "t19",
          "z25", "a0", "a26", "aa", "d4", "Q16", "c3", "0", "1", "2", "3", "5", "7", "9", "13", "19", "25", "26",
          "-1", "-7.5", "6.5", "0.5", "1e9", "nan", "inf", "99999999999999999999", "3:3", "9:7", "none", "absolute",
          "byoyomi", "canadian", "fischer", "fischer-capped", "alive", "dead", "seki", "true", "false", "interval",
          "minmoves", "maxmoves", "ownership", "rootInfo", "avoid", "allow", "chinese", "japanese", "tromp-taylor",
          '{"ko":"SIMPLE"}', '{"tax":"SEKI"}', "{", "}", "/nonexistent.sgf", "ünïcode", "\t", "#", "# interrupt",
          "\r", "\x00", "\x1b[2J", "a1,b2,c3", "A1,pass"]


def random_line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:  # raw noise
        return "".join(chr(rng.randrange(0, 0x250)) for _ in range(rng.randrange(0, 40))).replace("\n", "")
    words = [rng.choice(COMMANDS)] + [rng.choice(TOKENS) for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4, 6]))]
    if kind < 0.3:
        words.insert(0, str(rng.randrange(0, 100000)))
    line = " ".join(words)
    if rng.random() < 0.1:
        line = line.replace(" ", rng.choice(["\t", "  ", " \r ", " \x01"]))
    return line + rng.choice(["", "", "\r", " # comment"])


def expected_command(line: str) -> tuple[bool, int | None]:
    """Whether a line holds a command (GTP section 2.2, written out independently), and its id."""
    text = CONTROL.sub("", line).split("#", 1)[0].replace("\t", " ").strip()
    if not text:
        return False, None
    head = text.split()[0]
    return True, int(head) if head.isascii() and head.isdigit() else None


def fuzz(gtp, lines: list[str]) -> None:
    commands = [expected_command(line) for line in lines]
    for line in lines:
        gtp.send(line)
    gtp.send("999999 quit")
    replies = [gtp.response(120) for _ in range(sum(is_command for is_command, _ in commands) + 1)]
    assert replies[-1].id == 999999 and replies[-1].ok
    assert [r.id for r in replies[:-1]] == [command_id for is_command, command_id in commands if is_command]
    crashes = [(line, r.text) for line, r in zip([l for l, (c, _) in zip(lines, commands) if c], replies)
               if r.text.startswith("internal error")]
    assert not crashes, crashes[:5]
    assert gtp.close() == 0
    assert FRAMED.fullmatch(gtp.raw.decode("utf-8", errors="replace")), "non-GTP output on stdout"


def test_random_lines_without_a_network(engine, tmp_path):
    rng = random.Random(20240611)
    fuzz(engine(cwd=tmp_path), [random_line(rng) for _ in range(3000)])


@pytest.mark.parametrize("seed", [1, 2])
def test_random_lines_with_a_network(engine, tiny_onnx_model, tmp_path, seed):
    rng = random.Random(seed)
    gtp = engine("--weights", str(tiny_onnx_model), "--device", "cpu", "--visits", "3", "--seed", str(seed),
                 cwd=tmp_path)
    fuzz(gtp, [random_line(rng) for _ in range(800)])


def test_a_controller_that_stops_reading_ends_the_session_quietly(tmp_path):
    # A GUI that goes away closes its end of our stdout first: the answers after that cannot be written, and the
    # engine ends at the end of its input without a traceback.
    process = start_engine(["--weights-dir", str(tmp_path)], cwd=tmp_path)
    process.stdin.write(b"protocol_version\n")
    process.stdin.flush()
    assert process.stdout.readline() == b"= 2\n"
    process.stdout.close()
    process.stdin.write(b"name\nversion\nshowboard\n")
    process.stdin.close()
    process.wait(60)
    stderr = process.stderr.read().decode()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
