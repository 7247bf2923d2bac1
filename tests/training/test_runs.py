"""runs.py, the scaffold of resumable training runs: the stop flag (deadline through an injected clock, signals),
the run folder's resumption check and metrics, the device helper; and the training command line's config files."""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest

pytest.importorskip("torch")

from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import export_onnx, loop, metrics_csv, runs  # noqa: E402
from gtp_engine.training.__main__ import _loop_config, parse_args  # noqa: E402
from gtp_engine.training.train import TrainConfig  # noqa: E402


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_stop_flag_stops_at_the_deadline_of_the_injected_clock():
    clock = Clock()
    stop = runs.StopFlag(max_minutes=2, clock=clock)
    clock.now += 119.9
    assert not stop.stopped
    clock.now += 0.1
    assert stop.stopped
    assert not runs.StopFlag(None, clock=clock).stopped  # no deadline


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_sets_the_flag_while_entered_and_the_old_handler_comes_back(sig):
    before = signal.getsignal(sig)
    with runs.StopFlag() as stop:
        os.kill(os.getpid(), sig)
        assert stop.stopped and stop.signalled
    assert signal.getsignal(sig) == before


COLUMNS = ("step", "loss")


def folder(path, **changes):
    config = TrainConfig(data=("shards",), preset="tiny", **changes)
    return runs.RunFolder(path, config, "train_config", ("data", "device"), COLUMNS, "step")


def save_at(run: runs.RunFolder, step: int, provenance: dict | None = None) -> None:
    net = export_onnx.random_model("tiny", seed=0)
    run.save(checkpoint_lib.from_model(net, [5], provenance if provenance is not None else
                                       {"train_config": run.config_dict(), "steps": step}))


def test_a_new_folder_has_no_checkpoint_and_a_saved_one_resumes_with_resumable_changes_only(tmp_path):
    run = folder(tmp_path)
    assert run.load() is None
    save_at(run, 4)
    assert run.load().provenance["steps"] == 4
    assert folder(tmp_path, device="cuda").load() is not None  # the device does not change what is computed
    with pytest.raises(ValueError, match=r"other settings \(steps, lr\)"):
        folder(tmp_path, lr=0.5, steps=7).load()


def test_a_setting_newer_than_the_checkpoint_was_at_its_default(tmp_path):
    run = folder(tmp_path)
    saved = {k: v for k, v in run.config_dict().items() if k != "ownership_weight"}
    save_at(run, 2, {"train_config": saved, "steps": 2})
    assert run.load() is not None
    with pytest.raises(ValueError, match="ownership_weight"):
        folder(tmp_path, ownership_weight=0.9).load()


def test_a_checkpoint_of_another_kind_of_run_is_refused(tmp_path):
    run = folder(tmp_path)
    save_at(run, 1, {"reinforce_config": {}, "iteration": 1})
    with pytest.raises(ValueError, match="not the checkpoint of this kind of run"):
        run.load()


def test_resuming_drops_the_metrics_rows_past_the_checkpoint(tmp_path):
    run = folder(tmp_path)
    for step in (10, 20, 30):
        run.append({"step": step, "loss": 1.0 / step})
    run.resumed_at(20)
    assert [row["step"] for row in metrics_csv.read(run.metrics)] == ["10", "20"]
    run.write_config(note="x")
    assert (tmp_path / runs.CONFIG).exists()


def test_auto_is_cuda_only_where_there_is_one():
    import torch

    assert runs.device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert runs.device("cpu").type == "cpu"


def test_compute_dtype_auto_is_bfloat16_where_the_device_has_it_natively():
    import torch

    cpu = torch.device("cpu")
    assert runs.computes_bf16(cpu, "bfloat16") and not runs.computes_bf16(cpu, "float32")
    assert runs.computes_bf16(cpu, "auto") == torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert runs.computes_bf16(torch.device("cuda"), "auto")
    with pytest.raises(ValueError, match="half"):
        runs.computes_bf16(cpu, "half")


