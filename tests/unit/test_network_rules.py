"""The rule inputs a network is given: its trained rules, the nearest ones in place of others, and the compensation
moved by the difference between area and territory counting (network_evaluator.py)."""

import dataclasses
import logging

import numpy as np
import pytest

from gtp_engine import features, position
from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.game import GameState, Rules
from gtp_engine.network_evaluator import (
    SHIPPED_RULES,
    ModelInfo,
    NetworkEvaluator,
    RuleInputs,
    nearest_trained,
    trained_rules_of,
)

CHINESE, JAPANESE, AGA = RuleInputs(), RuleInputs("territory", "simple"), RuleInputs("area", "situational")


class Recording(NetworkEvaluator):
    """A network that answers nothing useful and keeps the global inputs it was given."""

    def __init__(self, trained):
        super().__init__(symmetry_mode="none")
        self.info = ModelInfo("net.onnx", 1, 15, 8, 2, 25, "test", (9,), "cpu", {}, trained_rules=trained)
        self.given = []

    def forward(self, spatial, global_):
        self.given.append(global_.copy())
        count, area = len(spatial), spatial.shape[2] * spatial.shape[3]
        return (np.zeros((count, area + 1), np.float32), np.zeros((count, 3), np.float32),
                np.zeros(count, np.float32), np.zeros((count,) + spatial.shape[2:], np.float32))


def given(evaluator, states):
    evaluator.evaluate(states)
    return evaluator.given[-1]


def game(rules, komi, handicap=0, moves=()):
    state = GameState(9, komi=komi, rules=Rules.named(rules))
    if handicap:
        state.place_handicap([state.grid.point(2, 2), state.grid.point(6, 6), state.grid.point(2, 6)][:handicap])
    for move in moves:
        state.play(state.grid.point(*move))
    return state


# White captures a black stone at (0, 0): the prisoner balance is not zero.
CAPTURE = [(0, 0), (0, 1), (4, 4), (1, 0)]


def test_nearest_keeps_scoring_then_ko_then_suicide():
    assert nearest_trained(RuleInputs("area", "simple"), [JAPANESE, AGA, CHINESE]) == AGA  # first listed of the area
    assert nearest_trained(RuleInputs("area", "situational", True), [CHINESE, AGA]) == AGA
    assert nearest_trained(RuleInputs("territory", "positional"), [CHINESE, JAPANESE]) == JAPANESE
    assert nearest_trained(JAPANESE, [CHINESE]) == CHINESE


def test_trained_rules_from_metadata_or_the_shipped_networks():
    assert trained_rules_of({"trained_rules": [{"scoring": "territory", "ko": "simple", "suicide": False}]}) == (
        JAPANESE,)
    fingerprint = next(iter(SHIPPED_RULES))
    assert trained_rules_of({"training": {"data_fingerprint": fingerprint}}) == SHIPPED_RULES[fingerprint]
    assert trained_rules_of({"training": {"data": "none: random weights"}}) is None
    for bad in ([], [{"scoring": "area"}], [{"scoring": "stones", "ko": "simple", "suicide": False}]):
        with pytest.raises(ValueError):
            trained_rules_of({"trained_rules": bad})


def test_territory_game_is_given_area_rules_with_the_usual_point_and_the_handicap_stones_for_white():
    """Japanese 6.5 is given as Chinese 7.5; a Japanese handicap game as the Chinese one of the same komi, whose
    bonus of N points gives White back the stones Black was given."""
    network = Recording((CHINESE,))
    for handicap in (0, 2, 3):
        for moves in ((), CAPTURE):
            japanese = game("japanese", 0.5 if handicap else 6.5, handicap, moves)
            chinese = game("chinese", 0.5 if handicap else 7.5, handicap, moves)
            assert features.white_compensation(chinese) == japanese.komi + (handicap or 1)
            np.testing.assert_allclose(given(network, [japanese]), features.encode([chinese])[1], atol=1e-6)


def white_compensation_given(network, state) -> float:
    own_view = given(network, [state])[0, features.GLOBAL.index("compensation")] * features.SCALE
    return own_view if state.to_play == WHITE else -own_view


