"""The endgame judgement on diagrams, with hand-made ownership and search results and no searcher: dead stones,
the counts, seki, our territory, needed fillings, rescues, and each pass rule's decision."""

from __future__ import annotations

import numpy as np
import pytest
from search_support import (
    CHAIN_SAVED_BY_A_CAPTURE,
    DAME,
    SPLIT,
    SPLIT_WITH_DEAD_BLACK_STONE,
    SPLIT_WITH_A_BLACK_STONE_IN_ATARI,
    SPLIT_WITH_DEAD_STONE,
    position,
)

from gtp_engine import endgame
from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS, from_gtp, grid, to_gtp
from gtp_engine.game import GameState, Rules
from gtp_engine.search import MoveInfo, SearchResult, Snapshot

# Black's chain in the corner and the white stone below it share their two liberties, A5 and A3: whoever plays
# one puts itself in atari, so neither does (seki). White's wall around them lives.
SEKI = """
    . X O . .
    O X O . .
    . X O . .
    O O O . .
    . . . . .
"""
# Black's stone at (3, 4) has a single liberty, (3, 3), an eye of Black's area that is false.
FALSE_EYE = """
    . . . . . . .
    . . . . . . .
    . . . X O . .
    . . X . X O .
    . . . X O . .
    . . . . . . .
    . . . . . . .
"""
# FALSE_EYE with the diagonals of (3, 3) Black's: a true eye.
FALSE_EYE_MADE_TRUE = """
    . . . . . . .
    . . . . . . .
    . . X X X . .
    . . X . X . .
    . . X X X . .
    . . . . . . .
    . . . . . . .
"""
# Black's eye on the lower edge at C1.
EYE_ON_THE_EDGE = """
    . . . . .
    . . . . .
    . . . . .
    . X X X .
    . X . X .
"""
G = grid(5)
BLACK_TERRITORY = G.point(2, 0)
WHITE_TERRITORY = G.point(2, 4)


def split_ownership(sure: float = 1.0) -> np.ndarray:
    """Black owns columns 0-2 and White columns 3-4 of a 5x5 board, whatever stands there."""
    return np.where(np.arange(25) % 5 <= 2, sure, -sure)


def after_white_pass(text: str, komi: float, rules: Rules = Rules()) -> GameState:
    game = position(text, WHITE, komi=komi, rules=rules)
    game.play(PASS, WHITE)
    return game


def move(point: int, winrate: float = 0.5, visits: int = 10, lcb: float | None = None) -> MoveInfo:
    return MoveInfo(point, visits, winrate, score_lead=0.0, prior=0.1, lcb=winrate - 0.1 if lcb is None else lcb,
                    order=0, pv=[point])


def searched(choice: MoveInfo | int, ownership: np.ndarray, others=(), root_moves=(), to_play=BLACK) -> SearchResult:
    """A search's result: its choice first among its moves, then `others` (MoveInfos or points)."""
    choice = choice if isinstance(choice, MoveInfo) else move(choice)
    moves = [choice] + [m if isinstance(m, MoveInfo) else move(m) for m in others]
    snapshot = Snapshot(to_play, visits=sum(m.visits for m in moves), playouts=0, elapsed=0.0,
                        winrate=choice.winrate, score_lead=0.0, moves=moves, ownership=ownership)
    return SearchResult(choice, snapshot, list(root_moves))


class Searches:
    """PassSearches whose results a test sets, recording which were asked for."""

    def __init__(self, after_passing=None, without_pass=None):
        self.after = after_passing  # the result of either search after our pass
        self.without = without_pass
        self.asked: list[str] = []

    def __call__(self) -> endgame.PassSearches:
        return endgame.PassSearches(self._after("after passing"), self._after("after passing to the deadline"),
                                    self._without if self.without is not None else None)

    def _after(self, name):
        def search(after: GameState):
            assert after.moves[-1][1] == PASS
            self.asked.append(name)
            return self.after

        return search

    def _without(self):
        self.asked.append("without pass")
        return self.without


def anything(point: int) -> bool:
    return True


# ---- the count ------------------------------------------------------------------------------------------------

