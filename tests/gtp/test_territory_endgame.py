"""A protocol session under Japanese rules, as a GUI drives one: real finished 9x9 games (tests/sgf/scored_games)
replayed to the first of their two passes; the engine, with the shipped 9x9 network, answers the opponent's pass
in the settled position with a pass of its own instead of filling its territory (where each stone costs a point).
"""

from __future__ import annotations

import pytest
from engine_process import ROOT

from gtp_engine import coords, sgf_io
from gtp_engine.board import BLACK

SCORED = ROOT / "tests" / "sgf" / "scored_games"
NETWORK = ROOT / "weights" / "9x9.onnx"
# Games the engine's side won, ended by the loser's pass: it is the engine's turn in a won, settled position.
WON_AND_SETTLED = ["ogs_10293941", "ogs_10328609", "ogs_1056556", "ogs_11233478"]


@pytest.mark.parametrize("name", WON_AND_SETTLED)
def test_the_engine_passes_back_in_a_settled_position_under_japanese_rules(engine, name):
    if not NETWORK.exists():
        pytest.skip("the shipped 9x9 network is not in weights/")
    record = sgf_io.load_sgf_file(SCORED / f"{name}.sgf")
    grid = record.to_game().grid
    *played, (passer, passed) = record.moves[:-1]
    assert passed == coords.PASS and record.rules == "Japanese"
    gtp = engine("--weights", str(NETWORK), "--visits", "200", "--seed", "1", "--threads", "1")
    gtp.ok("kata-set-rules japanese")
    gtp.ok("boardsize 9")
    gtp.ok(f"komi {record.komi:g}")
    for color, point in [*played, (passer, passed)]:
        gtp.ok(f"play {'B' if color == BLACK else 'W'} {coords.to_gtp(grid, point)}")
    assert gtp.ok(f"genmove {'w' if passer == BLACK else 'b'}").lower() == "pass"
