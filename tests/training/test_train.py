"""Supervised training: the command runs end to end on a few games (metrics, plot, checkpoint, ONNX that passes
the parity check and loads in the engine), a resumed run equals an uninterrupted one, resumption refuses other
settings, the learning-rate schedule, and masked losses."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import model as model_lib  # noqa: E402
from gtp_engine.training import sgf_ingest, train  # noqa: E402
from gtp_engine.training.train import TrainConfig  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    out = tmp_path_factory.mktemp("shards")
    # Half the games held out: with these fixtures' keys that is 3 of the 7 kept games.
    config = sgf_ingest.IngestConfig(size=9, min_moves=10, val_fraction=0.5, workers=1, shard_samples=60)
    sidecar = sgf_ingest.ingest([FIXTURES], out, config, progress=False)
    assert sidecar["games"]["val"] > 0 and sidecar["games"]["train"] > 0
    return out


def config_for(shards, **changes) -> TrainConfig:
    values = dict(data=(str(shards),), preset="tiny", batch_size=16, steps=6, eval_every=3, warmup_steps=2,
                  val_samples=64, window_samples=64, device="cpu", lr=3e-3)
    values.update(changes)
    return TrainConfig(**values)


def test_command_trains_end_to_end_and_exports_a_model_that_passes_parity(shards, tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "gtp_engine.training", "--threads", "1", "train", "--data", str(shards),
               "--out", str(run), "--preset", "tiny", "--steps", "6", "--eval-every", "3", "--batch-size", "16",
               "--val-samples", "64", "--device", "cpu", "--no-progress"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""  # logs and summaries go to stderr
    rows = train.read_metrics(run / train.METRICS)
    assert [row["step"] for row in rows] == [3, 6]
    assert all(0.0 <= row["val_policy_top1"] <= 1.0 and math.isfinite(row["val_value_loss"]) for row in rows)
    assert (run / train.PLOT).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((run / "config.json").read_text())["steps"] == 6

    from gtp_engine.onnx_evaluator import METADATA_KEY, OnnxEvaluator
    import onnx

    model = onnx.load(str(run / train.ONNX))
    metadata = json.loads({p.key: p.value for p in model.metadata_props}[METADATA_KEY])
    assert metadata["parity_max_abs_diff"] <= 1e-4
    assert metadata["training"]["steps"] == 6 and metadata["trained_sizes"] == [9]
    # The rules the samples carried, from the shards' sidecar through the checkpoint to the metadata.
    from gtp_engine import sgf_io
    from gtp_engine.network_evaluator import RuleInputs

    records = [sgf_io.load_sgf(data) for _, data in sgf_io.read_sgf_files(FIXTURES)]
    recorded = {RuleInputs.of(record.game_rules()) for record in records}
    assert {RuleInputs.from_json(rules) for rules in metadata["trained_rules"]} <= recorded
    # The exported network computes what the checkpoint computes.
    net = checkpoint_lib.load(run / train.CHECKPOINT).build_model()
    from gtp_engine.game import GameState

    state = GameState(9, komi=7.0)
    evaluator = OnnxEvaluator(run / train.ONNX, device="cpu", symmetry_mode="none")
    assert set(evaluator.info.trained_rules) == {RuleInputs.from_json(rules) for rules in metadata["trained_rules"]}
    got = evaluator.evaluate([state])
    from gtp_engine import features

    spatial, global_ = features.encode([state])
    with torch.no_grad():
        policy = torch.softmax(net(torch.from_numpy(spatial), torch.from_numpy(global_))[0], dim=1).numpy()
    assert np.allclose(got.policy, policy, atol=1e-4)


def test_the_sidecar_counts_the_samples_of_each_rule_input(shards):
    sidecar = json.loads((shards / "index.json").read_text())
    assert len(sidecar["rule_samples"]) == len(sidecar["rules"]) >= 1
    assert sum(sidecar["rule_samples"]) == sidecar["samples"]["train"] + sidecar["samples"]["val"]


def test_rule_inputs_in_too_few_samples_are_not_trained_rules(caplog):
    from types import SimpleNamespace

    chinese = {"ko": "positional", "scoring": "area", "suicide": False}
    japanese = {"ko": "simple", "scoring": "territory", "suicide": False}
    aga = {"ko": "situational", "scoring": "area", "suicide": False}

    def trained(*sidecars):
        trainer = SimpleNamespace(train_set=SimpleNamespace(sidecars=list(sidecars)))
        return train._Trainer.trained_rules.func(trainer)["trained_rules"]

    few = round(train.MIN_RULES_SHARE * 1000) - 1  # just under the share of the 1000 samples
    folder = {"rules": [chinese, japanese], "rule_samples": [600, 400 - few]}
    assert trained(folder, {"rules": [aga], "rule_samples": [few]}) == [chinese, japanese]
    assert "too few to be learnt" in caplog.text
    assert aga in trained(folder, {"rules": [aga], "rule_samples": [few + 2]})
    # Sidecars written before the counts: every rule input their samples carried.
    assert aga in trained({"rules": [chinese, japanese]}, {"rules": [aga]})


def test_resumed_run_equals_an_uninterrupted_one(shards, tmp_path, one_thread):
    config = config_for(shards)
    whole = train.train(config, tmp_path / "whole", export=False, progress=False)
    first = train.train(config, tmp_path / "resumed", stop_at=4, export=False, progress=False)
    assert first["step"] == 4 and not first["finished"]
    assert checkpoint_lib.load(tmp_path / "resumed" / train.CHECKPOINT).provenance["steps"] == 4
    second = train.train(config, tmp_path / "resumed", export=False, progress=False)
    assert second["step"] == whole["step"] == 6 and second["finished"]
    a = checkpoint_lib.load(tmp_path / "whole" / train.CHECKPOINT).state_dict
    b = checkpoint_lib.load(tmp_path / "resumed" / train.CHECKPOINT).state_dict
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert second["validation"] == whole["validation"]
    rows = train.read_metrics(tmp_path / "resumed" / train.METRICS)
    assert [row["step"] for row in rows] == [3, 6]


def test_resume_refuses_other_settings(shards, tmp_path, one_thread):
    train.train(config_for(shards, steps=2), tmp_path, export=False, progress=False)
    with pytest.raises(ValueError, match="lr"):
        train.train(config_for(shards, steps=2, lr=0.1), tmp_path, export=False, progress=False)


def test_the_compute_dtype_reaches_the_forward_pass_and_a_resumed_run_may_change_it(shards, tmp_path, one_thread):
    net = train.prepare(train.model_lib.build("tiny"), torch.device("cpu"))
    batch = train.dataset.take(train.dataset.Shards([str(shards)], "val").head(8), np.arange(8))
    for compute_dtype, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        outputs, _ = train.forward(net, batch, 9, 9, torch.device("cpu"), compute_dtype)
        assert outputs[1].dtype == dtype  # the value head ends in a linear layer: autocast computes it in bfloat16
    with pytest.raises(ValueError, match="compute_dtype"):
        config_for(shards, compute_dtype="half")
    train.train(config_for(shards, steps=4, compute_dtype="float32"), tmp_path, stop_at=2, export=False,
                progress=False)
    done = train.train(config_for(shards, steps=4, compute_dtype="bfloat16"), tmp_path, export=False, progress=False)
    assert done["finished"] and math.isfinite(done["validation"]["loss"])


def test_compiled_steps_learn_what_plain_ones_do_and_a_resumed_run_may_turn_compile_on(shards, tmp_path,
                                                                                      one_thread, monkeypatch):
    graphs = []

    def recording_backend(graph, example_inputs):  # what dynamo captured, run as it is (no code generation)
        graphs.append(graph)
        return graph.forward

    monkeypatch.setattr(train, "COMPILE_BACKEND", recording_backend)
    config = config_for(shards, steps=4, compute_dtype="float32")
    train.train(config, tmp_path / "plain", export=False, progress=False)
    train.train(config, tmp_path / "compiled", stop_at=2, export=False, progress=False)
    done = train.train(config_for(shards, steps=4, compute_dtype="float32", compile=True), tmp_path / "compiled",
                       export=False, progress=False)
    assert done["finished"] and graphs  # the last two steps went through torch.compile
    plain = checkpoint_lib.load(tmp_path / "plain" / train.CHECKPOINT).state_dict
    compiled = checkpoint_lib.load(tmp_path / "compiled" / train.CHECKPOINT).state_dict
    assert plain.keys() == compiled.keys()  # saved from the module itself, not the compiled wrapper
    assert all(torch.allclose(plain[k], compiled[k], atol=1e-5) for k in plain)


def test_learning_rate_schedules():
    cosine = TrainConfig(data=("x",), steps=100, lr=1.0, warmup_steps=10)
    assert train.learning_rate(cosine, 0) == pytest.approx(0.1, rel=0.01)
    assert train.learning_rate(cosine, 50) == pytest.approx(0.5)
    assert train.learning_rate(cosine, 99) < 0.001
    steps = TrainConfig(data=("x",), steps=100, lr=1.0, warmup_steps=0, schedule="step")
    assert [train.learning_rate(steps, s) for s in (0, 49, 50, 74, 75, 99)] == pytest.approx(
        [1.0, 1.0, 0.1, 0.1, 0.01, 0.01])


def test_masked_terms_ignore_samples_without_targets():
    config = TrainConfig(data=("x",))
    count, area = 4, 9
    outputs = (torch.randn(count, area + 1), torch.randn(count, 3), torch.randn(count) * 20,
               torch.tanh(torch.randn(count, 3, 3)))
    targets = {"move": torch.tensor([0, 1, 9, 2]), "value": torch.full((count,), -1),
               "score": torch.full((count,), 1e6), "score_mask": torch.zeros(count, dtype=torch.bool),
               "ownership": torch.ones(count, 3, 3), "ownership_mask": torch.zeros(count, dtype=torch.bool)}
    terms = train.losses(outputs, targets, config)
    assert terms["value_loss"] == 0 and terms["score_loss"] == 0 and terms["ownership_loss"] == 0
    assert torch.isclose(terms["loss"], terms["policy_loss"])
    targets["value"] = torch.tensor([0, -1, -1, -1])
    expected = torch.nn.functional.cross_entropy(outputs[1][:1], targets["value"][:1])
    assert torch.isclose(train.losses(outputs, targets, config)["value_loss"], expected)


def test_a_new_run_starts_from_the_weights_of_init_from(shards, tmp_path, one_thread):
    train.train(config_for(shards, steps=2), tmp_path / "first", export=False, progress=False)
    start = tmp_path / "first" / train.CHECKPOINT
    # lr 0: the one step changes no weight (batch norm's running statistics move), so the new run's weights are
    # exactly where it started.
    frozen = dict(steps=1, eval_every=1, lr=0.0)
    train.train(config_for(shards, init_from=str(start), **frozen), tmp_path / "second", export=False,
                progress=False)
    train.train(config_for(shards, **frozen), tmp_path / "fresh", export=False, progress=False)
    weights = [name for name, _ in checkpoint_lib.load(start).build_model().named_parameters()]
    a, b, c = ({k: checkpoint_lib.load(path).state_dict[k] for k in weights}
               for path in (start, tmp_path / "second" / train.CHECKPOINT, tmp_path / "fresh" / train.CHECKPOINT))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    with pytest.raises(ValueError, match="a tiny network .* cannot start a b6c64 run"):
        train.train(config_for(shards, preset="b6c64", init_from=str(start)), tmp_path / "other", export=False,
                    progress=False)


def test_a_run_of_the_value_head_alone_leaves_the_trunk_and_the_policy_exactly_as_they_were(shards, tmp_path,
                                                                                                one_thread):
    train.train(config_for(shards, steps=2), tmp_path / "first", export=False, progress=False)
    start = tmp_path / "first" / train.CHECKPOINT
    train.train(config_for(shards, init_from=str(start), train_parts=("value",)), tmp_path / "value",
                export=False, progress=False)
    before, after = (checkpoint_lib.load(path).state_dict for path in (start, tmp_path / "value" / train.CHECKPOINT))
    changed = {model_lib.part_of(key) for key in before if not torch.equal(before[key], after[key])}
    assert changed == {"value"}  # the trunk's and the policy head's weights and norm statistics too
    assert not torch.equal(before["ownership_out.weight"], after["ownership_out.weight"])
    with pytest.raises(ValueError, match="needs init_from"):
        config_for(shards, train_parts=("value",))
    with pytest.raises(ValueError, match="train_parts must be some of"):
        config_for(shards, init_from=str(start), train_parts=("head",))


def test_soft_policy_loss_is_cross_entropy_over_the_samples_with_a_policy_target():
    config = TrainConfig(data=("x",))
    count, area = 4, 9
    outputs = (torch.randn(count, area + 1), torch.randn(count, 3), torch.randn(count),
               torch.tanh(torch.randn(count, 3, 3)))
    move = torch.tensor([0, 1, 9, 2])
    targets = {"move": move, "value": torch.full((count,), -1), "score": torch.zeros(count),
               "score_mask": torch.zeros(count, dtype=torch.bool), "ownership": torch.ones(count, 3, 3),
               "ownership_mask": torch.zeros(count, dtype=torch.bool)}
    hard = train.losses(outputs, targets, config)["policy_loss"]
    one_hot = {**targets, "policy": torch.eye(area + 1)[move], "policy_mask": torch.ones(count, dtype=torch.bool)}
    assert torch.isclose(train.losses(outputs, one_hot, config)["policy_loss"], hard)
    # Sample 1 has no policy target (a fast search): its garbage distribution counts for nothing.
    mixed = torch.eye(area + 1)[move]
    mixed[1] = 100.0
    mask = torch.tensor([True, False, True, True])
    soft = {**targets, "policy": mixed, "policy_mask": mask}
    expected = torch.nn.functional.cross_entropy(outputs[0][mask], move[mask])
    assert torch.isclose(train.losses(outputs, soft, config)["policy_loss"], expected)


def test_the_search_value_blends_into_the_value_target_by_its_weight():
    count, area = 3, 9
    outputs = (torch.randn(count, area + 1), torch.randn(count, 3), torch.randn(count),
               torch.tanh(torch.randn(count, 3, 3)))
    targets = {"move": torch.tensor([0, 1, 2]), "value": torch.tensor([0, 1, -1]), "score": torch.zeros(count),
               "score_mask": torch.zeros(count, dtype=torch.bool), "ownership": torch.ones(count, 3, 3),
               "ownership_mask": torch.zeros(count, dtype=torch.bool), "search_value": torch.tensor([0.5, 0.5, 1.0])}
    log_p = torch.log_softmax(outputs[1], dim=1)
    result_only = train.losses(outputs, targets, TrainConfig(data=("x",)))["value_loss"]
    assert torch.isclose(result_only, -(log_p[0, 0] + log_p[1, 1]) / 2)  # weight 0: the result alone
    blended = train.losses(outputs, targets, TrainConfig(data=("x",), search_value_weight=0.5))["value_loss"]
    # A won game searched at 0.5: 0.5 * (1, 0, 0) + 0.5 * (0.75, 0.25, 0); a lost one: (0.375, 0.625, 0).
    expected = -((0.875 * log_p[0, 0] + 0.125 * log_p[0, 1]) + (0.375 * log_p[1, 0] + 0.625 * log_p[1, 1])) / 2
    assert torch.isclose(blended, expected)  # sample 2 has no value target: its search value counts for nothing
    with pytest.raises(ValueError, match="search_value_weight"):
        TrainConfig(data=("x",), search_value_weight=1.5)


def test_the_opponent_move_is_the_reply_played_and_turns_with_the_board(shards):
    from gtp_engine import symmetry
    from gtp_engine.training import dataset

    arrays = dataset.Shards([str(shards)], "train").head(10_000)
    move, game, reply = arrays["move"], arrays["game"], arrays["opponent_move"]
    last_of_game = np.append(game[1:] != game[:-1], True)
    assert (reply[last_of_game] == -1).all()
    assert np.array_equal(reply[~last_of_game], move[1:][~last_of_game[:-1]])
    # Positions that do not follow each other (every other one kept) have no reply to learn.
    every_other = dataset.take(arrays, np.arange(0, len(move), 2))
    every_other["cells"] = arrays["cells"][::2]
    assert (dataset.opponent_moves(every_other) == -1).all()
    # Under a symmetry the reply turns as the next position's move does.
    pairs = np.flatnonzero(~last_of_game)[:40]
    for s in symmetry.ALL:
        batch = dataset.take(arrays, np.concatenate([pairs, pairs + 1]))
        batch["symmetry"] = np.full(2 * len(pairs), s, np.uint8)
        _, _, targets = dataset.expand(dataset.to_device(batch, "cpu"), 9, 9)
        assert torch.equal(targets["opponent_move"][: len(pairs)], targets["move"][len(pairs):]), s


def test_the_opponent_policy_loss_is_cross_entropy_over_the_positions_with_a_reply():
    count, area = 4, 9
    outputs = (torch.randn(count, area + 1), torch.randn(count, 3), torch.randn(count),
               torch.tanh(torch.randn(count, 3, 3)), torch.randn(count, area + 1))
    targets = {"move": torch.tensor([0, 1, 9, 2]), "value": torch.full((count,), -1), "score": torch.zeros(count),
               "score_mask": torch.zeros(count, dtype=torch.bool), "ownership": torch.ones(count, 3, 3),
               "ownership_mask": torch.zeros(count, dtype=torch.bool), "opponent_move": torch.tensor([3, -1, 9, -1])}
    config = TrainConfig(data=("x",), opponent_policy_weight=0.15)
    terms = train.losses(outputs, targets, config)
    expected = torch.nn.functional.cross_entropy(outputs[4][[0, 2]], torch.tensor([3, 9]))
    assert torch.isclose(terms["opponent_policy_loss"], expected)
    assert torch.isclose(terms["loss"], terms["policy_loss"] + 0.15 * expected)
    assert train.losses(outputs[:4], targets, TrainConfig(data=("x",)))["opponent_policy_loss"] == 0
    with pytest.raises(ValueError, match="opponent_policy_weight"):
        TrainConfig(data=("x",), opponent_policy_weight=-0.1)


def test_a_run_with_the_opponent_policy_starts_from_a_network_without_it_and_exports_without_it(shards, tmp_path,
                                                                                                one_thread):
    import onnx

    train.train(config_for(shards, steps=2), tmp_path / "plain", export=False, progress=False)
    plain = tmp_path / "plain" / train.CHECKPOINT
    result = train.train(config_for(shards, steps=3, init_from=str(plain), opponent_policy_weight=0.15),
                         tmp_path / "aux", progress=False)
    aux = checkpoint_lib.load(tmp_path / "aux" / train.CHECKPOINT)
    assert aux.config.opponent_policy and "opponent_out.weight" in aux.state_dict
    for key, value in checkpoint_lib.load(plain).state_dict.items():  # started from the plain weights
        assert key in aux.state_dict
    rows = train.read_metrics(tmp_path / "aux" / train.METRICS)
    assert all(0 < row["val_opponent_policy_loss"] < 10 for row in rows)
    # The export has the four outputs of the contract, and says it has no opponent output.
    exported = onnx.load(result["onnx"])
    assert [o.name for o in exported.graph.output] == ["policy", "value", "score", "ownership"]
    assert "opponent_policy" not in json.loads(exported.metadata_props[0].value)["config"]
    # And a run without it starts from the network with it, dropping that output.
    train.train(config_for(shards, steps=1, init_from=str(tmp_path / "aux" / train.CHECKPOINT)),
                tmp_path / "dropped", export=False, progress=False)
    assert not checkpoint_lib.load(tmp_path / "dropped" / train.CHECKPOINT).config.opponent_policy
