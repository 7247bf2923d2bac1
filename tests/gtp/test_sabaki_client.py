"""Sabaki's own GTP client (@sabaki/gtp, under node) drives the engine: pipelined start-up, Sabaki's sync order
(komi before boardsize, undo and play pipelined), kata-analyze streaming stopped by another command, and moves
by kata-genmove_analyze. The session itself is tests/js/sabaki_session.js; this test checks its report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from engine_process import ROOT

JS = ROOT / "tests" / "js"


@pytest.fixture(scope="module")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed")
    if not (JS / "node_modules" / "@sabaki" / "gtp").is_dir():
        pytest.skip("@sabaki/gtp is not installed (npm ci --prefix tests/js)")
    return path


def test_sabaki_client_session(node, net_args):
    command = [sys.executable, "-m", "gtp_engine", *net_args]
    result = subprocess.run([node, str(JS / "sabaki_session.js"), json.dumps({"command": command, "cwd": str(ROOT)})],
                            capture_output=True, text=True, timeout=120)
    report = json.loads(result.stdout)
    assert "error" not in report, report.get("error")
    assert result.returncode == 0

    assert [content for error, content in report["startup"][:3]] == ["gtp_engine", "0.1.0", "2"]
    assert not any(error for error, _ in report["startup"])
    assert "kata-analyze" in report["startup"][3][1].split("\n")

    assert report["firstSync"] == ["komi 6.5", "boardsize 9", "clear_board", "play B D4", "play W F6", "play B C7"]
    assert report["branchSync"] == ["undo", "play B E5", "play W E4", "play B PASS"]  # all answered without error
    rows = [line for line in report["board"].split("\n") if re.match(r"\s*\d+ ", line)]
    assert [re.sub(r"[^XO.]", "", row) for row in rows][3:6] == [".....O...", "....X....", "...XO...."]

    assert report["analysisError"] is False and report["analysisLines"] >= 2
    assert report["abort"] == [False, "2"] and report["abortMs"] < 1000
    moves = [block for block in report["parsed"] if block is not None]
    assert moves, "Sabaki found no move in the analysis line"
    for block in moves:
        assert re.fullmatch(r"0\.\d+|1\.0+", block["winrate"]) and block["visits"] >= 1
        assert block["pv"][0] == block["move"] and block["scoreLead"] is not None

    error, play_line = report["genmove"]
    assert error is False and re.fullmatch(r"play (pass|[A-HJ-T]\d)", play_line)
    assert report["history"][-1] == "W " + play_line.split()[1].upper()
    assert report["resync"] == []  # the engine is where Sabaki thinks it is