def test_dead_stones_are_the_chains_whose_mean_ownership_is_the_opponents():
    game = position(SPLIT_WITH_DEAD_STONE, BLACK)
    assert endgame.dead_stones(game, split_ownership()) == [G.point(1, 1)]
    assert endgame.dead_stones_of(game, BLACK, split_ownership()) == []
    # The mean of a chain decides: Black's wall lives while most of it is Black's.
    leaning = split_ownership()
    leaning[[G.flat(G.point(row, 2)) for row in range(2)]] = -1.0
    assert endgame.dead_stones_of(game, BLACK, leaning) == []
    leaning[G.flat(G.point(2, 2))] = -1.0
    assert sorted(endgame.dead_stones_of(game, BLACK, leaning)) == [G.point(row, 2) for row in range(5)]


def test_a_chain_the_ownership_is_unsure_of_is_judged_with_its_liberties():
    game = position(SPLIT_WITH_DEAD_STONE, BLACK)
    stone = G.point(1, 1)
    liberties = [G.flat(p) for p in (G.point(0, 1), G.point(2, 1), G.point(1, 0))]
    ownership = split_ownership()
    ownership[G.flat(stone)] = -0.3  # half held alive for White, inside Black's area: (0.3 - 3) / 4 for White
    assert endgame.dead_stones(game, ownership) == [stone]
    assert endgame.dead_stones(game, ownership, margin=endgame.SURE_DEAD_OWNERSHIP) == [stone]
    ownership[liberties] = -0.5  # its liberties White's too: (0.3 + 1.5) / 4, alive
    assert endgame.dead_stones(game, ownership) == []
    ownership = split_ownership()
    ownership[G.flat(stone)] = -endgame.UNSURE_ALIVE_OWNERSHIP  # sure of it: its own mean decides
    assert endgame.dead_stones(game, ownership) == []


def test_the_count_removes_the_dead_stones_and_is_the_side_to_moves():
    game = position(SPLIT_WITH_DEAD_BLACK_STONE, BLACK, komi=7.5)
    assert game.score() == pytest.approx(3.5)  # the raw count
    assert endgame.lead_by_the_count(game, split_ownership()) == pytest.approx(-2.5)
    assert endgame.lead_by_the_count(position(SPLIT_WITH_DEAD_BLACK_STONE, WHITE, komi=7.5),
                                     split_ownership()) == pytest.approx(2.5)


@pytest.mark.parametrize("text, to_play, komi, decided", [
    (SPLIT, BLACK, 0.5, True),  # 15 to 10, no neutral point
    (SPLIT, WHITE, 0.5, False),
    (DAME, BLACK, 5.5, False),  # ahead by 4.5, but the 5 dame points could all go to White
    (DAME, BLACK, 0.5, True),  # ahead by 9.5: the dame cannot matter
    (SPLIT_WITH_DEAD_STONE, BLACK, 0.5, False),  # the dead stone counts alive, and makes Black's area neutral
], ids=["ahead", "behind", "dame could turn it", "dame cannot turn it", "a dead stone on the board"])
def test_the_raw_count_decides_a_game_the_neutral_points_cannot_turn(text, to_play, komi, decided):
    assert endgame.decided_by_the_raw_count(position(text, to_play, komi=komi)) == decided


def test_the_raw_count_decides_no_opening():
    assert not endgame.decided_by_the_raw_count(GameState(9, komi=-5.5))  # the whole empty board is neutral


def test_chain_statuses_tell_seki_from_alive_and_dead():
    g = grid(5)
    game = position(SEKI, BLACK)
    black_chain = sorted(g.point(row, 1) for row in range(3))
    white_stone = [g.point(1, 0)]
    in_seki = {g.flat(p) for p in black_chain + white_stone + [g.point(0, 0), g.point(2, 0)]}
    ownership = np.array([0.0 if i in in_seki else -1.0 for i in range(25)])
    statuses = endgame.chain_statuses(game, ownership)
    assert sorted(statuses["seki"]) == sorted([black_chain, white_stone])
    assert len(statuses["alive"]) == 3 and statuses["dead"] == []
    # Where the ownership gives the shared liberties to White, Black's chain is dead and no chain is in seki.
    statuses = endgame.chain_statuses(game, -np.ones(25))
    assert statuses["dead"] == [black_chain] and statuses["seki"] == []


