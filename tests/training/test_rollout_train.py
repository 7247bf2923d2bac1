"""Rollout policy training on the fixture games: samples point at the moves played, games are held out by hash,
the fit beats the uniform policy, and the command line writes a weights file the engine reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")  # the training command line imports it

from gtp_engine import rollout, sgf_io  # noqa: E402
from gtp_engine.coords import PASS  # noqa: E402
from gtp_engine.training.alphago import rollout_train  # noqa: E402
from gtp_engine.training.__main__ import main  # noqa: E402
from gtp_engine.training.alphago.rollout_train import RolloutTrainConfig  # noqa: E402
from gtp_engine.training.splits import record_key, split_of  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
CONFIG = RolloutTrainConfig(size=9, val_fraction=0.3, min_pattern_count=1, epochs=40, lr=0.1)


@pytest.mark.parametrize("fraction", [0.1, 0.3])
def test_samples_hold_the_played_moves_and_games_are_held_out_by_hash(fraction):
    config = dataclasses.replace(CONFIG, val_fraction=fraction)
    train, val, counts = rollout_train.collect([FIXTURES], config, progress=False)
    records = [sgf_io.load_sgf_file(p) for p in sorted(FIXTURES.glob("*.sgf"))]
    held_out = [r for r in records if split_of(record_key(r), fraction) == "val"]
    assert counts["games"] == len(records) and counts["val_games"] == len(held_out) > 0
    assert len(train) + len(val) == sum(len(r.moves) for r in records)
    assert val.board_moves == sum(1 for r in held_out for _, p in r.moves if p != PASS)
    if len(held_out) > 1:
        return
    # Replay the one held-out game on its own: each sample's target candidate is the move played.
    record = held_out[0]
    state = record.to_game(max_moves=0)
    for number, (color, point) in enumerate(record.moves):
        features = rollout.game_features(state)
        target = val.targets[number]
        if point == PASS:
            assert target == -1
        else:
            assert features.flat[target] == state.grid.flat(point)
            assert np.array_equal(val.groups[val.starts[number] + target], features.groups[target])
        state.play(point, color)


def test_the_fit_beats_the_uniform_policy_on_the_games_it_saw(tmp_path):
    summary = rollout_train.train_rollout([FIXTURES], tmp_path / "r.npz", CONFIG, progress=False)
    train, _, _ = rollout_train.collect([FIXTURES], CONFIG, progress=False)
    counts = np.diff(train.starts)[train.targets >= 0]
    uniform_loss = float(np.mean(np.log(counts)))
    assert summary["train"]["log_loss"] < 0.8 * uniform_loss
    assert summary["train"]["accuracy"] > 2 * float(np.mean(1 / counts))
    assert 0 <= summary["val"]["accuracy"] <= 1
    policy = rollout.RolloutPolicy.load(tmp_path / "r.npz")
    assert policy.info["board_size"] == 9 and policy.info["val_accuracy"] == pytest.approx(summary["val"]["accuracy"])
    assert len(policy.vocabulary) == summary["vocabulary"] > 0


def test_the_accuracy_of_the_uniform_policy_is_chance():
    train, _, _ = rollout_train.collect([FIXTURES], CONFIG, progress=False)
    figures = rollout_train.evaluate(train, rollout.RolloutPolicy.uniform())
    counts = np.diff(train.starts)[train.targets >= 0]
    assert figures["accuracy"] == pytest.approx(float(np.sum(1 / counts)) / train.board_moves)
    assert figures["log_loss"] == pytest.approx(float(np.mean(np.log(counts))))


def test_the_command_line_writes_weights_and_explains_a_wrong_size(tmp_path, capsys):
    out = tmp_path / "rollout-9x9.npz"
    assert main(["rollout-train", str(FIXTURES), "--out", str(out), "--size", "9", "--val-fraction", "0.3",
                 "--epochs", "1", "--games", "6", "--no-progress"]) == 0
    assert rollout.RolloutPolicy.load(out).info["games"] == 6
    assert '"accuracy"' in capsys.readouterr().err
    assert main(["rollout-train", str(FIXTURES), "--out", str(tmp_path / "x.npz"), "--size", "19",
                 "--no-progress"]) == 1
    assert "no 19x19 games to train on or to hold out" in capsys.readouterr().err
