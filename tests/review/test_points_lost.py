"""Points lost (review's module docstring): the mover's lead after the search's best move minus the played lead,
0 for the best move, the played move's own lead where the search before it visited it, and a comment whose numbers
add up to it."""

from __future__ import annotations

import re

import pytest
from review_support import OGS_GAME, main_line, position, review_of, run_review
from sgfmill import sgf

from gtp_engine import review as review_lib

GAME = b"(;GM[1]SZ[9]KM[7.5];B[ee];W[cc];B[gg];W[ff])"  # E5, C7, G3, F4


def loss_line(review, move) -> str:
    return review_lib.move_comment(review, move).splitlines()[1]


def test_the_best_move_played_loses_nothing_whatever_the_next_root_says():
    review = review_of(GAME, [
        position(-7.0, "E5", 1.0),  # Black plays E5, the best move...
        position(-6.0, "C7", 1.0),  # ...and the next root (a fresh, noisy search) says Black leads by -6: ignored
        position(0.0, "G3", 0.0), position(0.0, "F4", 0.0), position(0.0)])
    first = review.moves[0]
    assert (first.points_lost, first.played_lead, first.played_searched) == (0.0, 1.0, True)
    assert loss_line(review, first) == "Black lost 0.0 points: E5 was the search's best move (B+1.0)"
    assert first not in review.worst()
    assert review.worst() == [] and "No move lost points" in review_lib.root_comment(review, "tiny.onnx")


def test_a_played_move_the_search_visited_is_judged_by_its_own_lead_there():
    review = review_of(GAME, [
        position(0.0, "D4", 5.14, E5=2.66),  # E5 searched: its lead from this search, not the next root's
        position(-9.0, "D3", -3.0, C7=-1.0),  # White plays C7: its own lead -1.0 against the best's -3.0
        position(0.0, "G3", 0.0), position(0.0, "F4", 0.0), position(0.0)])
    black, white = review.moves[:2]
    assert (black.played_lead, black.played_searched, black.points_lost) == (2.66, True, 2.4)
    assert loss_line(review, black) == "Black lost 2.4 points: best D4 B+5.1, played E5 B+2.7"
    assert (white.played_lead, white.points_lost) == (-1.0, 2.0)
    assert loss_line(review, white) == "White lost 2.0 points: best D3 W+3.0, played C7 W+1.0"


def test_a_played_move_without_visits_is_judged_by_the_next_root_and_says_so():
    review = review_of(GAME, [
        position(0.0, "D4", 4.0), position(-4.5, "C3", -4.5, C7=-4.5),
        position(0.0, "G3", 0.0), position(0.0, "F4", 0.0), position(0.0)])
    black = review.moves[0]
    assert (black.played_lead, black.played_searched, black.points_lost) == (-4.5, False, 8.5)
    assert review_lib.move_properties(review, black)["BM"] == "2"
    assert loss_line(review, black) == ("Black lost 8.5 points, a blunder: best D4 B+4.0, played E5 W+4.5 (from the "
                                        "search after it: the search before gave it no visits)")
    assert "1. Move 1 (Black E5): lost 8.5 points (best D4 B+4.0, played W+4.5)" in review_lib.root_comment(
        review, "tiny.onnx")


@pytest.mark.parametrize(("best_lead", "played_lead"), [(5.14, 2.66), (5.15, 2.65), (0.04, -0.04), (-1.25, -4.35),
                                                         (3.05, 3.05), (2.0, 2.04), (10.06, 1.94)])
def test_the_numbers_of_the_comment_add_up_to_the_points_lost(best_lead, played_lead):
    for mover, lead_sign in (("B", 1), ("W", -1)):
        game = b"(;GM[1]SZ[9];B[ee])" if mover == "B" else b"(;GM[1]SZ[9]PL[W];W[ee])"
        review = review_of(game, [position(0.0, "D4", lead_sign * best_lead, E5=lead_sign * played_lead),
                                  position(0.0)])
        move = review.moves[0]
        line = loss_line(review, move)
        found = re.fullmatch(r"(Black|White) (lost|gained) (\d+\.\d) points[^:]*: best D4 ([BW])\+(\d+\.\d), "
                             r"played E5 ([BW])\+(\d+\.\d)", line)
        assert found, line
        side, verb, points, best_color, best, played_color, played = found.groups()
        mover_lead = {mover: 1, "BW".replace(mover, ""): -1}
        difference = mover_lead[best_color] * float(best) - mover_lead[played_color] * float(played)
        assert round(difference, 1) == (float(points) if verb == "lost" else -float(points)) == move.points_lost


def test_at_64_visits_no_listed_mistake_names_the_played_move_as_the_best(tiny_onnx_model, tmp_path):
    out = tmp_path / "reviewed.sgf"
    done = run_review(str(OGS_GAME), "-o", str(out), "--visits", "64", "--weights", str(tiny_onnx_model))
    assert done.returncode == 0, done.stderr
    game = sgf.Sgf_game.from_bytes(out.read_bytes())
    best_played = 0
    for node in main_line(game):
        played = re.match(r"Move \d+ \((?:Black|White) (\w+)\)", node.get("C")).group(1)
        loss = node.get("C").splitlines()[1]
        if "was the search's best move" in loss:
            best_played += 1
            assert re.match(rf"(Black|White) lost 0.0 points: {played} was", loss) and not node.has_property("BM")
        else:
            assert f"best {played} " not in loss
    assert best_played > 0
    worst = re.findall(r"^\d+\. Move \d+ \((?:Black|White) (\w+)\): lost [\d.]+ points \(best (\w+) ",
                       game.get_root().get("C"), re.MULTILINE)
    assert len(worst) == 10 and all(played != best for played, best in worst)