def test_chain_statuses_list_a_seki_with_eyes_whose_eyes_the_ownership_gives_their_owners():
    # The seki of test_game.py: Black's A4 B4 C4 A5 B5 and White's D5 D4 E4 share C5, each with an eye.
    game = position("""
        . X . O .
        X X X O O
        O O O X X
        . O O X .
        O . O X .
    """, BLACK, rules=Rules.named("japanese"))
    ownership = np.array([float(game.area_ownership()[i]) for i in range(25)])
    statuses = endgame.chain_statuses(game, ownership)
    assert sorted(statuses["seki"]) == sorted([[G.point(0, 1), G.point(1, 0), G.point(1, 1), G.point(1, 2)],
                                               [G.point(0, 3), G.point(1, 3), G.point(1, 4)]])
    assert statuses["dead"] == [] and game.score(endgame.dead_stones(game, ownership)) == 2 - 2 - 0.5


def test_chain_statuses_of_a_settled_game_list_every_chain_once():
    game = position(SPLIT_WITH_DEAD_STONE, BLACK)
    statuses = endgame.chain_statuses(game, split_ownership())
    assert statuses["dead"] == [[G.point(1, 1)]] and statuses["seki"] == []
    assert sorted(p for chain in statuses["alive"] for p in chain) == sorted(
        G.point(row, col) for row in range(5) for col in (2, 3))


# ---- our territory ------------------------------------------------------------------------------------------

def test_own_territory_is_our_area_where_the_ownership_is_sure():
    black = endgame.own_territory(position(SPLIT, BLACK), split_ownership())
    assert sorted(np.flatnonzero(black) % 5) == [0] * 5 + [1] * 5  # the empty points of Black's area
    white = endgame.own_territory(position(SPLIT, WHITE), split_ownership())
    assert sorted(np.flatnonzero(white) % 5) == [4] * 5
    assert not endgame.own_territory(position(SPLIT, BLACK), split_ownership(0.7)).any()  # not sure enough
    assert not endgame.own_territory(position(DAME, BLACK), split_ownership())[G.flat(G.point(0, 3))]  # dame


def test_a_filling_that_connects_a_chain_in_atari_is_needed():
    g = grid(7)
    game = position(FALSE_EYE, BLACK)
    eye = g.point(3, 3)
    territory = np.zeros(49, dtype=bool)
    territory[g.flat(eye)] = True
    assert endgame.is_needed_filling(game, eye, [], territory, np.ones(49))


def test_a_filling_the_search_is_sure_of_is_needed():
    game = position(SPLIT, BLACK)
    ownership = split_ownership()
    territory = endgame.own_territory(game, ownership)
    other_filling = G.point(0, 0)
    sure = move(BLACK_TERRITORY, winrate=0.9, lcb=0.8)
    moves = [sure, move(PASS, winrate=0.7), move(WHITE_TERRITORY, winrate=0.75), move(other_filling, winrate=0.85)]
    assert endgame.is_needed_filling(game, BLACK_TERRITORY, moves, territory, ownership)  # other fillings do not count
    assert not endgame.is_needed_filling(game, BLACK_TERRITORY, [move(BLACK_TERRITORY, 0.9, lcb=0.7)] + moves[1:],
                                         territory, ownership)  # its LCB below pass's winrate
    assert not endgame.is_needed_filling(game, BLACK_TERRITORY, [move(BLACK_TERRITORY, 0.9, visits=0, lcb=0.8)]
                                         + moves[1:], territory, ownership)  # never searched
    assert not endgame.is_needed_filling(game, BLACK_TERRITORY, [sure], territory, ownership)  # nothing to compare with
    # The territory of the choice leaves out a needed filling, and only that point.
    choice = endgame.territory_of_the_choice(game, searched(sure, split_ownership(), moves[1:]))
    assert not choice[G.flat(BLACK_TERRITORY)] and np.count_nonzero(choice) == 9


