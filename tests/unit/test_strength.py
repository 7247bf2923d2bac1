"""Strength levels (gtp_engine/search/strength.py): the level table, KataGo's human profiles, the level's move
distribution, and, with the shipped 9x9 network on positions of its own games, the properties a level guarantees:
its moves are among the policy's top 10, none loses more than half the board by a fuller search's judgement, and
its agreement with the full-strength move falls as the level drops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from search_support import ScriptedEvaluator

from gtp_engine import config, coords
from gtp_engine.analysis.query import parse_query
from gtp_engine.analysis.scheduler import Scheduler
from gtp_engine.analysis.settings import AnalysisSettings
from gtp_engine.board import BLACK
from gtp_engine.coords import PASS
from gtp_engine.evaluator import legal_policy
from gtp_engine.game import GameState, fixed_handicap_points
from gtp_engine.onnx_evaluator import OnnxEvaluator
from gtp_engine.player import Player, PlayerConfig
from gtp_engine.search import ResignConfig, ResignCounter, SearchConfig, Searcher, StopCondition, strength
from gtp_engine.search.choice import level_edge

NETWORK_9X9 = Path(__file__).resolve().parents[2] / "weights" / "9x9.onnx"
RANKS = [strength.rank_name(kyu) for kyu in range(strength.WEAKEST, strength.STRONGEST - 1, -1)]
FULL_VISITS = 200  # the fuller search that judges the levels' moves


@pytest.mark.parametrize("size", sorted(strength.TABLES))
def test_every_rank_of_the_scale_has_a_level_on_each_calibrated_size_and_the_levels_are_ordered(size):
    area = size * size
    rows = strength.TABLES[size]
    assert rows[0].name == strength.rank_name(strength.WEAKEST)  # every table starts at the scale's weakest rank
    assert all(strength.level_for(row.kyu, area) == row for row in rows)  # the rows themselves
    levels = [strength.parse_rank(rank).level(area) for rank in RANKS]
    strongest = rows[-1]  # ranks above it play it
    assert [level.name for level in levels] == [rank if strength.kyu_number(rank) >= strongest.kyu
                                                else strongest.name for rank in RANKS]
    for weak, strong in zip(levels, levels[1:]):
        assert strong.playouts >= weak.playouts >= strength.CANDIDATES
        assert strong.temperature <= weak.temperature and strong.search_share >= weak.search_share
        assert strong.max_loss <= weak.max_loss
    assert strength.CANDIDATES == 10 and all(level.max_loss <= 0.25 for level in levels)


def test_each_table_ends_at_the_strongest_rank_measured_on_its_board():
    """9x9's levels end at 4k, where the settings of its strongest row were placed; 19x19's reach 1d."""
    assert [row.name for row in strength.TABLES[9]] == ["12k", "11k", "9k", "8k", "5k", "4k"]
    assert [row.name for row in strength.TABLES[19]] == ["12k", "8k", "4k", "1d"]
    assert strength.parse_rank("1d").level(81) == strength.parse_rank("3k").level(81) == strength.TABLES[9][-1]
    assert strength.parse_rank("1d").level(361).name == "1d"


def test_a_rank_above_the_boards_strongest_level_plays_it_and_says_so_once(caplog):
    def visits(rank: int) -> int:
        player = Player(ScriptedEvaluator(), PlayerConfig(SearchConfig(seed=0), strength=strength.Rank(rank)))
        return player.genmove(GameState(9), BLACK, StopCondition(visits=1000)).visits

    four_kyu = visits(4)
    caplog.clear()
    player = Player(ScriptedEvaluator(), PlayerConfig(SearchConfig(seed=0), strength=strength.Rank(0)))
    with caplog.at_level("WARNING", logger="gtp_engine.player"):
        assert player.genmove(GameState(9), BLACK, StopCondition(visits=1000)).visits == four_kyu
        player.genmove(GameState(9), BLACK, StopCondition(visits=1000))
        player.genmove(GameState(19), BLACK, StopCondition(visits=1000))  # 19x19 has a 1d level
    said = [record.getMessage() for record in caplog.records if "strongest level" in record.getMessage()]
    assert said == ["strength 1d: the strongest level calibrated for this board is 4k, which it plays "
                    "(max plays at full strength)"]


def test_a_level_matches_have_not_placed_at_its_rank_says_so_once_and_the_placed_ones_say_nothing(caplog):
    assert [row.placed for row in strength.TABLES[19]] == [True, True, True, False]
    assert all(row.placed for row in strength.TABLES[9])
    assert not strength.parse_rank("2k").level(361).placed and strength.parse_rank("5k").level(361).placed
    said = {}
    for rank in ("1d", "2k", "4k", "5k"):
        player = Player(ScriptedEvaluator(), PlayerConfig(SearchConfig(seed=0), strength=strength.parse_rank(rank)))
        caplog.clear()
        with caplog.at_level("WARNING", logger="gtp_engine.player"):
            for _ in range(2):
                player.genmove(GameState(19), BLACK, StopCondition(visits=1000))
        said[rank] = [record.getMessage() for record in caplog.records if "not yet placed" in record.getMessage()]
    assert said["1d"] == ["strength 1d: not yet placed at this rank by matches on this board (the README's "
                          "Strength levels); it may play weaker, most of all giving handicap stones"]
    assert len(said["2k"]) == 1 and said["4k"] == said["5k"] == []


def test_ranks_parse_and_each_board_takes_the_table_of_the_nearest_calibrated_size():
    assert strength.parse_rank("max") is None and strength.parse_rank(" 12K ") == strength.Rank(12)
    assert strength.parse_rank("1d").name == "1d" and strength.rank_label(None) == "max"
    for bad in ("13k", "2d", "0k", "strong", "", "12"):
        with pytest.raises(ValueError, match="expected a rank from 12k to 1d or max"):
            strength.parse_rank(bad)
    with pytest.raises(ValueError, match="ranks go from 12k to 1d"):
        strength.Rank(13)
    assert strength.table_for(7 * 7) == strength.table_for(13 * 13) == strength.TABLES[9]
    assert strength.table_for(17 * 17) == strength.table_for(19 * 19) == strength.table_for(25 * 25) == \
        strength.TABLES[19]
    # the same rank reads less on 19x19: the same settings play stronger there against the same anchor
    eight = strength.Rank(8)
    assert eight.level(361).temperature > eight.level(81).temperature


def test_max_is_the_engine_without_the_option():
    assert config.build({"strength": "max"}) == config.build({})
    assert config.build({"strength": "8k"}).player.strength == strength.Rank(8)
    with pytest.raises(config.ConfigError, match="--strength"):
        config.build({"strength": "30k"})


def test_genmove_reads_as_the_ranks_level_on_the_games_board():
    """The same rank reads the playouts of its level on each board: 9x9's table on 9x9 and 13x13, 19x19's there."""
    for size in (9, 13, 19):
        player = Player(ScriptedEvaluator(), PlayerConfig(SearchConfig(seed=0), strength=strength.Rank(8)))
        choice = player.genmove(GameState(size), BLACK, StopCondition(visits=1000))
        assert choice.visits == strength.level_for(8, 81 if size < 19 else 361).playouts
    assert strength.level_for(8, 81).playouts != strength.level_for(8, 361).playouts


def test_a_level_takes_its_candidates_from_the_policy_averaged_over_the_symmetries():
    """Where the evaluator offers an averaged evaluation (a network does), the level plays among its top ten, not
    among the top ten of the one symmetry its search's root was evaluated in."""
    g = GameState(9).grid
    single = [g.point(r, c) for r in range(2) for c in range(9)]  # what the root's own evaluation favours
    averaged = [g.point(r, c) for r in range(5, 7) for c in range(9)]

    class Averaging(ScriptedEvaluator):
        def evaluate_averaged(self, states):
            return ScriptedEvaluator(favour=averaged).evaluate(states)

    for rank in ("12k", "8k"):
        player = Player(Averaging(favour=single), PlayerConfig(SearchConfig(seed=3), strength=strength.Rank(
            strength.kyu_number(rank))))
        moves = {player.genmove(GameState(9), BLACK, StopCondition()).point for _ in range(6)}
        assert moves <= set(averaged), rank
    # without it, the root's own priors
    plain = Player(ScriptedEvaluator(favour=single), PlayerConfig(SearchConfig(seed=3), strength=strength.Rank(12)))
    assert plain.genmove(GameState(9), BLACK, StopCondition()).point in single