def test_compute_dtype_auto_on_a_bf16_cpu_takes_the_faster_of_a_timed_trial(monkeypatch):
    import torch

    cpu = torch.device("cpu")
    monkeypatch.setattr(runs, "computes_bf16", lambda device, dtype: dtype != "float32")
    monkeypatch.setattr(runs, "_RESOLVED", {})
    clock = [0.0]  # seconds on an injected clock: each trial step advances it by its dtype's cost
    calls = []

    def resolve(device, setting, key, trial):
        return runs.resolve_compute_dtype(device, setting, key, trial, clock=lambda: clock[0])

    def trial(cost: dict):
        def step(dtype):
            calls.append(dtype)
            clock[0] += cost[dtype]
        return step

    assert resolve(cpu, "auto", ("a",), trial({"float32": 2.0, "bfloat16": 1.0})) == "bfloat16"
    assert calls == ["float32"] * (1 + runs.TRIAL_STEPS) + ["bfloat16"] * (1 + runs.TRIAL_STEPS)
    assert resolve(cpu, "auto", ("b",), trial({"float32": 1.0, "bfloat16": 1.6})) == "float32"
    calls.clear()  # decided once per key in a process; an explicit setting is never timed
    assert resolve(cpu, "auto", ("a",), trial({"float32": 1.0, "bfloat16": 9.0})) == "bfloat16"
    assert resolve(cpu, "float32", ("c",), trial({})) == "float32"
    assert resolve(torch.device("cuda"), "auto", ("d",), trial({})) == "bfloat16"
    assert calls == []
    monkeypatch.setattr(runs, "computes_bf16", lambda device, dtype: False)
    assert resolve(cpu, "auto", ("e",), trial({})) == "float32"
    with pytest.raises(ValueError, match="half"):
        resolve(cpu, "half", ("f",), trial({}))


# ---- config files --------------------------------------------------------------------------------------------

def test_a_config_file_sets_flags_and_the_command_line_wins(tmp_path):
    path = tmp_path / "loop.toml"
    path.write_text('init = "net.onnx"\nout = "runs/x"\ngenerations = 3\nkomi = 7\n'
                    'final-full-visits = 200\nfinal-fast-visits = 40\nvisit-ramp-generations = 10\n'
                    '[selfplay]\nnoise-fraction = 0.1\nresign_winrate = 0.02\nleaves-per-game = 4\n'
                    '[train]\nweight-decay = 3e-5\nsteps = 50\n[gate]\nparallel-games = 8\n')
    args = parse_args(["--threads", "1", "loop", "--config", str(path), "--generations", "5", "--lr", "0.01"])
    config = _loop_config(args)
    assert (args.out, config.init, config.generations, config.komi) == ("runs/x", "net.onnx", 5, 7.0)
    assert (config.final_full_visits, config.final_fast_visits, config.visit_ramp_generations) == (200, 40, 10)
    assert (config.selfplay.noise_fraction, config.selfplay.resign_winrate, config.selfplay.leaves_per_game) == \
        (0.1, 0.02, 4)
    assert (config.train.weight_decay, config.train.steps, config.train.lr) == (3e-5, 50, 0.01)
    assert config.train.val_samples == loop.TRAIN.val_samples  # the loop's default, not a supervised run's
    assert (config.gate.parallel_games, config.gate.komi) == (8, 7.0)
    plain = _loop_config(parse_args(["loop", "--init", "net.onnx", "--out", "o"]))
    assert plain == loop.LoopConfig(init="net.onnx")


def test_a_train_config_file_gives_the_shard_folders(tmp_path):
    path = tmp_path / "train.toml"
    path.write_text('data = ["a", "b"]\npreset = "tiny"\naugment = false\n')
    args = parse_args(["train", "--config", str(path), "--out", "o", "--steps", "9"])
    assert (args.data, args.preset, args.augment, args.steps) == (["a", "b"], "tiny", False, 9)


@pytest.mark.parametrize("text, reason", [
    ("stepz = 3\n", "unknown option 'stepz'"),
    ("steps = 2.5\n", "steps: expected an integer, got 2.5"),
    ("augment = 1\n", "augment: expected true or false, got 1"),
    ("steps = [\n", "is not valid TOML"),
])
def test_a_bad_config_file_is_refused_with_the_file_and_the_option(tmp_path, capsys, text, reason):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["train", "--config", str(path), "--out", "o", "--data", "d"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert str(path) in error and reason in error


def test_a_missing_config_file_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse_args(["train", "--config", str(tmp_path / "none.toml"), "--out", "o", "--data", "d"])
    assert "cannot read config file" in capsys.readouterr().err


def test_every_nested_setting_is_a_loop_flag():
    args = parse_args(["loop", "--init", "n.onnx", "--out", "o"])
    for section, kind in (("selfplay", "SelfPlayConfig"), ("train", "TrainConfig"), ("gate", "GateConfig")):
        nested = getattr(loop.LoopConfig(init="n.onnx"), section)
        for field in dataclasses.fields(nested):
            if field.name not in loop.LOOP_SETS[section]:
                assert hasattr(args, f"{section}.{field.name}"), f"{kind}.{field.name} has no loop flag"
