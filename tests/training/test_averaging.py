"""Weight averaging: the average is the mean of its snapshots' weights, snapshots that cannot line up are refused,
the norms are measured again on real shards (their running statistics become the data's), and the command writes a
checkpoint that names its snapshots."""

import pytest

torch = pytest.importorskip("torch")

from gtp_engine import sgf_io  # noqa: E402
from gtp_engine.training import averaging, dataset, export_onnx, sgf_ingest  # noqa: E402
from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import model as model_lib  # noqa: E402
from gtp_engine.training.__main__ import main as training_main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
SIZE = 5


@pytest.fixture
def shards(random_states, tmp_path):
    """A shard folder of 16 random 5x5 games (conftest's random_states), all in the training split."""
    records = tmp_path / "records"
    records.mkdir()
    for number, state in enumerate(random_states(SIZE, 16, seed=4, max_fill=0.6)):
        (records / f"{number}.sgf").write_bytes(sgf_io.save_sgf(state, result="B+R" if number % 2 else "W+R"))
    sgf_ingest.ingest([records], tmp_path / "shards", sgf_ingest.IngestConfig(size=SIZE, min_moves=2, val_fraction=0.0,
                                                                              workers=1))
    return tmp_path / "shards"


def snapshot(seed: int, batches_tracked: int = 0) -> checkpoint_lib.Checkpoint:
    ckpt = checkpoint_lib.from_model(export_onnx.random_model("tiny", seed=seed), trained_sizes=[SIZE],
                                     provenance={"data": "random weights", "steps": seed})
    for key, value in ckpt.state_dict.items():
        if key.endswith("num_batches_tracked"):
            value.fill_(batches_tracked)
    return ckpt


def test_the_average_is_the_mean_of_each_weight_and_the_last_snapshots_counts():
    snapshots = [snapshot(1, 10), snapshot(2, 20), snapshot(3, 30)]
    averaged = averaging.average(snapshots)
    for key, value in averaged.state_dict.items():
        if value.is_floating_point():
            expected = sum(s.state_dict[key] for s in snapshots) / 3
            torch.testing.assert_close(value, expected)
        else:
            assert torch.equal(value, snapshots[-1].state_dict[key])
    assert averaged.provenance == snapshots[-1].provenance and averaged.trained_sizes == [SIZE]
    assert not torch.equal(averaged.state_dict["stem.weight"], snapshots[0].state_dict["stem.weight"])
    alone = averaging.average(snapshots[:1])
    assert all(torch.equal(v, snapshots[0].state_dict[k]) for k, v in alone.state_dict.items())


def test_snapshots_that_cannot_line_up_are_refused():
    with pytest.raises(ValueError, match="no snapshots"):
        averaging.average([])
    wider = checkpoint_lib.from_model(model_lib.build(model_lib.preset("b6c64")))
    with pytest.raises(ValueError, match="only snapshots of one training run"):
        averaging.average([wider, snapshot(1)])


def test_recalibration_makes_the_running_statistics_those_of_the_data(shards):
    net = snapshot(5).build_model()
    first = net.blocks[0].norm1
    with torch.no_grad():
        first.running_mean.fill_(5.0)
        first.running_var.fill_(100.0)
    inputs = []
    hook = first.register_forward_hook(lambda module, args, output: inputs.append(args[0].detach().clone()))
    data = dataset.Shards([shards], "train")
    seen = averaging.recalibrate_norms(net, data, batches=3, batch_size=8, seed=2)
    hook.remove()
    assert seen == 24 and len(inputs) == 3
    measured = torch.cat(inputs).transpose(0, 1).flatten(1)  # [channels, positions x points]
    torch.testing.assert_close(first.running_mean, measured.mean(dim=1), atol=1e-5, rtol=1e-4)
    # Each batch's unbiased variance, averaged over the batches: what the cumulative running mean holds.
    per_batch = torch.stack([x.transpose(0, 1).flatten(1).var(dim=1, unbiased=True) for x in inputs]).mean(dim=0)
    torch.testing.assert_close(first.running_var, per_batch, atol=1e-5, rtol=1e-4)
    assert not net.training and first.momentum == 0.1  # eval mode and the training momentum back


def test_the_command_writes_a_checkpoint_that_names_its_snapshots(shards, tmp_path, capsys):
    paths = []
    for seed in (1, 2):
        paths.append(tmp_path / f"snapshot-{seed}.pt")
        checkpoint_lib.save(snapshot(seed), paths[-1])
    out = tmp_path / "average.pt"
    assert training_main(["average", *map(str, paths), "--data", str(shards), "--out", str(out), "--batches", "2",
                          "--batch-size", "8", "--device", "cpu"]) == 0
    averaged = checkpoint_lib.load(out)
    assert averaged.provenance["averaged"] == [str(p) for p in paths]
    assert averaged.provenance["norms_recalibrated_on"] == 16
    expected = (snapshot(1).state_dict["stem.weight"] + snapshot(2).state_dict["stem.weight"]) / 2
    torch.testing.assert_close(averaged.state_dict["stem.weight"], expected)
    export_onnx.export_checkpoint(out, tmp_path / "average.onnx")  # a network the engine can load

    missing = tmp_path / "missing.pt"
    assert training_main(["average", str(paths[0]), str(missing), "--data", str(shards), "--out",
                          str(tmp_path / "never.pt")]) == 1
    assert f"average failed: {missing}" in capsys.readouterr().err
    assert not (tmp_path / "never.pt").exists()