def test_a_level_whose_policy_loves_pass_still_searches_ten_moves_it_may_play():
    """Where no pass rule may pass (an open board), pass is left out before the level takes its candidates: the
    ten are the best ten other moves, each searched."""
    player = Player(ScriptedEvaluator(favour=[PASS]), PlayerConfig(SearchConfig(seed=0), strength=strength.Rank(8)))
    assert player.genmove(GameState(9), BLACK, StopCondition()).point != PASS
    root = player.searcher.tree.root
    visited = [root.moves[edge] for edge in range(root.tried) if root.N[edge] > 0]
    assert len(visited) == strength.CANDIDATES and PASS not in visited


def test_the_analysis_human_policy_draws_from_the_averaged_policy_and_reports_the_plain_one():
    """As in GTP, humanPolicy's candidates are the averaged policy's top ten (the search's choice aside), while
    the response's policy stays the root's own evaluation, as KataGo reports it."""
    g = GameState(9).grid
    single = [g.point(r, c) for r in range(2) for c in range(9)]
    averaged = [g.point(r, c) for r in range(5, 7) for c in range(9)]

    class Averaging(ScriptedEvaluator):
        def evaluate_averaged(self, states):
            return ScriptedEvaluator(favour=averaged).evaluate(states)

    # the plain policy favours both sets alike, so that the search visits both; its own top ten lie in `single`
    evaluator, responses = Averaging(favour=single + averaged), []
    query, _ = parse_query({"id": "h", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9,
                            "maxVisits": 400, "includePolicy": True,
                            "overrideSettings": {"humanSLProfile": "rank_12k"}}, AnalysisSettings())
    scheduler = Scheduler(lambda width, height: evaluator, SearchConfig(seed=0), responses.append, workers=1)
    scheduler.submit(query)
    scheduler.close(wait=True)
    (response,) = responses
    state = query.turns[0].state
    assert response["policy"] == [round(float(v), 6) for v in legal_policy(evaluator.evaluate([state]).policy[0],
                                                                           state, illegal=-1.0)]
    best = g.flat(coords.from_gtp(g, response["moveInfos"][0]["move"]))
    drawn = {i for i, p in enumerate(response["humanPolicy"]) if p > 0} - {best}
    assert drawn and drawn <= {g.flat(p) for p in averaged}


