"""Import of exported networks: a tiny network exported and imported again keeps every weight the exporter kept
and computes the same outputs, its folded norms are recalibrated to the statistics they see, the command writes
a checkpoint that loads, and files that cannot become a checkpoint are refused with their name and the reason."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from gtp_engine import features  # noqa: E402
from gtp_engine.onnx_evaluator import METADATA_KEY  # noqa: E402
from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import export_onnx, import_onnx  # noqa: E402
from gtp_engine.training.__main__ import main as training_main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
SIZE = 5


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(original model, its ONNX file): the tiny preset with every norm's scale and shift made distinct, as
    training makes them."""
    net = export_onnx.random_model("tiny", seed=3)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.3, 0.3)
    path = tmp_path_factory.mktemp("import") / "tiny.onnx"
    export_onnx.export(net, path, trained_sizes=[SIZE], provenance={"data": "random weights", "steps": 7})
    return net, path


def test_the_folded_pairs_are_each_convolution_read_only_by_a_norm():
    pairs = import_onnx.folded_pairs(export_onnx.random_model("tiny"))
    # tiny: block 0 plain (conv1 -> norm2), block 1 pooling (conv_pool -> norm_pool; conv1 also feeds an add)
    assert pairs == {"blocks.0.conv1": "blocks.0.norm2", "blocks.1.conv_pool": "blocks.1.norm_pool",
                     "policy_pool_conv": "policy_pool_norm", "value_conv": "value_norm"}


def test_an_imported_network_keeps_the_weights_and_computes_the_same(exported, random_states):
    original, path = exported
    checkpoint = import_onnx.import_onnx(path, calibration_games=16)
    imported = checkpoint.build_model()
    pairs = import_onnx.folded_pairs(imported)
    rewritten = set(pairs) | set(pairs.values())  # a folded convolution's weight carries its norm's scale
    for name, value in original.state_dict().items():
        if name.rsplit(".", 1)[0] not in rewritten and not name.endswith("num_batches_tracked"):
            assert torch.equal(imported.state_dict()[name], value), name
    for size in (SIZE, 9):
        spatial, global_ = (torch.from_numpy(a) for a in features.encode(random_states(size, 8, seed=size)))
        with torch.no_grad():
            for want, got in zip(original(spatial, global_), imported(spatial, global_)):
                assert float((want - got).abs().max()) < 1e-4
    assert checkpoint.trained_sizes == [SIZE] and checkpoint.provenance["steps"] == 7
    assert checkpoint.provenance["imported_from"] == str(path)
    assert checkpoint.provenance["import_parity_max_abs_diff"] <= export_onnx.TOLERANCE


def test_a_folded_norm_gets_the_statistics_of_its_input_on_the_calibration_games(exported):
    _, path = exported
    checkpoint = import_onnx.import_onnx(path, calibration_games=16)
    imported = checkpoint.build_model()
    states = import_onnx.calibration_positions(path, SIZE, 16, seed=0)  # the same games, same seed
    seen = {}
    norm = dict(imported.named_modules())["value_norm"]
    norm.register_forward_hook(lambda module, inputs, output: seen.update(x=inputs[0]))
    spatial, global_ = features.encode(states)
    with torch.no_grad():
        imported(torch.from_numpy(spatial), torch.from_numpy(global_))
    x = seen["x"].transpose(0, 1).flatten(1)
    assert torch.allclose(norm.running_mean, x.mean(dim=1), atol=1e-4)
    assert torch.allclose(norm.running_var, x.var(dim=1, unbiased=False), atol=1e-4)
    # so that on these positions training mode (batch statistics) computes what eval mode does
    with torch.no_grad():
        evaluated = norm.eval()(seen["x"])
        assert torch.allclose(norm.train()(seen["x"]), evaluated, atol=1e-4)


def test_the_command_writes_a_checkpoint_that_loads_and_exports_again(exported, tmp_path):
    original, path = exported
    out = tmp_path / "back.pt"
    assert training_main(["import-onnx", str(path), str(out), "--size", str(SIZE)]) == 0
    checkpoint = checkpoint_lib.load(out)
    assert checkpoint.config == original.config
    assert export_onnx.parity(checkpoint.build_model(), path) <= export_onnx.TOLERANCE


def test_files_that_are_not_exported_networks_are_refused_with_their_name(exported, tmp_path, capsys):
    _, path = exported
    missing = tmp_path / "missing.onnx"
    with pytest.raises(checkpoint_lib.CheckpointError, match=f"{missing}: no such file"):
        import_onnx.import_onnx(missing)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a network")
    assert training_main(["import-onnx", str(garbage), str(tmp_path / "x.pt")]) == 1
    assert f"{garbage}: not a readable ONNX file" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()

    proto = onnx.load(str(path))
    del proto.metadata_props[:]
    onnx.save(proto, str(tmp_path / "bare.onnx"))
    with pytest.raises(import_onnx.OnnxImportError, match="bare.onnx: no gtp_engine metadata"):
        import_onnx.import_onnx(tmp_path / "bare.onnx")

    proto = onnx.load(str(path))  # metadata that claims a bigger network than the weights are
    metadata = json.loads(proto.metadata_props[0].value)
    metadata["config"] = {**metadata["config"], "channels": 32, "name": "wider"}
    proto.metadata_props[0].value = json.dumps(metadata)
    assert proto.metadata_props[0].key == METADATA_KEY
    onnx.save(proto, str(tmp_path / "wider.onnx"))
    with pytest.raises(import_onnx.OnnxImportError, match="wider.onnx: .* has shape .* the wider model"):
        import_onnx.import_onnx(tmp_path / "wider.onnx")


def test_calibration_games_are_legal_and_cut_at_different_lengths(exported):
    _, path = exported
    states = import_onnx.calibration_positions(path, SIZE, 12, seed=1)
    lengths = {s.move_number for s in states}
    assert len(lengths) > 3 and max(lengths) <= int(0.6 * SIZE * SIZE)
    assert all(np.isfinite(features.encode([s])[0]).all() for s in states)


def test_a_fresh_network_whose_identical_norms_are_stored_once_imports_too(tiny_onnx_model):
    proto = onnx.load(str(tiny_onnx_model))
    names = {i.name for i in proto.graph.initializer}
    assert "blocks.1.norm1.weight" not in names  # all ones, like blocks.0.norm1.weight: kept once
    stored = import_onnx.stored_names(proto, export_onnx.random_model("tiny"))
    assert stored["blocks.1.norm1.weight"] in names
    checkpoint = import_onnx.import_onnx(tiny_onnx_model, size=SIZE, calibration_games=8)
    assert export_onnx.parity(checkpoint.build_model(), tiny_onnx_model) <= export_onnx.TOLERANCE
