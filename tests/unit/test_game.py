"""Game rules on ASCII positions: superko cycles, undo, setup stones, scoring and handicap placement."""

import json

import numpy as np
import pytest

from gtp_engine.board import BLACK, WHITE, Board, IllegalMoveError
from gtp_engine.coords import PASS, from_gtp, grid, to_gtp
from gtp_engine.game import GameState, Rules, fixed_handicap_points, format_result


def game_from_ascii(text, to_play=BLACK, rules=Rules(), komi=0.0):
    board = Board.from_ascii(text)
    game = GameState(board.width, board.height, komi=komi, rules=rules)
    game.place_setup(BLACK, board.stones(BLACK))
    game.place_setup(WHITE, board.stones(WHITE))
    game.set_to_play(to_play)
    return game


def at(game, vertex):
    return from_gtp(game.grid, vertex)


def play_all(game, vertices):
    for vertex in vertices.split():
        game.play(at(game, vertex))


# Three kos stacked on a 4x9 board. Ko 1 (rows 9-7) and ko 3 (rows 3-1) hold a white stone that black can take;
# ko 2 (rows 6-4) holds a black stone that white can take.
TRIPLE_KO = """
    . X O .
    X O . O
    . X O .
    . X O .
    X . X O
    . X O .
    . X O .
    X O . O
    . X O .
"""


def test_triple_ko_cycle_is_stopped_by_positional_superko():
    game = game_from_ascii(TRIPLE_KO)
    start = game.board.hash
    # Black takes ko 1, white takes ko 2, black takes ko 3, then each ko is taken back in the same order.
    play_all(game, "C8 B5 C2 B8 C5")
    last = at(game, "B2")
    assert game.board.is_legal(last, WHITE)  # legal under simple ko: it is not an immediate recapture
    assert game.board.hash_after(last, WHITE) == start
    assert game.illegal_reason(last) == "superko"
    assert not game.legal_mask()[game.grid.flat(last)]
    with pytest.raises(IllegalMoveError) as error:
        game.play(last)
    assert error.value.reason == "superko"


def test_triple_ko_cycle_is_allowed_under_simple_ko():
    game = game_from_ascii(TRIPLE_KO, rules=Rules.named("japanese"))
    play_all(game, "C8 B5 C2 B8 C5 B2")
    assert game.board.to_ascii() == Board.from_ascii(TRIPLE_KO).to_ascii()


# Black's stone at B1 with white above: black throws in at A1 (two stones in atari), white captures both at C1,
# and black's recapture of one stone at B1 would restore the starting board.
SEND_TWO_RETURN_ONE = """
    . . . . .
    O O X . .
    . X . X .
"""


def test_sending_two_returning_one_positional_vs_situational():
    game = game_from_ascii(SEND_TWO_RETURN_ONE)
    play_all(game, "A1 C1")
    assert game.board.captures[WHITE] == 2
    recapture = at(game, "B1")
    assert game.board.is_legal(recapture, BLACK)
    assert game.illegal_reason(recapture) == "superko"

    situational = game_from_ascii(SEND_TWO_RETURN_ONE, rules=Rules.named("aga"))
    play_all(situational, "A1 C1")
    # The same board recurs, but with white (not black) to move: situational superko allows it.
    assert situational.illegal_reason(recapture) is None
    situational.play(recapture)
    assert situational.board.to_ascii() == Board.from_ascii(SEND_TWO_RETURN_ONE).to_ascii()


def test_pass_never_violates_superko_and_two_passes_end_the_game():
    game = GameState(5)
    game.play(PASS)
    assert not game.is_over
    game.play(PASS)
    assert game.is_over
    game.undo()
    assert not game.is_over and game.to_play == WHITE


def test_setup_puts_only_its_final_position_in_the_superko_history():
    # Black's setup stone C2 alone, placed before White's stones, never stood on the board: C2 at the end captures
    # every white stone and leaves that position, which is legal.
    game = game_from_ascii("""
        O . .
        . . X
        . O .
    """, rules=Rules.named("chinese"))
    play_all(game, "C3 A2 pass B3 C1 B2 C1 A1 C2 C3 C2 C1")
    assert game.illegal_reason(at(game, "C2")) is None
    game.play(at(game, "C2"))
    assert game.board.to_ascii().split() == ". . . . . X . . .".split()


