"""Value network: one kept position per game with the result's sign from the side to move there, shards that
dataset.py reads, value training that leaves the policy alone (trainable head), and an exported value network
that passes the parity check and loads in the engine."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine.board import BLACK, WHITE  # noqa: E402
from gtp_engine.coords import PASS  # noqa: E402
from gtp_engine.game import GameState  # noqa: E402
from gtp_engine.onnx_evaluator import OnnxEvaluator  # noqa: E402
from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import dataset, export_onnx, metrics_csv, probes  # noqa: E402
from gtp_engine.training.alphago import policy_play, value_net  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def nets(tiny_checkpoint_with_seed):
    return [tiny_checkpoint_with_seed(3), tiny_checkpoint_with_seed(4)]  # the SL and the RL network


@pytest.fixture(scope="module")
def value_data(nets, tmp_path_factory):
    out = tmp_path_factory.mktemp("value") / "data"
    torch.set_num_threads(1)
    config = value_net.ValueDataConfig(games=40, batch=20, max_ply=12, size=5, komi=0.5, val_fraction=0.25,
                                       shard_samples=16, device="cpu")
    sidecar = value_net.make_data(str(nets[0]), str(nets[1]), out, config, progress=False)
    return out, sidecar


def scripted_result(kept_ply: int) -> policy_play.GameResult:
    """Black walls off the C column, White the A column (Black wins by 9.5); the step at kept_ply is recorded."""
    state = GameState(5, komi=0.5)
    black = [state.grid.point(row, 2) for row in range(5)]
    white = [state.grid.point(row, 0) for row in range(5)]
    steps = []
    for point in [p for pair in zip(black, white) for p in pair] + [PASS, PASS]:
        if state.move_number == kept_ply:
            spatial, global_ = policy_play.features.encode([state])
            steps.append(policy_play.Step(kept_ply, value_net.RL, spatial[0].astype(np.uint8), global_[0],
                                          state.to_play, policy_play.candidate_masks([state])[0],
                                          state.grid.flat(point)))
        state.play(point)
    return policy_play.GameResult(state, state.area_score(), state.move_number, steps)


def test_the_kept_sample_carries_the_result_of_the_side_to_move():
    black_to_move = value_net.sample_of(scripted_result(4))
    white_to_move = value_net.sample_of(scripted_result(5))
    assert black_to_move["to_play"][0] == BLACK and white_to_move["to_play"][0] == WHITE
    assert black_to_move["value"][0] == 0 and black_to_move["score"][0] == 9.5  # Black won
    assert white_to_move["value"][0] == 1 and white_to_move["score"][0] == -9.5
    assert (black_to_move["game_ownership"][0] == scripted_result(4).state.area_ownership()).all()
    # The stored position is the one at the kept ply: two black and two white stones.
    assert (black_to_move["cells"][0] > 0).sum() == 4 and (white_to_move["cells"][0] > 0).sum() == 5


def test_value_data_keeps_one_position_per_game(value_data):
    out, sidecar = value_data
    counts = sidecar["counts"]
    assert counts["games_played"] == 40
    assert counts["samples"] + counts["ended_before_kept_position"] == 40
    assert sidecar["samples"]["train"] + sidecar["samples"]["val"] == counts["samples"] > 30
    assert sidecar["samples"]["val"] > 0
    for split in dataset.SPLITS:
        arrays = dataset.Shards([out], split).head(10_000)
        games = len(arrays["game_key"])
        assert len(arrays["value"]) == games  # one sample per game
        assert len(set(arrays["game_key"].tolist())) == games
        assert set(arrays["value"].tolist()) <= {0, 1}  # komi 0.5: no draws
        # The result's sign agrees with the stored final lead of the side to move, and the position is the one
        # after move U <= 12 (the kept ply is U, 0-based U - 1 plus one).
        assert ((arrays["value"] == 0) == (arrays["score"] > 0)).all()
        kept = [int(source.split()[3]) for source in arrays["game_source"]]
        assert all(1 <= k <= 12 for k in kept)
        stones = (arrays["cells"] > 0).sum(axis=1)
        assert (stones <= np.array(kept)).all()


def test_value_training_of_the_head_leaves_the_policy_alone_and_exports(value_data, nets, tmp_path):
    out, _ = value_data
    run = tmp_path / "run"
    command = [sys.executable, "-m", "gtp_engine.training", "--threads", "1", "value-train", "--data", str(out),
               "--init", str(nets[0]), "--out", str(run), "--steps", "4", "--eval-every", "2", "--batch-size",
               "8", "--lr", "0.01", "--device", "cpu", "--no-progress"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    rows = metrics_csv.read(run / "metrics.csv")
    assert [int(r["step"]) for r in rows] == [2, 4]
    trained = checkpoint_lib.load(run / "checkpoint.pt")
    start = checkpoint_lib.load(nets[0])
    changed = {k for k in start.state_dict if not torch.equal(start.state_dict[k], trained.state_dict[k])}
    assert changed and all(k.startswith("value_") for k in changed)
    evaluator = OnnxEvaluator(run / "model.onnx", device="cpu", symmetry_mode="none")
    metadata = evaluator.info.metadata
    assert metadata["parity_max_abs_diff"] <= export_onnx.TOLERANCE
    assert "value network" in metadata["training"]["notes"]
    states = probes.random_positions(5, 4, np.random.default_rng(0))
    spatial, global_ = policy_play.features.encode(states)
    net = trained.build_model()
    with torch.no_grad():
        expected = net(torch.from_numpy(spatial), torch.from_numpy(global_))
    got = evaluator.run(spatial, global_)
    assert np.abs(got[1] - expected[1].numpy()).max() < 1e-4  # the value output, as torch computes it


def test_evaluate_checkpoints_reports_cross_entropy_and_mse(value_data, nets):
    out, _ = value_data
    losses = value_net.evaluate_checkpoints([str(p) for p in nets], str(out), "train", device="cpu")
    for path in nets:
        terms = losses[str(path)]
        assert terms["samples"] > 20 and terms["value_loss"] > 0 and 0 <= terms["value_mse"] <= 4
    # A network that always says "the side to move wins" with certainty: MSE 4 on losses, 0 on wins.
    net = export_onnx.random_model("tiny", seed=3)
    with torch.no_grad():
        net.value_out.weight.zero_()
        net.value_out.bias.copy_(torch.tensor([30.0, 0.0, 0.0, 0.0]))
    arrays = dataset.Shards([out], "train").head(10_000)
    terms = value_net.evaluate(net, arrays, 5, 5)
    lost = float((arrays["value"] == 1).mean())
    assert terms["value_mse"] == pytest.approx(4 * lost, abs=1e-4)
    assert terms["value_loss"] == pytest.approx(30 * lost, abs=1e-3)
