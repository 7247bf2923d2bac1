"""What the review writes into the SGF: the best line as a variation beside a move that lost points, the settings in
the root comment, and a review of a reviewed game that replaces the earlier review (own text) and keeps the rest."""

from __future__ import annotations

import pytest
from review_support import COMMENTED_GAME, REVIEWED_GAME, main_line, position, review_of, run_review
from sgfmill import sgf

from gtp_engine import review as review_lib

FLAT = b"(;GM[1]SZ[9]KM[7.5]C[Our club game];B[ee];W[cc];B[gg];W[ff])"  # one node sequence
NESTED = b"(;GM[1]SZ[9]KM[7.5]C[Our club game];B[ee](;W[cc](;B[gg](;W[ff]))))"  # OGS nests every move


def moves_of(nodes) -> list:
    return [node.get_move() for node in nodes]


def four_moves(second_loses: float = 4.0, fourth_loses: float = 0.0):
    """Positions for FLAT: White's C7 (move 2) and F4 (move 4) lose these many points against D3 and D4."""
    return [position(0.0, "E5", 0.0), position(0.0, "D3", -1.0, C7=-1.0 + second_loses, line="D3 E4 F5"),
            position(0.0, "G3", 0.0), position(0.0, "D4", -1.0, F4=-1.0 + fourth_loses, line="D4"), position(0.0)]


@pytest.mark.parametrize("game", [FLAT, NESTED])
def test_the_best_line_is_a_variation_beside_the_move_that_lost_points(game):
    review = review_of(game, four_moves())
    written = sgf.Sgf_game.from_bytes(review_lib.annotated_sgf(game, review, "tiny.onnx"))
    assert moves_of(main_line(written)) == moves_of(main_line(sgf.Sgf_game.from_bytes(game)))
    before = main_line(written)[0]  # Black's E5, the node before White's C7
    played, best = before
    assert played.get_move() == ("w", (6, 2)) and len(before) == 2
    line = [best, best[0], best[0][0]]
    assert moves_of(line) == [("w", (2, 3)), ("b", (3, 4)), ("w", (4, 5))] and len(line[-1]) == 0  # D3 E4 F5
    assert best.get("C") == ("Best at move 2 (White D3), by gtp_engine's search: score W+1.0, against B+3.0 after "
                             "C7, the move played\nThe search's line: D3 E4 F5")
    assert played.get("BM") == 1 and "White lost 4.0 points, a mistake: best D3 W+1.0, played C7 B+3.0" in played.get(
        "C")
    assert all(len(node) == 1 for node in main_line(written)[1:-1])  # the others lost nothing: no variation


def test_a_variation_needs_a_point_lost_and_a_best_move_other_than_the_played_one():
    review = review_of(FLAT, four_moves(second_loses=0.9, fourth_loses=1.0))
    variations = [review_lib.variation(review, m) for m in review.moves]
    assert [v is not None for v in variations] == [False, False, False, True]
    assert variations[3].moves == [(2, review.moves[3].best)]  # White's D4


@pytest.mark.parametrize(("properties", "stated"), [
    ("RU[Japanese]KM[6.5]", "Japanese rules, komi 6.5"),
    ("RU[AGA]KM[7]", "AGA rules, komi 7"),
    ("", "Chinese rules (the game names none), komi 7.5 (the game gives none: the rules' default)"),
    ("RU[Japanese]HA[2]AB[cc][gg]", "Japanese rules, komi 0.5 (the game gives none: the rules' default)"),
    ("RU[Go Seigen]KM[5.5]", "Chinese rules (for the game's RU[Go Seigen]), komi 5.5"),
])
def test_the_root_comment_states_the_network_visits_rules_and_komi(properties, stated):
    game = f"(;GM[1]SZ[9]{properties};B[ee])".encode()
    review = review_of(game, [position(0.0, "E5", 0.0), position(0.0)], visits=400)
    first = review_lib.root_comment(review, "default.int8.onnx").splitlines()[0]
    assert first == f"Reviewed by gtp_engine {review_lib.gtp_engine.__version__} with default.int8.onnx, 400 visits " \
                    f"per position, {stated}"


