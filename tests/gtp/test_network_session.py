"""GTP sessions with the tiny test network: moves, analysis formats and their interruption, scoring, GoGui's
analyze commands, interrupts and pondering. The engine runs as a subprocess, as a GUI starts it."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from engine_process import wait_for_exit

from gtp_engine import coords
from gtp_engine.game import GameState, format_result
from gtp_engine.gtp.values import parse_color

VERTEX = r"(?:[A-HJ-T](?:1[0-9]|[1-9])|pass)"
# Seconds from the input that stops a search to the end of its answer: the stop comes within one batch; the bound
# only catches a search that does not stop (pondering would run for minutes), and load alone cannot reach it.
STOP_LATENCY = 10.0
LZ_BLOCK = re.compile(rf"info move ({VERTEX}) visits (\d+) winrate (-?\d+) prior (\d+) lcb (-?\d+) order (\d+) "
                      rf"pv ((?:{VERTEX} ?)+)")
KATA_BLOCK = re.compile(rf"info move ({VERTEX}) visits (\d+) edgeVisits (\d+) utility (-?\d+\.\d+) "
                        rf"winrate (0\.\d+|1\.0+) scoreMean (-?\d+\.\d+) scoreStdev (\d+\.\d+) "
                        rf"scoreLead (-?\d+\.\d+) prior (0\.\d+|1\.0+) lcb (-?\d+\.\d+) "
                        rf"order (\d+) pv ((?:{VERTEX} ?)+)")


def replay(gtp, size: int) -> GameState:
    """The engine's game, rebuilt from its SGF, to check its answers against our own rules code."""
    game = GameState(size)
    for color, vertex in re.findall(r";\s*([BW])\[([a-z]*)\]", gtp.ok("printsgf")):
        point = coords.PASS if vertex == "" else coords.from_sgf(game.grid, vertex)
        game.play(point, parse_color(color))
    return game


