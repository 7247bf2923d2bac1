"""Stopping: quit, the end of input, SIGTERM and SIGINT end every front end at once, in every state, cleanly.

Each test starts the engine over pipes on the tiny test network with visit counts it cannot reach, brings it to a
state (GTP: idle with its network loaded, pondering, inside genmove, inside kata-analyze; the JSON analysis engine:
idle, and with a query running and more queued; a review under way), stops it one way, and times the exit from the
moment it was told. STOP_SECONDS is a bound two busy cores cannot break; the stops themselves take a fraction of a
second (the README gives the measured times). A clean end: the status asked for, no traceback and no abort
("terminate called", from onnxruntime's threads at interpreter exit) on stderr, and only protocol on stdout.
"""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from engine_process import EngineProcess, start_engine

STOP_SECONDS = 10.0
SETTLE = 0.3  # seconds in a state before the stop
GAME = Path(__file__).resolve().parent / "review" / "fixtures" / "ogs_20803642.sgf"
GAME_POSITIONS = 78
READY_LINE = "Started, ready to begin handling requests"

# Whole GTP responses, then at most one a signal cut short (a kata-analyze stream has no closing empty line).
GTP_OUTPUT = re.compile(r"(?:[=?]\d*(?: [^\n]*)?\n(?:[^\n]+\n)*\n)*(?:=\d*\n(?:[^\n]+\n)*)?")


class Process(EngineProcess):
    """The engine; its stdout kept as bytes in raw."""

    def decode(self, line: bytes) -> bytes:
        return line

    def wait_until(self, seen, timeout: float = 60.0) -> None:
        """Waits until seen(stdout text, stderr text) holds; fails with both when it does not in time."""
        end = time.monotonic() + timeout
        while not seen(self.raw.decode(errors="replace"), self.stderr_text()):
            assert self.process.poll() is None, f"the engine ended early:\n{self.stderr_text()}"
            assert time.monotonic() < end, f"state not reached; stdout:\n{self.raw.decode()}\n{self.stderr_text()}"
            time.sleep(0.02)

    def stop(self, way: str) -> float:
        """Stops the engine `way` (quit, eof, sigterm or sigint); the seconds until it exited."""
        assert self.process.poll() is None, self.stderr_text()
        start = time.monotonic()
        if way == "quit":
            self.write("99 quit\n")
        elif way == "eof":
            self.process.stdin.close()
        else:
            self.process.send_signal({"sigterm": signal.SIGTERM, "sigint": signal.SIGINT}[way])
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"still running {STOP_SECONDS} s after {way}:\n{self.stderr_text()}")
        return time.monotonic() - start


