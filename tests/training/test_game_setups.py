"""training/game_setups.py: the rule sets, komi and handicap stones drawn for each self-play game, and the gate's
rules in turn by pairs of games. No network and no torch; the tests of selfplay's and gating's use of it need the
train extra (their progress bars) and skip without it."""

from collections import Counter

import numpy as np
import pytest

from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import GameState, Rules, fixed_handicap_points
from gtp_engine.training.game_setups import GameSetup, SetupDistribution, rule_sets


def test_rule_sets_are_a_comma_separated_list_of_names():
    assert [r.name for r in rule_sets("chinese, japanese,aga")] == ["chinese", "japanese", "aga"]
    for bad in ("", "chinese,", "chinese,,aga", "chess"):
        with pytest.raises(ValueError):
            rule_sets(bad)


def test_the_komi_of_a_rule_set_follows_its_scoring():
    area_first = SetupDistribution("chinese,japanese,tromp-taylor", komi=7.5)
    assert [area_first.komi_of(Rules.named(n)) for n in ("chinese", "japanese", "tromp-taylor", "korean")] == \
        [7.5, 6.5, 7.5, 6.5]
    territory_first = SetupDistribution("japanese,chinese", komi=6.5)
    assert territory_first.komi_of(Rules.named("chinese")) == 7.5
    assert territory_first.komi_of(Rules.named("japanese")) == 6.5


def test_draws_spread_over_the_rule_sets_komi_and_handicaps():
    setups = SetupDistribution("chinese,japanese,aga", komi=7.5, komi_stdev=1.0, handicap_share=0.25, max_handicap=4)
    rng = np.random.default_rng(5)
    drawn = [setups.draw(rng) for _ in range(3000)]
    rules = Counter(s.rules.name for s in drawn)
    assert set(rules) == {"chinese", "japanese", "aga"} and min(rules.values()) > 900
    handicap = [s for s in drawn if s.handicap]
    assert 650 < len(handicap) < 850
    assert Counter(s.handicap for s in handicap).keys() == {2, 3, 4}
    assert all(s.komi == s.rules.default_komi(s.handicap) for s in handicap)
    for name, fair in (("chinese", 7.5), ("japanese", 6.5)):
        komi = np.array([s.komi for s in drawn if not s.handicap and s.rules.name == name])
        assert (komi * 2 == np.round(komi * 2)).all()  # half points, whole ones included
        assert abs(komi.mean() - fair) < 0.15 and 0.8 < komi.std() < 1.2 and (komi % 1 == 0).any()


def test_without_spread_or_handicaps_every_game_is_the_runs_own():
    setups = SetupDistribution("korean", komi=6.5)
    rng = np.random.default_rng(0)
    assert {setups.draw(rng) for _ in range(20)} == {GameSetup(Rules.named("korean"), 6.5)}
    assert rng.random() == np.random.default_rng(0).random()  # and draws nothing


def test_a_handicap_setup_places_the_stones_and_white_moves_first():
    game = GameSetup(Rules.named("japanese"), 0.5, 3).new_game(9)
    assert game.handicap_stones == 3 and game.to_play == WHITE and game.komi == 0.5
    points = fixed_handicap_points(game.grid, 3)
    assert all(game.board.colors[p] == BLACK for p in points)
    assert GameSetup(Rules.named("chinese"), 7.5).new_game(9).to_play == BLACK


def test_bad_distributions_are_refused():
    for bad in (dict(komi_stdev=-1.0), dict(handicap_share=1.5), dict(handicap_share=0.1, max_handicap=1)):
        with pytest.raises(ValueError):
            SetupDistribution("chinese", **bad)
    with pytest.raises(ValueError, match="no fixed handicap of 4 stones on 5x5"):
        SetupDistribution("chinese", handicap_share=0.1).check_board(5)
    SetupDistribution("chinese", handicap_share=0.1, max_handicap=9).check_board(9)


def test_selfplay_refuses_setups_its_board_cannot_take():
    pytest.importorskip("tqdm")
    from gtp_engine.training.selfplay import SelfPlayConfig

    with pytest.raises(ValueError, match="no fixed handicap of 4 stones on 5x5"):
        SelfPlayConfig(size=5, handicap_share=0.1)
    with pytest.raises(ValueError, match="no fixed handicap of 9 stones on 8x8"):
        SelfPlayConfig(size=8, handicap_share=0.1, max_handicap=9)
    with pytest.raises(ValueError):
        SelfPlayConfig(size=9, rules="chinese,chess")
    SelfPlayConfig(size=9, rules="chinese,japanese", handicap_share=0.1, max_handicap=9)


def test_the_gates_pairs_of_games_take_the_rule_sets_in_turn():
    pytest.importorskip("tqdm")
    from gtp_engine.training import gating

    config = gating.GateConfig(size=9, komi=7.5, rules="chinese,japanese")
    setups = [gating.setup_of(config, index) for index in range(6)]
    assert [(s.rules.name, s.komi) for s in setups] == [("chinese", 7.5)] * 2 + [("japanese", 6.5)] * 2 + \
        [("chinese", 7.5)] * 2
    assert gating.setup_of(gating.GateConfig(size=9, komi=7.0), 3) == GameSetup(Rules.named("chinese"), 7.0)
    assert isinstance(setups[0].new_game(9), GameState)
