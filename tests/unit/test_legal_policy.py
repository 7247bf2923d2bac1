"""The policy over legal moves (evaluator.legal_policy), and the three reports of it that must agree with it:
kata-raw-nn (NAN on illegal moves), the JSON analysis engine's policy (-1), and Player.policy (0; gogui-policy,
minmoves)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from search_support import position

from gtp_engine.analysis.query import parse_query
from gtp_engine.analysis.scheduler import Scheduler
from gtp_engine.analysis.settings import AnalysisSettings
from gtp_engine.board import BLACK, WHITE
from gtp_engine.config import PlayOptions
from gtp_engine.evaluator import UniformEvaluator, legal_policy
from gtp_engine.game import Rules
from gtp_engine.gtp.commands import Session
from gtp_engine.gtp.protocol import Stream, parse
from gtp_engine.player import MoveLimits, Player, PlayerConfig
from gtp_engine.search import SearchConfig

# Black to move: B4 is White's point, and A5 is suicide for Black.
BOARD = """
    . O . . .
    O . . . .
    . . . . .
    . . . . .
    . . . . .
"""


class SkewedEvaluator(UniformEvaluator):
    """A network whose policy is not normalised over the legal moves: it rises with the flat index over every
    point, occupied and illegal ones too, so leaving those out changes every probability."""

    def evaluate(self, states):
        batch = super().evaluate(states)
        weights = np.arange(1, batch.policy.shape[1] + 1, dtype=np.float32)
        batch.policy = np.tile(weights / weights.sum(), (len(states), 1))
        return batch


def test_the_policy_is_renormalised_over_the_legal_moves_with_the_fill_asked_for():
    state = position(BOARD, BLACK)
    raw = SkewedEvaluator().evaluate([state]).policy[0]
    legal = state.legal_mask()
    assert not legal.all()
    for fill in (0.0, -1.0):
        policy = legal_policy(raw, state, illegal=fill)
        assert policy.dtype == np.float64 and policy[legal].sum() == pytest.approx(1.0)
        assert np.all(policy[~legal] == fill)
        assert policy[legal] == pytest.approx(raw[legal] / raw[legal].sum())
    assert np.isnan(legal_policy(raw, state, illegal=np.nan)[~legal]).all()
    # A network that gives the legal moves nothing: uniform over them.
    nothing = np.where(legal, 0.0, 1.0)
    assert legal_policy(nothing, state)[legal] == pytest.approx(np.full(legal.sum(), 1 / legal.sum()))


def test_player_policy_is_the_legal_policy_for_the_colour_asked():
    evaluator = SkewedEvaluator()
    player = Player(evaluator, PlayerConfig(SearchConfig(seed=0)))
    game = position(BOARD, BLACK)
    for color in (BLACK, WHITE):
        state = game.with_to_play(color)
        expected = legal_policy(evaluator.evaluate([state]).policy[0], state)
        assert np.array_equal(player.policy(game, color), expected)


class _Players:
    def __init__(self, player: Player):
        self.player = player

    def prepare(self, width, height):
        return None

    def get(self, width, height):
        return self.player

    def clear_cache(self):
        pass


class _Discard:
    def write(self, text):
        pass


def test_kata_raw_nn_writes_the_legal_policy_with_nan_on_illegal_moves():
    evaluator = SkewedEvaluator()
    session = Session(_Players(Player(evaluator, PlayerConfig(SearchConfig(seed=0)))), MoveLimits(),
                      PlayOptions(), Rules.named("chinese"), board_size=5)
    for command in ("play w b5", "play w a4"):
        session.handler(command.split()[0])(parse(command), Stream(parse(command), _Discard(), threading.Event(),
                                                                   threading.Event()))
    command = parse("kata-raw-nn 0")
    lines = session.handler("kata-raw-nn")(command, Stream(command, _Discard(), threading.Event(),
                                                           threading.Event())).split("\n")
    at = lines.index("policy")
    written = [float(v) for row in lines[at + 1: at + 6] for v in row.split()] + [float(lines[at + 6].split()[1])]
    state = session.game
    expected = legal_policy(evaluator.evaluate([state]).policy[0], state, illegal=np.nan)
    assert np.array_equal(np.isnan(written), np.isnan(expected)) and np.isnan(expected).sum() == 3
    assert np.nan_to_num(written, nan=0.0) == pytest.approx(np.nan_to_num(expected, nan=0.0), abs=1e-6)


def test_the_json_engines_policy_is_the_legal_policy_with_minus_one_on_illegal_moves():
    evaluator = SkewedEvaluator()
    responses = []
    query, _ = parse_query({"id": "p", "moves": [["W", "B5"], ["W", "A4"]], "rules": "chinese", "boardXSize": 5,
                            "boardYSize": 5, "maxVisits": 4, "includePolicy": True}, AnalysisSettings())
    scheduler = Scheduler(lambda width, height: evaluator, SearchConfig(seed=0), responses.append, workers=1)
    scheduler.submit(query)
    scheduler.close(wait=True)
    (response,) = responses
    state = query.turns[0].state
    expected = legal_policy(evaluator.evaluate([state]).policy[0], state, illegal=-1.0)
    assert response["policy"] == [round(float(v), 6) for v in expected]
    assert response["policy"].count(-1.0) == 3  # B5 and A4 taken, A5 suicide for Black