def test_undo_restores_everything_and_stops_at_setup_stones():
    game = game_from_ascii(TRIPLE_KO)
    before = (game.board.to_ascii(), game.board.hash, game.to_play, game.legal_mask().tobytes())
    play_all(game, "C8 B5")
    game.undo()
    game.undo()
    assert (game.board.to_ascii(), game.board.hash, game.to_play, game.legal_mask().tobytes()) == before
    assert not game.can_undo
    with pytest.raises(IndexError, match="cannot undo"):
        game.undo()


def test_undo_restores_the_ko_ban():
    game = game_from_ascii(TRIPLE_KO)
    play_all(game, "C8 A1")
    game.undo()
    assert game.illegal_reason(at(game, "B8")) == "ko"


def test_copy_is_independent():
    game = GameState(9)
    play_all(game, "E5 C3")
    other = game.copy()
    other.play(at(other, "G7"))
    assert game.board.colors[at(game, "G7")] == 0
    assert game.move_number == 2 and other.move_number == 3


def test_a_copy_sees_superko_as_the_original_would_after_unchecked_moves():
    # What the search does: copy the position, play known-legal moves without checks, ask about the next one.
    game = game_from_ascii(TRIPLE_KO)
    line = game.copy()
    for vertex in "C8 B5 C2 B8 C5".split():
        line.play_unchecked(at(line, vertex))
    assert line.illegal_reason(at(line, "B2")) == "superko"
    assert game.move_number == 0 and game.illegal_reason(at(game, "C8")) is None
    situational = game_from_ascii(SEND_TWO_RETURN_ONE, rules=Rules.named("aga")).copy()
    situational.play_unchecked(at(situational, "A1"))
    situational.play_unchecked(at(situational, "C1"))
    assert situational.illegal_reason(at(situational, "B1")) is None


def test_the_rules_are_fixed_for_the_life_of_a_game():
    game = GameState(9, rules=Rules.named("aga"))
    with pytest.raises(AttributeError):
        game.rules = Rules.named("japanese")  # the superko history is keyed under the rules it was played with
    assert game.rules == Rules.named("aga") and game.copy().rules == game.rules


def test_moves_for_either_colour_in_any_order():
    game = GameState(9)
    game.play(at(game, "E5"), BLACK)
    game.play(at(game, "C3"), BLACK)
    assert game.to_play == WHITE
    assert game.moves == [(BLACK, at(game, "E5")), (BLACK, at(game, "C3"))]
    game.play_unchecked(at(game, "D4"), BLACK)
    assert game.to_play == WHITE and game.moves[-1] == (BLACK, at(game, "D4"))


SCORED = """
    . X O . .
    X X O . .
    . X O O O
    X X O . .
    . X O . O
"""


def test_area_score_without_dead_stones():
    game = game_from_ascii(SCORED, komi=7.5)
    # Black: 7 stones + A5 A3 A1 = 10; white: 8 stones + D5 E5 D4 E4 D2 E2 D1 = 15.
    assert game.area_score() == (10 - 15) - 7.5
    ownership = game.area_ownership().reshape(5, 5)
    assert ownership[0, 0] == 1 and ownership[0, 4] == -1


# SCORED with a black stone at D3 that white's area surrounds: alive or dead, as the players agree.
WITH_D3 = """
    . X O . .
    X X O . .
    . X O X O
    X X O . .
    . X O . O
"""


def test_area_score_with_dead_stones():
    game = game_from_ascii(WITH_D3, komi=0.5)
    dead_black = [at(game, "D3")]
    alive_count = game.area_score()
    dead_count = game.area_score(dead=dead_black)
    # Alive, D3 makes both right-hand regions neutral: black 8 stones + 3 points, white 7 stones.
    assert alive_count == (11 - 7) - 0.5
    # Dead, D3 and both regions are white's: black 7 + 3, white 7 + 8.
    assert dead_count == (10 - 15) - 0.5


def test_territory_score_counts_prisoners_and_dead_stones():
    game = game_from_ascii(WITH_D3, komi=6.5, rules=Rules.named("japanese"))
    game.board.captures[WHITE] = 2
    score = game.territory_score(dead=[at(game, "D3")])
    # Black: territory A5 A3 A1. White: territory D5 E5 D4 E4 D3 D2 E2 D1, 2 captures and the dead stone.
    assert score == 3 - (8 + 2 + 1) - 6.5


def test_tromp_taylor_neutral_points():
    game = game_from_ascii("""
        X . O
        X . O
        X . O
    """)
    assert game.area_score() == 0  # the middle column touches both colours


