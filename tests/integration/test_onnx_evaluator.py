"""OnnxEvaluator on a tiny random network: outputs, symmetries, batching, caching, and refusing bad model files."""

import functools
import json
import logging
import threading

import numpy as np
import pytest

from gtp_engine import features, symmetry
from gtp_engine.evaluator import CachedEvaluator, UniformEvaluator, compute_steps, prepare, symmetry_averaged
from gtp_engine.onnx_evaluator import METADATA_KEY, ModelLoadError, OnnxEvaluator

onnx = pytest.importorskip("onnx")


def raw_then_untransformed(evaluator, states, s):
    """What symmetry s should give, computed through symmetry.py instead of the evaluator's own gather."""
    g = states[0].grid
    spatial, global_ = features.encode(states)
    policy, value, score, ownership = evaluator.run(np.ascontiguousarray(symmetry.transform_planes(spatial, s)),
                                                    global_)
    policy = np.exp(policy - policy.max(axis=1, keepdims=True))
    policy = symmetry.untransform_policy(policy / policy.sum(axis=1, keepdims=True), s, g.height, g.width)
    ownership = symmetry.untransform_planes(ownership, s).reshape(len(states), -1)
    wdl = np.exp(value) / np.exp(value).sum(axis=1, keepdims=True)
    return policy, wdl[:, 0] - wdl[:, 1], score, ownership


def test_outputs_follow_the_evaluation_contract(tiny_onnx_model, random_states):
    evaluator = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, seed=0)
    for size in (9, (7, 5)):
        states = random_states(size, 6, seed=1)
        batch = evaluator.evaluate(states)
        area = states[0].grid.area
        assert batch.policy.shape == (6, area + 1) and batch.ownership.shape == (6, area)
        assert batch.value.shape == batch.score.shape == (6,)
        for field in ("policy", "value", "score", "ownership"):
            assert getattr(batch, field).dtype == np.float32
        assert np.allclose(batch.policy.sum(axis=1), 1.0, atol=1e-5) and batch.policy.min() >= 0
        assert np.all(np.abs(batch.value) <= 1) and np.all(np.abs(batch.ownership) <= 1)
    assert len(evaluator.evaluate([])) == 0


@pytest.mark.parametrize("s", symmetry.ALL)
def test_a_fixed_symmetry_is_undone_on_policy_and_ownership(tiny_onnx_model, random_states, s):
    states = random_states(7, 3, seed=2)
    evaluator = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, symmetry_mode=s)
    batch = evaluator.evaluate(states)
    policy, value, score, ownership = raw_then_untransformed(evaluator, states, s)
    assert np.allclose(batch.policy, policy, atol=1e-6)
    assert np.allclose(batch.ownership, ownership, atol=1e-6)
    assert np.allclose(batch.value, value, atol=1e-6) and np.allclose(batch.score, score, atol=1e-5)


def test_random_symmetry_picks_one_symmetry_per_position_and_average_takes_the_mean(tiny_onnx_model, random_states):
    states = random_states(7, 6, seed=3)
    fixed = [OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, symmetry_mode=s).evaluate(states)
             for s in symmetry.ALL]
    randomised = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, seed=5).evaluate(states)
    for i in range(len(states)):
        assert any(np.allclose(randomised.policy[i], f.policy[i], atol=1e-6) for f in fixed)
    average = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, symmetry_mode="average").evaluate(states)
    assert np.allclose(average.policy, np.mean([f.policy for f in fixed], axis=0), atol=1e-6)
    assert np.allclose(average.value, np.mean([f.value for f in fixed], axis=0), atol=1e-6)
    assert np.allclose(average.ownership, np.mean([f.ownership for f in fixed], axis=0), atol=1e-6)
    # The random network is not symmetric, so the symmetries really differ.
    assert not np.allclose(fixed[0].policy, fixed[5].policy, atol=1e-4)


def test_an_averaged_evaluation_takes_every_symmetry_whatever_the_mode_and_passes_the_cache(tiny_onnx_model,
                                                                                           random_states):
    states = random_states(7, 3, seed=6)
    average = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, symmetry_mode="average").evaluate(states)
    one = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, symmetry_mode=2)
    cache = CachedEvaluator(one)
    for evaluator in (one, cache):
        averaged = symmetry_averaged(evaluator, states)
        assert np.allclose(averaged.policy, average.policy, atol=1e-6)
        assert np.allclose(averaged.value, average.value, atol=1e-6)
    assert len(cache) == 0 and cache.misses == 0  # not cached: the cache holds the mode's evaluations
    assert not np.allclose(one.evaluate(states).policy, average.policy, atol=1e-4)
    assert symmetry_averaged(UniformEvaluator(), states) is None