def test_a_second_review_replaces_the_first_and_keeps_the_users_text_markup_and_variations():
    game = COMMENTED_GAME.read_bytes()
    positions = [position(0.0, "A1", 0.0)] * 15
    first = review_of(game, [*positions[:1], position(0.0, "E3", -9.0, D5=0.0, line="E3 F3"), *positions[2:]])
    second = review_of(game, positions, visits=20)  # other results: no BM, no variation
    once = review_lib.annotated_sgf(game, first, "tiny.onnx")
    assert once.count(b"Best at move 2") == 1 and once.count(b"BM[2]") == 1  # White's D5 lost 9 points
    twice = review_lib.annotated_sgf(once, second, "tiny.onnx")
    assert twice == review_lib.annotated_sgf(game, second, "tiny.onnx")
    written = sgf.Sgf_game.from_bytes(twice)
    root, moves = written.get_root(), main_line(written)
    assert root.get("C").startswith("A teaching game; the players' names are in CJK scripts.\n\nReviewed by gtp_engine")
    assert root.get("C").count("Reviewed by") == 1 and "20 visits" in root.get("C")
    assert moves[2].get("C").startswith("Teacher: the 3-3 point was also possible.\n\nStudent: noted.\n\nMove 3 (")
    assert moves[3].get("C").startswith("Teacher: too slow.\n\nMove 4 (") and moves[3].get("BM") == 1  # the user's BM
    assert moves[4].parent is moves[3] and len(moves[4]) == 2  # the user's variation at move 6 is kept
    assert moves[4][1].get("C") == "Teacher: the hane is sharper."


def test_text_the_user_adds_after_the_review_stays_and_the_review_is_replaced():
    review = review_of(FLAT, four_moves())
    once = review_lib.annotated_sgf(FLAT, review, "tiny.onnx")
    edited = once.replace(b"The search's line: D3 E4 F5]", b"The search's line: D3 E4 F5\n\nMe: I feared E4.]")
    edited = edited.replace(b"played C7 B+3.0]", b"played C7 B+3.0\n\nMe: a good move.]")
    assert edited.count(b"Me:") == 2
    written = sgf.Sgf_game.from_bytes(review_lib.annotated_sgf(edited, review, "tiny.onnx"))
    played, best = main_line(written)[0]
    assert played.get("C") == "Me: a good move.\n\n" + review_lib.move_comment(review, review.moves[1])
    assert best.get("C") == review_lib.variation(review, review.moves[1]).comment  # the variation is written anew


def test_reviewing_a_reviewed_game_gives_what_reviewing_the_game_gives(tiny_onnx_model, tmp_path):
    def reviewed(game, name):
        out = tmp_path / name
        done = run_review(str(game), "-o", str(out), "--visits", "16", "--weights", str(tiny_onnx_model),
                          "--threads", "1", "--seed", "7")
        assert done.returncode == 0, done.stderr
        return out

    once = reviewed(COMMENTED_GAME, "once.sgf")
    assert reviewed(once, "twice.sgf").read_bytes() == once.read_bytes()
    assert reviewed(REVIEWED_GAME, "again.sgf").read_bytes() == once.read_bytes()  # reviewed by an earlier version


def test_a_game_nesting_every_move_in_a_variation_of_its_own_is_annotated_again_without_recursion():
    from gtp_engine import sgf_io

    count = 1500  # beyond Python's recursion limit
    game = ("(;GM[1]SZ[9]" + "".join(f"(;{'BW'[i % 2]}[]" for i in range(count)) + ")" * count + ")").encode()
    record = sgf_io.load_sgf(game)

    def own(paragraph):
        return ("V",) if paragraph.startswith("ours") else None

    def annotate(data):
        variations = {i: sgf_io.Variation([(1, 0)], "ours: a line") for i in range(0, count, 2)}
        return sgf_io.annotate_main_line(data, record, {"C": "ours"}, [{"C": "ours", "V": "1"}] * count, variations,
                                         own)

    once = annotate(game)
    assert once.count(b"ours: a line") == count // 2 and annotate(once) == once