def test_handicap_bonus_under_area_scoring():
    chinese = GameState(9, komi=0.5)
    chinese.place_handicap(fixed_handicap_points(chinese.grid, 4))
    aga = GameState(9, komi=0.5, rules=Rules.named("aga"))
    aga.place_handicap(fixed_handicap_points(aga.grid, 4))
    assert chinese.to_play == WHITE
    assert chinese.area_score() == 81 - 0.5 - 4
    assert aga.area_score() == 81 - 0.5 - 3
    assert not chinese.can_undo


def test_black_stones_played_in_a_row_from_the_start_are_handicap_stones():
    game = GameState(9, komi=0.5)
    play_all(game, "C3")
    assert game.handicap_stones == 0  # one stone is an even game's first move
    game.play(at(game, "G7"), BLACK)
    game.play(at(game, "C7"), BLACK)
    assert game.handicap_stones == 3 and game.to_play == WHITE
    assert game.area_score() == 81 - 0.5 - 3  # the same bonus as placed stones
    play_all(game, "E5 G3")
    assert game.handicap_stones == 3  # Black's later moves are moves
    game.undo()
    game.undo()
    game.undo()
    assert game.handicap_stones == 2
    game.undo()
    assert game.handicap_stones == 0
    even = GameState(9)
    play_all(even, "C3 pass")
    even.play(at(even, "G7"), BLACK)
    assert even.handicap_stones == 0  # a pass between: not a handicap


def test_handicap_refused_on_a_non_empty_board():
    game = GameState(9)
    game.play(at(game, "E5"))
    with pytest.raises(ValueError, match="board not empty"):
        game.place_handicap(fixed_handicap_points(game.grid, 2))


def vertices(size, count):
    return " ".join(to_gtp(grid(size), p) for p in fixed_handicap_points(grid(size), count))


@pytest.mark.parametrize("count, expected", [
    (2, "D4 Q16"), (3, "D4 Q16 D16"), (4, "D4 Q16 D16 Q4"), (5, "D4 Q16 D16 Q4 K10"),
    (6, "D4 Q16 D16 Q4 D10 Q10"), (7, "D4 Q16 D16 Q4 D10 Q10 K10"),
    (8, "D4 Q16 D16 Q4 D10 Q10 K4 K16"), (9, "D4 Q16 D16 Q4 D10 Q10 K4 K16 K10"),
])
def test_fixed_handicap_19(count, expected):
    assert vertices(19, count) == expected


def test_fixed_handicap_13_and_9():
    assert vertices(13, 9) == "D4 K10 D10 K4 D7 K7 G4 G10 G7"
    assert vertices(9, 5) == "C3 G7 C7 G3 E5"
    assert vertices(9, 9) == "C3 G7 C7 G3 C5 G5 E3 E7 E5"


@pytest.mark.parametrize("size, count", [(19, 1), (19, 10), (9, 10), (8, 5), (7, 5), (6, 2), (10, 5)])
def test_fixed_handicap_invalid_counts(size, count):
    with pytest.raises(ValueError, match="invalid number of stones"):
        fixed_handicap_points(grid(size), count)


def test_fixed_handicap_small_boards():
    assert vertices(7, 4) == "C3 E5 C5 E3"
    assert vertices(8, 4) == "C3 F6 C6 F3"


def test_rules_by_name():
    assert Rules.named("Chinese") == Rules()
    assert Rules.named("tt").suicide_allowed
    assert Rules.named("japanese").scoring == "territory"
    with pytest.raises(ValueError, match="unknown rules"):
        Rules.named("martian")


@pytest.mark.parametrize("rules, legal", [("new-zealand", True), ("tromp-taylor", True), ("chinese", False),
                                          ("japanese", False)])
def test_only_a_suicide_of_two_stones_or_more_is_legal_and_only_where_the_rules_allow_it(rules, legal):
    game = GameState(5, rules=Rules.named(rules))
    for vertex in ("C3", "B2", "pass", "A3", "pass", "B1", "A2", "D4"):  # Black's A2 has one liberty left, A1
        game.play(from_gtp(game.grid, vertex))
    a1 = from_gtp(game.grid, "A1")
    assert game.is_legal(a1) is legal
    assert game.legal_mask()[game.grid.flat_of[a1]] == legal
    if legal:
        game.play(a1)
        assert game.board.colors[a1] == game.board.colors[from_gtp(game.grid, "A2")] == 0
        assert game.board.captures[WHITE] == 2  # White takes the two stones as prisoners