def test_large_batches_run_in_chunks_with_the_same_results(tiny_onnx_model, random_states):
    states = random_states(9, 7, seed=4)
    whole = OnnxEvaluator(tiny_onnx_model, device="cpu", symmetry_mode="none").evaluate(states)
    chunked = OnnxEvaluator(tiny_onnx_model, device="cpu", symmetry_mode="none", max_batch=3).evaluate(states)
    assert np.allclose(whole.policy, chunked.policy, atol=1e-6)
    assert np.allclose(whole.value, chunked.value, atol=1e-6)


def test_cache_over_a_random_symmetry_evaluator_gives_identical_answers(tiny_onnx_model, random_states):
    states = random_states(9, 4, seed=6)
    cache = CachedEvaluator(OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, seed=1))
    first = cache.evaluate(states)
    second = cache.evaluate(states)
    assert np.array_equal(first.policy, second.policy) and np.array_equal(first.value, second.value)
    assert (cache.hits, cache.misses) == (4, 4)


@pytest.mark.parametrize("parts", [1, 3])
@pytest.mark.parametrize("mode", ["random", "average", 5])
def test_a_prepared_evaluation_computed_in_other_threads_equals_evaluate(tiny_onnx_model, random_states, mode, parts):
    """Computed whole in another thread, or in parts at once (slices of 3, 3 and 1 positions, as the search's
    threads compute a batch alone in flight)."""
    states = random_states(9, 7, seed=8)
    whole = CachedEvaluator(OnnxEvaluator(tiny_onnx_model, device="cpu", symmetry_mode=mode, seed=3))
    split = CachedEvaluator(OnnxEvaluator(tiny_onnx_model, device="cpu", symmetry_mode=mode, seed=3))
    expected = whole.evaluate(states)
    evaluation = prepare(split, states)
    assert split.misses == 7 and len(split) == 0  # looked up now, stored with the result
    steps = compute_steps(evaluation, parts)
    assert len(steps) == parts
    workers = [threading.Thread(target=step) for step in steps]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    got = evaluation.result()
    assert len(split) == 7
    for field in ("policy", "value", "score", "ownership"):  # slices may round differently in onnxruntime
        assert np.allclose(getattr(got, field), getattr(expected, field), rtol=0, atol=0 if parts == 1 else 1e-5), field
    again = prepare(split, states[:3] + states[:1])  # all cached: nothing left to compute or split
    assert compute_steps(again, parts) == [again.compute]
    again.compute()
    assert np.array_equal(again.result().value, got.value[[0, 1, 2, 0]])
    assert split.misses == 7
    one = prepare(OnnxEvaluator(tiny_onnx_model, device="cpu"), states[:1])
    assert len(compute_steps(one, parts)) == 1  # one position is never split


def test_the_provider_in_use_is_logged_once(tiny_onnx_model, caplog, random_states):
    with caplog.at_level(logging.INFO, logger="gtp_engine.onnx_evaluator"):
        evaluator = OnnxEvaluator(tiny_onnx_model, device="auto", threads=1)
        evaluator.evaluate(random_states(9, 2))
        evaluator.evaluate(random_states(9, 2, seed=1))
    lines = [r.getMessage() for r in caplog.records if "runs on" in r.getMessage()]
    assert lines == [f"network {evaluator.info.describe()} runs on {evaluator.provider}"]
    assert evaluator.provider in ("cpu", "cuda", "tensorrt")
    assert evaluator.info.preset == "tiny"


# ---- refusing bad files ------------------------------------------------------------------------------------

def rewrite_metadata(source, target, **changes):
    model = onnx.load(str(source))
    entry = next(p for p in model.metadata_props if p.key == METADATA_KEY)
    meta = json.loads(entry.value)
    meta.update(changes)
    entry.value = json.dumps(meta)
    onnx.save(model, str(target))
    return target


def refused(path, **kwargs):
    with pytest.raises(ModelLoadError) as info:
        OnnxEvaluator(path, **kwargs)
    assert str(info.value).startswith(str(path) + ": ")
    return info.value.reason


