"""The GPU recipe (tools/train19_gpu.py) on the CPU, as the device runs it: a tiny archive of real 19x19 games is
ingested, one chunk trains and leaves its checkpoint in parts, a second call on a fresh work folder (a fresh
machine) resumes from the carried parts and exports ONNX at the end; the chunked run ends with exactly the weights
of an uninterrupted one, and a damaged carry is refused with a message naming it."""

import json
import shutil
import tarfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from tools import train19_gpu  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures19"
RECIPE = ["--preset", "tiny", "--batch-size", "32", "--steps", "6", "--warmup-steps", "2", "--val-fraction", "0.3",
          "--workers", "1", "--ingest-parts", "2", "--eval-every", "3", "--val-samples", "64", "--window-samples", "400", "--device", "cpu",
          "--command-seconds", "3600"]


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("archive") / "go19_tiny.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        for sgf in sorted(FIXTURES.glob("*.sgf")):
            tar.add(sgf, arcname=f"go19_tiny/{sgf.name}")
    return path


def call(capsys, archive: Path, work: Path, carry: Path, out: Path, *extra: str) -> dict:
    """One device call: `step` with the recipe's settings; its JSON report."""
    assert train19_gpu.main(["step", "--archive", str(archive), "--work", str(work), "--carry", str(carry),
                             "--out", str(out), *RECIPE, *extra]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def weights(out: Path) -> dict:
    data = b"".join((out / name).read_bytes() for name in json.loads((out / "manifest.json").read_text())["parts"])
    path = out / "joined.pt"
    path.write_bytes(data)
    return checkpoint_lib.load(path).state_dict


def test_a_chunked_run_carried_to_a_fresh_machine_equals_an_uninterrupted_one(tmp_path, archive, capsys, one_thread):
    first = call(capsys, archive, tmp_path / "machine-1", tmp_path / "nothing-carried", tmp_path / "out-1",
                 "--max-steps", "3")
    assert (first["step"], first["steps"], first["finished"], first["onnx"]) == (3, 6, False, False)
    assert 0 <= first["validation"]["policy_top1"] <= 1  # evaluated at step 3 on held-out games
    manifest = json.loads((tmp_path / "out-1" / "manifest.json").read_text())
    assert manifest["steps"] == 3 and (tmp_path / "out-1" / "metrics.csv").exists()
    sidecars = [json.loads((tmp_path / "machine-1" / "shards" / f"part-0{k}" / "index.json").read_text())
                for k in (0, 1)]
    assert [s["counts"]["records"] for s in sidecars] == [3, 3]  # the archive's six games in two parts
    assert sum(s["games"]["val"] for s in sidecars) >= 1 and sum(s["games"]["train"] for s in sidecars) >= 3
    assert sum(shard["ownership_games"] for s in sidecars for shard in s["shards"]) >= 1  # counted to the end
    shard_times = sorted(p.stat().st_mtime_ns for p in (tmp_path / "machine-1" / "shards").rglob("*.npz"))

    carried = tmp_path / "carried"  # what the caller copies back from the device's files
    shutil.copytree(tmp_path / "out-1", carried)
    second = call(capsys, archive, tmp_path / "machine-2", carried, tmp_path / "out-2")
    assert (second["step"], second["steps_this_call"], second["finished"], second["onnx"]) == (6, 3, True, True)
    metrics = (tmp_path / "machine-2" / "run" / "metrics.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in metrics[1:]] == ["3", "6"]  # the carried row kept, one row per eval

    whole = call(capsys, archive, tmp_path / "machine-3", tmp_path / "nothing-carried", tmp_path / "out-3",
                 "--no-export")
    assert (whole["step"], whole["finished"], whole["onnx"]) == (6, True, False)
    chunked, straight = weights(tmp_path / "out-2"), weights(tmp_path / "out-3")
    assert chunked.keys() == straight.keys()
    assert all(torch.equal(chunked[key], straight[key]) for key in chunked)

    import onnxruntime  # the exported network loads where the engine runs it
    session = onnxruntime.InferenceSession(str(tmp_path / "out-2" / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()]

    # A warm machine keeps its shards (no ingest again) and a later checkpoint rather than the older carry.
    call(capsys, archive, tmp_path / "machine-1", tmp_path / "nothing-carried", tmp_path / "out-4", "--max-steps", "1",
         "--no-export")
    assert sorted(p.stat().st_mtime_ns for p in (tmp_path / "machine-1" / "shards").rglob("*.npz")) == shard_times
    assert train19_gpu.restore(tmp_path / "out-1", tmp_path / "machine-2" / "run") == 6


def test_relabelled_shards_replace_plain_ones_on_a_warm_machine(tmp_path, archive, capsys, one_thread):
    machine = tmp_path / "machine"
    call(capsys, archive, machine, tmp_path / "nothing", tmp_path / "out-1", "--max-steps", "1", "--no-export")
    plain = sorted(p.stat().st_mtime_ns for p in (machine / "shards").rglob("*.npz"))
    call(capsys, archive, machine, tmp_path / "nothing", tmp_path / "out-2", "--max-steps", "1", "--no-export",
         "--relabel-share", "1", "--relabel-rules", "japanese")
    assert sorted(p.stat().st_mtime_ns for p in (machine / "shards").rglob("*.npz")) != plain  # ingested again
    sidecars = [json.loads((machine / "shards" / f"part-0{k}" / "index.json").read_text()) for k in (0, 1)]
    assert {(s["config"]["relabel_share"], s["config"]["relabel_rules"]) for s in sidecars} == {(1.0, "japanese")}
    assert sum(n for s in sidecars for n in s["counts"]["setups"].values()) == sum(
        s["counts"]["games"] for s in sidecars)  # every game's setup counted (the relabelling: test_sgf_ingest.py)
    relabelled = sorted(p.stat().st_mtime_ns for p in (machine / "shards").rglob("*.npz"))
    call(capsys, archive, machine, tmp_path / "nothing", tmp_path / "out-3", "--max-steps", "1", "--no-export",
         "--relabel-share", "1", "--relabel-rules", "japanese")
    assert sorted(p.stat().st_mtime_ns for p in (machine / "shards").rglob("*.npz")) == relabelled  # kept


def test_a_fitted_run_takes_its_length_from_the_probe_and_keeps_it_when_resumed(tmp_path, archive, capsys,
                                                                              one_thread, monkeypatch):
    seconds = 3600 - 90  # RECIPE's --command-seconds less the default --margin (less the call's few seconds)
    rate = 4.5 * 32 / (train19_gpu.FIT_SHARE * seconds)  # 4.5 steps of 32 samples fit
    monkeypatch.setattr(train19_gpu, "probe_rate", lambda args, folders: {"samples_per_s": rate})
    first = call(capsys, archive, tmp_path / "machine-1", tmp_path / "nothing", tmp_path / "out-1", "--fit",
                 "--max-steps", "2")
    assert (first["step"], first["steps"], first["probe"]["samples_per_s"]) == (2, 4, rate)

    def no_probe(args, folders):
        raise AssertionError("a resumed run was probed again")

    monkeypatch.setattr(train19_gpu, "probe_rate", no_probe)
    second = call(capsys, archive, tmp_path / "machine-2", tmp_path / "out-1", tmp_path / "out-2", "--fit")
    assert (second["step"], second["steps"], second["finished"], second["probe"]) == (4, 4, True, None)


def test_fitted_steps_fill_the_seconds_within_the_bounds():
    assert train19_gpu.fitted_steps(1000.0, 100.0, 10, 10**6) == int(1000 * 100 * train19_gpu.FIT_SHARE / 10)
    assert train19_gpu.fitted_steps(1000.0, 100.0, 10, 50) == 50  # never more than --steps or --epochs ask
    assert train19_gpu.fitted_steps(1.0, 1.0, 2048, 50) == 1


def test_a_damaged_carry_is_refused_with_its_folder_named(tmp_path, archive, capsys):
    call(capsys, archive, tmp_path / "machine", tmp_path / "nothing", tmp_path / "out", "--max-steps", "1")
    part = tmp_path / "out" / "checkpoint.pt.000"
    part.write_bytes(part.read_bytes()[:-10])
    code = train19_gpu.main(["step", "--archive", str(archive), "--work", str(tmp_path / "fresh"),
                             "--carry", str(tmp_path / "out"), "--out", str(tmp_path / "out-2"), *RECIPE])
    assert code == 1
    assert "do not match manifest.json" in capsys.readouterr().err


def test_a_missing_archive_is_named(tmp_path, capsys):
    code = train19_gpu.main(["step", "--archive", str(tmp_path / "none.tar.xz"), "--work", str(tmp_path / "w"),
                             "--out", str(tmp_path / "o"), *RECIPE])
    assert code == 1
    assert "none.tar.xz: no such archive" in capsys.readouterr().err


def test_bench_reports_each_preset_against_the_first(tmp_path, archive, capsys, one_thread):
    assert train19_gpu.main(["bench", "--archive", str(archive), "--work", str(tmp_path / "work"), "--workers", "1",
                             "--ingest-parts", "1", "--device", "cpu", "--batch-size", "8", "--bench-steps", "1",
                             "--presets", "tiny", "tiny"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [row["preset"] for row in rows] == ["tiny", "tiny"] and rows[0]["ratio_to_tiny"] == 1.0
    assert all(row["samples_per_s"] > 0 and row["samples_per_cpu_s"] > 0 and row["batch_stream_samples_per_s"] > 0
               for row in rows)


def test_bench_with_compile_runs_the_steps_through_torch_compile(tmp_path, archive, capsys, one_thread, monkeypatch):
    graphs = []
    monkeypatch.setattr(train19_gpu.train, "COMPILE_BACKEND",
                        lambda graph, example_inputs: graphs.append(graph) or graph.forward)  # no code generation
    assert train19_gpu.main(["bench", "--archive", str(archive), "--work", str(tmp_path / "work"), "--workers", "1",
                             "--ingest-parts", "1", "--device", "cpu", "--batch-size", "8", "--bench-steps", "1",
                             "--presets", "tiny", "--compile"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["compile"] and row["warm_up_seconds"] >= 0 and row["samples_per_s"] > 0 and graphs


def test_a_fresh_machine_goes_on_from_a_committed_network(tmp_path, archive, capsys, one_thread):
    """docs/gpu-runs.md's call for a run that goes on from the shipped network: import-onnx of the shipped file, then
    a fitted run with --init-from it."""
    from gtp_engine.training.__main__ import main as training_main

    whole = call(capsys, archive, tmp_path / "machine-1", tmp_path / "nothing", tmp_path / "out-1")
    assert whole["finished"] and whole["onnx"]  # model.onnx: as a committed network would be
    assert training_main(["import-onnx", str(tmp_path / "out-1" / "model.onnx"), str(tmp_path / "init.pt")]) == 0
    imported = checkpoint_lib.load(tmp_path / "init.pt").state_dict
    # lr 0: the one step leaves the weights as imported, so the run provably started from them
    resumed = call(capsys, archive, tmp_path / "machine-2", tmp_path / "nothing", tmp_path / "out-2",
                   "--init-from", str(tmp_path / "init.pt"), "--lr", "0", "--seed", "2", "--max-steps", "1",
                   "--no-export")
    assert (resumed["step"], resumed["finished"]) == (1, False)
    trained = weights(tmp_path / "out-2")
    parameters = [key for key, value in imported.items() if value.is_floating_point() and "running" not in key]
    assert parameters and set(parameters) <= set(trained)
    assert all(torch.equal(trained[key], imported[key]) for key in parameters)


def test_a_sidecar_written_before_a_setting_existed_counts_it_at_its_default():
    import dataclasses

    from gtp_engine.training import sgf_ingest

    config = sgf_ingest.IngestConfig(size=19, workers=4)
    written = dataclasses.asdict(config)
    del written["ownership_playouts"]
    assert train19_gpu._same_ingest(written, config)
    assert not train19_gpu._same_ingest(written, dataclasses.replace(config, ownership_playouts=8))