# ---- chains in atari ----------------------------------------------------------------------------------------

def test_the_rescue_of_a_chain_in_atari_is_its_last_liberty():
    g = grid(7)
    game = position(FALSE_EYE, BLACK)
    black_side = np.where((np.arange(49) % 7 <= 3) | (np.arange(49) == g.flat(g.point(3, 4))), 1.0, -1.0)
    assert list(endgame.living_chains_in_atari(game, black_side)) == [([g.point(3, 4)], g.point(3, 3))]
    assert endgame.rescue(game, black_side) == g.point(3, 3)
    # A chain the count takes as dead is no longer ours to save.
    assert endgame.rescue(game, np.where(np.arange(49) % 7 <= 3, 1.0, -1.0)) is None


def test_the_rescue_of_a_chain_whose_liberty_is_suicide_is_a_capture_beside_it():
    g = grid(7)
    game = position(CHAIN_SAVED_BY_A_CAPTURE, BLACK)
    chain = sorted(g.point(6, col) for col in (3, 4))
    assert endgame.captures_beside(game.board, chain) == [g.point(6, 6)]
    assert endgame.rescue(game, np.ones(49)) == g.point(6, 6)


# ---- the pass rules -----------------------------------------------------------------------------------------

def test_rule_1_passes_after_the_opponents_pass_when_the_count_after_passing_wins():
    game = after_white_pass(SPLIT, komi=0.5)
    searches = Searches(after_passing=searched(move(BLACK_TERRITORY, winrate=0.1), split_ownership(),
                                               to_play=WHITE))
    result = searched(BLACK_TERRITORY, split_ownership())
    assert endgame.pass_in_question(game, result, may_pass=True)
    assert endgame.choose_move(game, result, anything, True, searches()) == (PASS, result)
    assert searches.asked == ["after passing"]


def test_rule_1_plays_on_where_the_count_after_passing_loses_with_the_search_without_pass():
    # The count says Black wins; the search after Black's pass finds Black's wall dead: a group that lives only if
    # Black moves first. The search chose pass: the move comes from the search without pass.
    game = after_white_pass(SPLIT, komi=0.5)
    without = searched(WHITE_TERRITORY, split_ownership())
    searches = Searches(after_passing=searched(PASS, -np.ones(25), to_play=WHITE), without_pass=without)
    assert endgame.choose_move(game, searched(PASS, split_ownership()), anything, True, searches()) \
        == (WHITE_TERRITORY, without)
    assert searches.asked == ["after passing", "without pass"]


def test_rule_1_never_passes_while_behind_by_the_count():
    game = after_white_pass(SPLIT, komi=10.5)
    searches = Searches(without_pass=searched(BLACK_TERRITORY, split_ownership(), others=[WHITE_TERRITORY]))
    point, _ = endgame.choose_move(game, searched(PASS, split_ownership()), anything, True, searches())
    assert point == WHITE_TERRITORY  # the search without pass chose a filling of Black's own area: not that
    assert searches.asked == ["without pass"]


@pytest.mark.parametrize("rules", ["japanese", "chinese"])
def test_after_the_opponents_pass_under_territory_scoring_our_area_is_not_filled(rules):
    # The loop of a game under japanese rules: White passed every move, and Black, ahead by the count but with a
    # search after its pass that found its group dead, filled its own area where the ownership was unsure, point
    # after point, each filling a point lost under territory scoring, until its eyes went too.
    game = after_white_pass(SPLIT, komi=0.5, rules=Rules.named(rules))
    unsure = split_ownership(0.7)
    fillings = [G.point(row, col) for row in range(5) for col in range(2)]
    searches = Searches(after_passing=searched(PASS, -np.ones(25), to_play=WHITE),
                        without_pass=searched(BLACK_TERRITORY, unsure, others=fillings[:3],
                                              root_moves=fillings + [PASS]))
    point, _ = endgame.choose_move(game, searched(PASS, unsure), anything, True, searches())
    # Under area scoring a filling costs nothing, and the search wanted it; under territory scoring it costs a
    # point and the search was not sure it gained one: pass.
    assert point == (PASS if rules == "japanese" else BLACK_TERRITORY)