def test_the_fed_area_count_is_the_territory_count_in_every_position_of_games_with_passes_and_captures():
    """Area less territory counting is the stones Black has played less White's, so the area count under the fed
    compensation is the game's territory count, less the point of Black's move to come when Black is to move. A pass
    moves it a point: after White's pass, a black stone inside Black's territory costs Black that point."""
    network = Recording((CHINESE,))
    rng = np.random.default_rng(5)
    no_tax = dataclasses.replace(Rules.named("japanese"), tax="none")  # the tax is no input; keep it out
    passes = captures = 0
    for handicap in (0, 0, 2):
        japanese = GameState(9, komi=6.5 if not handicap else 0.5, rules=no_tax)
        chinese = GameState(9, komi=0.0, rules=Rules.named("chinese"))
        for state in (japanese, chinese):
            if handicap:
                state.place_handicap([state.grid.point(2, 2), state.grid.point(6, 6)][:handicap])
        for _ in range(160):
            compensation = white_compensation_given(network, japanese)
            chinese.komi += compensation - features.white_compensation(chinese)
            assert japanese.territory_score() == pytest.approx(
                chinese.area_score() + (japanese.to_play == BLACK), abs=1e-4)
            legal = np.flatnonzero(japanese.legal_mask()[:-1])
            if not len(legal) or (japanese.consecutive_passes == 0 and rng.random() < 0.08):
                move = PASS
                passes += 1
            else:
                move = japanese.grid.from_flat(int(rng.choice(legal)))
            before = sum(japanese.board.captures)
            for state in (japanese, chinese):
                state.play(move)
            captures += sum(japanese.board.captures) > before
    assert passes >= 10 and captures >= 10  # the games had both


def test_area_game_is_given_territory_rules_with_its_prisoners():
    network = Recording((JAPANESE,))
    for handicap, rules, komi in ((0, "chinese", 7.5), (2, "chinese", 0.5), (3, "aga", 0.5)):
        area = game(rules, komi, handicap, CAPTURE)
        compensation = features.white_compensation(area)
        # After CAPTURE, Black is to move in the even game (the usual point) and White in the handicap games,
        # where Black has put down the handicap stones more.
        territory = game("japanese", compensation - (handicap or 1), handicap, CAPTURE)
        fed = given(network, [area])
        np.testing.assert_allclose(fed, features.encode([territory])[1], atol=1e-6)
        assert fed[0, features.GLOBAL.index("prisoner_balance")] != 0


def test_other_ko_and_suicide_rules_keep_the_compensation():
    network = Recording((CHINESE, JAPANESE))
    aga = game("aga", 0.5, 3)
    chinese = game("chinese", 0.5, 3)
    fed = given(network, [aga])
    expected = features.encode([chinese])[1]
    expected[0, 0] = features.encode([aga])[1][0, 0]  # aga's N-1 bonus, as the game has it
    np.testing.assert_allclose(fed, expected, atol=1e-6)


def test_trained_and_unknown_rules_go_as_they_are():
    states = [game(rules, 7.5, 0, CAPTURE) for rules in ("chinese", "japanese", "aga", "tromp-taylor")]
    np.testing.assert_array_equal(given(Recording(None), states), features.encode(states)[1])
    np.testing.assert_array_equal(given(Recording((CHINESE,)), states[:1]), features.encode(states[:1])[1])


def test_a_mixed_batch_and_the_warning_once_per_rules(caplog):
    network = Recording((CHINESE,))
    states = [game("japanese", 6.5), game("chinese", 7.5), game("aga", 7.5), game("japanese", 6.5, 0, CAPTURE)]
    with caplog.at_level(logging.WARNING, logger="gtp_engine.network_evaluator"):
        fed = given(network, states)
        given(network, states)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and any("japanese/korean" in w and "it is given chinese" in w for w in warnings)
    assert any("aga rules; it is given chinese" in w for w in warnings)
    expected = features.encode([game("chinese", 7.5), game("chinese", 7.5), game("chinese", 7.5),
                                game("chinese", 7.5, 0, CAPTURE)])[1]
    np.testing.assert_allclose(fed, expected, atol=1e-6)


@pytest.mark.skipif(position.IMPLEMENTATIONS.compiled is None, reason="compiled search positions not built")
def test_compiled_search_positions_are_given_what_their_game_states_are():
    kind = position.IMPLEMENTATIONS.compiled
    for trained, rules in (((CHINESE,), "japanese"), ((JAPANESE,), "chinese")):
        root = game(rules, 0.5, 2)
        leaf = kind.root(root)
        kind.play_line(leaf, [root.grid.point(*move) for move in CAPTURE])
        reference = root.copy()
        for move in CAPTURE:
            reference.play(reference.grid.point(*move))
        np.testing.assert_array_equal(given(Recording(trained), [leaf]), given(Recording(trained), [reference]))