@pytest.fixture
def start(tmp_path):
    started: list[Process] = []

    def start(*args: str) -> Process:
        process = Process(list(args), cwd=tmp_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.close(5)


def assert_clean(process: Process, status: int = 0) -> str:
    """The exit status and a clean stderr; returns stderr."""
    stderr = process.stderr_text()
    assert process.process.returncode == status, stderr
    assert "Traceback" not in stderr and "terminate called" not in stderr, stderr
    return stderr


def answered(number: int):
    return lambda out, err: f"\n={number}" in "\n" + out


# ---- GTP ------------------------------------------------------------------------------------------------------

LOADED = "1 kata-set-param maxVisits 2\n2 genmove b\n"  # the first genmove: the network has loaded
GTP_STATES = {  # name -> (flags, input, what shows the engine is in the state)
    "idle": ((), LOADED, answered(2)),
    "pondering": (("--ponder", "on", "--time", "0.2"), "2 genmove b\n", answered(2)),  # 20 x 100000 visits
    "genmove": ((), LOADED + "3 kata-set-param maxVisits 100000\n4 genmove w\n", answered(3)),
    "kata-analyze": ((), LOADED + "4 kata-analyze interval 10\n", lambda out, err: "info move" in out),
}


@pytest.mark.parametrize("way", ["quit", "eof", "sigterm", "sigint"])
@pytest.mark.parametrize("state", GTP_STATES)
def test_gtp_stops_at_once(start, tiny_onnx_model, state, way):
    flags, lines, begun = GTP_STATES[state]
    gtp = start("--weights", str(tiny_onnx_model), "--device", "cpu", "--visits", "100000", "--seed", "1", *flags)
    gtp.write(lines)
    gtp.wait_until(begun)
    time.sleep(SETTLE)
    assert "=4 " not in gtp.raw.decode(), "the genmove ended before the stop"
    gtp.stop(way)
    assert_clean(gtp)
    out = gtp.raw.decode()
    assert GTP_OUTPUT.fullmatch(out), f"not GTP on stdout:\n{out}"
    if way == "quit":
        assert out.endswith("=99\n\n"), out
    if state == "genmove" and way in ("quit", "eof"):  # asked for its answer at once, the genmove gave it
        assert re.search(r"^=4 (?:[A-T]\d+|pass|resign)\n\n", out, re.M), out


# ---- the JSON analysis engine ----------------------------------------------------------------------------------

def query(query_id: str) -> str:
    return json.dumps({"id": query_id, "moves": [["B", "E5"]], "rules": "chinese", "komi": 7.5, "boardXSize": 9,
                       "boardYSize": 9, "maxVisits": 10_000_000, "reportDuringSearchEvery": 0.1}) + "\n"


@pytest.mark.parametrize("way", ["eof", "sigterm", "sigint"])
@pytest.mark.parametrize("state", ["idle", "busy"])
def test_analysis_stops_at_once(start, tiny_onnx_model, state, way):
    # At the end of input KataGo finishes the queued queries, unless -quit-without-waiting.
    flags = ("-quit-without-waiting",) if state == "busy" and way == "eof" else ()
    engine = start("analysis", "-model", str(tiny_onnx_model), "-analysis-threads", "1", *flags)
    engine.wait_until(lambda out, err: READY_LINE in err)
    if state == "busy":
        engine.write(query("running") + query("queued-1") + query("queued-2"))
        engine.wait_until(lambda out, err: '"id":"running"' in out)
    time.sleep(SETTLE)
    engine.stop(way)
    assert_clean(engine)
    for line in engine.raw.decode().splitlines():
        assert json.loads(line)["id"] == "running", line


def test_the_analysis_engine_says_it_is_ready_after_its_network_loaded(start, tiny_onnx_model):
    engine = start("analysis", "-model", str(tiny_onnx_model), "-log-level", "error")
    engine.wait_until(lambda out, err: READY_LINE in err)
    lines = engine.stderr_text().splitlines()
    assert lines[-1] == READY_LINE, lines  # as KataGo words it, alone on its line, at every log level
    assert engine.stop("eof") < STOP_SECONDS
    assert_clean(engine)


def test_the_analysis_engine_drops_its_queue_at_the_end_of_input_when_nobody_reads_it(tiny_onnx_model, tmp_path):
    with tempfile.TemporaryFile() as stderr:
        engine = start_engine(["analysis", "-model", str(tiny_onnx_model), "-analysis-threads", "1"], stderr,
                              cwd=tmp_path)
        engine.stdin.write((query("running") + query("queued")).encode())
        engine.stdin.flush()
        assert json.loads(engine.stdout.readline())["id"] == "running"
        engine.stdout.close()  # the client has gone: nobody reads our output
        engine.stdin.close()
        try:
            engine.wait(STOP_SECONDS)
        finally:
            engine.kill()
        stderr.seek(0)
        text = stderr.read().decode(errors="replace")
    assert engine.returncode == 0, text
    assert "Traceback" not in text and "terminate called" not in text, text


# ---- the review -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("way", ["sigterm", "sigint"])
def test_a_stopped_review_writes_nothing_and_says_how_far_it_got(start, tiny_onnx_model, tmp_path, way):
    game = tmp_path / "game.sgf"
    game.write_bytes(GAME.read_bytes())
    plot = ["--plot", str(tmp_path / "graph.png")] if importlib.util.find_spec("matplotlib") else []
    review = start("review", str(game), "--weights", str(tiny_onnx_model), "--visits", "2000", "--threads", "1", *plot)
    review.wait_until(lambda out, err: f" 1/{GAME_POSITIONS} positions" in err)
    review.stop(way)
    signum = signal.SIGTERM if way == "sigterm" else signal.SIGINT
    stderr = assert_clean(review, 128 + signum)
    done = re.search(rf"^review stopped after (\d+) of {GAME_POSITIONS} positions; nothing written$", stderr, re.M)
    assert done and 1 <= int(done.group(1)) < GAME_POSITIONS, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["game.sgf"]  # no review, no graph (with matplotlib), no partial file
    assert review.raw == b""