@pytest.mark.parametrize("rules", ["japanese", "chinese"])
def test_after_the_opponents_pass_under_territory_scoring_a_dead_stone_is_not_captured(rules):
    # A game under korean rules: White passed with a dead stone still inside Black's area, and Black played beside
    # it, a point lost under territory scoring, where the count takes the stone as a prisoner all the same.
    game = after_white_pass(SPLIT_WITH_DEAD_STONE, komi=0.5, rules=Rules.named(rules))
    beside = G.point(1, 0)
    territory = endgame.own_territory(game, split_ownership())
    assert territory[G.flat(beside)] == (rules == "japanese")
    assert not endgame.own_territory(game, split_ownership(), captures_owed=True)[G.flat(beside)]
    result = searched(beside, split_ownership(), root_moves=[beside, PASS])
    point, _ = endgame.choose_move(game, result, anything, True, Searches()(), time_to_check=False)
    assert point == (PASS if rules == "japanese" else beside)
    # In cleanup the dead stones are captured whatever the rules: no pass may be played.
    assert endgame.choose_move(game, result, anything, False, Searches()())[0] == beside
    # Where the count after passing finds the stone alive, the opponent to move, its capture is owed after all.
    alive = Searches(after_passing=searched(PASS, -np.ones(25), to_play=WHITE))
    assert endgame.choose_move(game, result, anything, True, alive())[0] == beside
    assert alive.asked == ["after passing"]
    # Where it finds it dead too, pass.
    dead = Searches(after_passing=searched(PASS, split_ownership(), to_play=WHITE))
    assert endgame.choose_move(game, result, anything, True, dead())[0] == PASS


@pytest.mark.parametrize("rules", ["japanese", "chinese"])
def test_behind_by_the_count_after_the_opponents_pass_a_filling_is_needed_only_as_a_connection(rules):
    # A lost game under korean rules: White passed every move, and Black, behind by the count, filled its own area
    # point by point, each time the search sure of the filling (its network, fed chinese rules, charges no point).
    game = after_white_pass(SPLIT, komi=5.5, rules=Rules.named(rules))  # behind by half a point, all alive
    ownership = split_ownership()
    territory = endgame.own_territory(game, ownership)
    moves = [move(BLACK_TERRITORY, winrate=0.3, lcb=0.25), move(PASS, winrate=0.0), move(WHITE_TERRITORY, 0.1)]
    assert endgame.is_needed_filling(game, BLACK_TERRITORY, moves, territory, ownership) == (rules == "chinese")
    assert endgame.lead_by_the_count(game, ownership) < 0
    # Ahead by the count, the search's certainty counts again; and behind only with a group of ours dead by the
    # count, a filling may save it.
    ahead = after_white_pass(SPLIT, komi=0.5, rules=Rules.named(rules))
    assert endgame.is_needed_filling(ahead, BLACK_TERRITORY, moves, endgame.own_territory(ahead, ownership), ownership)
    wall_dead = np.where(np.arange(25) % 5 <= 1, 1.0, -1.0)  # Black's wall on column 2 dead
    assert endgame.lead_by_the_count(ahead, wall_dead) < 0
    assert endgame.is_needed_filling(ahead, BLACK_TERRITORY, moves, endgame.own_territory(ahead, ownership), wall_dead)
    # The connection of a chain in atari stays needed, behind or not.
    g = grid(7)
    atari = position(FALSE_EYE, WHITE, komi=60.5, rules=Rules.named(rules))
    atari.play(PASS, WHITE)
    assert endgame.lead_by_the_count(atari, np.ones(49)) < 0
    eye = np.zeros(49, dtype=bool)
    eye[g.flat(g.point(3, 3))] = True
    assert endgame.is_needed_filling(atari, g.point(3, 3), [], eye, np.ones(49))


