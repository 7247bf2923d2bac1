"""Growing a network deeper: the grown network computes exactly what its source computes, its new blocks learn, the
command takes a checkpoint or an exported network, and configs that cannot hold the source are refused."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from gtp_engine import features  # noqa: E402
from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import export_onnx, grow  # noqa: E402
from gtp_engine.training import model as model_lib  # noqa: E402
from gtp_engine.training.__main__ import main as training_main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = model_lib.preset("tiny")
DEEPER = dataclasses.replace(TINY, name="tiny-deeper", blocks=5, pool_blocks=(2, 4))


def inputs(seed: int = 0, count: int = 6, size: int = 5):
    generator = torch.Generator().manual_seed(seed)
    spatial = (torch.rand(count, features.SPATIAL_CHANNELS, size, size, generator=generator) < 0.3).float()
    spatial[:, 0] = 1.0  # on the board
    return spatial, torch.rand(count, features.GLOBAL_FEATURES, generator=generator)


def source_checkpoint(seed: int = 3) -> checkpoint_lib.Checkpoint:
    return checkpoint_lib.from_model(export_onnx.random_model("tiny", seed=seed), trained_sizes=[5],
                                     provenance={"data": "random weights", "steps": 7})


def test_blocks_keep_their_order_and_kind_each_as_early_as_it_can_go():
    assert grow.placement(TINY, DEEPER) == [0, 2]  # tiny: plain, pooling
    b6 = model_lib.preset("b6c64")
    assert grow.placement(b6, model_lib.preset("b10c64")) == [0, 1, 3, 4, 6, 7]
    assert grow.placement(b6, model_lib.preset("b8c64")) == [0, 1, 3, 4, 5, 6]
    assert grow.placement(b6, b6) == list(range(6))
    with pytest.raises(ValueError, match="fewer than"):
        grow.placement(model_lib.preset("b10c64"), b6)
    with pytest.raises(ValueError, match="block 1 \\(global pooling\\) has no place"):
        grow.placement(TINY, dataclasses.replace(TINY, name="no-pool-left", blocks=3, pool_blocks=(0,)))


def test_the_grown_network_computes_what_its_source_computes():
    source = source_checkpoint()
    grown = grow.grow(source, DEEPER, seed=5)
    assert grown.config.blocks == 5 and grown.trained_sizes == [5]
    assert grown.provenance["grown_from"] == {"config": "tiny", "blocks_at": [0, 2]}
    assert grown.provenance["steps"] == 7
    spatial, global_ = inputs()
    with torch.no_grad():
        before = source.build_model()(spatial, global_)
        after = grown.build_model()(spatial, global_)
    for old, new in zip(before, after):
        assert torch.equal(old, new)
    # The new blocks are not all zero: only their last convolution is.
    new_block = grown.build_model().blocks[1]
    assert not torch.count_nonzero(new_block.conv2.weight)
    assert torch.count_nonzero(new_block.conv1.weight)


def test_the_new_blocks_learn():
    net = grow.grow(source_checkpoint(), DEEPER).build_model().train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    spatial, global_ = inputs(seed=1)
    policy, value, _, _ = net(spatial, global_)
    (policy.logsumexp(dim=1).mean() - policy[:, 3].mean() + value[:, 0].mean()).backward()
    optimizer.step()
    assert torch.count_nonzero(net.blocks[1].conv2.weight)
    assert torch.count_nonzero(net.blocks[3].conv2.weight)


def test_only_depth_grows():
    with pytest.raises(ValueError, match="channels 16 against 24"):
        grow.grow(source_checkpoint(), dataclasses.replace(DEEPER, channels=24))


def test_the_command_grows_a_checkpoint_or_an_exported_network(tmp_path, monkeypatch):
    monkeypatch.setitem(model_lib.PRESETS, DEEPER.name, DEEPER)
    source = tmp_path / "tiny.pt"
    checkpoint_lib.save(source_checkpoint(), source)
    assert training_main(["grow", str(source), str(tmp_path / "deeper.pt"), "--preset", DEEPER.name]) == 0
    assert checkpoint_lib.load(tmp_path / "deeper.pt").config == DEEPER
    network = tmp_path / "tiny.onnx"
    export_onnx.export(source_checkpoint().build_model(), network, trained_sizes=[5])
    assert training_main(["grow", str(network), str(tmp_path / "from-onnx.pt"), "--preset", DEEPER.name]) == 0
    assert checkpoint_lib.load(tmp_path / "from-onnx.pt").config.blocks == 5


def test_the_command_names_what_does_not_fit(tmp_path, capsys):
    source = tmp_path / "tiny.pt"
    checkpoint_lib.save(source_checkpoint(), source)
    assert training_main(["grow", str(source), str(tmp_path / "wide.pt"), "--preset", "b10c64"]) == 1
    assert "grow failed: cannot grow tiny into b10c64: channels 16 against 64" in capsys.readouterr().err
    assert not (tmp_path / "wide.pt").exists()
    assert training_main(["grow", str(tmp_path / "missing.pt"), str(tmp_path / "x.pt"), "--preset", "b10c64"]) == 1
    assert "missing.pt: no such file" in capsys.readouterr().err
