"""AlphaGo's options on the command line: --lambda with a rollout policy, --value-weights, --rollouts; where the
rollout policy is found, and the errors for a missing or bad one."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from engine_process import ROOT

from gtp_engine import config, network_loader
from gtp_engine.config import ConfigError
from gtp_engine.game import GameState
from gtp_engine.mixed_evaluator import MixedEvaluator
from gtp_engine.network_loader import NetworkUnavailable
from gtp_engine.rollout import RolloutPolicy

VERTEX = re.compile(r"^(?:[A-HJ-T](?:1[0-9]|[1-9])|pass)$")


@pytest.fixture
def rollout_file(tmp_path):
    path = tmp_path / "rollout.npz"
    RolloutPolicy.uniform().save(path, board_size=9)
    return path


def test_options_are_typed_and_checked():
    built = config.build({"lambda": "0.5", "rollouts": "2", "rollout-weights": "r.npz", "value-weights": "v.onnx"})
    assert built.rollout == config.RolloutOptions(mix=0.5, weights="r.npz", count=2)
    assert built.network.value_weights == "v.onnx"
    assert config.build().rollout.mix == 0.0  # the Zero setting by default
    for layer, words in (({"lambda": "1.5"}, "--lambda"), ({"lambda": "-0.1"}, "--lambda"),
                         ({"rollouts": "0"}, "--rollouts")):
        with pytest.raises(ConfigError, match=words):
            config.build(layer)


def test_genmove_with_lambda_and_a_separate_value_network(engine, net_args, rollout_file, tiny_onnx_model):
    gtp = engine(*net_args, "--lambda", "0.5", "--rollout-weights", str(rollout_file),
                 "--value-weights", str(tiny_onnx_model), "--rollouts", "2", "--visits", "8")
    gtp.ok("boardsize 9")
    gtp.ok("clear_board")
    first = gtp.ok("genmove b", timeout=120)
    assert VERTEX.match(first)
    gtp.ok("play w E5" if first != "E5" else "play w D4")
    assert VERTEX.match(gtp.ok("genmove b", timeout=120))
    assert "Traceback" not in gtp.stderr_text()


def test_a_bad_rollout_file_stops_the_engine_with_its_name(tmp_path):
    bad = tmp_path / "broken.npz"
    bad.write_bytes(b"nonsense")
    result = subprocess.run([sys.executable, "-m", "gtp_engine", "--lambda", "0.5", "--rollout-weights", str(bad)],
                            input="", capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 2
    assert f"rollout weights {bad}: not a readable .npz file" in result.stderr
    missing = tmp_path / "missing.npz"
    result = subprocess.run([sys.executable, "-m", "gtp_engine", "--lambda", "1", "--rollout-weights", str(missing)],
                            input="", capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 2 and f"rollout weights {missing}: no such file" in result.stderr


def test_without_a_rollout_policy_for_the_size_genmove_says_what_is_missing(engine, tmp_path, tiny_onnx_model):
    gtp = engine("--weights", str(tiny_onnx_model), "--weights-dir", str(tmp_path), "--device", "cpu",
                 "--lambda", "0.5", "--visits", "8")
    gtp.ok("boardsize 9")
    reply = gtp("genmove b")
    assert not reply.ok
    assert f"no rollout policy for 9x9 boards in {tmp_path}; give one with --rollout-weights FILE" in reply.text
    assert gtp.ok("name")  # the engine is still there


def test_the_shipped_rollout_policy_is_the_sizes_own_else_the_19x19_one(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    folders = (first, second)
    assert network_loader.shipped_rollout(9, 9, folders) is None
    (second / "rollout-19x19.npz").write_bytes(b"")
    assert network_loader.shipped_rollout(9, 9, folders) == second / "rollout-19x19.npz"
    (second / "rollout-9x9.npz").write_bytes(b"")
    assert network_loader.shipped_rollout(9, 9, folders) == second / "rollout-9x9.npz"
    assert network_loader.shipped_rollout(13, 13, folders) == second / "rollout-19x19.npz"


def test_the_loader_mixes_only_when_asked(tmp_path, tiny_onnx_model, rollout_file):
    def player(**options):
        built = config.build({"device": "cpu", "weights": str(tiny_onnx_model), "weights-dir": str(tmp_path),
                              **options})
        return network_loader.NetworkLoader(built).get(9, 9)

    assert not isinstance(player().evaluator, MixedEvaluator)  # the Zero setting: the network alone
    mixed = player(**{"lambda": "0.25", "rollout-weights": str(rollout_file), "rollouts": "3"}).evaluator
    assert isinstance(mixed, MixedEvaluator)
    assert (mixed.mix, mixed.rollouts, mixed.value) == (0.25, 3, None)
    split = player(**{"value-weights": str(tiny_onnx_model)}).evaluator
    assert isinstance(split, MixedEvaluator) and split.value is not None and split.mix == 0.0
    with pytest.raises(NetworkUnavailable, match="no rollout policy for 9x9"):
        player(**{"lambda": "0.25"})
    (tmp_path / "rollout-9x9.npz").write_bytes(b"bad")
    with pytest.raises(NetworkUnavailable, match="rollout-9x9.npz: not a readable"):
        player(**{"lambda": "0.25"})
    batch = mixed.evaluate([GameState(9)])
    assert np.isfinite(batch.value).all() and -1 <= batch.value[0] <= 1
