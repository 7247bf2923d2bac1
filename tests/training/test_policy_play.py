"""Policy play: batched games end legal, counted and without own-eye filling; the eye rule on diagrams; sampling
follows the masked softmax that log_policy describes; matches alternate colours."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import features  # noqa: E402
from gtp_engine.board import BLACK, WHITE, Board  # noqa: E402
from gtp_engine.coords import PASS  # noqa: E402
from gtp_engine.game import GameState  # noqa: E402
from gtp_engine.training import export_onnx  # noqa: E402
from gtp_engine.training.alphago import policy_play  # noqa: E402


def position(text: str, to_play: int) -> GameState:
    board = Board.from_ascii(text)
    state = GameState(board.width, board.height)
    for color in (BLACK, WHITE):
        state.place_setup(color, board.stones(color))
    state.set_to_play(to_play)
    return state


def marked(state: GameState, *vertices: tuple[int, int]) -> np.ndarray:
    out = np.zeros(state.grid.area, bool)
    for row, col in vertices:
        out[row * state.grid.width + col] = True
    return out


@pytest.fixture(scope="module")
def nets():
    torch.set_num_threads(1)
    return export_onnx.random_model("tiny", seed=0), export_onnx.random_model("tiny", seed=1)


EYES = """
    . X . . .
    X X X . .
    X . X . .
    O X X O X
    . . X X .
"""


def test_own_eyes_follow_the_rollout_rule():
    state = position(EYES, BLACK)
    # (0,0): a corner eye. (2,1): one opponent diagonal away from the edge, still an eye. (4,4): black
    # neighbours, but on the edge with an opponent diagonal. (4,0): a white neighbour.
    expected = marked(state, (0, 0), (2, 1))
    assert (policy_play.own_eyes([state])[0] == expected).all()
    assert not policy_play.own_eyes([position(EYES, WHITE)])[0].any()
    swapped = EYES.replace("X", "x").replace("O", "X").replace("x", "O")
    assert (policy_play.own_eyes([position(swapped, WHITE)])[0] == expected).all()


def test_candidates_leave_out_eyes_and_pass_only_when_nothing_else_remains():
    state = position("""
        . X X X X
        X X . X X
        X X X X X
        X X X X .
        X X X X X
    """, BLACK)
    masks = policy_play.candidate_masks([state, GameState(5)])
    assert not masks[0, :-1].any() and masks[0, -1]  # only eyes left: pass
    assert masks[1, :-1].all() and not masks[1, -1]  # empty board: every point, no pass


def test_batched_games_end_in_legal_counted_positions_without_eye_filling(nets):
    config = policy_play.PlayConfig(size=5, komi=0.5)
    results = policy_play.play(list(nets), 12, config, np.random.default_rng(0))
    assert len(results) == 12
    for result in results:
        assert result.state.is_over or result.plies == config.move_cap()
        replay = GameState(5, komi=0.5)
        for color, point in result.state.moves:
            assert color == replay.to_play
            if point != PASS:
                assert not policy_play.own_eyes([replay])[0][replay.grid.flat(point)]
            else:
                assert not policy_play.candidate_masks([replay])[0, :-1].any()  # passed only when forced
            replay.play(point)  # checked: raises on an illegal move
        assert result.score == replay.area_score()
        assert result.winner == (BLACK if result.score > 0 else WHITE)
    # Sampling from two different random networks over 12 games: the games differ.
    assert len({tuple(r.state.moves) for r in results}) == 12


def test_sampling_follows_the_masked_softmax_of_log_policy():
    logits = np.array([[2.0, 1.0, 0.0, 5.0, -1.0]])
    candidates = np.array([[True, True, True, False, True]])
    rng = np.random.default_rng(0)
    for temperature in (1.0, 0.5):
        draws = np.concatenate([policy_play.sample(np.repeat(logits, 1000, 0), np.repeat(candidates, 1000, 0),
                                                   temperature, rng) for _ in range(20)])
        frequencies = np.bincount(draws, minlength=5) / len(draws)
        expected = torch.exp(policy_play.log_policy(torch.tensor(logits), torch.tensor(candidates),
                                                    temperature))[0].numpy()
        assert frequencies[3] == 0 and expected[3] == 0
        assert np.abs(frequencies - expected).max() < 0.01


def test_recorded_steps_hold_the_inputs_the_network_was_given(nets):
    results = policy_play.play(list(nets), 4, policy_play.PlayConfig(size=5), np.random.default_rng(1),
                               record=lambda game, ply, agent: agent == 0 and ply < 6)
    for game, result in enumerate(results):
        assert [s.ply for s in result.steps] == [p for p in range(6) if (game + p) % 2 == 0]
        replay = GameState(5)
        for color, point in result.state.moves[:6]:
            step = next((s for s in result.steps if s.ply == replay.move_number), None)
            if step is not None:
                spatial, global_ = features.encode([replay])
                assert (step.spatial == spatial[0]).all() and (step.global_ == global_[0]).all()
                assert step.to_play == color and step.move == replay.grid.flat(point)
                assert step.candidates[step.move]
            replay.play(point)


def test_match_counts_wins_for_a_with_colours_alternating():
    # With komi 30 on 5x5 White always wins, so A (Black in even games) wins exactly the odd games.
    config = policy_play.PlayConfig(size=5, komi=30.0)
    summary = policy_play.match(policy_play.RANDOM, policy_play.RANDOM, 6, config, np.random.default_rng(2),
                                batch=4)
    assert summary["wins"] == summary["wins_as_white"] == 3 and summary["wins_as_black"] == 0
    assert summary["losses"] == 3 and summary["draws"] == 0 and summary["win_rate"] == 0.5
    low, high = summary["interval_95"]
    assert low < 0.5 < high

