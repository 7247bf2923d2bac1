"""REINFORCE: an update raises the log-probability of the winner's moves and lowers the loser's on a scripted game
and leaves the value head alone; the command runs end to end, and a resumed run equals an uninterrupted one."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import features  # noqa: E402
from gtp_engine.board import BLACK, WHITE  # noqa: E402
from gtp_engine.coords import PASS  # noqa: E402
from gtp_engine.game import GameState  # noqa: E402
from gtp_engine.onnx_evaluator import OnnxEvaluator  # noqa: E402
from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import export_onnx, metrics_csv  # noqa: E402
from gtp_engine.training.alphago import policy_gradient, policy_play  # noqa: E402
from gtp_engine.training.alphago.policy_gradient import ReinforceConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def init_checkpoint(tiny_checkpoint_with_seed):
    return tiny_checkpoint_with_seed(3)


def scripted_game() -> policy_play.GameResult:
    """5x5, komi 0.5: Black walls off the C column, White the A column, both pass; Black wins by 9.5. Every
    stone is a recorded step."""
    state = GameState(5, komi=0.5)
    steps = []
    black = [state.grid.point(row, 2) for row in range(5)]
    white = [state.grid.point(row, 0) for row in range(5)]
    for point in [p for pair in zip(black, white) for p in pair]:
        spatial, global_ = features.encode([state])
        candidates = policy_play.candidate_masks([state])[0]
        move = state.grid.flat(point)
        assert candidates[move]
        steps.append(policy_play.Step(state.move_number, 0, spatial[0].astype(np.uint8), global_[0], state.to_play,
                                      candidates, move))
        state.play(point)
    state.play(PASS)
    state.play(PASS)
    return policy_play.GameResult(state, state.area_score(), state.move_number, steps)


def log_p_by_colour(net, game: policy_play.GameResult) -> dict[int, float]:
    sums = {BLACK: 0.0, WHITE: 0.0}
    with torch.no_grad():
        for step in game.steps:
            logits = net.eval()(torch.from_numpy(step.spatial[None]).float(), torch.from_numpy(step.global_[None]))[0]
            log_p = policy_play.log_policy(logits, torch.from_numpy(step.candidates[None]), 1.0)[0, step.move]
            sums[step.to_play] += float(log_p)
    return sums


def test_update_raises_the_winners_moves_and_lowers_the_losers(one_thread):
    game = scripted_game()
    assert game.score == 9.5 and game.winner == BLACK
    net = export_onnx.random_model("tiny", seed=0)
    value_before = {k: v.clone() for k, v in net.state_dict().items() if k.startswith(("value_", "ownership_"))}
    before = log_p_by_colour(net, game)
    optimizer = torch.optim.SGD(policy_gradient.trained_parameters(net), lr=0.02)
    advantage = [game.reward(step.to_play) for step in game.steps]
    terms = policy_gradient.update(net, optimizer, game.steps, advantage, games=1, temperature=1.0, chunk=4)
    after = log_p_by_colour(net, game)
    assert terms["moves"] == 10
    assert after[BLACK] > before[BLACK] + 0.01
    assert after[WHITE] < before[WHITE] - 0.01
    for key, value in value_before.items():
        assert torch.equal(net.state_dict()[key], value), key


def test_mean_baseline_centres_the_rewards():
    rewards = np.array([1.0, -1.0, 1.0, 1.0])
    assert policy_gradient.advantages(rewards, "none").tolist() == [1.0, -1.0, 1.0, 1.0]
    assert policy_gradient.advantages(rewards, "mean").tolist() == [0.5, -1.5, 0.5, 0.5]


def config(**changes) -> ReinforceConfig:
    values = dict(iterations=2, games=4, size=5, pool_every=1, lr=0.01, baseline="none", device="cpu", chunk=64)
    values.update(changes)
    return ReinforceConfig(**values)


def test_a_resumed_run_equals_an_uninterrupted_one(init_checkpoint, tmp_path, one_thread):
    whole = policy_gradient.reinforce(config(), tmp_path / "whole", str(init_checkpoint), export=False,
                                      progress=False)
    assert whole["finished"] and whole["iteration"] == 2
    first = policy_gradient.reinforce(config(iterations=1), tmp_path / "split", str(init_checkpoint), export=False,
                                      progress=False)
    assert first["iteration"] == 1 and not (tmp_path / "split" / "pool" / "0002.pt").exists()
    second = policy_gradient.reinforce(config(), tmp_path / "split", export=False, progress=False)
    assert second["iteration"] == 2
    a = checkpoint_lib.load(tmp_path / "whole" / "checkpoint.pt")
    b = checkpoint_lib.load(tmp_path / "split" / "checkpoint.pt")
    assert all(torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict)
    assert a.provenance["pool"] == b.provenance["pool"] == ["pool/0000.pt", "pool/0001.pt", "pool/0002.pt"]
    rows = [metrics_csv.read(tmp_path / run / "metrics.csv") for run in ("whole", "split")]
    for row_a, row_b in zip(*rows, strict=True):
        assert {k: v for k, v in row_a.items() if k != "seconds"} == {k: v for k, v in row_b.items()
                                                                     if k != "seconds"}
    # The pool's first member is the initial network, and the learner moved away from it.
    init = checkpoint_lib.load(init_checkpoint).state_dict
    pool0 = checkpoint_lib.load(tmp_path / "whole" / "pool" / "0000.pt").state_dict
    assert all(torch.equal(init[k], pool0[k]) for k in init)
    assert not torch.equal(a.state_dict["policy_out.weight"], init["policy_out.weight"])


def test_resuming_with_other_settings_is_refused(init_checkpoint, tmp_path, one_thread):
    policy_gradient.reinforce(config(iterations=1), tmp_path, str(init_checkpoint), export=False, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        policy_gradient.reinforce(config(lr=0.1), tmp_path, export=False, progress=False)
    with pytest.raises(ValueError, match="give --init"):
        policy_gradient.reinforce(config(), tmp_path / "empty", export=False, progress=False)


def test_command_runs_two_iterations_and_exports_a_loadable_network(init_checkpoint, tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "gtp_engine.training", "--threads", "1", "reinforce", "--init",
               str(init_checkpoint), "--out", str(run), "--iterations", "2", "--games", "4", "--size", "5",
               "--pool-every", "1", "--device", "cpu", "--no-progress"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    rows = metrics_csv.read(run / "metrics.csv")
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert all(int(r["wins"]) + int(r["losses"]) + int(r["draws"]) == 4 for r in rows)
    evaluator = OnnxEvaluator(run / "model.onnx", device="cpu", symmetry_mode="none")
    batch = evaluator.evaluate([GameState(5)])
    assert batch.policy.shape == (1, 26)