@pytest.mark.parametrize("rules", ["japanese", "chinese"])
def test_an_eye_is_our_territory_however_unsure_the_ownership(rules):
    game = position(FALSE_EYE_MADE_TRUE, BLACK, rules=Rules.named(rules))
    g = game.grid
    territory = endgame.own_territory(game, np.full(49, 0.3))
    assert territory[g.flat(g.point(3, 3))] and territory.sum() == 1
    edge = position(EYE_ON_THE_EDGE, BLACK, rules=Rules.named(rules))
    assert endgame.own_territory(edge, np.full(25, 0.3))[G.flat(G.point(4, 2))]
    assert not endgame.own_territory(position(SEKI, WHITE, rules=Rules.named(rules)), np.zeros(25)).any()


def test_rule_1_rescues_a_chain_in_atari_whatever_the_search_chose():
    g = grid(7)
    game = position(CHAIN_SAVED_BY_A_CAPTURE, WHITE, komi=0.5)
    game.play(PASS, WHITE)
    searches = Searches()
    for chosen in (PASS, g.point(0, 0)):
        result = searched(chosen, np.ones(49))
        assert endgame.pass_in_question(game, result, may_pass=True) == (chosen == PASS)
        assert endgame.choose_move(game, result, anything, True, searches())[0] == g.point(6, 6)
    assert searches.asked == []


def test_rule_2_passes_first_in_a_decided_and_settled_game_the_search_after_passing_confirms():
    game = position(SPLIT, BLACK, komi=0.5)
    result = searched(move(PASS, winrate=0.9), split_ownership())
    assert endgame.decided_and_settled(game, split_ownership())
    assert endgame.pass_in_question(game, result, may_pass=True)
    confirmed = Searches(after_passing=searched(move(BLACK_TERRITORY, winrate=0.25), split_ownership(),
                                                to_play=WHITE))
    assert endgame.choose_move(game, result, anything, True, confirmed()) == (PASS, result)
    assert confirmed.asked == ["after passing to the deadline"]
    # Where the opponent does better after our pass than the search of our move allows, play on: the search's own
    # move in our territory where it chose one (the answer to the threat), else a move outside it.
    threatened = Searches(after_passing=searched(move(BLACK_TERRITORY, winrate=0.35), split_ownership(),
                                                 to_play=WHITE))
    filling = searched(move(BLACK_TERRITORY, winrate=0.9, lcb=0.3), split_ownership(), others=[WHITE_TERRITORY])
    assert endgame.choose_move(game, filling, anything, True, threatened())[0] == BLACK_TERRITORY
    assert threatened.asked == ["after passing to the deadline"]
    elsewhere = searched(move(PASS, winrate=0.9), split_ownership(), others=[BLACK_TERRITORY, WHITE_TERRITORY])
    assert endgame.choose_move(game, elsewhere, anything, True, threatened())[0] == WHITE_TERRITORY


@pytest.mark.parametrize("text, komi, ownership", [
    (DAME, 5.5, split_ownership()),  # not decided by the raw count
    (SPLIT_WITH_DEAD_STONE, 0.5, split_ownership()),  # the dead stone still on the board: not decided either
    (SPLIT, 0.5, split_ownership(0.5)),  # not settled
    (SPLIT, 10.5, split_ownership()),  # behind by the count
], ids=["dame", "a dead stone on the board", "unsettled", "behind"])
def test_rule_2_does_not_pass_first_in_a_game_not_decided_and_settled(text, komi, ownership):
    game = position(text, BLACK, komi=komi)
    searches = Searches()
    legal = [G.from_flat(i) for i in np.flatnonzero(game.legal_mask()[:-1])]
    result = searched(move(PASS, winrate=0.9), ownership, root_moves=legal)
    assert not endgame.decided_and_settled(game, ownership)
    assert not endgame.pass_in_question(game, result, may_pass=True)
    point, _ = endgame.choose_move(game, result, anything, True, searches())
    assert point != PASS and not endgame.own_territory(game, ownership)[G.flat(point)]
    assert searches.asked == []


def test_rule_2_does_not_pass_first_with_a_living_chain_in_atari():
    corner = G.point(4, 4)
    ours = np.where(np.arange(25) == G.flat(corner), 1.0, split_ownership())
    game = position(SPLIT_WITH_A_BLACK_STONE_IN_ATARI, BLACK, komi=0.5)
    assert not endgame.decided_and_settled(game, ours)
    assert endgame.decided_and_settled(game, split_ownership())  # once the count takes the stone as dead