def test_a_missing_file_is_refused(tmp_path):
    assert refused(tmp_path / "nothing.onnx") == "no such file"
    assert refused(tmp_path).startswith("is a directory")


def test_a_network_exported_for_one_size_accepts_that_size_only(fixed_size_network):
    network = OnnxEvaluator(fixed_size_network(7), device="cpu")
    assert (network.info.min_size, network.info.max_size) == (7, 7)
    with pytest.raises(ModelLoadError, match="outside the sizes this network accepts"):
        network.check_size(9, 9)
    assert "fixed at 7x5" in refused(fixed_size_network(7, 5, name="seven_by_five.onnx"), device="cpu")


def test_a_corrupt_file_is_refused(tmp_path, tiny_onnx_model):
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(tiny_onnx_model.read_bytes()[:2000])
    assert "onnxruntime cannot load it" in refused(path, device="cpu")


def test_a_file_without_our_metadata_is_refused(tmp_path, tiny_onnx_model):
    model = onnx.load(str(tiny_onnx_model))
    del model.metadata_props[:]
    path = tmp_path / "foreign.onnx"
    onnx.save(model, str(path))
    assert "no 'gtp_engine' metadata" in refused(path, device="cpu")


def test_another_feature_version_is_refused(tmp_path, tiny_onnx_model):
    path = rewrite_metadata(tiny_onnx_model, tmp_path / "old.onnx", features_version=features.FEATURES_VERSION + 1)
    reason = refused(path, device="cpu")
    assert f"features version {features.FEATURES_VERSION + 1}" in reason


def test_unreadable_metadata_is_refused(tmp_path, tiny_onnx_model):
    path = rewrite_metadata(tiny_onnx_model, tmp_path / "bad.onnx", min_size="small")
    assert "unreadable 'gtp_engine' metadata" in refused(path, device="cpu")