def test_genmove_plays_legal_moves_for_either_colour(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 9")
    gtp.ok("komi 7")
    for color in "bwbwbbw":  # the colour asked for may differ from the one to move
        move = gtp.ok(f"genmove {color}", timeout=120)
        assert re.fullmatch(VERTEX, move) or move == "resign", move
        if move != "resign":
            assert gtp.ok("showboard").split("last move: ")[1] == f"{color.upper()} {move}"
    game = replay(gtp, 9)
    assert len(game.moves) == 7
    before = gtp.ok("showboard")
    assert re.fullmatch(VERTEX, gtp.ok("reg_genmove w"))
    assert gtp.ok("showboard") == before  # reg_genmove does not play
    # The Player follows the session through undo: the next move is legal where the session is.
    gtp.ok("undo")
    gtp.ok("undo")
    assert gtp.ok("kgs-genmove_cleanup b") != "resign"
    game = replay(gtp, 9)
    assert len(game.moves) == 6 and game.moves[-1][0] == parse_color("b")


def analysis_lines(gtp, command: str, seconds: float, stop: str = "protocol_version"):
    """Runs an analysis command for `seconds`, stops it with `stop`; returns the lines and the stop latency."""
    gtp.send(command)
    head = gtp.line(60)
    assert re.fullmatch(r"=\d*", head), head
    time.sleep(seconds)
    gtp.send(stop)
    sent = time.monotonic()
    lines = []
    while (line := gtp.line(30)) != "":
        lines.append(line)
    latency = time.monotonic() - sent
    return lines, latency


def test_lz_analyze_streams_integer_lines_until_any_input(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 9")
    gtp.ok("play b e5")
    lines, latency = analysis_lines(gtp, "lz-analyze W 10", 1.0)
    assert lines and latency < STOP_LATENCY
    for line in lines:
        blocks = re.split(r" (?=info )", line)
        for k, block in enumerate(blocks):
            match = LZ_BLOCK.fullmatch(block)
            assert match, block
            assert 0 <= int(match.group(3)) <= 10000 and int(match.group(6)) == k
            assert match.group(7).split()[0] == match.group(1)  # the pv starts with the move
        assert "E5" not in [LZ_BLOCK.fullmatch(b).group(1) for b in blocks]  # the point is taken
    assert gtp.response(10).text == "2"  # then the command that stopped it is answered
    # Lizzie's form: an interval and no colour; a bare empty line stops it too.
    lines, latency = analysis_lines(gtp, "17 lz-analyze 20", 0.5, stop="")
    assert lines and latency < STOP_LATENCY and LZ_BLOCK.match(lines[-1])


def test_kata_analyze_writes_decimals_root_info_and_ownership(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 7")
    gtp.ok("play b d4")
    lines, latency = analysis_lines(gtp, "kata-analyze w interval 10 ownership true rootInfo true maxmoves 3", 0.8,
                                    stop="name")
    assert latency < STOP_LATENCY
    assert gtp.response(10).text == "gtp_engine"
    line = lines[-1]
    info, _, ownership = line.partition(" ownership ")
    info, _, root = info.partition(" rootInfo ")
    blocks = re.split(r" (?=info )", info)
    assert 1 <= len(blocks) <= 3
    assert all(KATA_BLOCK.fullmatch(b) for b in blocks), blocks
    assert re.fullmatch(r"visits \d+ utility -?\d+\.\d+ winrate [01]\.\d+ scoreLead -?\d+\.\d+ "
                        r"scoreMean -?\d+\.\d+ scoreStdev \d+\.\d+ rawWinrate [01]\.\d+ rawLead -?\d+\.\d+", root)
    values = [float(v) for v in ownership.split()]
    assert len(values) == 49 and all(-1 <= v <= 1 for v in values)
    # minmoves pads the line with moves nobody visited yet.
    lines, _ = analysis_lines(gtp, "kata-analyze b 1000 minmoves 6", 0.2)
    blocks = re.split(r" (?=info )", lines[-1])
    assert len(blocks) >= 6 and all(KATA_BLOCK.fullmatch(b) for b in blocks)
    assert gtp.response(10).text == "2"


def test_analysis_arguments_are_checked(engine, net_args):
    gtp = engine(*net_args)
    for command in ("lz-analyze b 10 ownership true", "kata-analyze b 10 colour w", "kata-analyze b interval",
                    "kata-analyze b 10 minmoves -1", "lz-analyze b -5", "kata-analyze b 10 rootInfo maybe"):
        reply = gtp(command)
        assert (reply.ok, reply.text) == (False, "syntax error"), command
    assert gtp("lz-analyze w allow w q16").text == "syntax error"
    assert gtp("lz-analyze w allow w q16 1 avoid w c3 1").text.startswith("cannot use these avoid / allow clauses")


def blocks_of(line: str, pattern: re.Pattern) -> list[re.Match]:
    matches = [pattern.fullmatch(b) for b in re.split(r" (?=info )", line)]
    assert all(matches), line
    return matches


def test_analysis_never_reports_an_avoided_move_and_allow_limits_the_moves(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 9")
    gtp.ok("play b e5")
    lines, _ = analysis_lines(gtp, "lz-analyze w 10 minmoves 5", 0.5)
    gtp.response(10)
    favourites = [blocks_of(lines[-1], LZ_BLOCK)[k].group(1) for k in range(3)]
    avoided = ",".join(favourites)
    lines, _ = analysis_lines(gtp, f"kata-analyze w 5 avoid w {avoided} 1 avoid b d4 2 minmoves 20", 0.8)
    gtp.response(10)
    assert lines
    for line in lines:
        moves = [m.group(1) for m in blocks_of(line, KATA_BLOCK)]
        assert len(moves) >= 20 and not set(moves) & set(favourites), (favourites, moves)
    allowed = {"A1", "J9", "C7", "pass"}
    lines, _ = analysis_lines(gtp, "lz-analyze w 5 allow white a1,j9,c7,pass 1 minmoves 10", 0.5)
    gtp.response(10)
    for line in lines:
        assert {m.group(1) for m in blocks_of(line, LZ_BLOCK)} <= allowed
    # genmove_analyze plays within the allowed moves; pass only when listed.
    gtp.send("kata-genmove_analyze w 5 allow w b2:c3 1")
    assert gtp.line(60) == "="
    while (line := gtp.line(60)) != "":
        last = line
    assert last in ("play B2", "play B3", "play C2", "play C3"), last


def test_genmove_analyze_streams_then_plays(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 9")
    for command, block in (("lz-genmove_analyze b 5", LZ_BLOCK), ("kata-genmove_analyze w 5", KATA_BLOCK)):
        gtp.send(command)
        assert gtp.line(60) == "="
        lines = []
        while (line := gtp.line(60)) != "":
            lines.append(line)
        assert lines[-1].startswith("play ")
        move = lines[-1].split()[1]
        assert re.fullmatch(VERTEX, move)
        assert all(block.match(line) for line in lines[:-1])
        assert gtp.ok("showboard").split("last move: ")[1] == f"{command.split()[1].upper()} {move}"


def test_scoring_and_dead_stones_agree(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 7")
    for move in ("b c3", "w e5", "b c5", "w e3", "b d4", "w f6", "b b2", "w pass"):
        gtp.ok(f"play {move}")
    game = replay(gtp, 7)
    dead = [coords.from_gtp(game.grid, v) for v in gtp.ok("final_status_list dead").split()]
    alive = [coords.from_gtp(game.grid, v) for v in gtp.ok("final_status_list alive").split()]
    stones = [p for p in game.grid.points if game.board.colors[p] in (1, 2)]
    assert sorted(dead + alive) == sorted(stones)
    assert gtp.ok("final_score") == format_result(game.score(dead))
    seki = gtp.ok("final_status_list seki").split()
    assert set(seki) <= {coords.to_gtp(game.grid, p) for p in alive}


def test_gogui_analyze_commands(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 9")
    gtp.ok("play b e5")
    definitions = gtp.ok("gogui-analyze_commands").split("\n")
    listed = set(gtp.ok("list_commands").split("\n"))
    for definition in definitions:
        kind, label, command = definition.split("/")
        assert kind in ("dboard", "gfx", "string", "plist", "none") and label
        assert command.split()[0] in listed
    rows = gtp.ok("gogui-ownership").split("\n")
    assert len(rows) == 9 and all(len(r.split()) == 9 and all(-1 <= float(v) <= 1 for v in r.split()) for r in rows)
    policy = gtp.ok("gogui-policy").split("\n")
    assert all(re.fullmatch(rf"INFLUENCE {VERTEX} [01]\.\d+|LABEL {VERTEX} \d+|TEXT pass \d+\.\d%", p) for p in policy)
    assert not any(p.startswith("INFLUENCE E5") for p in policy)  # taken
    best = gtp.ok("gogui-best_moves").split("\n")
    assert best[0].startswith("VAR w ") and best[-1].startswith("TEXT White to play")
    assert re.fullmatch(r"White to play: winrate \d+\.\d%, (leads|trails) by \d+\.\d points, \d+ visits",
                        gtp.ok("gogui-winrate"))
    assert gtp.ok("clear_cache") == ""


def test_ownership_survives_a_search_that_reuses_all_its_visits(engine, net_args):
    # Regression: the second gogui-winrate finds its 24 visits in the tree and makes no playout; the ownership
    # that follows used to be all zeros, and final_score / final_status_list read the same ownership.
    gtp = engine(*net_args)
    gtp.ok("boardsize 9")
    gtp.ok("play b e5")
    gtp.ok("gogui-winrate")
    first = gtp.ok("gogui-ownership")
    assert any(float(v) != 0 for v in first.split())
    gtp.ok("gogui-winrate")
    assert gtp.ok("gogui-ownership") == first


def test_gogui_interrupt_ends_a_long_genmove_with_a_move(engine, net_args):
    gtp = engine(*net_args, "--visits", "1000000")
    gtp.ok("boardsize 9")
    gtp.send("genmove b")
    time.sleep(1.0)
    gtp.send("# interrupt")
    sent = time.monotonic()
    reply = gtp.response(30)
    assert time.monotonic() - sent < STOP_LATENCY
    assert reply.ok and re.fullmatch(VERTEX, reply.text)


def cpu_seconds(pid: int) -> float:
    """CPU time of a process so far, read without sending it a command (a command would stop pondering)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads CPU time from /proc (Linux)")
def test_pondering_runs_between_moves_and_stops_on_any_input(engine, net_args):
    gtp = engine(*net_args, "--ponder", "on", "--visits", "400")  # pondering stops by itself after 20 x visits
    pid = gtp.process.pid
    gtp.ok("boardsize 9")
    gtp.ok("genmove b")
    start = cpu_seconds(pid)
    deadline = time.monotonic() + 60.0  # a loaded machine gives the engine less than a core: wait, bound nothing
    while cpu_seconds(pid) - start <= 0.25 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cpu_seconds(pid) - start > 0.25  # thinking on the opponent's time
    gtp.send("")  # an empty line is input too: it stops pondering
    time.sleep(0.3)
    start = cpu_seconds(pid)
    time.sleep(0.7)
    assert cpu_seconds(pid) - start < 0.15
    gtp.ok("genmove w")
    sent = time.monotonic()
    assert gtp.ok("name") == "gtp_engine" and time.monotonic() - sent < STOP_LATENCY  # answered while pondering


def test_sigterm_during_analysis_ends_the_process(engine, net_args):
    gtp = engine(*net_args)
    gtp.send("lz-analyze b 10")
    assert gtp.line(60) == "="
    assert gtp.line(60).startswith("info")
    gtp.process.send_signal(signal.SIGTERM)
    assert wait_for_exit(gtp.process, 5) < 5 and gtp.process.returncode == 0


def test_stdout_stays_gtp_while_libraries_print(engine, tiny_onnx_model):
    """--device auto makes onnxruntime try its GPU providers; where their libraries are missing it prints errors,
    partly with print() to stdout. The engine points stdout at stderr, so the GTP stream must stay clean."""
    gtp = engine("--weights", str(tiny_onnx_model), "--visits", "8")
    gtp.ok("boardsize 9")
    assert re.fullmatch(VERTEX, gtp.ok("genmove b"))
    gtp.ok("quit")
    assert gtp.close() == 0
    assert re.fullmatch(r"=\n\n= [A-J][1-9]\n\n=\n\n|=\n\n= pass\n\n=\n\n", gtp.raw.decode())