def test_human_profiles_map_to_the_nearest_rank():
    assert strength.profile_rank("rank_12k").name == "12k"
    assert strength.profile_rank("preaz_3k").name == "3k"
    assert strength.profile_rank("rank_1d").name == "1d"
    assert strength.profile_rank("rank_20k").name == "12k"  # below the scale: its weakest level
    assert strength.profile_rank("rank_9d") is None and strength.profile_rank("proyear_1990") is None
    for bad in ("rank_0k", "rank_12x", "human", "proyear_19", "rank12k"):
        with pytest.raises(ValueError, match="unknown humanSLProfile"):
            strength.profile_rank(bad)


def test_a_level_resigns_late_and_only_after_searches_in_a_row():
    level = strength.parse_rank("10k")
    counter = ResignCounter(PlayerConfig(resign=ResignConfig(winrate=0.05), strength=level).resign_rule)
    area = 81
    assert not any(counter.update(BLACK, 0.01, move, area) for move in range(2, 40, 2))  # before half the board
    assert [counter.update(BLACK, 0.01, move, area) for move in (40, 42, 44)] == [False, False, True]
    assert not ResignCounter(PlayerConfig(resign=ResignConfig(winrate=None), strength=level).resign_rule).update(
        BLACK, 0.0, 80, area)
    assert PlayerConfig(resign=ResignConfig(winrate=0.05)).resign_rule == ResignConfig(winrate=0.05)  # at max


def test_the_distribution_keeps_to_candidates_bounds_and_the_search_share():
    rng = np.random.default_rng(3)
    for rank in RANKS:
        level = strength.parse_rank(rank).level(81)
        for _ in range(20):
            edges = 30
            prior = rng.dirichlet(np.ones(edges))
            lead = np.where(rng.random(edges) < 0.7, rng.normal(0, 15, edges), np.nan)
            is_pass = np.zeros(edges, dtype=bool)
            is_pass[rng.integers(edges)] = True
            best = int(rng.choice(np.flatnonzero(np.isfinite(lead))))
            p = strength.distribution(level, prior, lead, best, is_pass, 81)
            assert p.sum() == pytest.approx(1.0) and (p >= 0).all()
            top = set(np.argsort(-prior)[:10].tolist()) | {best}
            played = set(np.flatnonzero(p > 0).tolist())
            assert played <= top
            assert all(np.isfinite(lead[i]) and lead[i] >= lead[best] - level.max_loss * 81 for i in played)
            assert p[best] >= level.search_share - 1e-12
            assert not any(is_pass[i] for i in played - {best})
            if is_pass[best]:
                assert played == {best}