def test_a_lone_stones_suicide_is_illegal_under_every_rule_set():
    for rules in ("new-zealand", "tromp-taylor", "chinese"):
        game = GameState(5, rules=Rules.named(rules))
        for vertex in ("C3", "B1", "pass", "A2"):  # A1: Black's lone stone would have no liberty
            game.play(from_gtp(game.grid, vertex))
        a1 = from_gtp(game.grid, "A1")
        assert game.illegal_reason(a1) == "suicide" and not game.legal_mask()[game.grid.flat_of[a1]]


def test_tromp_taylor_counts_the_board_as_it_stands_and_friendly_rules_take_dead_stones_off():
    game = GameState(5, rules=Rules.named("tromp-taylor"), komi=0)
    for vertex in ("C1", "D1", "C2", "D2", "C3", "D3", "C4", "D4", "C5", "D5", "E3", "A3"):  # E3, A3: dead
        game.play(from_gtp(game.grid, vertex))
    dead = [from_gtp(game.grid, "A3"), from_gtp(game.grid, "E3")]
    assert game.rules.counts_the_board_as_it_stands and not game.rules.friendly_pass
    assert game.score(dead) == game.score() == 0  # 10 points each: the dead stones split both areas
    chinese = GameState(5, komi=0)
    for color, point in game.moves:
        chinese.play(point, color)
    assert chinese.score(dead) == 15 - 10 and chinese.score() == 0  # Black's 15 points against White's 10
    assert Rules.from_katago({"friendlyPassOk": True}) != Rules.named("tromp-taylor")
    assert Rules.from_katago({"scoring": "TERRITORY", "ko": "SIMPLE", "friendlyPassOk": False}).friendly_pass


def test_format_result():
    assert format_result(3.5) == "B+3.5"
    assert format_result(-0.5) == "W+0.5"
    assert format_result(12.0) == "B+12"
    assert format_result(0.0) == "0"


def test_legal_mask_agrees_with_is_legal_in_a_random_game():
    rng = np.random.default_rng(3)
    game = GameState(7)
    for _ in range(120):
        mask = game.legal_mask()
        expected = [game.is_legal(p) for p in game.grid.points] + [True]
        assert mask.tolist() == expected
        choices = np.flatnonzero(mask)
        game.play(game.grid.from_flat(int(rng.choice(choices))))
        if game.is_over:
            break


@pytest.mark.parametrize("name", ["chinese", "japanese", "korean", "aga", "tromp-taylor", "new-zealand",
                                  "stone-scoring", "ancient-territory"])
def test_katago_rules_objects_round_trip(name):
    rules = Rules.named(name)  # korean plays as japanese here: the object names the first of the two
    assert Rules.from_katago(rules.to_katago()).to_katago() == rules.to_katago()
    nearest, differences = Rules.nearest_katago(json.dumps(rules.to_katago()))
    assert nearest.to_katago() == rules.to_katago() and differences == []


def test_katago_rule_names_and_objects_this_engine_plays_only_approximately():
    assert Rules.nearest_katago("bga") == (Rules.named("aga"), [])
    assert Rules.nearest_katago("Chinese_OGS") == (Rules.named("chinese"), [])
    assert Rules.nearest_katago({}) == (Rules.named("tromp-taylor"), [])  # KataGo's defaults for an object
    rules, differences = Rules.nearest_katago("stone scoring")
    assert (rules.scoring, rules.ko, rules.white_handicap_bonus, rules.tax) == ("area", "simple", "0", "all")
    assert differences == [] and rules == Rules.named("stone_scoring")
    assert Rules.nearest_katago("ancient territory")[0].tax == "all"
    _, differences = Rules.nearest_katago({"scoring": "AREA", "tax": "SEKI", "hasButton": True, "ko": "SPIGHT"})
    assert len(differences) == 2
    with pytest.raises(ValueError, match="hasButton"):
        Rules.from_katago({"hasButton": True})  # the exact form refuses what it would only approximate
    # Territory scoring without the seki tax is its own rule set, no longer japanese.
    untaxed = Rules.from_katago({"scoring": "TERRITORY", "tax": "NONE", "ko": "SIMPLE", "suicide": False})
    assert (untaxed.name, untaxed.tax) == ("custom", "none")
    for unknown, field in (("backgammon", "backgammon"), ({"komi": 7.5}, "komi"), ({"ko": "NONE"}, "ko"),
                           ({"tax": "SOME"}, "tax"), ({"whiteHandicapBonus": "2"}, "handicap bonus")):
        with pytest.raises(ValueError, match=field):
            Rules.nearest_katago(unknown)


