"""tools/resign_scan.py: resignation rules replayed on a game's evaluations, and the command on real records with
the shipped 9x9 network."""

from __future__ import annotations

from pathlib import Path

from gtp_engine.board import BLACK, WHITE
from gtp_engine.network_loader import shipped_weights
from tools import resign_scan

AREA = 361


def test_a_rule_resigns_after_consecutive_positions_of_one_colour_below_it():
    rows = [(WHITE, 181, 0.20, -100.0, False), (BLACK, 182, 0.8, 100.0, False), (WHITE, 183, 0.22, -95.0, False),
            (BLACK, 184, 0.8, 95.0, False), (WHITE, 185, 0.24, -91.0, False)]
    assert resign_scan.first_resignation(rows, AREA, 0.05, 0.25, 5, 3) == (WHITE, 185)
    assert resign_scan.first_resignation(rows, AREA, 0.05, 0.2, 3, 3) is None  # winrates above 3 x 5%
    assert resign_scan.first_resignation(rows, AREA, 0.05, 0, 0, 3) is None  # the winrate alone
    assert resign_scan.first_resignation(rows, AREA, 0.05, 0.3, 100, 3) is None  # never 108 points behind
    assert resign_scan.first_resignation(rows[:3], AREA, 0.05, 0.25, 5, 2) == (WHITE, 183)
    # right after the opponent's pass a tenth of the board behind counts, as the engine counts it
    after_pass = [(WHITE, 291, 0.12, -45.0, True)]
    assert resign_scan.first_resignation(after_pass, AREA, 0.05, 0.25, 5, 1) == (WHITE, 291)
    assert resign_scan.first_resignation([after_pass[0][:4] + (False,)], AREA, 0.05, 0.25, 5, 1) is None


def test_the_command_reads_finished_records_and_prints_a_row_per_rule(capsys):
    records = Path(__file__).resolve().parent / "sgf" / "scored_games"
    assert resign_scan.main([str(shipped_weights(9, 9)), str(records), "--size", "9", "--rules", "0.2:3,0.25:5"]) == 0
    out = capsys.readouterr().out
    games = int(out.split(" games")[0])
    assert games > 0
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| 0.2")]
    assert [row[0] for row in rows] == ["| 0.2:3", "| 0.25:5"]
    assert all(int(row[1]) <= games and int(row[3]) <= games for row in rows)