def test_without_time_to_check_no_rule_passes_or_searches():
    game = position(SPLIT, BLACK, komi=0.5)
    result = searched(move(PASS, winrate=0.9), split_ownership(), others=[WHITE_TERRITORY])
    searches = Searches(after_passing=searched(move(BLACK_TERRITORY, winrate=0.25), split_ownership(),
                                               to_play=WHITE))
    assert endgame.choose_move(game, result, anything, True, searches(), time_to_check=False)[0] == WHITE_TERRITORY
    assert searches.asked == []
    assert endgame.choose_move(game, result, anything, True, searches())[0] == PASS  # with the check
    passed = after_white_pass(SPLIT, komi=0.5)
    searches = Searches(without_pass=searched(BLACK_TERRITORY, split_ownership()))
    assert endgame.choose_move(passed, result, anything, True, searches(), time_to_check=False)[0] == WHITE_TERRITORY
    assert searches.asked == []


def test_rule_4_plays_the_best_move_outside_our_territory_and_passes_only_without_one():
    game = position(SPLIT, BLACK, komi=0.5)
    result = searched(BLACK_TERRITORY, split_ownership(), others=[G.point(0, 0)],
                      root_moves=[G.point(1, 1), WHITE_TERRITORY, PASS])
    # No pass allowed (a cleanup capture owed): the best move that fills nothing.
    assert endgame.choose_move(game, result, anything, False, Searches()())[0] == WHITE_TERRITORY
    # Every move a filling: pass, where the filter allows it; else the search's own choice.
    fillings = searched(BLACK_TERRITORY, split_ownership(), root_moves=[G.point(0, 0)])
    assert endgame.choose_move(game, fillings, anything, False, Searches()())[0] == PASS
    assert endgame.choose_move(game, fillings, lambda point: point != PASS, False, Searches()())[0] == BLACK_TERRITORY


def test_the_move_filter_keeps_the_rules_off_the_moves_it_forbids():
    game = position(SPLIT, BLACK, komi=10.5)
    result = searched(WHITE_TERRITORY, split_ownership(), root_moves=[G.point(0, 4), G.point(4, 4)])
    allowed = {G.point(4, 4), PASS}.__contains__
    assert endgame.choose_move(game, result, allowed, True, Searches()())[0] == G.point(4, 4)
    assert not endgame.pass_in_question(game, result, may_pass=False)


def test_count_after_passing_is_ours_from_the_search_of_the_position_our_pass_leaves():
    game = position(SPLIT, BLACK, komi=0.5)
    seen = []

    def search(after):
        seen.append((after.to_play, after.moves))
        return searched(move(PASS, winrate=0.3), split_ownership(), to_play=WHITE)

    lead, winrate = endgame.count_after_passing(game, search)
    assert (lead, winrate) == (pytest.approx(4.5), pytest.approx(0.7))
    assert seen == [(WHITE, [(BLACK, PASS)])] and game.moves == []  # the position handed in stays as it was


@pytest.mark.parametrize("rules, dead", [("chinese", ["A3", "E3"]), ("tromp-taylor", [])])
def test_no_stone_is_dead_where_the_board_is_counted_as_it_stands(rules, dead):
    # Black's wall on column C, White's on D; E3 (Black's) and A3 (White's) are dead in the other's area.
    state = GameState(5, rules=Rules.named(rules), komi=0)
    for vertex in ("C1", "D1", "C2", "D2", "C3", "D3", "C4", "D4", "C5", "D5", "E3", "A3"):
        state.play(from_gtp(state.grid, vertex))
    ownership = np.array([1.0 if to_gtp(state.grid, p)[0] in "ABC" else -1.0 for p in state.grid.points])
    assert sorted(to_gtp(state.grid, p) for p in endgame.dead_stones(state, ownership)) == dead
    assert endgame.lead_by_the_count(state, ownership) == (5 if rules == "chinese" else 0)
