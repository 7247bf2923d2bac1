"""Golden GTP transcripts: each tests/golden/NAME.gtp is sent at once (pipelined) to `python -m gtp_engine` with the
tiny test network, and stdout must equal NAME.out. The first line "# args: ..." (a GTP comment) holds extra flags.

In .out files, what the network decides is written as a placeholder, checked by kind: {move} (a vertex, pass or
resign), {result} (B+3.5, W+1, 0) and {text} (the rest of the line). Everything else must match exactly, so a
change to framing, error words, diagrams or the order of answers shows up here. Edit the .out files by hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PLACEHOLDERS = {
    "{move}": r"(?:[A-HJ-Z][0-9]{1,2}|pass|resign)",
    "{result}": r"(?:[BW]\+[0-9]+(?:\.[0-9])?|0)",
    "{text}": r"[^\n]+",
}


def expected_pattern(text: str) -> re.Pattern:
    pattern = re.escape(text)
    for placeholder, regex in PLACEHOLDERS.items():
        pattern = pattern.replace(re.escape(placeholder), regex)
    return re.compile(pattern)


@pytest.mark.parametrize("name", sorted(p.stem for p in HERE.glob("*.gtp")))
def test_golden_transcript(name, tiny_onnx_model):
    script = (HERE / f"{name}.gtp").read_text()
    args = script.split("\n", 1)[0].removeprefix("# args:").split()
    result = subprocess.run(
        [sys.executable, "-m", "gtp_engine", "--weights", str(tiny_onnx_model), "--device", "cpu", *args],
        input=script, capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    expected = (HERE / f"{name}.out").read_text()
    if not expected_pattern(expected).fullmatch(result.stdout):
        # Show the first line that differs, with its neighbours.
        got, want = result.stdout.split("\n"), expected.split("\n")
        for i, (a, b) in enumerate(zip(got, want)):
            if not expected_pattern(b).fullmatch(a):
                pytest.fail(f"{name}.out line {i + 1}: expected {b!r}, got {a!r}\n" + "\n".join(got[max(0, i - 3):i + 3]))
        pytest.fail(f"{name}: {len(got)} output lines, {len(want)} expected")
