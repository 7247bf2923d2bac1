"""tools/loss_analysis.py: our lead, drops, phases and swings from a review's numbers, and the command over a folder
of games with the tiny test network (a few visits: the numbers are a random network's, the shape is checked)."""

from __future__ import annotations

import json

import pytest

from gtp_engine import coords, review, sgf_io
from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import Rules
from tools import loss_analysis

MOVES = "E5 C7 G3 F4 D3 C3"  # on 9x9, Black first


def _record(result: str = "W+R", black: str = "gtp_engine", white: str = "Pachi UCT") -> sgf_io.GameRecord:
    g = coords.grid(9, 9)
    moves = [(BLACK if i % 2 == 0 else WHITE, coords.from_gtp(g, v)) for i, v in enumerate(MOVES.split())]
    return sgf_io.GameRecord(9, 9, komi=7.0, moves=moves, result=result, black=black, white=white, source="g.sgf")


def _review(record: sgf_io.GameRecord, start_lead: float, leads: list[float], lost: list[float]) -> review.Review:
    """A Review with Black's lead at the start and after each move, and each move's points lost."""
    moves = [review.MoveReview(number=n, color=color, point=point, winrate=0.5, score_lead=lead, best=None,
                               best_lead=0.0, played_lead=0.0, played_searched=False, points_lost=loss, line=[])
             for n, ((color, point), lead, loss) in enumerate(zip(record.moves, leads, lost), 1)]
    return review.Review(record, 10, Rules.named("chinese"), 7.0, 0.5, start_lead, moves)


def test_drops_are_our_lead_after_our_previous_move_minus_after_this_one():
    record = _record()
    result = _review(record, 1.0, [2.0, 0.5, 3.0, -4.0, -1.0, -9.0], [0.0, 1.0, 2.5, 0.0, -1.5, 0.0])
    black = loss_analysis.game_loss(result, BLACK)
    assert [(m.number, m.vertex, m.lead, m.drop, m.points_lost) for m in black.moves] == [
        (1, "E5", 2.0, -1.0, 0.0), (3, "G3", 3.0, -1.0, 2.5), (5, "D3", -1.0, 4.0, -1.5)]
    white = loss_analysis.game_loss(result, WHITE)  # White's view: Black's leads negated, from the start's
    assert [(m.number, m.lead, m.drop) for m in white.moves] == [(2, -0.5, -0.5), (4, 4.0, -4.5), (6, 9.0, -5.0)]
    assert sum(m.drop for m in black.moves) == 1.0 - (-1.0)  # the drops add up to the lead lost
    assert [m.number for m in black.swings()] == [5]  # only drops count, largest first


def test_moves_are_put_in_phases_by_the_share_of_the_board_played_and_the_opening_left_out():
    assert [loss_analysis.phase(n, 81) for n in (1, 16, 17, 48, 49, 100)] == \
        ["opening", "opening", "middle game", "middle game", "endgame", "endgame"]
    assert loss_analysis.phase_ranges(361) == {"opening": "moves 1-72", "middle game": "moves 73-216",
                                                "endgame": "moves 217 on"}
    record = _record()
    result = _review(record, 0.0, [1.0, 1.0, 1.0, 1.0, -2.0, -2.0], [3.0, 0.0, -1.0, 0.0, 2.0, 0.0])
    loss = loss_analysis.game_loss(result, BLACK, opening_moves=2)
    assert [m.number for m in loss.moves] == [3, 5]
    # all in the opening on 9x9; points lost sum the positive ones only
    assert loss.by_phase()["opening"] == {"drop": 3.0, "points_lost": 2.0}
    assert loss_analysis.totals([loss, loss])["opening"] == {"drop": 6.0, "points_lost": 4.0}


def test_our_colour_and_the_lost_games():
    assert loss_analysis.our_color(_record(), "gtp_engine") == BLACK
    assert loss_analysis.our_color(_record(black="x", white="gtp_engine"), "gtp_engine") == WHITE
    assert loss_analysis.our_color(_record(black="gtp_engine", white="gtp_engine"), "gtp_engine") is None
    assert loss_analysis.lost(_record("W+3.5"), BLACK) and not loss_analysis.lost(_record("B+R"), BLACK)
    assert not loss_analysis.lost(_record("0"), WHITE)


def _folder(tmp_path):
    """Three games: one our engine lost as Black, one it won as White, one it did not play."""
    folder = tmp_path / "match"
    folder.mkdir()
    for number, record in enumerate([_record("W+R"), _record("W+2", black="Pachi UCT", white="gtp_engine"),
                                     _record("B+1", black="a", white="b")], 1):
        (folder / f"game-{number}.sgf").write_bytes(sgf_io.save_sgf(
            record.to_game(), black=record.black, white=record.white, result=record.result))
    return folder


def test_the_command_reports_the_lost_games_only(tiny_onnx_model, tmp_path, capsys):
    args = [str(_folder(tmp_path)), "--weights", str(tiny_onnx_model), "--visits", "4", "--threads", "1",
            "--seed", "1"]
    assert loss_analysis.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("game-1.sgf: our engine Black, lost W+R (3 of our moves counted)")
    assert out[1].startswith("  our lead after each of our moves: 1:") and " 3:" in out[1] and " 5:" in out[1]
    assert [line.split(" (")[0] for line in out[2:5]] == ["  opening", "  middle game", "  endgame"]
    assert out[5].startswith("  biggest swings: ")
    assert out[6] == "all 1 lost games of 2, 4 visits a position:"
    assert [line.split(":")[0] for line in out[7:]] == ["  opening", "  middle game", "  endgame"]

    assert loss_analysis.main(args + ["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["games"], report["lost"]) == (2, 1)
    assert [m["number"] for m in report["losses"][0]["moves"]] == [1, 3, 5]
    assert set(report["totals"]) == {"opening", "middle game", "endgame"}


def test_games_without_our_engine_are_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        loss_analysis.main([str(_folder(tmp_path)), "--name", "someone else"])
    assert "no game of 'someone else'" in capsys.readouterr().err