# ---- scoring under every rule set -------------------------------------------------------------------------------

# A seki in the top row: Black's chain A4 B4 C4 A5 B5 and White's D5 D4 E4 share C5, where either colour's stone
# would be left one liberty; each has one eye (A5, E5). The walls below live, White's with two one-point regions.
SEKI_WITH_EYES = """
    . X . O .
    X X X O O
    O O O X X
    . O O X .
    O . O X .
"""


def test_seki_stones_are_the_chains_beside_a_point_neither_colour_can_fill():
    game = game_from_ascii(SEKI_WITH_EYES)
    seki = {to_gtp(game.grid, p) for p in game.seki_stones()}
    assert seki == {"B5", "D5", "A4", "B4", "C4", "D4", "E4"}
    assert game_from_ascii(DAME_COLUMN).seki_stones() == set()  # unfilled dame beside chains with liberties to spare


@pytest.mark.parametrize("name, expected", [
    # Area: stones and regions; the eyes in seki count (Black 8 + A5 + E2 E1, White 10 + E5 A2 B1).
    ("chinese", (8 + 3) - (10 + 3)),
    ("aga", (8 + 3) - (10 + 3)),
    # Territory with the seki tax: the eyes in seki count for nobody (Black E2 E1, White A2 B1).
    ("japanese", 2 - 2),
    ("korean", 2 - 2),
    # Stone scoring: stones, and each counted region less two (Black's 2 - 2, White's two of 1 - 2 each).
    ("stone-scoring", (8 + 0) - (10 - 2)),
    ("ancient-territory", 0 - (-2)),
])
def test_seki_eyes_under_each_rule_set(name, expected):
    assert game_from_ascii(SEKI_WITH_EYES, rules=Rules.named(name)).score() == expected


# Black has the left two columns, White the right two; the middle column is dame.
DAME_COLUMN = """
    . X . O .
    . X . O .
    . X . O .
    . X . O .
    . X . O .
"""


@pytest.mark.parametrize("name", ["chinese", "japanese", "stone-scoring", "tromp-taylor"])
def test_dame_counts_for_nobody(name):
    game = game_from_ascii(DAME_COLUMN, rules=Rules.named(name))
    assert game.score() == 0  # five points (less the tax) and five stones under area scoring, each side
    play_all(game, "C3")  # Black fills a dame point: a stone more under area scoring, nothing under territory
    assert game.score() == (1 if game.rules.scoring == "area" else 0)


def test_captures_count_under_territory_scoring_only():
    for name, expected in (("japanese", 1), ("chinese", 0)):
        game = game_from_ascii(DAME_COLUMN, rules=Rules.named(name))
        game.board.captures[BLACK] = 1
        assert game.score() == expected


def test_aga_area_count_is_the_territory_count_with_pass_stones():
    """AGA rules give the opponent a stone for each pass and end with White's pass, so that area and territory
    counting agree; the engine counts the area, in which the pass stones need no counting."""
    moves = "C5 D5 C4 D4 pass D3 C3 D2 C2 D1 C1 E5 pass pass"  # Black passes once more; White fills E5
    game = GameState(5, komi=0.5, rules=Rules.named("aga"))
    play_all(game, moves)
    territory = GameState(5, komi=0.5, rules=Rules.named("japanese"))
    play_all(territory, moves)
    black_passes = sum(1 for color, point in game.moves if point == PASS and color == BLACK)
    white_passes = sum(1 for color, point in game.moves if point == PASS and color == WHITE)
    assert game.moves[-1] == (WHITE, PASS) and (black_passes, white_passes) == (2, 1)
    # Area: Black 5 stones + 10, White 6 + 4. Territory: Black 10, White 4, and White's pass stone from Black.
    assert territory.score() == 6 - 0.5
    assert game.score() == territory.score() + white_passes - black_passes == 5 - 0.5


def test_the_tax_follows_the_scoring_by_default_and_is_kept_in_katagos_form():
    assert Rules.named("japanese").tax == "seki" and Rules.named("chinese").tax == "none"
    assert Rules.named("stone-scoring").to_katago()["tax"] == "ALL"
    with pytest.raises(ValueError, match="tax"):
        Rules("area", tax="some")
