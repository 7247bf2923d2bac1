"""Torch model, checkpoints and ONNX export: torch-vs-onnxruntime parity, metadata, refusals, prefixes."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from gtp_engine import features  # noqa: E402
from gtp_engine.onnx_evaluator import METADATA_KEY, OnnxEvaluator  # noqa: E402
from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import export_onnx  # noqa: E402
from gtp_engine.training import model as model_lib  # noqa: E402


@pytest.fixture(scope="module")
def tiny_net():
    """The torch network the tiny_onnx_model fixture exported (same preset and seed)."""
    return export_onnx.random_model("tiny", seed=0)


@pytest.fixture
def reuse_export(monkeypatch, tiny_onnx_model):
    """Skips torch.onnx (seconds) by handing out the graph the fixture already exported from tiny_net."""
    monkeypatch.setattr(export_onnx, "_to_onnx", lambda net: onnx.load(str(tiny_onnx_model)))


@pytest.mark.parametrize("size", [9, 13, 19, (7, 11)])
def test_onnxruntime_matches_torch(tiny_onnx_model, tiny_net, random_states, size):
    states = random_states(size, 5, seed=1)
    spatial, global_ = features.encode(states)
    with torch.no_grad():
        expected = tiny_net(torch.from_numpy(spatial), torch.from_numpy(global_))
    got = OnnxEvaluator(tiny_onnx_model, device="cpu", symmetry_mode="none").run(spatial, global_)
    for name, g, e in zip(model_lib.OUTPUTS, got, expected):
        assert g.shape == tuple(e.shape), name
        assert np.abs(g - e.numpy()).max() <= 1e-4, name


def test_metadata_describes_the_network(tiny_onnx_model):
    model = onnx.load(str(tiny_onnx_model))
    meta = json.loads(next(p.value for p in model.metadata_props if p.key == METADATA_KEY))
    assert meta["features_version"] == features.FEATURES_VERSION
    assert meta["spatial_channels"] == features.SPATIAL_CHANNELS
    assert meta["global_features"] == features.GLOBAL_FEATURES
    assert meta["preset"] == "tiny"
    assert model_lib.ModelConfig.from_dict(meta["config"]) == model_lib.preset("tiny")
    assert meta["training"]["steps"] == 0
    assert 0 <= meta["parity_max_abs_diff"] <= 1e-4
    assert [i.name for i in model.graph.input] == ["spatial", "global"]
    assert [o.name for o in model.graph.output] == list(model_lib.OUTPUTS)
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert isinstance(dims[0], str) and isinstance(dims[2], str) and isinstance(dims[3], str)


def test_a_failed_parity_check_writes_nothing(tmp_path, reuse_export):
    out = tmp_path / "bad.onnx"
    other_weights = export_onnx.random_model("tiny", seed=1)  # torch and the exported graph now disagree
    with pytest.raises(export_onnx.ExportError, match=r"bad\.onnx: onnxruntime differs from torch by"):
        export_onnx.export(other_weights, out)
    assert list(tmp_path.iterdir()) == []


def test_checkpoint_round_trip_and_export(tmp_path, tiny_net, reuse_export):
    provenance = {"data": "go9_curated", "steps": 1200}
    path = tmp_path / "run" / "step1200.pt"
    checkpoint_lib.save(checkpoint_lib.from_model(tiny_net, trained_sizes=[19, 9], provenance=provenance), path)
    assert [p.name for p in path.parent.iterdir()] == ["step1200.pt"]  # the temporary file is gone
    loaded = checkpoint_lib.load(path)
    assert loaded.config == tiny_net.config and loaded.trained_sizes == [9, 19] and loaded.provenance == provenance
    for key, value in tiny_net.state_dict().items():
        assert torch.equal(loaded.state_dict[key], value)

    meta = export_onnx.export_checkpoint(path, tmp_path / "net.onnx")
    assert meta["trained_sizes"] == [9, 19] and meta["training"] == provenance
    info = OnnxEvaluator(tmp_path / "net.onnx", device="cpu").info
    assert info.trained_sizes == (9, 19) and info.metadata["training"]["steps"] == 1200


def test_stated_trained_rules_replace_the_ones_the_samples_carried(tmp_path, tiny_net, reuse_export):
    from gtp_engine.game import Rules
    from gtp_engine.network_evaluator import RuleInputs

    carried = [RuleInputs.of(Rules.named(name)).to_json() for name in ("chinese", "japanese", "aga")]
    path = tmp_path / "run.pt"
    checkpoint_lib.save(checkpoint_lib.from_model(tiny_net, provenance={"steps": 1, "trained_rules": carried}), path)
    assert export_onnx.main([str(path), str(tmp_path / "all.onnx")]) == 0
    info = OnnxEvaluator(tmp_path / "all.onnx", device="cpu").info
    assert info.fed_rules(RuleInputs.of(Rules.named("aga"))) == RuleInputs.of(Rules.named("aga"))
    assert export_onnx.main([str(path), str(tmp_path / "stated.onnx"), "--trained-rules", "chinese,japanese"]) == 0
    info = OnnxEvaluator(tmp_path / "stated.onnx", device="cpu").info
    assert set(info.trained_rules) == {RuleInputs.of(Rules.named(name)) for name in ("chinese", "japanese")}
    assert info.fed_rules(RuleInputs.of(Rules.named("aga"))) == RuleInputs.of(Rules.named("chinese"))
    assert info.metadata["training"]["trained_rules"] == carried  # what the samples carried stays on record
    assert info.metadata["training"]["trained_rules_stated"] == "chinese,japanese"
    assert export_onnx.main([str(path), str(tmp_path / "bad.onnx"), "--trained-rules", "chinese,moon"]) == 1


@pytest.mark.parametrize("prefix", ["module.", "_orig_mod.", "_orig_mod.module."])
def test_checkpoints_from_wrapped_models_load_into_a_plain_one(tmp_path, tiny_net, prefix):
    checkpoint = checkpoint_lib.from_model(tiny_net)
    checkpoint.state_dict = {prefix + k: v for k, v in tiny_net.state_dict().items()}
    checkpoint_lib.save(checkpoint, tmp_path / "wrapped.pt")
    net = checkpoint_lib.load(tmp_path / "wrapped.pt").build_model()
    assert set(net.state_dict()) == set(tiny_net.state_dict())


def test_bad_checkpoints_are_refused_with_the_file_and_the_reason(tmp_path, tiny_net):
    with pytest.raises(checkpoint_lib.CheckpointError, match="nothing.pt: no such file"):
        checkpoint_lib.load(tmp_path / "nothing.pt")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(checkpoint_lib.CheckpointError, match="garbage.pt: not a readable checkpoint"):
        checkpoint_lib.load(garbage)
    plain = tmp_path / "plain.pt"
    torch.save(tiny_net.state_dict(), plain)
    with pytest.raises(checkpoint_lib.CheckpointError, match="plain.pt: not a gtp_engine-checkpoint-1 file"):
        checkpoint_lib.load(plain)
    old = checkpoint_lib.from_model(tiny_net)
    old.features_version = features.FEATURES_VERSION - 1
    checkpoint_lib.save(old, tmp_path / "old.pt")
    with pytest.raises(checkpoint_lib.CheckpointError, match="old.pt: features version"):
        checkpoint_lib.load(tmp_path / "old.pt")
    mismatched = checkpoint_lib.from_model(tiny_net)
    mismatched.config = model_lib.preset("b6c64")
    checkpoint_lib.save(mismatched, tmp_path / "mismatch.pt")
    with pytest.raises(checkpoint_lib.CheckpointError, match="mismatch.pt: weights do not match the b6c64 config"):
        checkpoint_lib.load(tmp_path / "mismatch.pt")


def test_a_padded_board_gives_the_same_answer_as_the_board_alone(tiny_net, random_states):
    """The mask makes the network size-independent: a 7x7 position zero-padded into 9x9 evaluates the same."""
    spatial, global_ = features.encode(random_states(7, 3, seed=8))
    padded = np.zeros((3, features.SPATIAL_CHANNELS, 9, 9), np.float32)
    padded[:, :, :7, :7] = spatial
    with torch.no_grad():
        small = tiny_net(torch.from_numpy(spatial), torch.from_numpy(global_))
        large = tiny_net(torch.from_numpy(padded), torch.from_numpy(global_))
    board = large[0][:, :81].reshape(3, 9, 9)[:, :7, :7].reshape(3, 49)
    assert torch.allclose(small[0][:, :49], board, atol=1e-5)
    assert torch.allclose(small[0][:, 49], large[0][:, 81], atol=1e-5)  # pass
    assert torch.allclose(small[1], large[1], atol=1e-5) and torch.allclose(small[2], large[2], atol=1e-4)
    assert torch.allclose(small[3], large[3][:, :7, :7], atol=1e-5)
    assert torch.all(large[0][:, :81].reshape(3, 9, 9)[:, 7:, :] <= model_lib.OFF_BOARD_LOGIT / 2)


def test_every_preset_builds_and_keeps_the_output_shapes():
    for name in model_lib.PRESETS:
        net = model_lib.build(name).eval()
        spatial = torch.zeros(2, features.SPATIAL_CHANNELS, 5, 6)
        spatial[:, 0] = 1
        with torch.no_grad():
            policy, value, score, ownership = net(spatial, torch.zeros(2, features.GLOBAL_FEATURES))
        assert policy.shape == (2, 31) and value.shape == (2, 3) and score.shape == (2,)
        assert ownership.shape == (2, 5, 6)
    with pytest.raises(ValueError, match="unknown preset"):
        model_lib.preset("b99c1")
