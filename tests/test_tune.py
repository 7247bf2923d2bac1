"""tools/tune.py: SPSA and its verification match end to end on a tiny random network (seconds), resuming from
the journal, nothing written without --out, throughput-scaled visits for costly parameters, SPSA's arithmetic,
clear errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools import tune

SMALL = ["--size", "5", "--visits", "4", "--parallel", "2", "--opening-moves", "1", "--throughput-positions", "2",
         "--throughput-rounds", "1", "--report-every", "1"]


def journal(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / tune.JOURNAL).read_text().splitlines()]


def test_spsa_runs_end_to_end_with_its_verification_and_resumes(tiny_onnx_model, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["spsa", "--weights", str(tiny_onnx_model), *SMALL, "--pairs", "3", "--params", "c_puct,lcb_z",
            "--verify-games", "4", "--out", str(out)]
    assert tune.main(argv) == 0
    printed = capsys.readouterr().out
    lines = journal(out)
    assert len(lines) == 3 and sorted(line["k"] for line in lines) == [1, 2, 3]
    assert all(-2 <= line["result"] <= 2 and len(line["theta"]) == 2 for line in lines)
    c_puct, lcb_z = lines[-1]["theta"]
    assert f"c_puct={round(c_puct, 4):g}" in printed and f"lcb_z={round(lcb_z, 4):g}" in printed
    assert f"config file lines (gtp-engine --config FILE):\nc-puct = {round(c_puct, 4):g}\nlcb-z = " in printed
    verify = journal(out / "verify")
    games = [line for line in verify if "pair" in line]
    assert len(games) == 4 and {line["candidate_black"] for line in games} == {True, False}
    assert "in 4 games, score" in printed and "(95%: " in printed

    assert tune.main(argv) == 0  # resumes: every pair and game is in the journals already
    assert "resuming after 3 pairs" in capsys.readouterr().err
    assert len(journal(out)) == 3 and len([line for line in journal(out / "verify") if "pair" in line]) == 4

    assert tune.main([*argv[:-2], "--visits", "5", "--out", str(out)]) == 2
    assert "other settings (visits)" in capsys.readouterr().err


def test_match_scales_a_costly_candidate_by_throughput_and_writes_nothing_without_out(
        tiny_onnx_model, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["match", "--weights", str(tiny_onnx_model), *SMALL, "--candidate", "batch_size=1,virtual_loss=2",
            "--games", "2"]
    assert tune.main(argv) == 0
    captured = capsys.readouterr()
    assert "throughput (visits per CPU second" in captured.err
    line = next(line for line in captured.out.splitlines() if line.startswith("candidate "))
    assert "batch_size=1, virtual_loss=2" in line and "in 2 games" in line
    candidate_visits = int(line.split("(")[1].split(" v. ")[0])
    assert candidate_visits >= 1
    assert list(tmp_path.iterdir()) == []


def test_spsa_steps_toward_the_winning_side_and_stays_in_range():
    spsa = tune.Spsa([tune.SPECS["c_puct"], tune.SPECS["lcb_z"]], pairs=100, r_end=0.02)
    theta = np.array([1.0, 3.0])
    flip = np.array([1.0, -1.0])
    up = spsa.update(theta, 1, flip, 2.0)
    assert up[0] > 1.0 and up[1] < 3.0
    assert np.allclose(spsa.update(theta, 1, flip, 0.0), theta)
    assert np.all(spsa.c_k(1) > spsa.c_k(100)) and np.allclose(spsa.c_k(100), [0.15, 0.3])
    last_step = spsa.update(theta, 100, flip, 1.0) - theta
    assert np.allclose(np.abs(last_step), [0.02 * 0.15, 0.02 * 0.3], rtol=0.05)
    low, high = tune.SPECS["lcb_z"].low, tune.SPECS["c_puct"].high
    assert spsa.update(np.array([high, low]), 1, flip, 1e6).tolist() == [high, low]


def test_every_parameter_is_a_config_file_option_set_where_the_engine_reads_it():
    for name, spec in tune.SPECS.items():
        value = spec.high if spec.integer else (spec.low + spec.high) / 2
        built = tune.make_config({name: value})
        assert tune.value_of(built, name, 9) == value
        assert tune.value_of(tune.make_config({}), name, 9) != value  # so the value above really moved
    assert tune.value_of(tune.make_config({}), "score_scale", 9) == 4.5  # unset: half the side of the board


@pytest.mark.parametrize("text, words", [
    ("c_puct", "expected NAME=VALUE"),
    ("cpuct=1", "expected NAME=VALUE"),
    ("c_puct=x", "c_puct: expected a number"),
    ("lcb_z=7", "outside 0.1 .. 6"),
])
def test_bad_values_are_named(text, words):
    with pytest.raises(tune.TuneError, match=words):
        tune.parse_values(text)


def test_spsa_refuses_parameters_that_change_the_cost_of_a_visit(tmp_path, capsys):
    assert tune.main(["spsa", "--weights", str(tmp_path / "none.onnx"), "--params", "c_puct,batch_size"]) == 2
    assert "batch_size changes the cost of a visit" in capsys.readouterr().err


def test_tuned_values_in_a_config_file_reach_the_engines_searcher(tiny_onnx_model, tmp_path):
    """What `spsa` prints as config file lines, given to the engine, is what its Searcher searches with."""
    from gtp_engine.__main__ import load_config
    from gtp_engine.network_loader import NetworkLoader

    path = tmp_path / "engine.toml"
    path.write_text("c-puct = 1.7\nfpu-reduction = 0.3\nlcb-z = 2.5\nscore-utility = 0.05\nbatch = 16\n")
    engine_config = load_config(["--config", str(path), "--weights", str(tiny_onnx_model), "--device", "cpu"])
    searcher = NetworkLoader(engine_config).get(9, 9).searcher
    cfg = searcher.config
    assert (cfg.tree.c_puct, cfg.tree.fpu_reduction, cfg.choice.lcb_z, cfg.tree.score_utility, cfg.batch_size) == \
        (1.7, 0.3, 2.5, 0.05, 16)
    assert cfg == tune.make_config({"c_puct": 1.7, "fpu_reduction": 0.3, "lcb_z": 2.5, "score_utility": 0.05,
                                    "batch_size": 16})


def test_a_games_root_takes_the_sides_policy_temperature():
    """A side's root_policy_temperature reaches its searches' roots, as the engine's Searcher sets it."""
    from gtp_engine.evaluator import UniformEvaluator
    from gtp_engine.game import GameState

    class Peaked(UniformEvaluator):  # a policy with a clear favourite, so that a temperature changes it
        def evaluate(self, states):
            batch = super().evaluate(states)
            batch.policy[:, 0] += 1.0
            batch.policy /= batch.policy.sum(axis=1, keepdims=True)
            return batch

    for temperature in (1.0, 2.0):
        side = tune.Side(tune.make_config({"root_policy_temperature": temperature}), 8)
        game = tune.Game(Peaked(), GameState(5), side, side, tag=0)
        batch = game.evaluator.evaluate([game.tree.root_state])
        game.tree.finish(game.tree.gather(1), batch)
        game.advance()
        root = game.tree.root
        if temperature == 1.0:
            assert game.tree.root_prior is None
        else:
            expected = root.prior ** 0.5 / (root.prior ** 0.5).sum()
            np.testing.assert_allclose(game.tree.root_prior, expected)
            assert game.tree.root_prior.max() < root.prior.max()