def test_other_input_channel_counts_are_refused(tmp_path):
    from onnx import TensorProto, helper

    def tensor(name, *shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    graph = helper.make_graph(
        [helper.make_node("Identity", ["global"], [name]) for name in ("policy", "value", "score")]
        + [helper.make_node("Identity", ["spatial"], ["ownership"])],
        "wrong_channels",
        [tensor("spatial", "N", features.SPATIAL_CHANNELS - 1, "H", "W"), tensor("global", "N", features.GLOBAL_FEATURES)],
        [tensor("policy", "N", features.GLOBAL_FEATURES), tensor("value", "N", features.GLOBAL_FEATURES),
         tensor("score", "N", features.GLOBAL_FEATURES), tensor("ownership", "N", features.SPATIAL_CHANNELS - 1, "H", "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    entry = model.metadata_props.add()
    entry.key = METADATA_KEY
    entry.value = json.dumps({"features_version": features.FEATURES_VERSION, "spatial_channels": 14,
                              "global_features": features.GLOBAL_FEATURES, "min_size": 2, "max_size": 25})
    path = tmp_path / "wrong_channels.onnx"
    onnx.save(model, str(path))
    assert f"has {features.SPATIAL_CHANNELS - 1} channels" in refused(path, device="cpu")


def test_a_board_size_outside_the_networks_range_is_refused(tmp_path, tiny_onnx_model, random_states):
    path = rewrite_metadata(tiny_onnx_model, tmp_path / "small.onnx", max_size=13)
    evaluator = OnnxEvaluator(path, device="cpu")
    evaluator.evaluate(random_states(13, 1))
    with pytest.raises(ModelLoadError, match=r"small\.onnx: board size 19x19 is outside .*2\.\.13"):
        evaluator.evaluate(random_states(19, 1))


def test_an_explicit_gpu_device_that_does_not_load_is_refused(tiny_onnx_model):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime build has CUDA; the refusal is for builds and machines without it")
    assert "no usable device for --device cuda" in refused(tiny_onnx_model, device="cuda")
    with pytest.raises(ValueError):
        OnnxEvaluator(tiny_onnx_model, device="gpu")


def test_an_unknown_precision_is_refused(tmp_path, tiny_onnx_model):
    path = rewrite_metadata(tiny_onnx_model, tmp_path / "half.onnx", precision="fp16")
    assert "unknown precision 'fp16'" in refused(path, device="cpu")


def test_an_int8_network_without_its_quantization_record_is_refused(tmp_path, tiny_onnx_model):
    path = rewrite_metadata(tiny_onnx_model, tmp_path / "bare.onnx", precision="int8")
    assert "int8 network without its 'quantization' record" in refused(path, device="cpu")


def test_a_file_named_int8_must_say_int8(tmp_path, tiny_onnx_model):
    path = tmp_path / "net.int8.onnx"
    path.write_bytes(tiny_onnx_model.read_bytes())
    assert "named as an int8 network (*.int8.onnx) but its metadata says fp32" in refused(path, device="cpu")


def test_two_loads_at_once_keep_onnxruntime_quiet_through_both_gpu_attempts(monkeypatch, tiny_onnx_model):
    # --device auto with onnxruntime-gpu on a machine without CUDA's libraries: each CUDA attempt fails, with
    # onnxruntime's logging off. The engine loads two networks at once (the default size's and the one boardsize
    # asked for); one load turning the logging back on while the other's attempt ran printed that attempt's
    # failure in red on stderr. Here the first attempt ends while the second runs, wherever the two overlap.
    from gtp_engine import onnx_evaluator

    ort = onnx_evaluator.ort
    real_session = ort.InferenceSession
    changed = threading.Condition()
    state = {"severity": 2, "restores": 0, "attempts": 0}
    severities_seen = []

    def set_severity(level):
        with changed:
            state["severity"] = level
            state["restores"] += level == 2
            changed.notify_all()

    def session(path, sess_options=None, providers=()):
        if providers[0] == "CPUExecutionProvider":
            return real_session(path, sess_options=sess_options, providers=list(providers))
        with changed:
            state["attempts"] += 1
            first, restores = state["attempts"] == 1, state["restores"]
            changed.notify_all()
            if first:  # until the other load's attempt has begun, where nothing keeps them apart
                changed.wait_for(lambda: state["attempts"] >= 2, timeout=0.5)
            else:  # until the first attempt has turned the logging back on, where nothing keeps them apart
                changed.wait_for(lambda: state["restores"] > restores, timeout=0.5)
            severities_seen.append(state["severity"])
        raise RuntimeError("CUDA libraries not found")

    # The engine's default log level, whatever an earlier test in this process set (debug lets onnxruntime speak).
    monkeypatch.setattr(onnx_evaluator.log, "isEnabledFor", lambda level: level >= logging.WARNING)
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(ort, "set_default_logger_severity", set_severity)
    monkeypatch.setattr(ort, "InferenceSession", session)
    devices = []
    loads = [threading.Thread(target=lambda: devices.append(onnx_evaluator.open_session(tiny_onnx_model)[1]))
             for _ in range(2)]
    for load in loads:
        load.start()
    for load in loads:
        load.join()
    assert devices == ["cpu", "cpu"]
    assert severities_seen == [4, 4]  # 4: fatal errors only


def test_gpu_libraries_are_preloaded_once_and_quietly_before_a_gpu_attempt(monkeypatch, capfd, tiny_onnx_model):
    # The gpu extra's nvidia packages are loaded by onnxruntime.preload_dlls, which prints what it cannot find on
    # stdout, the protocol's stream: that goes to the debug log. A CPU-only load never calls it.
    from gtp_engine import onnx_evaluator

    ort = onnx_evaluator.ort
    calls = []

    def preload(directory=None):
        calls.append(directory)
        print("Failed to load libcublasLt.so.13: cannot open shared object file")

    monkeypatch.setattr(ort, "preload_dlls", preload, raising=False)
    # The engine's default log level, whatever an earlier test in this process set (debug lets onnxruntime speak).
    monkeypatch.setattr(onnx_evaluator.log, "isEnabledFor", lambda level: level >= logging.WARNING)
    # A fresh once-per-process cache: an earlier test in this process may have preloaded already.
    monkeypatch.setattr(onnx_evaluator, "_preload_gpu_libraries",
                        functools.cache(onnx_evaluator._preload_gpu_libraries.__wrapped__))
    onnx_evaluator.open_session(tiny_onnx_model, device="cpu")
    assert calls == []
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    for _ in range(2):
        onnx_evaluator.open_session(tiny_onnx_model, device="auto")
    captured = capfd.readouterr()
    assert calls == [""]
    assert "libcublas" not in captured.out + captured.err