@pytest.fixture(scope="module")
def network():
    """The shipped 9x9 network in one symmetry, so that the searches a test compares are the same each time (a
    level's candidates come from its policy averaged over the symmetries, which a test reads alike)."""
    return OnnxEvaluator(NETWORK_9X9, device="cpu", threads=1, symmetry_mode=0)


@pytest.fixture(scope="module")
def positions(network):
    """Positions of a game the network plays with itself, drawing among its top moves (seeded), every 5 moves."""
    rng = np.random.default_rng(11)
    game, found = GameState(9, komi=7.0), []
    while len(game.moves) < 45 and not game.is_over:
        policy = Player(network).policy(game, game.to_play)[:-1]
        top = np.argsort(-policy)[:4]
        point = game.grid.from_flat(int(rng.choice(top, p=policy[top] / policy[top].sum())))
        game.play(point, game.to_play)
        if len(game.moves) % 5 == 0:
            found.append(game.copy())
    return found


def full_search(network, state: GameState):
    return Searcher(network, SearchConfig(seed=0)).search(state, StopCondition(visits=FULL_VISITS)).snapshot


def test_level_moves_are_plausible_and_never_lose_half_the_board(network, positions):
    checked = 0
    for rank in ("12k", "8k", "5k"):
        player = Player(network, PlayerConfig(SearchConfig(seed=1), strength=strength.parse_rank(rank)))
        for state in positions[::2]:
            move = player.genmove(state, state.to_play, StopCondition()).point
            policy = legal_policy(network.evaluate_averaged([state]).policy[0], state)  # of the network itself
            top10 = {state.grid.from_flat(int(i)) for i in np.argsort(-policy)[:10]}
            assert move in top10 or move == PASS, (rank, state.moves)
            full = full_search(network, state)
            after = state.copy()
            after.play(move, state.to_play)
            lead_after = -full_search(network, after).score_lead
            area = state.grid.area
            if full.score_lead > -area / 2:  # the game is not already lost
                assert full.score_lead - lead_after <= area / 2, (rank, state.moves, move)
            checked += 1
    assert checked == 3 * len(positions[::2])


def test_agreement_with_full_strength_falls_as_the_level_drops(network, positions):
    """The level's chance of playing the full-strength move (its choice from FULL_VISITS visits), by sampling the
    level's choice 200 times from each of its searches."""
    best = [full_search(network, state).moves[0].point for state in positions]
    agreement = {}
    for rank in ("12k", "8k", "5k"):
        level = strength.parse_rank(rank).level(81)
        searcher = Searcher(network, SearchConfig(seed=2))
        rng = np.random.default_rng(5)
        hits = 0.0
        for state, point in zip(positions, best):
            searcher.reset()
            searcher.search(state, StopCondition(playouts=level.playouts), strength=level)
            tree = searcher.tree
            draws = [tree.root.moves[level_edge(tree, searcher.config.choice, level, rng)] for _ in range(200)]
            hits += draws.count(point) / len(draws)
        agreement[rank] = hits / len(positions)
    assert agreement["12k"] < agreement["8k"] < agreement["5k"] < 1.0, agreement


def test_a_level_plays_a_handicap_game_out_where_full_strength_resigns():
    """White gives 4 stones on 9x9 to a network sure Black wins: at full strength White resigns from move 20 (a
    quarter of the board), at a level it plays on to half the board."""
    def white_losing(state):
        return 0.99 if state.to_play == BLACK else -0.99

    resign = ResignConfig(winrate=0.05)
    for level, resigns in ((None, True), (strength.parse_rank("5k"), False)):
        player = Player(ScriptedEvaluator(value=white_losing), PlayerConfig(SearchConfig(seed=0), resign=resign,
                                                                            strength=level))
        game = GameState(9, komi=0.5)
        game.place_handicap(fixed_handicap_points(game.grid, 4))
        resigned = False
        while game.move_number < 30 and not resigned:
            choice = player.genmove(game, game.to_play, StopCondition(visits=20))
            resigned = choice.resign
            if not resigned:
                game.play(choice.point, game.to_play)
        assert resigned == resigns and (not resigned or game.move_number >= 20)
